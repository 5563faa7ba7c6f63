"""Attacks by a tenant, against the controller as it is installed (docs/security.md).

One control plane of the module's own; one ``taskfsm run`` process for all tests, watching every
namespace, with the identity and RBAC the project ships (:mod:`tests.support.identity`: the
ServiceAccount ``taskfsm`` in ``taskfsm-system`` bound to the generated roles), leader election
on, authenticated metrics on; and per test a tenant: a namespace and a token bound to a Role that
allows the namespaced nagare kinds and Secrets there, and nothing else. The tenant writes its
objects with its own token; only the tests' checks use the admin identity.

After every test the controller must still be ready and a bystander tenant's Task must still
succeed: no attack may stop or starve the controller for others.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from taskfsm.api.crdgen import crd_documents
from taskfsm.kube import client as kube_client
from taskfsm.kube.rest import Rest
from taskfsm.tools import rbac
from taskfsm_dev.controlplane import ControlPlane
from taskfsm_dev.crds import install_crds
from taskfsm_dev.kubelet import SimulatedKubelet
from taskfsm_dev.process import ControllerProcess
from tests.support import identity
from tests.support.tenancy import PODS_REFUSED_TIMEOUT, Tenant

CONTROLLER_NAMESPACE = rbac.NAMESPACE


@pytest.fixture(scope="session")
def security_plane() -> Iterator[ControlPlane]:
    """The attacked cluster, with taskfsm's CRDs."""
    with ControlPlane(name="taskfsm-security") as plane:
        with plane.api_client() as api:
            install_crds(api, crd_documents())
        yield plane


@pytest.fixture(scope="session")
def admin(security_plane: ControlPlane) -> Iterator[client.ApiClient]:
    with security_plane.api_client() as api:
        yield api


@pytest.fixture(scope="session")
def controller(
    security_plane: ControlPlane, admin: client.ApiClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControllerProcess]:
    """``taskfsm run`` as installed: all namespaces, leader election, --metrics-secure."""
    workdir = tmp_path_factory.mktemp("security-controller")
    kubeconfig = identity.install_controller(admin, security_plane, CONTROLLER_NAMESPACE, workdir)
    proc = ControllerProcess(
        kubeconfig,
        leader_elect=True,
        lease_namespace=CONTROLLER_NAMESPACE,
        identity="security-controller",
        log_dir=workdir,
        name="taskfsm-security",
        args=[
            "--metrics-secure",
            "--watch-timeout=20",
            "--watch-read-margin=5",
            "--shutdown-timeout=10",
            f"--job-pods-refused-timeout={PODS_REFUSED_TIMEOUT}",
            "--orphan-sweep-period=5",
            "--log-format=json",
        ],
    )
    with proc:
        yield proc


def _make_tenant(
    admin: client.ApiClient, plane: ControlPlane, workdir: Path, prefix: str
) -> Tenant:
    namespace = f"{prefix}-{uuid.uuid4().hex[:6]}"
    kubeconfig = identity.install_tenant(admin, plane, namespace, workdir)
    kubelet = SimulatedKubelet(admin, namespace=namespace).__enter__()
    return Tenant(
        namespace=namespace,
        rest=Rest(kube_client.from_kubeconfig(kubeconfig)),
        admin=Rest(admin),
        kubeconfig=kubeconfig,
        kubelet=kubelet,
    )


def _drop_tenant(admin: client.ApiClient, tenant: Tenant) -> None:
    tenant.kubelet.__exit__(None, None, None)
    with contextlib.suppress(Exception):
        client.CoreV1Api(admin).delete_namespace(tenant.namespace, propagation_policy="Background")


@pytest.fixture
def tenant(
    controller: ControllerProcess,
    admin: client.ApiClient,
    security_plane: ControlPlane,
    tmp_path: Path,
    bystander: Tenant,
) -> Iterator[Tenant]:
    """The attacker: a fresh namespace and its tenant. After the test the controller is still
    ready and the bystander's new Task still succeeds."""
    attacker = _make_tenant(admin, security_plane, tmp_path, "tenant")
    yield attacker
    controller.wait_ready(30)
    name = f"after-{uuid.uuid4().hex[:6]}"
    bystander.task_in_new_workflow(name)
    bystander.wait_phase(name, "Succeeded", timeout=90)
    _drop_tenant(admin, attacker)


@pytest.fixture(scope="session")
def bystander(
    controller: ControllerProcess,
    admin: client.ApiClient,
    security_plane: ControlPlane,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Tenant]:
    """Another tenant, whose Tasks every attack must leave alone."""
    other = _make_tenant(admin, security_plane, tmp_path_factory.mktemp("bystander"), "bystander")
    other.basics()
    yield other
    _drop_tenant(admin, other)


@pytest.fixture
def remote_tenant_kubeconfig(security_plane: ControlPlane, tenant: Tenant) -> dict[str, Any]:
    """An inline kubeconfig of a "remote" cluster the tenant owns: this one, with the tenant's
    own token, Jobs in the tenant's namespace."""
    document = security_plane.kubeconfig_dict(namespace=tenant.namespace)
    document["users"] = [{"name": "admin", "user": {"token": identity.token_of(tenant.kubeconfig)}}]
    return document
