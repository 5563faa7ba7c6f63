"""Shared fixtures: one real control plane per test session, a fresh namespace per test.

Tests under ``tests/integration``, ``tests/e2e`` and ``tests/faults`` are marked ``integration``
automatically and use the real kube-apiserver, etcd and kube-controller-manager started here. A
missing prerequisite (Go, the built binaries) fails the session loudly; nothing is skipped.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from taskfsm_dev.controlplane import ControlPlane
from taskfsm_dev.kubelet import SimulatedKubelet

INTEGRATION_DIRS = ("integration", "e2e", "faults", "security", "node")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).parts
        if any(d in parts for d in INTEGRATION_DIRS):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    """The main cluster: etcd + kube-apiserver + kube-controller-manager on loopback."""
    with ControlPlane(name="taskfsm-main") as cp:
        yield cp


@pytest.fixture(scope="session")
def remote_control_plane() -> Iterator[ControlPlane]:
    """A second, independent cluster (a remote MediaProcessingEntity's), started on first use."""
    with ControlPlane(name="taskfsm-remote") as cp:
        yield cp


@pytest.fixture(scope="session")
def api_client(control_plane: ControlPlane) -> Iterator[client.ApiClient]:
    """An admin ``kubernetes.client.ApiClient`` for the main cluster."""
    with control_plane.api_client() as api:
        yield api


def _fresh_namespace(api: client.ApiClient, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
    return name


@pytest.fixture
def namespace(api_client: client.ApiClient, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace in the main cluster, deleted (in the background) after the test."""
    prefix = request.node.name.lower().replace("_", "-")[:40].strip("-") or "t"
    prefix = "".join(ch if ch.isalnum() or ch == "-" else "-" for ch in prefix)
    name = _fresh_namespace(api_client, prefix)
    yield name
    client.CoreV1Api(api_client).delete_namespace(name, propagation_policy="Background")


@pytest.fixture
def kubelet(api_client: client.ApiClient, namespace: str) -> Iterator[SimulatedKubelet]:
    """A simulated kubelet for the test's namespace, driven by pod annotations."""
    with SimulatedKubelet(api_client, namespace=namespace) as sim:
        yield sim
