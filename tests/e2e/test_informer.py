"""The watch loop on its own (``taskfsm.kube.informer.Informer``) against the real API server:
resume without replay, deletions missed during an outage, and 410 Gone."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from kubernetes import client

from taskfsm.kube import client as kube_client
from taskfsm.kube.informer import Informer
from taskfsm.kube.resources import TASKS
from taskfsm.kube.rest import NAMESPACES, Resource, Rest
from taskfsm_dev import objects
from taskfsm_dev.proxies import ApiProxy
from taskfsm_dev.waiting import wait_for

CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")


class Recorder:
    """Events an informer delivered, as (type, name) counts."""

    def __init__(self) -> None:
        self.events: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    def __call__(self, kind: str, obj: dict) -> None:
        with self._lock:
            self.events[(kind, obj["metadata"]["name"])] += 1


@pytest.fixture
def rest(api_client: client.ApiClient) -> Rest:
    return Rest(api_client)


def configmap(name: str) -> dict:
    return {"metadata": {"name": name}, "data": {"k": "v"}}


def start(informer: Informer) -> tuple[Informer, Recorder]:
    recorder = Recorder()
    informer.add_handler(recorder)
    informer.start()
    assert informer.wait_synced(10)
    return informer, recorder


def test_reconnects_resume_without_replaying_events(rest, namespace):
    """Watches that end resume from the last resourceVersion: every change arrives exactly once."""
    informer, seen = start(
        Informer(rest, CONFIGMAPS, namespace=namespace, watch_timeout=2, read_margin=2)
    )
    try:
        for i in range(3):
            rest.create(CONFIGMAPS, namespace, configmap(f"c{i}"))
        rest.patch(CONFIGMAPS, namespace, "c0", {"data": {"k": "w"}})
        wait_for(lambda: informer.watches >= 4, timeout=20, what="several watch reconnects")
        assert seen.events == Counter(
            {("ADDED", "c0"): 1, ("ADDED", "c1"): 1, ("ADDED", "c2"): 1, ("MODIFIED", "c0"): 1}
        )
        assert informer.relists == 0
        assert informer.get(namespace, "c0")["data"] == {"k": "w"}
    finally:
        informer.stop()


def test_deletion_during_an_outage_is_delivered_after_it(control_plane, namespace, rest):
    """A ConfigMap deleted while the connection is cut is reported DELETED once it is back."""
    with ApiProxy(control_plane.server) as proxy:
        kubeconfig = control_plane.kubeconfig_dict()
        kubeconfig["clusters"][0]["cluster"]["server"] = proxy.url
        proxied = Rest(kube_client.from_kubeconfig_dict(kubeconfig))
        rest.create(CONFIGMAPS, namespace, configmap("doomed"))
        informer, seen = start(
            Informer(proxied, CONFIGMAPS, namespace=namespace, watch_timeout=20, max_backoff=2)
        )
        try:
            proxy.cut()
            wait_for(lambda: not informer.healthy, timeout=5, what="failure noticed")
            rest.delete(CONFIGMAPS, namespace, "doomed")
            time.sleep(1)
            assert informer.get(namespace, "doomed") is not None  # stale while cut
            proxy.restore()
            wait_for(
                lambda: seen.events[("DELETED", "doomed")] == 1,
                timeout=10,
                what="DELETED delivered",
            )
            assert informer.get(namespace, "doomed") is None
            assert informer.healthy
        finally:
            informer.stop()


def test_expired_resource_version_relists_once_and_synthesises_deletes(
    control_plane, namespace, rest, crds
):
    """A 410 after an outage relists once, synthesises the missed DELETED and replays nothing else."""
    with ApiProxy(control_plane.server) as proxy:
        kubeconfig = control_plane.kubeconfig_dict()
        kubeconfig["clusters"][0]["cluster"]["server"] = proxy.url
        proxied = Rest(kube_client.from_kubeconfig_dict(kubeconfig))
        rest.create(TASKS, namespace, objects.task("keep", workflow_name="wf"))
        rest.create(TASKS, namespace, objects.task("drop", workflow_name="wf"))
        informer, seen = start(
            Informer(proxied, TASKS, namespace=namespace, watch_timeout=20, max_backoff=2)
        )
        try:
            proxy.cut()
            wait_for(lambda: not informer.healthy, timeout=5, what="failure noticed")
            rest.delete(TASKS, namespace, "drop")
            stale = rest.get(NAMESPACES, None, "default")["metadata"]["resourceVersion"]
            informer.reconnect(resume_from=stale)  # as if the outage outlived the watch history
            since, watches = time.monotonic(), informer.watches
            time.sleep(2)
            assert informer.watches == watches  # nothing gets through while cut ...
            assert (
                proxy.accepted_since(since) <= 12
            )  # ... and retries back off (≤ 3 tries of ≤ 4 connects)
            before = Counter(seen.events)
            proxy.restore()
            wait_for(
                lambda: informer.relists == 1 and informer.healthy, timeout=10, what="one relist"
            )
            assert seen.events - before == Counter({("DELETED", "drop"): 1})
            rest.create(TASKS, namespace, objects.task("after", workflow_name="wf"))
            wait_for(
                lambda: seen.events[("ADDED", "after")] == 1, timeout=10, what="watching again"
            )
            assert informer.relists == 1
        finally:
            informer.stop()


class ListSpy:
    """A real :class:`Rest` that records the (limit, continue) of every list request."""

    def __init__(self, rest: Rest, *, expire_continue_once: bool = False) -> None:
        self._rest = rest
        self.pages: list[tuple[int | None, bool]] = []
        self._expire = expire_continue_once

    def __getattr__(self, name: str):
        return getattr(self._rest, name)

    def list(self, res, namespace=None, **kwargs):
        self.pages.append((kwargs.get("limit"), bool(kwargs.get("continue_token"))))
        if self._expire and kwargs.get("continue_token"):
            self._expire = False
            from taskfsm.kube.errors import Gone

            raise Gone("The provided continue parameter is too old")
        return self._rest.list(res, namespace, **kwargs)


def test_the_first_list_is_paged_and_caches_every_object(rest, namespace):
    """Large lists come in pages (client-go's reflector does the same): all 7 objects cached,
    delivered ADDED once each, and the watch resumes from the paged list's resourceVersion."""
    for i in range(7):
        rest.create(CONFIGMAPS, namespace, configmap(f"cm-{i}"))
    spy = ListSpy(rest)
    informer, seen = start(Informer(spy, CONFIGMAPS, namespace=namespace, page_size=3))  # type: ignore[arg-type]  # a fake standing in for the real type: duck-typed
    try:
        assert spy.pages == [(3, False), (3, True), (3, True)]
        assert sorted(o["metadata"]["name"] for o in informer.list()) == [
            f"cm-{i}" for i in range(7)
        ]
        assert all(not o["metadata"].get("managedFields") for o in informer.list())
        assert seen.events == Counter({("ADDED", f"cm-{i}"): 1 for i in range(7)})
        rest.create(CONFIGMAPS, namespace, configmap("cm-late"))
        wait_for(
            lambda: seen.events[("ADDED", "cm-late")] == 1,
            timeout=10,
            what="the watch after the paged list",
        )
        assert len(spy.pages) == 3, "no relist: the watch resumed from the list's resourceVersion"
    finally:
        informer.stop()


def test_an_expired_snapshot_between_pages_lists_again_unpaged(rest, namespace):
    """A continue token the API server no longer honours (410) restarts the list without pages;
    nothing from the abandoned pages is delivered twice."""
    for i in range(5):
        rest.create(CONFIGMAPS, namespace, configmap(f"cm-{i}"))
    spy = ListSpy(rest, expire_continue_once=True)
    informer, seen = start(Informer(spy, CONFIGMAPS, namespace=namespace, page_size=2))  # type: ignore[arg-type]  # a fake standing in for the real type: duck-typed
    try:
        assert spy.pages == [(2, False), (2, True), (None, False)]
        assert sorted(o["metadata"]["name"] for o in informer.list()) == [
            f"cm-{i}" for i in range(5)
        ]
        assert seen.events == Counter({("ADDED", f"cm-{i}"): 1 for i in range(5)})
        assert informer.failures == 0
    finally:
        informer.stop()
