"""tools/controlplane/build.sh: the envtest convention (KUBEBUILDER_ASSETS) and the cache key."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from taskfsm_dev import controlplane
from taskfsm_dev.controlplane import BUILD_SCRIPT


def run_build(env_extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **env_extra}
    return subprocess.run(
        ["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, env=env, check=False
    )


def make_binaries(directory: Path, names: tuple[str, ...]) -> None:
    for name in names:
        path = directory / name
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)


def test_kubebuilder_assets_with_binaries_is_used_without_building(tmp_path):
    """A KUBEBUILDER_ASSETS directory holding etcd and kube-apiserver is printed as is."""
    make_binaries(tmp_path, ("etcd", "kube-apiserver"))
    proc = run_build({"KUBEBUILDER_ASSETS": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(tmp_path)


def test_kubebuilder_assets_without_binaries_fails_loudly(tmp_path):
    """A KUBEBUILDER_ASSETS directory lacking kube-apiserver is an error, not a silent build."""
    make_binaries(tmp_path, ("etcd",))
    proc = run_build({"KUBEBUILDER_ASSETS": str(tmp_path)})
    assert proc.returncode == 1
    assert "lacks etcd or kube-apiserver" in proc.stderr


def test_cached_binaries_are_reused(tmp_path):
    """With all four binaries (etcd, kube-apiserver, kube-controller-manager, kubectl) in the
    cache directory for this go.sum, nothing is built."""
    import hashlib

    go_sum = BUILD_SCRIPT.parent / "go.sum"
    key = "v1.35.4-" + hashlib.sha256(go_sum.read_bytes()).hexdigest()[:12]
    cached = tmp_path / key
    cached.mkdir()
    make_binaries(cached, ("etcd", "kube-apiserver", "kube-controller-manager", "kubectl"))
    proc = run_build({"TASKFSM_CONTROLPLANE_CACHE": str(tmp_path), "KUBEBUILDER_ASSETS": ""})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(cached)
    assert "building" not in proc.stderr


def test_the_harness_honours_kubebuilder_assets_without_a_build_script(tmp_path, monkeypatch):
    """From anywhere (no checkout's build script), KUBEBUILDER_ASSETS names the binaries."""
    make_binaries(tmp_path, ("etcd", "kube-apiserver"))
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(tmp_path))
    monkeypatch.setattr(controlplane, "BUILD_SCRIPT", tmp_path / "missing" / "build.sh")
    assert controlplane.binaries_dir() == tmp_path


def test_the_harness_names_a_missing_binary_of_kubebuilder_assets(tmp_path, monkeypatch):
    make_binaries(tmp_path, ("etcd",))
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(tmp_path))
    with pytest.raises(controlplane.ControlPlaneError, match="lacks kube-apiserver"):
        controlplane.binaries_dir()


def test_the_harness_without_assets_or_build_script_fails_loudly(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    monkeypatch.setattr(controlplane, "BUILD_SCRIPT", tmp_path / "missing" / "build.sh")
    with pytest.raises(controlplane.ControlPlaneError, match="KUBEBUILDER_ASSETS is not set"):
        controlplane.binaries_dir()
