"""The controller image: its filesystem, built offline the way the Dockerfile builds it, starts
the entry point as the non-root user on a read-only root filesystem, and runs a Task to the end
(tests/support/image.py explains the build)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from taskfsm.testing import objects
from taskfsm.testing.waiting import wait_for
from tests.support import image
from tests.support.process import ControllerProcess

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


@pytest.mark.timeout(900)  # a cold build of the root filesystem (scripts/setup.sh makes it warm)
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
