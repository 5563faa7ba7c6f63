"""Deletion waits only on what can exist (docs/operations.md, "Deleting what never reached a
cluster"): a namespaced MediaProcessingEntity refused by policy (``NamespaceNotAllowed``,
``KubeconfigRefused``), one whose client never connected (``NotReachable``), and a Task that
never got a Job because its MPE is one of those, each delete at once; so does a namespace
holding all of them.

The controller is the security tier's (tests/security/conftest.py): installed with the shipped
RBAC, watching every namespace, ``--cleanup-timeout`` at its default (120 s). Before this fix
such an MPE took the cleanup timeout plus backoff (174 s measured) to go. Every wait below polls
with a generous timeout that is still below the cleanup timeout, so passing proves no deletion
waited for it; the seconds each deletion took are printed, not asserted.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import pytest
from kubernetes import client

from taskfsm import defaults
from taskfsm.api import constants as c
from taskfsm.controllers.clusters.registry import CLOCK_MARGIN_SECONDS
from taskfsm.kube.errors import NotFound
from taskfsm.kube.resources import BY_KIND
from taskfsm.kube.rest import NAMESPACES
from taskfsm_dev import objects
from taskfsm_dev.objects import kubeconfig_secret, remote_mpe
from taskfsm_dev.waiting import wait_for
from tests.support.tenancy import Tenant, kubeconfig

pytestmark = pytest.mark.timeout(600)

GONE_WITHIN = defaults.CLEANUP_TIMEOUT / 2
"""How long a deletion may take here, generously: half the controller's cleanup timeout (a
deletion that waited for it would take longer)."""
CONTROLLER_TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"
CLOSED_PORT_SERVER = "https://127.0.0.1:1"
"""A server nothing listens on: a client of it never connects."""


def make_refused_mpe(tenant: Tenant, name: str, state: str) -> str:
    """Create MPE ``name`` in refused ``state``; wait for its Ready=False verdict; its reason."""
    if state == "NamespaceNotAllowed":
        tenant.create(objects.local_mpe(name, namespace="kube-system"))
    elif state == "KubeconfigRefused":
        document = kubeconfig(CLOSED_PORT_SERVER, user={"tokenFile": CONTROLLER_TOKEN_FILE})
        tenant.create(kubeconfig_secret(f"{name}-kubeconfig", document))
        tenant.create(remote_mpe(name, f"{name}-kubeconfig"))
    else:  # never connected: a kubeconfig the policy allows, for a server that never answers
        document = kubeconfig(CLOSED_PORT_SERVER, user={"token": "not-a-real-token"})
        tenant.create(kubeconfig_secret(f"{name}-kubeconfig", document))
        tenant.create(remote_mpe(name, f"{name}-kubeconfig"))
    wait_for(
        lambda: tenant.condition("MediaProcessingEntity", name, "Ready").get("status") == "False",
        timeout=60,
        what=lambda: f"MPE {name} Ready=False: {tenant.status('MediaProcessingEntity', name)}",
    )
    return str(tenant.condition("MediaProcessingEntity", name, "Ready").get("reason"))


def make_waiting_task(tenant: Tenant, name: str, mpe: str) -> None:
    """A Task naming ``mpe``: it records the MPE and waits for it, with no Job."""
    tenant.task(
        name, mediaProcessingEntityRef={"kind": c.KIND_MEDIA_PROCESSING_ENTITY, "name": mpe}
    )
    wait_for(
        lambda: (
            (tenant.status("Task", name).get("mediaProcessingEntityRef") or {}).get("name") == mpe
            and c.FINALIZER_TASK_PROTECTION
            in (tenant.get("Task", name) or {})["metadata"].get("finalizers", [])
        ),
        timeout=60,
        what=lambda: f"Task {name} bound to {mpe}: {tenant.get('Task', name)}",
    )
    assert not tenant.status("Task", name).get("jobRef")


def seconds_to_gone(exists: Callable[[], bool], delete: Callable[[], None], what: str) -> float:
    started = time.monotonic()
    delete()
    wait_for(lambda: not exists(), timeout=GONE_WITHIN, interval=0.2, what=f"{what} gone")
    return time.monotonic() - started


STATES = ["NamespaceNotAllowed", "KubeconfigRefused", "NotReachable"]


@pytest.fixture(autouse=True)
def controller_settled(controller) -> None:
    """What the controller knows of an MPE is its whole history only for MPEs created after it
    started (and after a margin for the API server's clock): the MPEs here are."""
    started = os.stat(f"/proc/{controller.pid}").st_ctime
    time.sleep(max(0.0, started + 2 * CLOCK_MARGIN_SECONDS + 1 - time.time()))


@pytest.mark.parametrize("state", STATES)
def test_a_refused_mpe_deletes_at_once(tenant, state):
    tenant.create(objects.workflow("wf"))
    tenant.create(objects.function("fn"))
    reason = make_refused_mpe(tenant, "m", state)
    assert reason == state
    took = seconds_to_gone(
        lambda: tenant.get("MediaProcessingEntity", "m") is not None,
        lambda: tenant.rest.delete(BY_KIND["MediaProcessingEntity"], tenant.namespace, "m"),
        f"MPE ({state})",
    )
    print(f"MPE refused with {state}: gone {took:.1f}s after its deletion")
    assert "OrphansNotChecked" not in tenant.event_reasons("m")


@pytest.mark.parametrize("state", STATES)
def test_a_task_that_never_got_a_job_deletes_at_once_and_so_does_its_mpe(tenant, state):
    tenant.create(objects.workflow("wf"))
    tenant.create(objects.function("fn"))
    make_refused_mpe(tenant, "m", state)
    make_waiting_task(tenant, "t", "m")
    took = seconds_to_gone(
        lambda: tenant.get("Task", "t") is not None,
        lambda: tenant.rest.delete(BY_KIND["Task"], tenant.namespace, "t"),
        f"Task (MPE {state})",
    )
    print(f"Task whose MPE is refused with {state}: gone {took:.1f}s after its deletion")
    assert "JobAbandoned" not in tenant.event_reasons("t")
    took = seconds_to_gone(
        lambda: tenant.get("MediaProcessingEntity", "m") is not None,
        lambda: tenant.rest.delete(BY_KIND["MediaProcessingEntity"], tenant.namespace, "m"),
        f"MPE ({state})",
    )
    print(f"its MPE: gone {took:.1f}s after its deletion")
    assert tenant.jobs() == []


def test_an_mpe_deleted_under_its_waiting_task_goes_at_once_and_the_task_says_so(tenant):
    """Nothing of the Task can be in a cluster the MPE never reached: the MPE does not wait for
    the Task (it never will have a Job there); the Task is woken and reports the MPE gone."""
    tenant.create(objects.workflow("wf"))
    tenant.create(objects.function("fn"))
    make_refused_mpe(tenant, "m", "NamespaceNotAllowed")
    make_waiting_task(tenant, "t", "m")
    took = seconds_to_gone(
        lambda: tenant.get("MediaProcessingEntity", "m") is not None,
        lambda: tenant.rest.delete(BY_KIND["MediaProcessingEntity"], tenant.namespace, "m"),
        "MPE under a waiting Task",
    )
    print(f"MPE under a waiting Task: gone {took:.1f}s after its deletion")
    assert tenant.get("Task", "t") is not None
    assert tenant.jobs() == []


def test_a_namespace_holding_every_refused_kind_deletes_at_once(tenant, admin):
    tenant.create(objects.workflow("wf"))
    tenant.create(objects.function("fn"))
    for index, state in enumerate(STATES):
        make_refused_mpe(tenant, f"m{index}", state)
        make_waiting_task(tenant, f"t{index}", f"m{index}")
    rest = tenant.admin

    def namespace_exists() -> bool:
        try:
            rest.get(NAMESPACES, None, tenant.namespace)
        except NotFound:
            return False
        return True

    took = seconds_to_gone(
        namespace_exists,
        lambda: client.CoreV1Api(admin).delete_namespace(tenant.namespace),
        f"namespace {tenant.namespace}",
    )
    print(f"namespace with {len(STATES)} refused MPEs and their Tasks: gone {took:.1f}s")
