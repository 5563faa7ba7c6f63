"""A Task's Workflow drives it (§3.5, §3.11): ownership, termination, deletion, absence.

Owner reference and the four labels; a terminated Workflow fails its active Tasks with an
endTime (D10) and deletes their still-active Jobs; a Workflow being deleted deletes its Tasks
and stops the pass before any Job is made (D9); a Workflow that is gone garbage-collects its
Tasks through the owner reference; a missing Workflow is a clear, retried error that clears
once the Workflow appears.
"""

from __future__ import annotations

from typing import Any

from taskfsm.api import constants as c
from taskfsm.kube.resources import WORKFLOWS
from taskfsm.manifests.jobs import job_name
from taskfsm_dev import objects
from taskfsm_dev.waiting import wait_for
from tests.support.probes import conditions_of

HOLD = "example.com/hold"


def running_task(engine, probe, name: str = "t", *, workflow: str = "wf") -> dict[str, Any]:
    engine.create(objects.workflow(workflow))
    engine.create(objects.never_starting(objects.function("f")))
    engine.create(objects.local_mpe("m"))
    engine.create(objects.task(name, workflow_name=workflow, function_name="f", mpe_name="m"))
    return probe.wait_phase(name, "Running")


def set_workflow_phase(probe, name: str, phase: str) -> None:
    probe.rest.patch(
        WORKFLOWS, probe.namespace, name, {"status": {"phase": phase}}, subresource="status"
    )


def test_task_gets_workflow_owner_reference_and_labels(engine, controller, probe, namespace):
    """The Task is controlled by its Workflow (owner ref with controller and blockOwnerDeletion)
    and carries the four workflow/task labels, as do its Job and Secret."""
    running_task(engine, probe)
    workflow = engine.get(c.KIND_WORKFLOW, "wf")
    task = probe.task("t")
    assert task["metadata"]["ownerReferences"] == [
        {
            "apiVersion": c.API_VERSION,
            "kind": c.KIND_WORKFLOW,
            "name": "wf",
            "uid": workflow["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    labels = {
        c.LABEL_WORKFLOW_NAMESPACE: namespace,
        c.LABEL_WORKFLOW_NAME: "wf",
        c.LABEL_TASK_NAMESPACE: namespace,
        c.LABEL_TASK_NAME: "t",
    }
    assert labels.items() <= task["metadata"]["labels"].items()
    job = probe.job(job_name(task))
    secret = probe.secret(job_name(task))
    assert labels.items() <= job["metadata"]["labels"].items()
    assert secret["metadata"]["labels"] == labels


def test_d10_terminated_workflow_fails_active_task_with_end_time(engine, controller, probe):
    """D10: when the Workflow ends, a Running Task becomes Failed with endTime and the
    WorkflowTerminated reason, and its still-active Job is deleted."""
    task = running_task(engine, probe)
    name = job_name(task)
    set_workflow_phase(probe, "wf", "Succeeded")
    failed = probe.wait_phase("t", "Failed")
    status = failed["status"]
    assert status["endTime"] >= status["startTime"]
    failed_condition = next(cond for cond in status["conditions"] if cond["type"] == "Failed")
    assert failed_condition["status"] == "True"
    assert failed_condition["reason"] == "WorkflowTerminated"
    wait_for(lambda: probe.job(name) is None, timeout=60, what="active Job deleted")
    assert probe.phase("t") == "Failed"


def test_terminated_workflow_leaves_finished_task_alone(engine, controller, kubelet, probe):
    """A Task that already Succeeded keeps its phase, endTime and Job when the Workflow ends."""
    engine.create(objects.workflow("wf"))
    engine.create(objects.function("f"))
    engine.create(objects.local_mpe("m"))
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="m"))
    done = probe.wait_phase("t", "Succeeded")
    set_workflow_phase(probe, "wf", "Failed")
    # A Task created afterwards fails at once: the controller has seen the Workflow's new phase.
    engine.create(objects.task("later", workflow_name="wf", function_name="f", mpe_name="m"))
    probe.wait_phase("later", "Failed")
    after = probe.task("t")
    assert after["status"]["phase"] == "Succeeded"
    assert after["status"]["endTime"] == done["status"]["endTime"]
    assert probe.job(job_name(after)) is not None


def test_d9_deleting_workflow_deletes_new_task_before_any_job(engine, controller, probe, namespace):
    """D9: a Task whose Workflow is being deleted deletes itself and stops: no Job or Secret is
    ever created for it."""
    workflow = objects.workflow("wf")
    workflow["metadata"]["finalizers"] = [HOLD]
    engine.create(workflow)
    engine.create(objects.function("f"))
    engine.create(objects.local_mpe("m"))
    engine.api.delete_namespaced_custom_object(c.GROUP, c.VERSION, namespace, "workflows", "wf")
    wait_for(
        lambda: engine.get(c.KIND_WORKFLOW, "wf")["metadata"].get("deletionTimestamp"), timeout=10
    )
    try:
        engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="m"))
        wait_for(lambda: probe.task_gone("t"), timeout=60, what="Task deleted")
        assert probe.jobs() == []
        assert probe.secrets() == []
    finally:
        probe.rest.patch(WORKFLOWS, namespace, "wf", {"metadata": {"finalizers": None}})


def test_deleting_workflow_deletes_running_task_and_its_job(engine, controller, probe, namespace):
    """A Workflow being deleted deletes its Running Task; the Task's deletion removes the Job
    and its Secret, then the Task goes."""
    task = running_task(engine, probe)
    name = job_name(task)
    probe.rest.patch(WORKFLOWS, namespace, "wf", {"metadata": {"finalizers": [HOLD]}})
    engine.api.delete_namespaced_custom_object(c.GROUP, c.VERSION, namespace, "workflows", "wf")
    try:
        wait_for(lambda: probe.task_gone("t"), timeout=60, what="Task deleted")
        wait_for(lambda: probe.job(name) is None and probe.secret(name) is None, timeout=60)
    finally:
        probe.rest.patch(WORKFLOWS, namespace, "wf", {"metadata": {"finalizers": None}})


def test_workflow_gone_garbage_collects_task_and_job(engine, controller, probe, namespace):
    """Deleting the Workflow outright lets the garbage collector delete the owned Task, whose
    deletion flow removes its Job."""
    task = running_task(engine, probe)
    name = job_name(task)
    engine.api.delete_namespaced_custom_object(
        c.GROUP, c.VERSION, namespace, "workflows", "wf", propagation_policy="Background"
    )
    wait_for(lambda: probe.task_gone("t"), timeout=90, what="Task garbage-collected")
    wait_for(lambda: probe.job(name) is None, timeout=60, what="Job deleted")


def test_missing_workflow_is_a_clear_error_then_recovers(engine, controller, probe):
    """A Task naming a Workflow that does not exist reports it and retries; once the Workflow
    is created the Task proceeds and the message clears."""
    engine.create(objects.never_starting(objects.function("f")))
    engine.create(objects.local_mpe("m"))
    engine.create(objects.task("t", workflow_name="later", function_name="f", mpe_name="m"))
    task = probe.wait_message(
        "t", 'failed to fetch Workflow: workflows.engine.nagare.media "later" not found'
    )
    assert task["status"].get("phase", "") == ""
    assert conditions_of(task) == {}
    probe.wait_event("t", "ReconcileError")
    engine.create(objects.workflow("later"))
    running = probe.wait_phase("t", "Running")
    assert running["status"]["message"] == ""
    assert running["metadata"]["ownerReferences"][0]["name"] == "later"


def test_events_tell_the_phase_story(engine, controller, kubelet, probe):
    """Each phase change is a Kubernetes Event about the Task; a failure is a Warning."""
    engine.create(objects.workflow("wf"))
    engine.create(objects.function("f", exit_code=1))
    engine.create(objects.local_mpe("m"))
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="m"))
    probe.wait_phase("t", "Failed")
    wait_for(lambda: "Failed" in probe.event_reasons("t"), timeout=10, what="Failed Event")
    events = probe.events("t")
    reasons = [e["reason"] for e in events]
    assert "Running" not in reasons  # a Normal phase change is an Event with --task-phase-events
    failed = next(e for e in events if e["reason"] == "Failed")
    assert failed["type"] == "Warning"
    assert failed["regarding"]["kind"] == c.KIND_TASK
    assert "JobFailed" in failed["note"]


def test_task_stuck_on_selection_still_belongs_to_its_workflow(engine, controller, probe):
    """A pass that ends in error keeps the metadata it set before the error: a Task whose
    Function cannot be selected still gets its finalizer, owner reference and labels (so its
    Workflow counts it and garbage collection reaches it)."""
    engine.create(objects.workflow("wf"))
    engine.create(objects.local_mpe("m"))
    engine.create(objects.task("t", workflow_name="wf", function_name="missing", mpe_name="m"))
    probe.wait_message("t", 'functions.engine.nagare.media "missing" not found')
    task = wait_for(
        lambda: (t := probe.task("t")) and t["metadata"].get("finalizers") and t, timeout=30
    )
    assert task["metadata"]["finalizers"] == [c.FINALIZER_TASK_PROTECTION]
    assert task["metadata"]["ownerReferences"][0]["name"] == "wf"
    assert task["metadata"]["labels"][c.LABEL_WORKFLOW_NAME] == "wf"
    assert task["status"]["phase"] == "Initializing"
