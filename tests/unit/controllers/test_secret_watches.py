"""The kubeconfig Secret watch of remote MediaProcessingEntities: it asks for
one Secret by name and its cache never holds Secret data."""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

import pytest
from kubernetes import client

from taskfsm.controllers.clusters.watches import SecretWatches, secret_metadata
from taskfsm.kube.informer import Informer
from taskfsm.kube.rest import SECRETS, Rest

KEY = ("MediaProcessingEntity", "ns", "m")


def test_secret_watch_cache_keeps_metadata_only():
    """A cached kubeconfig Secret is its identity and resourceVersion, no data,
    annotations or managedFields."""
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "kc",
            "namespace": "ns",
            "uid": "u1",
            "resourceVersion": "42",
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": '{"data": 1}'},
            "managedFields": [{"manager": "kubectl"}],
        },
        "data": {"kubeconfig": "c2VjcmV0"},
        "stringData": {"kubeconfig": "secret"},
    }
    assert secret_metadata(secret) == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "kc", "namespace": "ns", "uid": "u1", "resourceVersion": "42"},
    }


class Opened(Exception):
    """The fake API server's answer to a watch request."""


def test_secret_watch_lists_and_watches_one_secret_by_name():
    """The Secret informer's lists and watches carry a metadata.name field selector (the
    namespace's other Secrets are never listed)."""
    calls: list[tuple[str, dict[str, Any]]] = []
    rest = Rest(client.ApiClient())

    def request(method: str, res: Any, path: str, **options: Any) -> Any:
        calls.append((path, options.get("query") or {}))
        if (options.get("query") or {}).get("watch"):
            raise Opened  # what it asked for is recorded: no stream to read
        return {"items": [], "metadata": {"resourceVersion": "1"}}

    rest.request = request  # type: ignore[method-assign]  # test instrumentation: replaces the method on this one object
    watches = SecretWatches(
        rest, on_mpe_event=lambda _key: None, fingerprint_of=lambda _key: None, informer_options={}
    )
    informer = Informer(rest, SECRETS, namespace="ns", field_selector="metadata.name=kc")
    with patch.object(Informer, "start", lambda self: self):  # no thread: the calls, one by one
        watches.watch(KEY, ("ns", "kc"))
    made = watches._watches[("ns", "kc")].informer
    assert made.field_selector == "metadata.name=kc"
    for each in (informer, made):
        calls.clear()
        each._list_all()
        with pytest.raises(Opened):
            each._watch()
        assert [path for path, _ in calls] == ["/api/v1/namespaces/ns/secrets"] * 2
        assert calls[0][1]["fieldSelector"] == "metadata.name=kc"
        assert calls[1][1]["fieldSelector"] == "metadata.name=kc"
        assert calls[1][1]["watch"] == "true"
