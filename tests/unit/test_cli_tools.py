"""The pure parts of the CLI verbs and of ``taskfsm ui``: ages, reasons, ``wait --for``, a Task's
path from its Events or its status, the chart maps the page uses, and the UI's live counts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from taskfsm import cli
from taskfsm.kube.rest import Rest
from taskfsm.tools import explain, tasks
from taskfsm.tools.ui import charts
from taskfsm.tools.ui.live import LiveModel

NOW = datetime(2026, 1, 10, 12, 0, 0, tzinfo=UTC)


def task(phase: str = "", *, conditions: list[dict[str, str]] | None = None, **status: Any):
    return {
        "metadata": {"name": "t", "namespace": "ns", "creationTimestamp": "2026-01-10T11:00:00Z"},
        "spec": {"workflowRef": {"name": "wf"}},
        "status": {**({"phase": phase} if phase else {}), "conditions": conditions or [], **status},
    }


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (5, "5s"),
        (119, "119s"),
        (125, "2m5s"),
        (600, "10m"),
        (3 * 3600 + 60, "3h1m"),
        (9 * 3600, "9h"),
        (3 * 86400 + 7200, "3d2h"),
        (40 * 86400, "40d"),
        (3 * 365 * 86400 + 86400, "3y1d"),
    ],
)
def test_age_reads_as_kubectl_prints_it(seconds: int, text: str) -> None:
    then = (NOW - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert tasks.age(then, NOW) == text
    assert tasks.age(None) == "<unknown>"


def test_reason_is_the_terminal_condition_the_suspension_or_an_error() -> None:
    failed = [{"type": "Failed", "status": "True", "reason": "JobLost"}]
    assert tasks.task_reason(task("Failed", conditions=failed)) == "JobLost"
    done = [{"type": "Complete", "status": "True", "reason": "JobSucceeded"}]
    assert tasks.task_reason(task("Succeeded", conditions=done)) == "JobSucceeded"
    held = [{"type": "Ready", "status": "False", "reason": "JobSuspended"}]
    assert tasks.task_reason(task("Running", conditions=held)) == "JobSuspended"
    assert tasks.task_reason(task("JobPending", message="MPE not ready")) == "Error"
    assert tasks.task_reason(task("Running")) == ""


def test_wait_spec() -> None:
    succeeded = tasks.WaitSpec("phase=Succeeded")
    assert succeeded.met(task("Succeeded"))
    assert not succeeded.met(task("Running"))
    assert succeeded.hopeless(task("Failed")) == "the Task ended Failed"
    assert succeeded.hopeless(None) == "the Task was deleted"
    ready = tasks.WaitSpec("condition=Ready")
    assert ready.met(task("Running", conditions=[{"type": "Ready", "status": "True"}]))
    assert tasks.WaitSpec("condition=Ready=False").met(
        task("Running", conditions=[{"type": "Ready", "status": "False"}])
    )
    assert tasks.WaitSpec("delete").met(None)
    for bad in ("phase", "running", "condition=", "delete=now"):
        with pytest.raises(ValueError, match="expected phase=PHASE"):
            tasks.WaitSpec(bad)


def test_table_pads_columns_and_adds_the_namespace_with_all_namespaces() -> None:
    lines = tasks.table([task("Running")], wide=False, all_namespaces=True)
    assert lines[0].split() == [
        "NAMESPACE",
        "NAME",
        "PHASE",
        "REASON",
        "WORKFLOW",
        "MPE",
        "JOB",
        "AGE",
    ]
    assert lines[1].split()[:3] == ["ns", "t", "Running"]
    assert "<none>" in lines[1]  # no MPE, no Job yet


def test_phase_path_from_events_then_from_the_status() -> None:
    events = [
        {"reason": "JobPending", "note": "(new) -> Initializing -> JobPending"},
        {"reason": "ReconcileError", "note": "could not create the Job"},
        {"reason": "Running", "note": "JobPending -> Running"},
        {"reason": "Failed", "note": "Running -> Failed: JobFailed"},
    ]
    failed = task("Failed")
    assert explain.phase_path(failed, events) == [
        "",
        "Initializing",
        "JobPending",
        "Running",
        "Failed",
    ]
    expired = task(
        "Succeeded",
        queuedTime="t0",
        startTime="t1",
        conditions=[{"type": "Initialized", "status": "True"}],
    )
    assert explain.phase_path(expired, []) == [
        "",
        "Initializing",
        "JobPending",
        "Running",
        "Succeeded",
    ]
    assert explain.phase_path(task(), None) == [""]
    assert explain.phase_path(task("JobPending", queuedTime="t0"), None) == [
        "",
        "Initializing",
        "JobPending",
    ]


def test_chart_moves_follow_the_shortest_way() -> None:
    info = charts.chart_info("task")
    phases = info["views"]["phases"]
    assert set(phases["states"]) == {
        "new",
        "initializing",
        "job_pending",
        "running",
        "succeeded",
        "failed",
    }
    assert phases["moves"]["new->running"] == [
        "new->initializing",
        "initializing->job_pending",
        "job_pending->running",
    ]
    full = info["views"]["lifecycle"]
    assert full["moves"]["running->succeeded"] == ["running->succeeded"]
    assert full["moves"]["running->deleting"] == ["live__anchor->deleting"]
    assert charts.path_moves("task", "phases", ["new", "new", "initializing"]) == [
        "new->initializing"
    ]


def test_svgs_name_their_nodes_by_state_id() -> None:
    for chart in charts.CHARTS:
        for view in charts.VIEWS:
            svg = charts.svg(chart, view).decode()
            for state in charts.chart_info(chart)["views"][view]["states"]:
                assert f"<title>{state}</title>" in svg, (chart, view, state)


def test_live_model_counts_and_moves() -> None:
    model = LiveModel(Rest(None), "ns")  # type: ignore[arg-type]  # never started: no requests
    t = task("Running")
    model._on_chart_event("task", "ADDED", t)
    model._on_chart_event(
        "task", "ADDED", {**task("Succeeded"), "metadata": {**t["metadata"], "name": "u"}}
    )
    snap = model.snapshot()
    assert snap["counts"]["task"]["phases"] == {"running": 1, "succeeded": 1}
    assert snap["moves"] == []
    model._on_chart_event("task", "MODIFIED", task("Succeeded"))
    deleting = task("Succeeded")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-10T12:00:00Z"
    model._on_chart_event("task", "MODIFIED", deleting)
    snap = model.snapshot()
    assert snap["counts"]["task"]["phases"] == {"succeeded": 2}
    assert snap["counts"]["task"]["lifecycle"] == {"succeeded": 1, "deleting": 1}
    assert [(m["from"], m["to"]) for m in snap["moves"]] == [
        ("Running", "Succeeded"),
        ("Succeeded", "Deleting"),
    ]
    assert snap["recent"]["task"]["phases"] == {"running->succeeded": 1}
    assert snap["recent"]["task"]["lifecycle"] == {
        "running->succeeded": 1,
        "live__anchor->deleting": 1,
    }
    model._on_chart_event("task", "DELETED", deleting)
    assert model.snapshot()["counts"]["task"]["lifecycle"] == {"succeeded": 1}


def test_moves_age_out_of_the_emphasis() -> None:
    now = [100.0]
    model = LiveModel(Rest(None), None, recent_seconds=60, clock=lambda: now[0])  # type: ignore[arg-type]
    model._on_chart_event("task", "ADDED", task("Running"))
    model._on_chart_event("task", "MODIFIED", task("Failed"))
    assert model.snapshot()["recent"]["task"]["phases"] == {"running->failed": 1}
    now[0] += 61
    snap = model.snapshot()
    assert snap["recent"]["task"]["phases"] == {}
    assert snap["moves"] == []


def test_cli_outputs_match_the_tools() -> None:
    assert cli.OUTPUTS == tasks.OUTPUTS


@pytest.mark.parametrize(
    ("text", "seconds"), [("30", 30.0), ("90s", 90.0), ("5m", 300.0), ("1h", 3600.0), ("1.5", 1.5)]
)
def test_wait_timeout_takes_kubectl_durations(text: str, seconds: float) -> None:
    args = cli.build_parser().parse_args(["wait", "t", "--timeout", text])
    assert args.timeout == seconds


def test_wait_timeout_refuses_other_text(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["wait", "t", "--timeout", "soon"])
    assert "not a duration: 'soon'" in capsys.readouterr().err
