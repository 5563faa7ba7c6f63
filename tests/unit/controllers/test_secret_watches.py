"""The kubeconfig Secret watch of remote MediaProcessingEntities: it asks for
one Secret by name and its cache never holds Secret data."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from taskfsm.controllers.clusters.watches import NamedObjectRest, secret_metadata
from taskfsm.kube.rest import SECRETS, Rest


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


def test_secret_watch_lists_and_watches_one_secret_by_name():
    """The Secret informer's lists and watches carry a metadata.name field
    selector (the namespace's other Secrets are never listed)."""
    calls: list[tuple[str, dict[str, Any]]] = []
    rest = NamedObjectRest(Rest(client.ApiClient()), "kc")

    def request(method: str, res: Any, path: str, **options: Any) -> Any:
        calls.append((path, options.get("query") or {}))
        return {"items": []}

    rest.request = request  # type: ignore[method-assign]  # test instrumentation: replaces the method on this one object
    rest.list(SECRETS, "ns", limit=500)
    rest.watch(SECRETS, "ns", timeout_seconds=5, read_timeout=10, resourceVersion="1")
    assert [path for path, _ in calls] == ["/api/v1/namespaces/ns/secrets"] * 2
    assert calls[0][1]["fieldSelector"] == "metadata.name=kc"
    assert calls[1][1]["fieldSelector"] == "metadata.name=kc"
    assert calls[1][1]["watch"] == "true"
