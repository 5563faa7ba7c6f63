"""Fixtures for the fault-injection suite.

The suite runs on a control plane of its own, started once per session on first use:
kube-controller-manager's client rate limit (20 requests/s by default) would otherwise make the
real Job controller, not taskfsm, the bottleneck of a suite that runs hundreds of Jobs, and the
API server restart test must not disturb the session's shared control plane.

Every test runs the controller as a separate process (what is deployed) and ends by checking the
lifecycle invariants of :mod:`tests.support.chaos`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from taskfsm.api.crdgen import crd_documents
from taskfsm_dev.controlplane import ControlPlane
from taskfsm_dev.crds import install_crds
from taskfsm_dev.kubelet import SimulatedKubelet
from tests.support import identity
from tests.support.chaos import FAST_WATCH_ARGS, ChildLedger, CrashableController, Fleet
from tests.support.namespaces import delete_namespace
from tests.support.reports import FAILED

FAULTS_KCM_ARGS = ("--kube-api-qps=500", "--kube-api-burst=1000", "--concurrent-job-syncs=20")


@pytest.fixture(scope="session")
def faults_plane() -> Iterator[ControlPlane]:
    """etcd + kube-apiserver + kube-controller-manager (high client rate limits), CRDs installed."""
    with ControlPlane(name="taskfsm-faults", controller_manager_args=FAULTS_KCM_ARGS) as cp:
        with cp.api_client() as api:
            install_crds(api, crd_documents())
        yield cp


@pytest.fixture
def faults_api(faults_plane: ControlPlane) -> Iterator[client.ApiClient]:
    """A fresh admin client per test (the API server restart test breaks pooled connections)."""
    with faults_plane.api_client() as api:
        yield api


@pytest.fixture
def faults_namespace(faults_api: client.ApiClient, request: pytest.FixtureRequest) -> Iterator[str]:
    name = f"faults-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(faults_api)
    core.create_namespace({"metadata": {"name": name}})
    yield name
    delete_namespace(faults_api, name)


@pytest.fixture
def faults_kubelet(
    faults_api: client.ApiClient, faults_namespace: str
) -> Iterator[SimulatedKubelet]:
    with SimulatedKubelet(faults_api, namespace=faults_namespace) as sim:
        yield sim


@pytest.fixture
def fleet(faults_api: client.ApiClient, faults_namespace: str) -> Fleet:
    return Fleet(faults_api, faults_namespace).setup()


@pytest.fixture
def ledger(faults_api: client.ApiClient, faults_namespace: str) -> Iterator[ChildLedger]:
    with ChildLedger(faults_api, faults_namespace) as led:
        yield led


@pytest.fixture
def installed_kubeconfig(
    faults_api: client.ApiClient, faults_plane: ControlPlane, faults_namespace: str, tmp_path: Path
) -> Iterator[Path]:
    """The controller as installed (:mod:`tests.support.identity`): a token bound to exactly
    the generated RBAC, with its Leases in the test namespace."""
    yield identity.install_controller(faults_api, faults_plane, faults_namespace, tmp_path)
    identity.uninstall(faults_api, faults_namespace)


@pytest.fixture
def controller_process(
    faults_plane: ControlPlane,
    faults_namespace: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    installed_kubeconfig: Path,
) -> Iterator[Callable[..., CrashableController]]:
    """Build (not start) crashable ``taskfsm run`` processes for the test namespace, as the
    installed controller; all are stopped after the test and their log tails printed when it
    failed."""
    built: list[CrashableController] = []

    def make(
        *, kubeconfig: str | Path | None = None, args: tuple[str, ...] = (), **options: Any
    ) -> CrashableController:
        options.setdefault("namespace", faults_namespace)
        options.setdefault("name", f"taskfsm-{len(built)}")
        proc = CrashableController(
            kubeconfig or installed_kubeconfig,
            log_dir=tmp_path,
            args=[*FAST_WATCH_ARGS, *args],
            **options,
        )
        built.append(proc)
        return proc

    yield make
    for proc in built:
        proc.ensure_stopped()
    if request.node.stash.get(FAILED, False):
        for proc in built:
            print(proc.tail(120))
