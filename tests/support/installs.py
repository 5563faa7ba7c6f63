"""The controller installed the ways a user installs it, on a cluster with a real node: the chart
(``helm install deploy/chart``) and the plain manifests (``kubectl apply -k deploy/``), with the
project's kubectl and helm (:mod:`tests.support.kubetools`), then waited for as a user waits
(``kubectl rollout status``: the Pods passed their own readiness probes).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from taskfsm.kube.client import ApiClient
from taskfsm.kube.rest import NAMESPACES, Rest
from taskfsm.tools import rbac
from tests.support import kubetools

RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}
"""The Pod Security label every namespace of the tier carries: what runs there is admitted at
the ``restricted`` level, the controller's Pod and the Tasks' pods alike."""

CHART = "deploy/chart"
ROLLOUT_TIMEOUT = 180
"""Seconds for the controller's Pods to become Ready (image unpack, Python start-up, the first
LISTs, then the readiness probe's period)."""


@dataclass(frozen=True)
class Installed:
    """One installation of the controller."""

    how: str
    """``helm`` or ``kustomize``."""
    namespace: str
    deployment: str
    kubeconfig: Path
    release: str = ""

    def kubectl(self, *args: str, check: bool = True, timeout: float = 180) -> str:
        """``kubectl -n <namespace> <args>``; its standard output."""
        line = kubetools.quote("kubectl", "-n", self.namespace, *args)
        return kubetools.run(line, self.kubeconfig, check=check, timeout=timeout).stdout

    def pods(self) -> list[dict[str, Any]]:
        """The controller's Pods."""
        out = self.kubectl("get", "pods", "-l", "app.kubernetes.io/name=taskfsm", "-o", "json")
        return list(json.loads(out)["items"])

    def wait_available(self, timeout: float = ROLLOUT_TIMEOUT) -> None:
        """Until every replica of the Deployment is Ready (``kubectl rollout status``)."""
        self.kubectl(
            "rollout", "status", f"deployment/{self.deployment}", f"--timeout={int(timeout)}s",
            timeout=timeout + 30,
        )  # fmt: skip

    def uninstall(self) -> None:
        """Remove what the install made (the CRDs stay, as with Helm) and wait until the
        controller's Pods are gone."""
        if self.how == "helm":
            line = kubetools.quote(
                "helm", "uninstall", self.release, "-n", self.namespace, "--wait", "--timeout=120s"
            )
            kubetools.run(line, self.kubeconfig, timeout=180)
        else:
            # The CRDs (and every Task) stay: delete what manager.yaml and rbac.yaml made.
            for name in ("manager.yaml", "rbac.yaml"):
                kubetools.run(
                    kubetools.quote(
                        "kubectl", "delete", "-f", f"deploy/{name}", "--ignore-not-found",
                        "--wait=true", "--timeout=120s",
                    ),
                    self.kubeconfig,
                    timeout=180,
                )  # fmt: skip


def helm_install(
    kubeconfig: Path,
    *,
    image: str,
    namespace: str,
    release: str = "taskfsm",
    values: dict[str, Any] | None = None,
    work: Path,
) -> Installed:
    """``helm install <release> deploy/chart`` into ``namespace`` (which must exist: the test
    labels it for Pod Security) with the image the node holds and ``values``."""
    repository, tag = image.rsplit(":", 1)
    file = work / f"{release}-values.yaml"
    file.write_text(
        yaml.safe_dump(
            {
                "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
                **(values or {}),
            }
        )
    )
    kubetools.run(
        kubetools.quote("helm", "install", release, CHART, "-n", namespace, "-f", str(file)),
        kubeconfig,
    )
    fullname = release if "taskfsm" in release else f"{release}-taskfsm"
    return Installed("helm", namespace, f"{fullname}-controller", kubeconfig, release)


def kustomize_install(kubeconfig: Path) -> Installed:
    """``kubectl apply -k deploy/`` as the README says (its namespace, labelled ``restricted``,
    comes with it)."""
    kubetools.run("kubectl apply -k deploy/", kubeconfig)
    return Installed("kustomize", rbac.NAMESPACE, "taskfsm-controller", kubeconfig)


def fresh_namespace(api: ApiClient, prefix: str, labels: dict[str, str] | None = None) -> str:
    """A new namespace of the node's cluster, labelled Pod Security ``restricted``."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    Rest(api).create(
        NAMESPACES, None, {"metadata": {"name": name, "labels": {**RESTRICTED, **(labels or {})}}}
    )
    return name
