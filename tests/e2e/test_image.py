"""The controller image: its filesystem, built offline the way the Dockerfile builds it, starts
the entry point as the non-root user on a read-only root filesystem, and runs a Task to the end
(tests/support/image.py explains the build)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from taskfsm.tools import deploygen
from taskfsm_dev import objects, oci
from taskfsm_dev.process import ControllerProcess
from taskfsm_dev.waiting import wait_for
from tests.support import image, oci_image, release

REPO = Path(__file__).resolve().parents[2]


def _config_map_data() -> str:
    """The WorkflowManagerConfiguration deploy/manager.yaml mounts at /etc/taskfsm."""
    docs = yaml.safe_load_all((REPO / "deploy" / "manager.yaml").read_text())
    config_map = next(d for d in docs if d and d["kind"] == "ConfigMap")
    return config_map["data"]["config.yaml"]


def _mount_options(pid: int, mount_point: str) -> set[str]:
    """The options of the mount at ``mount_point`` as process ``pid`` sees it."""
    lines = Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
    fields = [line.split() for line in lines if line.split()[4] == mount_point]
    assert fields, f"no mount at {mount_point} for pid {pid}"
    return set(fields[-1][5].split(","))  # the last one mounted there is the one in effect


@pytest.mark.timeout(900)  # a cold root filesystem build (`make setup-test` makes it warm)
def test_image_runs_a_task_to_succeeded_as_non_root_on_a_read_only_root(
    control_plane, cluster, kubelet, namespace, tmp_path, installed_kubeconfig
):
    """The image's entry point, started from the image filesystem as uid/gid 65532 with the root
    filesystem read-only (only /tmp writable, as the Deployment's emptyDir) and the kubeconfig and
    deploy/manager.yaml's configuration mounted at /etc/taskfsm, becomes ready, takes a Task to
    Succeeded with a real Job, and exits 0 on SIGTERM."""
    rootfs = image.build()
    spec = image.dockerfile()
    assert spec.user == "65532:65532"
    assert spec.entrypoint == ("/opt/taskfsm/bin/taskfsm",)

    etc = tmp_path / "etc-taskfsm"
    etc.mkdir(mode=0o755)
    shutil.copyfile(installed_kubeconfig(), etc / "kubeconfig")  # the installed identity
    (etc / "config.yaml").write_text(_config_map_data())
    for path in (etc / "kubeconfig", etc / "config.yaml"):
        path.chmod(0o644)  # readable by the image's user
    proc = ControllerProcess(
        "/etc/taskfsm/kubeconfig",
        namespace=namespace,
        log_dir=tmp_path,
        name="image",
        args=[
            "--config=/etc/taskfsm/config.yaml",
            "--log-format=json",
            "--watch-timeout=20",
            "--watch-read-margin=5",
            "--shutdown-timeout=10",
        ],
    )
    assert proc.cmd[:3] == [sys.executable, "-m", "taskfsm"]
    proc.cmd = image.run_command(rootfs, proc.cmd[3:], mounts={etc: "/etc/taskfsm"})

    with proc:  # returns once /readyz answers 200
        pid = proc.pid
        assert os.readlink(f"/proc/{pid}/root") == str(rootfs)
        assert os.readlink(f"/proc/{pid}/exe").startswith(str(rootfs) + "/usr/bin/python3.11")
        status = dict(
            line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        )
        assert status["Uid"].split() == ["65532"] * 4
        assert status["Gid"].split() == ["65532"] * 4
        assert "ro" in _mount_options(pid, "/")
        assert "rw" in _mount_options(pid, "/tmp")

        cluster.create(objects.workflow("wf"))
        cluster.create(objects.function("fn", run_seconds=1))
        cluster.create(objects.local_mpe("local"))
        cluster.create(objects.task("t", workflow_name="wf", function_name="fn", mpe_name="local"))
        wait_for(lambda: cluster.phase("t") == "Succeeded", timeout=60, what="Task Succeeded")
        job = cluster.task("t")["status"]["jobRef"]["name"]
        assert [j["metadata"]["name"] for j in cluster.jobs()] == [job]
        assert proc.terminate() == 0, proc.tail()


def _skopeo(*args: str) -> str:
    """skopeo from Debian (`scripts/setup.sh test` installs it); missing: the test fails."""
    skopeo = shutil.which("skopeo")
    assert skopeo, "skopeo is missing: scripts/setup.sh test installs it (Debian package)"
    proc = subprocess.run([skopeo, *args], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"skopeo {' '.join(args)}:\n{proc.stderr}"
    return proc.stdout


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> release.Release:
    """``make release`` of this checkout's version (the tag and clean-tree checks aside: they are
    unit-tested), once for the module."""
    tag = f"v{deploygen.project_version()}"
    return release.build(tag, tmp_path_factory.mktemp("dist"), check_git=False)


@pytest.mark.timeout(900)  # the release builds the image (a cold root filesystem: minutes)
def test_a_release_holds_the_wheel_the_image_and_the_chart_of_its_tag_with_checksums(released):
    """``make release``: the wheel and sdist, the image archive and its SBOM, the chart package
    whose version and appVersion are the tag's; SHA256SUMS checks every one of them."""
    version = released.version
    output = released.checksums.parent
    assert {p.name for p in released.files} == {
        f"taskfsm-{version}-py3-none-any.whl",
        f"taskfsm-{version}.tar.gz",
        f"taskfsm-{version}.oci.tar",
        f"taskfsm-{version}.cdx.json",
        f"taskfsm-{version}.tgz",
    }
    checked = subprocess.run(
        ["sha256sum", "-c", "SHA256SUMS"], cwd=output, capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count(": OK") == len(released.files)
    with tarfile.open(output / f"taskfsm-{version}.tgz") as chart:
        meta = yaml.safe_load(chart.extractfile("taskfsm/Chart.yaml").read())  # type: ignore[union-attr]  # a regular member
    assert (meta["version"], meta["appVersion"]) == (version, version)
    with zipfile.ZipFile(output / f"taskfsm-{version}-py3-none-any.whl") as wheel:
        metadata = wheel.read(f"taskfsm-{version}.dist-info/METADATA").decode()
    assert f"Version: {version}" in metadata
    assert "Provides-Extra: client" in metadata
    assert "Requires-Dist: graphviz==0.21; extra == 'client'" in metadata


@pytest.mark.timeout(900)  # a cold root filesystem build (`make setup-test` makes it warm)
def test_image_archive_is_the_tested_filesystem_and_loads(tmp_path, released):
    """`make image`'s OCI archive (tests/support/oci_image.py) holds the tested root filesystem
    as one layer with the Dockerfile's USER, ENTRYPOINT and CMD; skopeo reads it both as an OCI
    archive and as a docker archive (docker load's format); podman loads it under the image's
    name; skopeo copies it with every digest checked; the copied layer, unpacked, runs the entry
    point as the non-root user; the SBOM beside it is valid CycloneDX 1.6 and lists exactly the
    image's Python distributions, at uv.lock's versions."""
    rootfs = image.build()
    spec = image.dockerfile()
    result = released.image
    version = deploygen.project_version()
    assert result.archive.name == f"taskfsm-{version}.oci.tar"
    assert result.sbom.parent == result.archive.parent
    assert result.reference == f"ghcr.io/nagare-media/taskfsm:{version}" == deploygen.image()

    archive_ref = f"oci-archive:{result.archive}:{result.tag}"
    inspected = json.loads(_skopeo("inspect", archive_ref))
    assert inspected["Digest"] == result.manifest_digest
    assert (inspected["Architecture"], inspected["Os"]) == ("amd64", "linux")
    assert inspected["Labels"]["org.opencontainers.image.version"] == version
    config = json.loads(_skopeo("inspect", "--config", archive_ref))
    assert config["config"]["User"] == spec.user == "65532:65532"
    assert config["config"]["Entrypoint"] == list(spec.entrypoint)
    assert config["config"]["Cmd"] == list(spec.cmd) == ["run"]
    assert config["rootfs"]["diff_ids"] == [result.layer_diff_id]
    docker = json.loads(_skopeo("inspect", f"docker-archive:{result.archive}"))
    assert docker["Layers"] == [result.layer_diff_id]  # docker archives name layers uncompressed

    # podman (Debian) loads it into a private store: the name comes from the archive
    podman = shutil.which("podman")
    assert podman, "podman is missing: scripts/setup.sh test installs it (Debian package)"
    runroot = Path(tempfile.mkdtemp(prefix="podman-", dir="/tmp"))  # at most 50 characters
    store = ["--root", str(tmp_path / "podman"), "--runroot", str(runroot)]
    store += ["--storage-driver", "vfs"]
    loaded = subprocess.run(
        [podman, *store, "load", "-i", str(result.archive)], capture_output=True, text=True
    )
    assert loaded.returncode == 0, loaded.stderr
    assert f"Loaded image: {result.reference}" in loaded.stdout + loaded.stderr
    shown = subprocess.run(
        [podman, *store, "image", "inspect", result.reference], capture_output=True, text=True
    )
    assert shown.returncode == 0, shown.stderr
    [loaded_image] = json.loads(shown.stdout)
    assert loaded_image["Config"]["User"] == spec.user
    assert loaded_image["Config"]["Entrypoint"] == list(spec.entrypoint)
    assert loaded_image["RootFS"]["Layers"] == [result.layer_diff_id]
    shutil.rmtree(runroot, ignore_errors=True)

    copied = tmp_path / "copied"
    _skopeo("copy", archive_ref, f"dir:{copied}")  # reads every blob and checks its digest
    [layer] = inspected["Layers"]
    blob = copied / layer.removeprefix("sha256:")
    with tarfile.open(blob) as tar:
        members = tar.getmembers()
        names = {m.name for m in members}
        assert len(names) == len(members)
        assert "opt/taskfsm/bin/taskfsm" in names
        assert "etc/passwd" in names
        assert {"dev", "proc", "sys", "tmp"} <= names
        assert not [n for n in names if n.startswith(("dev/", "proc/", "sys/"))]
        assert names == {str(p.relative_to(rootfs)) for p in oci.entries(rootfs)}
        unpacked = tmp_path / "unpacked"
        tar.extractall(unpacked, numeric_owner=True, filter="fully_trusted")
    assert (unpacked / "opt/taskfsm/bin/taskfsm").stat().st_uid == 0
    proc = subprocess.run(
        image.run_command(unpacked, ["--version"]), capture_output=True, text=True, check=False
    )
    assert (proc.returncode, proc.stdout.strip()) == (0, f"taskfsm {version}"), proc.stderr

    validator = JsonStrictValidator(SchemaVersion.V1_6)  # CycloneDX's own JSON schema
    assert validator.validate_str(result.sbom.read_text()) is None
    bom = json.loads(result.sbom.read_text())
    assert (bom["bomFormat"], bom["specVersion"]) == ("CycloneDX", "1.6")
    subject = bom["metadata"]["component"]
    assert (subject["type"], subject["name"], subject["version"]) == (
        "container",
        "ghcr.io/nagare-media/taskfsm",
        version,
    )
    python_components = [c for c in bom["components"] if c["purl"].startswith("pkg:pypi/")]
    listed = {_normalized(c["name"]): c["version"] for c in python_components}
    site = rootfs / oci_image.VENV_SITE_PACKAGES
    installed = {
        _normalized(d.metadata["Name"]): d.version
        for d in importlib.metadata.distributions(path=[str(site)])
    }
    assert listed == installed
    assert listed["taskfsm"] == version
    assert "pytest" not in listed  # the image has no test tools
    locked = {
        _normalized(p["name"]): p["version"]
        for p in tomllib.loads((REPO / "uv.lock").read_text())["package"]
    }
    assert {name: locked.get(name) for name in listed} == listed
    assert all(
        c["purl"] == f"pkg:pypi/{_normalized(c['name'])}@{c['version']}" for c in python_components
    )
    # The base's Debian packages, from the image's dpkg database, each with a deb purl.
    debian = {c["name"]: c for c in bom["components"] if c["purl"].startswith("pkg:deb/debian/")}
    assert set(debian) == {name for name, _, _ in oci_image.debian_packages(rootfs)}
    assert {"python3.11", "libc6", "ca-certificates"} <= set(debian)
    assert len(debian) + len(python_components) == len(bom["components"])
