"""The pure parts of the CLI verbs and of ``taskfsm ui``: ages, reasons, ``wait --for``, a Task's
path from its Events or its status, the chart maps the page uses, and the UI's live counts."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from taskfsm import cli
from taskfsm.api import constants as c
from taskfsm.cli import verbs
from taskfsm.kube.rest import Rest
from taskfsm.tools import explain, tasks, views, workflows
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
    # Without --task-phase-events only the Warning of a Failed Task is an Event.
    warned = task("Failed", startTime="t1", conditions=[{"type": "Initialized", "status": "True"}])
    only_warning = [{"reason": "Failed", "note": "Running -> Failed: JobFailed"}]
    assert explain.phase_path(warned, only_warning) == [
        "",
        "Initializing",
        "JobPending",
        "Running",
        "Failed",
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
    assert verbs.OUTPUTS == tasks.OUTPUTS


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


# -- Workflows and --watch (taskfsm.tools.workflows, taskfsm.tools.views) ----------------------


def named(obj: dict[str, Any], name: str, **meta: Any) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "name": name, **meta}}


def workflow(phase: str = "", **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "wf", "namespace": "ns", "creationTimestamp": "2026-01-10T11:00:00Z"},
        "status": {**({"phase": phase} if phase else {}), **status},
    }


def test_split_kind_reads_type_slash_name() -> None:
    assert tasks.split_kind("workflow/wf") == ("Workflow", "wf")
    assert tasks.split_kind("wf/wf") == ("Workflow", "wf")
    assert tasks.split_kind("tasks/t") == ("Task", "t")
    assert tasks.split_kind("t") == (None, "t")


def test_wait_spec_names_the_kind_that_ended() -> None:
    spec = tasks.WaitSpec("phase=Succeeded")
    assert spec.hopeless(workflow("Failed"), "Workflow") == "the Workflow ended Failed"
    assert spec.hopeless(workflow("AwaitingCompletion"), "Workflow") == ""
    assert spec.hopeless(None, "Workflow") == "the Workflow was deleted"


def test_workflow_row_counts_its_tasks_by_phase() -> None:
    done = [{"type": "Complete", "status": "True", "reason": "AllTasksSucceeded"}]
    wf = workflow("Succeeded", conditions=[*done, {"type": "Ready", "status": "False"}])
    members = [
        named(task(), "a"),
        named(task("JobPending"), "b"),
        named(task("Running"), "c"),
        named(task("Succeeded"), "d"),
        named(task("Failed"), "e"),
    ]
    other = {**task("Running"), "spec": {"workflowRef": {"name": "other"}}}
    row = workflows.row(wf, workflows.tasks_of(wf, [*members, other]), now=NOW)
    assert row == [
        "wf",
        "Succeeded",
        "AllTasksSucceeded",
        "Complete",
        "5",
        "2",
        "1",
        "1",
        "1",
        "60m",
    ]
    assert workflows.row(workflow(), [], now=NOW)[:4] == ["wf", "New", "", "<none>"]


def tables(view: views.View, *events: tuple[str, str, dict[str, Any]]) -> list[str]:
    """What a view prints for ``events`` after an empty start."""
    out = io.StringIO()
    objects = views.Objects()
    printer = views.show(view, objects, out=out)
    for kind, event, obj in events:
        objects.apply(kind, event, obj)
        printer.event(objects, kind, event, obj)
    return out.getvalue().splitlines()


def test_watch_prints_a_row_only_when_a_cell_other_than_age_changed() -> None:
    view = views.TaskList("ns", None, {"Task": None})
    objects = views.Objects()
    objects.apply("Task", "ADDED", task("Running"))
    out = io.StringIO()
    printer = views.show(view, objects, out=out)
    assert [line.split()[:2] for line in out.getvalue().splitlines()] == [
        ["NAME", "PHASE"],
        ["t", "Running"],
    ]
    touched = named(task("Running"), "t", resourceVersion="2")
    for kind, event, obj in [
        ("Task", "MODIFIED", touched),  # nothing shown changed: no row
        ("Task", "MODIFIED", task("Succeeded")),
        ("Task", "DELETED", task("Succeeded")),
    ]:
        objects.apply(kind, event, obj)
        printer.event(objects, kind, event, obj)
    assert [line.split()[:2] for line in out.getvalue().splitlines()[2:]] == [
        ["t", "Succeeded"],
        ["t", "Deleted"],
    ]


def test_watch_of_a_workflow_prints_its_row_when_its_tasks_change() -> None:
    view = views.WorkflowList(None, None, {"Workflow": None, "Task": None})
    lines = tables(
        view,
        ("Workflow", "ADDED", workflow("Running")),
        ("Task", "ADDED", task("Running")),
        ("Task", "ADDED", {**named(task(), "x"), "spec": {"workflowRef": {"name": "other"}}}),
        ("Task", "MODIFIED", task("Succeeded")),
    )
    assert lines[0].split()[:2] == ["NAMESPACE", "NAME"]  # -A
    cells = [line.split() for line in lines[1:]]
    assert [c[:2] + c[4:9] for c in cells] == [
        ["ns", "wf", "0", "0", "0", "0", "0"],
        ["ns", "wf", "1", "0", "1", "0", "0"],
        ["ns", "wf", "1", "0", "0", "1", "0"],
    ]


def test_get_watch_prints_each_kinds_header_when_the_rows_switch_kind() -> None:
    view = views.Get("ns", None, {"Task": None, "Workflow": None}, workflows=["wf"])
    lines = tables(
        view,
        ("Workflow", "ADDED", workflow()),
        ("Task", "ADDED", task("Running")),
        ("Task", "ADDED", named(task(), "u", namespace="ns")),
    )
    assert [line.split()[0] for line in lines] == [
        "NAME",  # the Workflow's header: it appeared after the empty start
        "wf",
        "NAME",  # the Tasks' header
        "t",
        "NAME",  # the Workflow's again
        "wf",
        "NAME",
        "u",
        "NAME",
        "wf",
    ]
    assert lines[2].split()[:4] == ["NAME", "PHASE", "REASON", "WORKFLOW"]


def test_object_outputs_print_each_new_version_of_what_was_named() -> None:
    view = views.Get("ns", "name", {"Task": None, "Workflow": None}, workflows=["wf"])
    lines = tables(
        view,
        ("Workflow", "ADDED", named(workflow(), "wf", resourceVersion="1")),
        ("Task", "ADDED", task("Running")),  # of wf, but not named: no object of its own
        ("Workflow", "MODIFIED", named(workflow(), "wf", resourceVersion="1")),
        ("Workflow", "MODIFIED", named(workflow("Running"), "wf", resourceVersion="2")),
    )
    assert lines == [f"workflow.{c.GROUP}/wf", f"workflow.{c.GROUP}/wf"]


def test_workflow_logs_prefix_every_line_with_the_task() -> None:
    sink = io.BytesIO()
    prefixed = workflows.Prefixed(sink, "[a] ")
    prefixed.write(b"one\ntw")
    prefixed.write(b"o\nthree")
    prefixed.flush()
    assert sink.getvalue() == b"[a] one\n[a] two\n[a] three\n"


def test_list_and_get_take_workflows_and_watch() -> None:
    parser = cli.build_parser()
    args = parser.parse_args(["list", "workflows", "-w"])
    assert (verbs.LIST_KINDS[args.kind], args.watch) == ("Workflow", True)
    assert parser.parse_args(["list"]).kind == "tasks"
    assert parser.parse_args(["get", "workflow/wf", "--watch"]).watch
