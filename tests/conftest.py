"""Shared fixtures: one real control plane per test session (per xdist worker), a fresh namespace
per test; the suite's order and its split between xdist workers.

Tests under the tiers of :data:`INTEGRATION_DIRS` are marked ``integration`` automatically and use
a real kube-apiserver, etcd and kube-controller-manager (this one, or their tier's own). A missing
prerequisite (Go, the built binaries) fails the session loudly; nothing is skipped. Tests run in
tier order, longest tier first, and ``pytest -n N`` shares them out by
:class:`tests.support.scheduling.TierScheduling` (docs/testing.md). A test leaves a line for the
end of the run with ``record_property("summary", line)`` (the transition coverage figures).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from kubernetes import client
from xdist.remote import Producer

from taskfsm.api.crdgen import crd_documents
from taskfsm_dev.controlplane import ControlPlane
from taskfsm_dev.crds import install_crds
from taskfsm_dev.kubelet import SimulatedKubelet
from tests.support import scheduling
from tests.support.examples import examples
from tests.support.namespaces import delete_namespace
from tests.support.reports import FAILED
from tests.support.scheduling import TierScheduling

# Hypothesis's deadline (200 ms per example) and its "too slow" health check are wall-clock
# limits: on a shared 2-core machine running three workers they failed property tests that were
# right (a loaded run showed it). Speed is measured in benchmarks, never asserted in tests.
settings.register_profile(
    "taskfsm",
    max_examples=examples(100),  # Hypothesis's default, scaled by TASKFSM_EXAMPLES
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("taskfsm")

INTEGRATION_DIRS = ("integration", "e2e", "faults", "security", "node", "bench")
SUMMARY_LINES: list[str] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.stash[FAILED] = report.failed
    return report


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).parts
        if any(d in parts for d in INTEGRATION_DIRS):
            item.add_marker(pytest.mark.integration)
    # Stable: within a tier, the files and tests keep their collection order.
    items.sort(key=lambda item: scheduling.tier_rank(item.nodeid))


def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> TierScheduling:
    return TierScheduling(config, log)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # On the controller under xdist too: a worker's report carries the test's user properties.
    if report.when == "call":
        SUMMARY_LINES.extend(str(v) for k, v in report.user_properties if k == "summary")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in sorted(SUMMARY_LINES):
        terminalreporter.write_line(line)


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
def crds(api_client: client.ApiClient) -> list[str]:
    """taskfsm's own CRDs in the main cluster, installed and Established."""
    return install_crds(api_client, crd_documents())


@pytest.fixture(scope="session")
def api_client(control_plane: ControlPlane) -> Iterator[client.ApiClient]:
    """An admin ``kubernetes.client.ApiClient`` for the main cluster."""
    with control_plane.api_client() as api:
        yield api


@pytest.fixture(scope="session")
def server_minor(api_client: client.ApiClient) -> int:
    """The main cluster's Kubernetes minor version: 35, or 30 in the run against the oldest
    supported Kubernetes (docs/testing.md, "The oldest supported Kubernetes"). Tests of a feature
    newer than 1.30 assert, by it, what taskfsm does without the feature instead."""
    return int(client.VersionApi(api_client).get_code().minor.rstrip("+"))


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
    delete_namespace(api_client, name)


@pytest.fixture
def remote_namespace(remote_control_plane: ControlPlane) -> Iterator[tuple[ControlPlane, str]]:
    """A fresh namespace in the second cluster, with a simulated kubelet playing its pods."""
    name = f"remote-{uuid.uuid4().hex[:8]}"
    with remote_control_plane.api_client() as api:
        client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
        with SimulatedKubelet(api, namespace=name):
            yield remote_control_plane, name
        delete_namespace(api, name)


@pytest.fixture
def kubelet(api_client: client.ApiClient, namespace: str) -> Iterator[SimulatedKubelet]:
    """A simulated kubelet for the test's namespace, driven by pod annotations."""
    with SimulatedKubelet(api_client, namespace=namespace) as sim:
        yield sim
