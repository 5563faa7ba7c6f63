"""Deleting a test's namespace so that it really goes.

A test's namespace is deleted when the test ends, after the controllers it ran have stopped. The
Tasks, Workflows, MediaProcessingEntities and Jobs those controllers protected with finalizers
would then hold the namespace in Terminating for ever, and kube-controller-manager's namespace
controller sweeps a terminating namespace again and again -- discovery, then a LIST and a
DELETE of every resource type, retried with a backoff of up to a minute -- for the rest of the
session. One clean-clone run left 127 such namespaces on its control planes, and those sweeps
were most of the API servers' requests (docs/testing.md, "Where the time goes"). So the test's
deletion also lets go of those finalizers. The test of namespace deletion itself
(tests/e2e/test_namespace_deletion.py) deletes its namespaces with the controller running and
does not use this.
"""

from __future__ import annotations

import contextlib
from typing import Any

from kubernetes import client

from taskfsm.api import constants as c
from taskfsm.kube.resources import MEDIA_PROCESSING_ENTITIES, TASKS, WORKFLOWS

PROTECTED = (TASKS, WORKFLOWS, MEDIA_PROCESSING_ENTITIES)
"""The nagare kinds taskfsm puts finalizers on, in a namespace (and Jobs)."""
TIMEOUT = 30
"""Seconds per request: a teardown never waits long on a cluster that is gone."""
RELEASED = {"metadata": {"finalizers": None}}


def delete_namespace(api_client: client.ApiClient, name: str) -> None:
    """Delete ``name`` (in the background) and remove the finalizers its objects still carry.
    Errors are ignored: the namespace may be gone, its cluster stopped, its CRDs never
    installed."""
    with contextlib.suppress(Exception):
        client.CoreV1Api(api_client).delete_namespace(
            name, propagation_policy="Background", _request_timeout=TIMEOUT
        )
    custom = client.CustomObjectsApi(api_client)
    for res in PROTECTED:
        with contextlib.suppress(Exception):
            listed = custom.list_namespaced_custom_object(
                c.GROUP, c.VERSION, name, res.plural, _request_timeout=TIMEOUT
            )
            for obj in _held(listed["items"]):
                with contextlib.suppress(Exception):
                    custom.patch_namespaced_custom_object(
                        c.GROUP,
                        c.VERSION,
                        name,
                        res.plural,
                        obj,
                        RELEASED,
                        _request_timeout=TIMEOUT,
                    )
    batch = client.BatchV1Api(api_client)
    with contextlib.suppress(Exception):
        jobs = batch.list_namespaced_job(name, _request_timeout=TIMEOUT).to_dict()["items"]
        for job in _held(jobs):
            with contextlib.suppress(Exception):
                batch.patch_namespaced_job(job, name, RELEASED, _request_timeout=TIMEOUT)


def _held(items: list[dict[str, Any]]) -> list[str]:
    """Names of the objects that still carry a finalizer."""
    return [obj["metadata"]["name"] for obj in items if obj["metadata"].get("finalizers")]
