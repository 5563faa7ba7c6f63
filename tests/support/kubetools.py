"""kubectl and helm as a user runs them: the project's own builds (kubectl v1.35.4 from
tools/controlplane, helm from tools/helm), first on ``PATH``, with ``.venv/bin`` (``taskfsm``,
``kubectl-taskfsm``) after them, against a given kubeconfig, from the repository root.

A missing binary or a failed build raises: tests that need kubectl or helm fail, never skip.
"""

from __future__ import annotations

import functools
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from taskfsm_dev.controlplane import REPO_ROOT, binaries_dir

HELM_BUILD = REPO_ROOT / "tools" / "helm" / "build.sh"


class ToolError(RuntimeError):
    """A tool could not be built, or a command failed (message: its output)."""


@functools.cache
def kubectl() -> Path:
    """kubectl built with the control plane (same Go module, same version)."""
    path = binaries_dir() / "kubectl"
    if not path.is_file():
        raise ToolError(f"{path} is missing: tools/controlplane/build.sh builds it")
    return path


@functools.cache
def helm() -> Path:
    """helm built by tools/helm/build.sh (cached like the control plane)."""
    proc = subprocess.run(["bash", str(HELM_BUILD)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ToolError(f"building helm failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    path = Path(proc.stdout.strip().splitlines()[-1])
    if not path.is_file():
        raise ToolError(f"tools/helm/build.sh printed {path}, which does not exist")
    return path


@functools.cache
def _state_dir() -> Path:
    """Where kubectl and helm keep caches and configuration during the session (not ~)."""
    return Path(tempfile.mkdtemp(prefix="taskfsm-kubetools-"))


def environment(kubeconfig: Path | str, *, with_helm: bool = True) -> dict[str, str]:
    """The environment of a user's shell: the project's kubectl and helm (unless not
    ``with_helm``: tests of kubectl alone need not build helm) first on PATH, then .venv/bin,
    KUBECONFIG set, caches in a temporary directory."""
    state = _state_dir()
    path = [
        str(kubectl().parent),
        *([str(helm().parent)] if with_helm else []),
        str(Path(sys.executable).parent),
    ]
    return {
        **os.environ,
        "PATH": os.pathsep.join([*path, os.environ.get("PATH", "")]),
        "KUBECONFIG": str(kubeconfig),
        "KUBECACHEDIR": str(state / "kube-cache"),
        "HELM_CACHE_HOME": str(state / "helm-cache"),
        "HELM_CONFIG_HOME": str(state / "helm-config"),
        "HELM_DATA_HOME": str(state / "helm-data"),
    }


def run(
    command: str,
    kubeconfig: Path | str,
    *,
    check: bool = True,
    env: Mapping[str, str] | None = None,
    timeout: float = 180,
    with_helm: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run one shell command line (as written in the docs) from the repository root."""
    proc = subprocess.run(
        ["bash", "-c", command],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO_ROOT,
        env={**environment(kubeconfig, with_helm=with_helm), **(env or {})},
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise ToolError(
            f"$ {command}\nexit {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n"
            f"--- stderr\n{proc.stderr[-4000:]}"
        )
    return proc


def documents(text: str) -> list[dict[str, Any]]:
    """The non-empty YAML documents of ``text`` (a rendered chart, ``kubectl kustomize``)."""
    return [d for d in yaml.safe_load_all(text) if d]


def quote(*words: str) -> str:
    return shlex.join(words)
