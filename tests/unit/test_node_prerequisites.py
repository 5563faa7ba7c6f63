"""The real node of the development kit fails loudly on a host that cannot run it, and
tools/node/build.sh reuses its cache: what a fresh machine sees before tests/node runs."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from taskfsm_dev import node


def test_a_missing_command_is_named_with_its_debian_package(monkeypatch: pytest.MonkeyPatch):
    """Without containerd on PATH, the list names it and the package that has it."""
    real_which = shutil.which
    monkeypatch.setattr(
        shutil, "which", lambda cmd: None if cmd == "containerd" else real_which(cmd)
    )
    assert "containerd (Debian package containerd)" in node.missing_prerequisites()


def test_missing_cni_plugins_are_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setattr(node, "CNI_BIN_DIR", tmp_path)
    missing = node.missing_prerequisites()
    assert f"{tmp_path / 'bridge'} (Debian package containernetworking-plugins)" in missing


def test_a_cluster_on_a_host_that_lacks_something_fails_before_starting_anything(
    monkeypatch: pytest.MonkeyPatch,
):
    """RealCluster.start raises with the whole list (never a skip) and starts no process."""
    monkeypatch.setattr(node, "missing_prerequisites", lambda: ["a", "b"])
    cluster = node.RealCluster()
    with pytest.raises(node.NodeError, match="cannot run a real node; it lacks:\n  a\n  b"):
        cluster.start()
    assert cluster.sandbox is None
    assert cluster.control_plane is None


def test_cached_node_binaries_are_reused(tmp_path: Path) -> None:
    """With kubelet, kube-scheduler, kube-proxy and workload under the cache key of this
    go.sum and workload source, the build script prints that directory and builds nothing."""
    here = node.NODE_BUILD_SCRIPT.parent
    digest = hashlib.sha256(
        (here / "go.sum").read_bytes() + (here / "cmd/workload/main.go").read_bytes()
    ).hexdigest()[:12]
    cached = tmp_path / f"v1.35.4-{digest}"
    cached.mkdir()
    for name in node.NODE_BINARIES:
        (cached / name).write_text("#!/bin/sh\n")
        (cached / name).chmod(0o755)
    proc = subprocess.run(
        ["bash", str(node.NODE_BUILD_SCRIPT)],
        capture_output=True,
        text=True,
        env={**os.environ, "TASKFSM_NODE_CACHE": str(tmp_path)},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(cached)
    assert "building" not in proc.stderr
