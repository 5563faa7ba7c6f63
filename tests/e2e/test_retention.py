"""Retention (`taskfsm run --finished-ttl`, docs/operations.md "Retention") on the real control
plane, with the installed controller's RBAC: finished Workflows (with their Tasks) and finished
Tasks whose Workflow does not exist are deleted once the TTL has passed since their endTime,
with their Jobs and Secrets, across a restart of the controller; what is not finished, or
finished within the TTL, stays; without the flag nothing is deleted."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from taskfsm.api import constants as c
from taskfsm.api.timestamps import parse_time
from taskfsm.kube.errors import NotFound
from taskfsm.kube.resources import WORKFLOWS
from taskfsm_dev import objects
from taskfsm_dev.waiting import wait_for
from tests.support.cluster import Cluster

pytestmark = pytest.mark.timeout(240)

TTL = 25.0
"""Long enough for every object to finish before the first controller is stopped."""


def _config(tmp_path: Path) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(
        f"apiVersion: {c.API_VERSION}\n"
        f"kind: WorkflowManagerConfiguration\n"
        "workflowTerminationWaitingDuration: 1s\n",
        encoding="utf-8",
    )
    return f"--config={path}"


def _workflow(cluster: Cluster, name: str) -> dict[str, Any] | None:
    try:
        return cluster.rest.get(WORKFLOWS, cluster.namespace, name)
    except NotFound:
        return None


def _workflow_phase(cluster: Cluster, name: str) -> str:
    return ((_workflow(cluster, name) or {}).get("status") or {}).get("phase") or ""


def _children(cluster: Cluster, task: str) -> list[str]:
    """The Jobs and Secrets labelled with ``task``'s name."""
    found = []
    for kind, items in (("Job", cluster.jobs()), ("Secret", cluster.secrets())):
        for obj in items:
            if (obj["metadata"].get("labels") or {}).get(c.LABEL_TASK_NAME) == task:
                found.append(f"{kind}/{obj['metadata']['name']}")
    return found


def _end_time(obj: dict[str, Any] | None) -> float:
    end = parse_time(((obj or {}).get("status") or {}).get("endTime"))
    assert end is not None, obj
    return end.timestamp()


def _remove_workflow_leaving_tasks(cluster: Cluster, name: str) -> None:
    """Delete Workflow ``name`` behind the controller's back: its finalizer dropped, its Tasks
    orphaned (not deleted with it)."""
    cluster.rest.patch(WORKFLOWS, cluster.namespace, name, {"metadata": {"finalizers": None}})
    cluster.rest.delete(WORKFLOWS, cluster.namespace, name, propagation="Orphan")
    wait_for(lambda: _workflow(cluster, name) is None, timeout=30, what=f"Workflow {name} gone")


def _set_up(cluster: Cluster) -> None:
    cluster.create(objects.function("ok", run_seconds=1))
    cluster.create(objects.function("long", run_seconds=3600))
    cluster.create(objects.local_mpe("local"))
    # A Workflow whose two Tasks succeed: it succeeds, and expires.
    cluster.create(objects.workflow("done"))
    for name in ("done-a", "done-b"):
        cluster.create(
            objects.task(name, workflow_name="done", function_name="ok", mpe_name="local")
        )
    # A Task that succeeds, whose Workflow is then removed without it: it expires.
    cluster.create(objects.workflow("solo-wf"))
    cluster.create(
        objects.task("solo", workflow_name="solo-wf", function_name="ok", mpe_name="local")
    )
    # A Workflow still running: it stays, whatever its age.
    cluster.create(objects.workflow("busy"))
    cluster.create(
        objects.task("busy-a", workflow_name="busy", function_name="long", mpe_name="local")
    )


def _finished(cluster: Cluster) -> None:
    wait_for(
        lambda: (
            _workflow_phase(cluster, "done") == "Succeeded"
            and cluster.phase("solo") == "Succeeded"
            and cluster.phase("busy-a") == "Running"
            and _children(cluster, "busy-a")
        ),
        timeout=60,
        what="Workflow done Succeeded, Task solo Succeeded, Task busy-a Running",
    )


def test_finished_objects_are_deleted_after_the_ttl_across_a_restart(
    cluster, kubelet, start_controller, tmp_path
):
    """With `--finished-ttl`, a finished Workflow goes with its Tasks, Jobs and Secrets, and a
    finished Task whose Workflow is gone with its Job and Secret, once the TTL has passed, even
    when the controller was down when it passed; a running Workflow and a Workflow finished
    within the TTL stay."""
    args = [_config(tmp_path), f"--finished-ttl={TTL:g}s"]
    first = start_controller(name="first", args=args)
    _set_up(cluster)
    _finished(cluster)
    assert _children(cluster, "done-a")
    assert _children(cluster, "solo")
    assert first.terminate() == 0
    # Stopped within the TTL: nothing was deleted yet.
    done_end = _end_time(_workflow(cluster, "done"))
    assert time.time() < done_end + TTL, "the first controller ran past the TTL"
    assert cluster.phase("done-a") == cluster.phase("done-b") == "Succeeded"
    _remove_workflow_leaving_tasks(cluster, "solo-wf")
    solo_end = _end_time(cluster.task("solo"))
    # The TTL passes while no controller runs.
    time.sleep(max(0.0, max(done_end, solo_end) + TTL + 1 - time.time()))
    assert _workflow(cluster, "done") is not None
    assert cluster.task("solo") is not None

    start_controller(name="second", args=args)
    expired = ("done-a", "done-b", "solo")

    def left() -> list[str]:
        leftover = [f"Task/{n}" for n in expired if cluster.task(n) is not None]
        leftover += [child for n in expired for child in _children(cluster, n)]
        if _workflow(cluster, "done") is not None:
            leftover.append("Workflow/done")
        return leftover

    wait_for(lambda: not left(), timeout=60, what=lambda: f"still there: {left()}")
    # A Workflow that finishes now is kept within its TTL.
    cluster.create(objects.workflow("fresh"))
    cluster.create(
        objects.task("fresh-a", workflow_name="fresh", function_name="ok", mpe_name="local")
    )
    wait_for(lambda: _workflow_phase(cluster, "fresh") == "Succeeded", timeout=60, what="fresh")
    time.sleep(2)
    assert _workflow(cluster, "fresh") is not None
    assert cluster.phase("fresh-a") == "Succeeded"
    assert _children(cluster, "fresh-a")
    # The running Workflow, its Task and its Job stay.
    assert _workflow_phase(cluster, "busy") == "Running"
    assert cluster.phase("busy-a") == "Running"
    assert _children(cluster, "busy-a")


def test_without_the_flag_nothing_finished_is_deleted(cluster, kubelet, start_controller, tmp_path):
    """Without `--finished-ttl`, finished Workflows and Tasks, and a finished Task whose
    Workflow is gone, stay with their Jobs and Secrets (the Task says its Workflow is missing)."""
    first = start_controller(name="first", args=[_config(tmp_path)])
    _set_up(cluster)
    _finished(cluster)
    assert first.terminate() == 0
    _remove_workflow_leaving_tasks(cluster, "solo-wf")  # unseen: no Task deletes itself
    start_controller(name="second", args=[_config(tmp_path)])
    wait_for(
        lambda: (
            "failed to fetch Workflow"
            in ((cluster.task("solo") or {}).get("status") or {}).get("message", "")
        ),
        timeout=60,
        what="Task solo reporting its missing Workflow",
    )
    time.sleep(5)
    assert _workflow_phase(cluster, "done") == "Succeeded"
    for name in ("done-a", "done-b", "solo"):
        assert cluster.phase(name) == "Succeeded", name
        assert _children(cluster, name), name
