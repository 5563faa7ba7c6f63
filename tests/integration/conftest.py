"""Fixtures for controller tests: CRDs installed once, an in-process controller per test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from taskfsm.api import constants as c
from taskfsm.kube.resources import BY_KIND
from taskfsm.manager.manager import Manager, Settings
from tests.support.probes import ClusterScoped, Probe


class Engine:
    """Create and read nagare objects in one namespace (cluster kinds get unique names)."""

    def __init__(self, api_client: client.ApiClient, namespace: str) -> None:
        self.api = client.CustomObjectsApi(api_client)
        self.namespace = namespace

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        res = BY_KIND[obj["kind"]]
        if res.namespaced:
            return self.api.create_namespaced_custom_object(
                c.GROUP, c.VERSION, self.namespace, res.plural, obj
            )
        return self.api.create_cluster_custom_object(c.GROUP, c.VERSION, res.plural, obj)

    def get(self, kind: str, name: str) -> dict[str, Any]:
        res = BY_KIND[kind]
        if res.namespaced:
            return self.api.get_namespaced_custom_object(
                c.GROUP, c.VERSION, self.namespace, res.plural, name
            )
        return self.api.get_cluster_custom_object(c.GROUP, c.VERSION, res.plural, name)

    def delete(self, kind: str, name: str) -> None:
        res = BY_KIND[kind]
        self.api.delete_namespaced_custom_object(
            c.GROUP, c.VERSION, self.namespace, res.plural, name
        )

    def names(self, kind: str) -> list[str]:
        """The names of the namespace's objects of ``kind`` (namespaced kinds)."""
        items = self.api.list_namespaced_custom_object(
            c.GROUP, c.VERSION, self.namespace, BY_KIND[kind].plural
        )["items"]
        return [obj["metadata"]["name"] for obj in items]

    def task(self, name: str) -> dict[str, Any]:
        return self.get(c.KIND_TASK, name)

    def phase(self, name: str) -> str:
        return (self.task(name).get("status") or {}).get("phase") or ""


@pytest.fixture
def engine(api_client: client.ApiClient, namespace: str, crds: list[str]) -> Engine:
    return Engine(api_client, namespace)


@pytest.fixture
def controller(api_client: client.ApiClient, namespace: str, crds: list[str]) -> Iterator[Manager]:
    """An in-process controller watching only the test's namespace (fast watches, no ports)."""
    settings = Settings(
        namespace=namespace,
        metrics_address=None,
        health_address=None,
        resync_seconds=30,
        watch_timeout=20,
        read_margin=10,
        shutdown_timeout=5,
    )
    ctl = Manager(api_client, settings).start()
    yield ctl
    ctl.stop()


# -- reconcile tests (probes, cluster-scoped objects, controllers built per test) -------


@pytest.fixture
def probe(api_client: client.ApiClient, namespace: str, crds: list[str]) -> Probe:
    """Plain-dict reads (Jobs, Secrets, payloads, Events) and test-side Job status writes."""
    return Probe(api_client, namespace)


@pytest.fixture
def cluster_scoped(api_client: client.ApiClient, crds: list[str]) -> Iterator[ClusterScoped]:
    """Cluster-scoped nagare objects created by the test, removed (finalizers first) after it."""
    tracker = ClusterScoped(api_client)
    yield tracker
    tracker.cleanup()


@pytest.fixture
def controller_factory(
    api_client: client.ApiClient, namespace: str, crds: list[str]
) -> Iterator[Callable[..., Manager]]:
    """Build and start a Manager for the test's namespace; ``rest_factory`` and Settings
    fields may be overridden. Every controller built is stopped after the test."""
    built: list[Manager] = []

    def make(*, rest_factory: Any = None, start: bool = True, **overrides: Any) -> Manager:
        options: dict[str, Any] = {
            "namespace": namespace,
            "metrics_address": None,
            "health_address": None,
            "resync_seconds": 30,
            "watch_timeout": 20,
            "read_margin": 10,
            "shutdown_timeout": 5,
            **overrides,
        }
        ctl = Manager(api_client, Settings(**options), rest_factory=rest_factory)
        built.append(ctl)
        return ctl.start() if start else ctl

    yield make
    for ctl in reversed(built):
        ctl.stop()
