"""The controller as a user installs it, on a real node: the chart and the plain manifests each
give a controller Pod that passes its own probes, runs as its ServiceAccount with the in-cluster
configuration (no kubeconfig), non-root with a read-only root filesystem in a namespace that
enforces Pod Security ``restricted``, and runs a Task whose Job is a real container."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from taskfsm.kube.client import ApiClient
from taskfsm_dev import objects
from taskfsm_dev.node import WORKLOAD_IMAGE
from tests.support import installs
from tests.support.cluster import Cluster
from tests.support.installs import RESTRICTED, fresh_namespace
from tests.support.probes import Probe

INSTALL_PATHS = ("helm", "kustomize")


@pytest.fixture(params=INSTALL_PATHS)
def installed(
    request: pytest.FixtureRequest,
    node_admin: ApiClient,
    node_kubeconfig: Path,
    controller_image: str,
    tmp_path: Path,
) -> Iterator[installs.Installed]:
    """The controller installed one way, Available; uninstalled after the test."""
    if request.param == "helm":
        namespace = fresh_namespace(node_admin, "taskfsm-helm")
        done = installs.helm_install(
            node_kubeconfig, image=controller_image, namespace=namespace, work=tmp_path
        )
    else:
        done = installs.kustomize_install(node_kubeconfig)
    try:
        done.wait_available()
        yield done
    finally:
        done.uninstall()


def test_controller_pod_runs_as_installed_and_runs_a_task(
    installed: installs.Installed, node_admin: ApiClient, tenant_namespace: str
) -> None:
    """Every controller Pod is Ready through its own probes and never restarted; it runs as the
    ServiceAccount the install made, non-root, read-only, without capabilities, in a namespace
    enforcing ``restricted``; and with neither ``--kubeconfig`` nor ``KUBECONFIG`` (so from the
    in-cluster configuration: its token and the ``kubernetes`` Service) a tenant's Task runs its
    Job's real container to Succeeded."""
    pods = installed.pods()
    assert len(pods) >= 1
    namespace = installed.kubectl("get", "namespace", installed.namespace, "-o", "json")
    assert all(f'"{k}": "{v}"' in namespace for k, v in RESTRICTED.items())
    for pod in pods:
        spec, status = pod["spec"], pod["status"]
        assert spec["serviceAccountName"] == "taskfsm"
        container = spec["containers"][0]
        assert not any(a.startswith("--kubeconfig") for a in container.get("args") or [])
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
        # The ServiceAccount admission gave the Pod its projected token: the in-cluster config.
        assert any("projected" in v for v in spec["volumes"])
        (state,) = status["containerStatuses"]
        assert state["ready"] is True, state
        assert state["restartCount"] == 0, state
        assert not any(e.get("name") == "KUBECONFIG" for e in container.get("env") or [])

    probe = Probe(node_admin, tenant_namespace)
    for obj in (
        objects.workflow("wf"),
        objects.local_mpe("m"),
        objects.container_function(
            "show-data", "cat", "/run/secrets/engine.nagare.media/task/data.json",
            image=WORKLOAD_IMAGE,
        ),
        objects.task("t", workflow_name="wf", function_name="show-data", mpe_name="m"),
    ):  # fmt: skip
        Cluster(node_admin, tenant_namespace).create(obj)
    task = probe.wait_phase("t", "Succeeded", timeout=120)
    assert task["status"]["jobRef"]["namespace"] == tenant_namespace
