"""``taskfsm run --controllers`` (docs/operations.md, "Flags"): a controller
left out writes nothing, the ones named do their work. ``taskfsm run`` as a process on the real
control plane; each test would fail if the flag were ignored (all three controllers running)."""

from __future__ import annotations

import time

from taskfsm.api import constants as c
from taskfsm.kube.resources import MEDIA_PROCESSING_ENTITIES, WORKFLOWS
from taskfsm_dev import objects
from taskfsm_dev.waiting import wait_for


def _status(cluster, res, name: str) -> dict:
    return cluster.rest.get(res, cluster.namespace, name).get("status") or {}


def _finalizers(cluster, res, name: str) -> list[str]:
    return cluster.rest.get(res, cluster.namespace, name)["metadata"].get("finalizers") or []


def _setup(cluster) -> None:
    cluster.create(objects.function("fn", run_seconds=0.2))
    cluster.create(objects.local_mpe("local"))
    cluster.create(objects.workflow("wf"))
    cluster.create(objects.task("t1", workflow_name="wf", function_name="fn", mpe_name="local"))


def test_without_workflow_and_mpe_only_tasks_are_reconciled(cluster, kubelet, start_controller):
    """``--controllers=task``: the Task runs to Succeeded (the MPE's cluster client is still
    built for it), but the Workflow gets no status and the MPE neither its finalizer nor a
    condition, and no Workflow or MPE reconcile is counted as the Workflow controller's."""
    _setup(cluster)
    proc = start_controller(args=["--controllers=task"])
    wait_for(lambda: cluster.phase("t1") == "Succeeded", timeout=60, what="t1 Succeeded")
    time.sleep(2.0)  # what a Workflow reconcile would write lands well within this
    assert _status(cluster, WORKFLOWS, "wf") == {}
    assert _status(cluster, MEDIA_PROCESSING_ENTITIES, "local").get("conditions") is None
    assert c.FINALIZER_MPE_PROTECTION not in _finalizers(
        cluster, MEDIA_PROCESSING_ENTITIES, "local"
    )
    assert proc.metric("controller_runtime_reconcile_total", controller="workflow") == 0
    assert proc.metric("controller_runtime_reconcile_total", controller="task") > 0


def test_without_the_task_controller_tasks_are_left_alone(cluster, kubelet, start_controller):
    """``--controllers=workflow,mpe``: the Workflow and the MPE get their status, the Task stays
    without a phase, no finalizer and no Job."""
    _setup(cluster)
    proc = start_controller(args=["--controllers=workflow,mpe"])
    wait_for(
        lambda: bool(_status(cluster, WORKFLOWS, "wf").get("phase")),
        timeout=30,
        what="the Workflow has a phase",
    )
    wait_for(
        lambda: (
            c.FINALIZER_MPE_PROTECTION in _finalizers(cluster, MEDIA_PROCESSING_ENTITIES, "local")
        ),
        timeout=30,
        what="the MPE's finalizer",
    )
    time.sleep(2.0)
    task = cluster.task("t1")
    assert task is not None
    assert (task.get("status") or {}).get("phase") is None
    assert task["metadata"].get("finalizers") is None
    assert cluster.jobs() == []
    assert proc.metric("workqueue_adds_total", name="task") == 0
