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


MIN_BUILD_SCRIPT = BUILD_SCRIPT.parents[1] / "controlplane-min" / "build.sh"
LIB = BUILD_SCRIPT.parents[1] / "lib.sh"


def test_the_oldest_control_plane_is_reused_when_cached(tmp_path):
    """tools/controlplane-min: with the main build and the v1.30.14 directory (keyed by both
    go.sum files) cached, the v1.30.14 directory is printed and nothing is built, even with
    KUBEBUILDER_ASSETS set (it is what that directory is for)."""
    import hashlib

    main_sum = (BUILD_SCRIPT.parent / "go.sum").read_bytes()
    min_sum = (MIN_BUILD_SCRIPT.parent / "go.sum").read_bytes()
    main = tmp_path / ("v1.35.4-" + hashlib.sha256(main_sum).hexdigest()[:12])
    oldest = tmp_path / ("v1.30.14-" + hashlib.sha256(min_sum + main_sum).hexdigest()[:12])
    for directory in (main, oldest):
        directory.mkdir()
        make_binaries(directory, ("etcd", "kube-apiserver", "kube-controller-manager", "kubectl"))
    env = {**os.environ, "TASKFSM_CONTROLPLANE_CACHE": str(tmp_path), "KUBEBUILDER_ASSETS": "/x"}
    proc = subprocess.run(
        ["bash", str(MIN_BUILD_SCRIPT)], capture_output=True, text=True, env=env, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(oldest)
    assert "building" not in proc.stderr


def test_k8s_build_builds_with_the_version_and_copies_the_files_in(tmp_path):
    """tools/lib.sh k8s_build: the packages built and the --copy files land in OUT together; OUT
    is printed; a second call builds nothing."""
    module = tmp_path / "module"
    (module / "cmd" / "hello").mkdir(parents=True)
    (module / "go.mod").write_text("module example.invalid/m\n\ngo 1.22\n")
    (module / "cmd" / "hello" / "main.go").write_text(
        'package main\n\nimport "fmt"\n\nvar gitVersion = "none"\n\n'
        "func main() { fmt.Println(gitVersion) }\n"
    )
    extra = tmp_path / "etcd"
    extra.write_text("#!/bin/sh\n")
    extra.chmod(0o755)
    out = tmp_path / "cache" / "v1.30.14-x"
    script = (
        f'. "{LIB}"; k8s_build t "{module}" v1.30.14 "{out}" "a moment" ./cmd/hello '
        f'--copy "{extra}"'
    )
    env = {**os.environ, "GOFLAGS": ""}
    runs = [
        subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, check=False)
        for _ in range(2)
    ]
    for proc in runs:
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == str(out)
    assert f"building hello (and copying {extra}) v1.30.14" in runs[0].stderr
    assert "building" not in runs[1].stderr
    assert sorted(p.name for p in out.iterdir()) == ["etcd", "hello"]
    assert not list(out.parent.glob("*.partial.*"))
