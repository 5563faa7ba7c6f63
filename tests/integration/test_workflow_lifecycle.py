"""Whole Workflows on the real control plane (docs/behaviour.md §4.3, §3.11; D20).

A Workflow of Tasks goes Initializing → Running → AwaitingCompletion → Succeeded once the
termination waiting duration has passed; a Task added while it waits brings it back to
Running; a Task failing with FailWorkflow fails the Workflow and then its other active Tasks
(their Jobs deleted), while Ignore lets the Workflow succeed; deleting a Workflow deletes its
Tasks, their Jobs and Secrets, and then the Workflow itself.

The waiting duration is made short (`Settings.workflow_termination_waiting`). The Workflow's
path is read from its phase-change Events (one per change, the note lists every phase the
reconcile went through), so transient phases are not missed by polling.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from taskfsm.api import constants as c
from taskfsm.kube.errors import NotFound
from taskfsm.kube.resources import TASKS, WORKFLOWS
from taskfsm.manifests.jobs import job_name
from taskfsm.tools import explain
from taskfsm_dev import objects
from taskfsm_dev.waiting import wait_for

WAIT = 3.0
PHASES = {p.value for p in c.WorkflowPhase}


@pytest.fixture
def workflows(controller_factory):
    """A controller with a short termination wait."""
    return controller_factory(workflow_termination_waiting=WAIT)


def workflow(probe, name: str) -> dict[str, Any] | None:
    try:
        return probe.rest.get(WORKFLOWS, probe.namespace, name)
    except NotFound:
        return None


def workflow_status(probe, name: str) -> dict[str, Any]:
    return (workflow(probe, name) or {}).get("status") or {}


def wait_workflow_phase(probe, name: str, phase: str, *, timeout: float = 90) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        wf = workflow(probe, name)
        return wf if wf and (wf.get("status") or {}).get("phase") == phase else None

    return wait_for(
        check,
        timeout=timeout,
        what=f"Workflow {name} {phase} (now {workflow_status(probe, name)!r})",
    )


def workflow_path(probe, name: str) -> list[str]:
    """The phases the Workflow went through, from its phase-change Events."""
    events = [
        e
        for e in probe.events(name)
        if (e.get("regarding") or {}).get("kind") == c.KIND_WORKFLOW and e.get("reason") in PHASES
    ]
    path: list[str] = []
    for event in sorted(events, key=lambda e: e.get("eventTime") or ""):
        for step in (event.get("note") or "").split(": ")[0].split(" -> "):
            if step in PHASES and (not path or path[-1] != step):
                path.append(step)
    return path


def counters(status: dict[str, Any]) -> dict[str, int]:
    return {k: status.get(k) for k in ("total", "active", "succeeded", "failed")}


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {
        cond["type"]: (cond["status"], cond.get("reason", ""))
        for cond in status.get("conditions") or []
    }


def stamp(value: str) -> datetime:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def basics(engine, *, workflow_name: str = "wf") -> None:
    engine.create(objects.workflow(workflow_name))
    engine.create(objects.function("quick", run_seconds=1))
    engine.create(objects.function("slow", run_seconds=600))
    engine.create(objects.function("crash", exit_code=1, run_seconds=1))
    engine.create(objects.local_mpe("m"))


def add_task(engine, name: str, function: str, *, workflow_name: str = "wf", **spec: Any) -> None:
    engine.create(
        objects.task(
            name, workflow_name=workflow_name, function_name=function, mpe_name="m", **spec
        )
    )


def test_workflow_of_three_tasks_succeeds_after_the_waiting_duration(
    engine, workflows, kubelet, probe
):
    """Initializing → Running → AwaitingCompletion → Succeeded, not before the wait is over;
    finalizer, labels, times, counters and conditions as §4.3 says."""
    basics(engine)
    for i in range(3):
        add_task(engine, f"t{i}", "quick")
    wf = wait_workflow_phase(probe, "wf", "Succeeded")
    for i in range(3):
        assert probe.phase(f"t{i}") == "Succeeded"

    # The Succeeded Event is recorded after the status write: wait for it.
    path = wait_for(
        lambda: (p := workflow_path(probe, "wf"))[-2:] == ["AwaitingCompletion", "Succeeded"] and p,
        timeout=30,
        what=lambda: f"the Succeeded Event (path {workflow_path(probe, 'wf')})",
    )
    assert path[0] == "Initializing", path
    assert "Running" in path, path

    meta, status = wf["metadata"], wf["status"]
    assert c.FINALIZER_WORKFLOW_PROTECTION in meta["finalizers"]
    assert meta["labels"][c.LABEL_WORKFLOW_NAME] == "wf"
    assert meta["labels"][c.LABEL_WORKFLOW_NAMESPACE] == probe.namespace
    assert counters(status) == {"total": 3, "active": 0, "succeeded": 3, "failed": 0}
    assert conditions(status) == {"Ready": ("False", ""), "Complete": ("True", "TasksCompleted")}
    assert stamp(status["queuedTime"]) <= stamp(status["startTime"]) <= stamp(status["endTime"])
    assert not status.get("message")
    # The timed transition: Succeeded no earlier than the wait after the last Task finished.
    probe.wait_event("wf", "Succeeded")
    succeeded = next(e for e in probe.events("wf") if e.get("reason") == "Succeeded")
    decided = datetime.strptime(succeeded["eventTime"][:19], "%Y-%m-%dT%H:%M:%S").replace(
        tzinfo=UTC
    )
    assert (decided - stamp(status["endTime"])).total_seconds() >= WAIT - 1


def test_task_added_while_awaiting_completion_brings_it_back_to_running(
    engine, controller_factory, kubelet, probe
):
    """A new Task during the wait: AwaitingCompletion → Running, then it completes again."""
    controller_factory(workflow_termination_waiting=15.0)
    basics(engine)
    add_task(engine, "first", "quick")
    wait_workflow_phase(probe, "wf", "AwaitingCompletion")
    assert workflow_status(probe, "wf").get("endTime")
    add_task(engine, "second", "quick")
    wait_for(
        lambda: "Running" in workflow_path(probe, "wf")[2:],
        timeout=30,
        what=f"Workflow back to Running (path {workflow_path(probe, 'wf')})",
    )
    wf = wait_workflow_phase(probe, "wf", "Succeeded", timeout=90)
    assert counters(wf["status"]) == {"total": 2, "active": 0, "succeeded": 2, "failed": 0}
    # The phase-change Event is recorded after the status write: wait for it, do not read once
    # (run 13 read the Events before the Succeeded one was written).
    expected = ["AwaitingCompletion", "Running", "AwaitingCompletion", "Succeeded"]
    wait_for(
        lambda: workflow_path(probe, "wf")[-4:] == expected,
        timeout=30,
        what=lambda: (
            f"the Workflow's Events to tell {expected} (path {workflow_path(probe, 'wf')})"
        ),
    )


def test_failed_task_with_fail_workflow_fails_the_workflow_then_its_active_tasks(
    engine, workflows, kubelet, probe
):
    """The default jobFailurePolicy (FailWorkflow): the Workflow fails, then every Task still
    active fails too and its Job is deleted (§3.11)."""
    basics(engine)
    add_task(engine, "slow-1", "slow")
    add_task(engine, "slow-2", "slow")
    probe.wait_phase("slow-1", "Running")
    probe.wait_phase("slow-2", "Running")
    jobs = {name: job_name(probe.task(name)) for name in ("slow-1", "slow-2")}
    add_task(engine, "crash", "crash")

    wf = wait_workflow_phase(probe, "wf", "Failed")
    status = wf["status"]
    assert conditions(status)["Failed"] == ("True", "TaskFailed")
    assert "crash" in next(
        cond["message"] for cond in status["conditions"] if cond["type"] == "Failed"
    )
    assert status.get("endTime")
    for name in jobs:
        probe.wait_phase(name, "Failed")
    wait_for(
        lambda: all(probe.job(j) is None for j in jobs.values()),
        timeout=60,
        what="the Jobs of the other Tasks deleted",
    )
    wait_for(
        lambda: (
            counters(workflow_status(probe, "wf"))
            == {"total": 3, "active": 0, "succeeded": 0, "failed": 3}
        ),
        timeout=30,
        what="the counters follow the Tasks",
    )
    assert workflow_status(probe, "wf")["phase"] == "Failed"
    probe.wait_event("wf", "Failed")
    assert [e["type"] for e in probe.events("wf") if e.get("reason") == "Failed"] == ["Warning"]


def test_explain_shows_a_workflow_its_counters_and_tasks(
    engine, workflows, kubelet, probe, api_client, namespace, capsys
):
    """`taskfsm explain workflow/<name>`: phase, counters, each Task with its phase and policy,
    the lifecycle with the current state marked; a bare name falls back to the Workflow."""
    basics(engine)
    add_task(engine, "ok", "quick")
    add_task(engine, "tolerated", "crash", jobFailurePolicy={"defaultAction": "Ignore"})
    wait_workflow_phase(probe, "wf", "Succeeded")

    assert explain.main(api_client, namespace, "workflow/wf", "text") == 0
    text = capsys.readouterr().out
    assert "Phase:      Succeeded" in text
    assert "total 2, active 0, succeeded 1, failed 1" in text
    assert "ok " in text
    assert "tolerated " in text
    assert "Ignore" in text
    assert "-> [Succeeded] | Failed" in text
    assert "Complete     True" in text

    assert explain.main(api_client, namespace, "wf", "mermaid") == 0
    assert "class succeeded highlighted" in capsys.readouterr().out

    assert explain.main(api_client, namespace, "tolerated", "text") == 0
    text = capsys.readouterr().out
    assert text.startswith(f"Task {namespace}/tolerated")
    assert "Phase:      Failed" in text
    assert "Job:" in text
    assert any(
        line.strip().startswith("conditions:") and "Failed" in line for line in text.splitlines()
    )

    assert explain.main(api_client, namespace, "workflow/nope", "none") == 1
    summary = explain.workflow_summary(api_client, namespace)
    assert summary[0] == "Workflow wf: Succeeded (total 2, active 0, succeeded 1, failed 1)"
    assert "  Task tolerated: Failed (jobFailurePolicy Ignore)" in summary


def test_failed_task_with_ignore_lets_the_workflow_succeed(engine, workflows, kubelet, probe):
    """`jobFailurePolicy: {defaultAction: Ignore}`: the failure is counted, the Workflow succeeds."""
    basics(engine)
    add_task(engine, "ok", "quick")
    add_task(engine, "crash", "crash", jobFailurePolicy={"defaultAction": "Ignore"})
    wf = wait_workflow_phase(probe, "wf", "Succeeded")
    assert probe.phase("crash") == "Failed"
    assert probe.phase("ok") == "Succeeded"
    assert counters(wf["status"]) == {"total": 2, "active": 0, "succeeded": 1, "failed": 1}
    assert "Failed" not in workflow_path(probe, "wf")


def test_deleting_a_workflow_deletes_its_tasks_jobs_secrets_and_then_itself(
    engine, workflows, kubelet, probe
):
    """The Workflow keeps its finalizer while Tasks are active; each Task deletes itself (and
    its Job, whose Secret goes with it); then the Workflow releases its finalizer and goes."""
    basics(engine)
    add_task(engine, "slow-1", "slow")
    add_task(engine, "slow-2", "slow")
    probe.wait_phase("slow-1", "Running")
    probe.wait_phase("slow-2", "Running")
    wait_workflow_phase(probe, "wf", "Running")
    jobs = [job_name(probe.task(name)) for name in ("slow-1", "slow-2")]
    assert all(probe.job(j) and probe.secret(j) for j in jobs)
    assert c.FINALIZER_WORKFLOW_PROTECTION in workflow(probe, "wf")["metadata"]["finalizers"]

    probe.rest.delete(WORKFLOWS, probe.namespace, "wf")

    def all_gone() -> bool:
        tasks = probe.rest.list(TASKS, probe.namespace).get("items") or []
        return (
            not tasks
            and all(probe.job(j) is None and probe.secret(j) is None for j in jobs)
            and workflow(probe, "wf") is None
        )

    wait_for(all_gone, timeout=90, what="Tasks, Jobs, Secrets and the Workflow gone")


def test_each_workflow_counts_only_its_own_tasks(engine, workflows, kubelet, probe):
    """Two Workflows in one namespace: each counts only the Tasks carrying its labels, and a
    failure in one does not touch the other."""
    basics(engine)
    engine.create(objects.workflow("other"))
    add_task(engine, "mine", "quick")
    add_task(engine, "theirs", "crash", workflow_name="other")
    wait_workflow_phase(probe, "other", "Failed")
    wf = wait_workflow_phase(probe, "wf", "Succeeded")
    assert counters(wf["status"]) == {"total": 1, "active": 0, "succeeded": 1, "failed": 0}
    assert counters(workflow_status(probe, "other"))["failed"] == 1
