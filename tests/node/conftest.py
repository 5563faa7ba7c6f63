"""The real-node tier: what a user runs on a node, on a node that runs containers.

One control plane with one real node (:mod:`taskfsm_dev.node`: containerd, kubelet, kube-proxy,
kube-scheduler) serves the whole tier; the controller's own image (``make image``'s archive) and
the workload image are imported into the node's containerd, since no registry is reachable. The
controller is installed the ways a user installs it (:mod:`tests.support.installs`: the chart,
``kubectl apply -k``) and runs as a Pod with its ServiceAccount; the Tasks' Jobs run real
containers. A host that cannot run a node fails the tier with what it lacks; nothing skips.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from taskfsm.kube.client import ApiClient
from taskfsm_dev.node import RealCluster
from tests.support import installs, oci_image
from tests.support.installs import fresh_namespace
from tests.support.namespaces import delete_namespace


@pytest.fixture(scope="session")
def node_cluster() -> Iterator[RealCluster]:
    """A control plane with one real node, Ready and untainted."""
    with RealCluster(name="taskfsm-node") as cluster:
        yield cluster


@pytest.fixture(scope="session")
def node_kubeconfig(node_cluster: RealCluster) -> Path:
    """The admin kubeconfig of the node's cluster (what the operator installing taskfsm has)."""
    assert node_cluster.control_plane is not None
    return node_cluster.control_plane.kubeconfig


@pytest.fixture(scope="session")
def node_admin(node_cluster: RealCluster) -> Iterator[ApiClient]:
    with node_cluster.api_client() as api:
        yield api


@pytest.fixture(scope="session")
def controller_image(node_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The controller image (``make image``'s OCI archive of the tested root filesystem),
    imported into the node; returns its reference (the manifests' ``image``)."""
    assert node_cluster.node is not None
    archive = oci_image.write(tmp_path_factory.mktemp("dist"))
    node_cluster.node.import_image(archive.archive)
    assert archive.reference in node_cluster.node.images()
    return archive.reference


@pytest.fixture
def tenant_namespace(node_admin: ApiClient) -> Iterator[str]:
    """A tenant's namespace (Pod Security ``restricted``), deleted after the test."""
    name = fresh_namespace(node_admin, "tenant")
    yield name
    delete_namespace(node_admin, name)


@pytest.fixture(scope="module")
def installed_controller(
    request: pytest.FixtureRequest,
    node_admin: ApiClient,
    node_kubeconfig: Path,
    controller_image: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[installs.Installed]:
    """The chart installed once for the module, with the module's ``CONTROLLER_VALUES``, and
    Available; uninstalled after its last test (one controller at a time: the releases share
    their cluster-scoped names)."""
    values = getattr(request.module, "CONTROLLER_VALUES", {})
    namespace = fresh_namespace(node_admin, "taskfsm")
    done = installs.helm_install(
        node_kubeconfig,
        image=controller_image,
        namespace=namespace,
        values=values,
        work=tmp_path_factory.mktemp("helm"),
    )
    try:
        done.wait_available()
        yield done
    finally:
        done.uninstall()
        delete_namespace(node_admin, namespace)
