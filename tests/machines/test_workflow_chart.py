"""The Workflow chart's structure, events, driver edge cases, conditions and the D20 fixes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from machines import chart_data
from machines.conditions import Condition
from machines.workflow.chart import (
    PHASE_STATES,
    STATE_PHASES,
    WorkflowLifecycle,
    configuration_for_phase,
    events_for,
)
from machines.workflow.conditions import WorkflowReason, compute_workflow_conditions
from machines.workflow.driver import VERDICT_NAMES, run_pass
from machines.workflow.guards import WorkflowObservationGuards, fatal_failures
from machines.workflow.model import EFFECT_NAMES, GUARD_NAMES, WorkflowLifecycleModel
from machines.workflow.observation import PHASES, WorkflowObservation

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
SET_UP = {"has_finalizer": True, "labels_set": True, "counts_recorded": True}


class Recorder(WorkflowObservationGuards):
    """Effects that only record their names."""

    def __init__(self) -> None:
        self.calls: list[str] = []


for _name in EFFECT_NAMES:
    setattr(Recorder, _name, lambda self, o, _n=_name: self.calls.append(_n))


def obs(**fields: Any) -> WorkflowObservation:
    return WorkflowObservation(**{"name": "wf", **fields})


# -- structure -------------------------------------------------------------------------------


def test_chart_names_match_the_model_protocol() -> None:
    assert chart_data.guard_names(WorkflowLifecycle) == set(GUARD_NAMES)
    assert chart_data.action_names(WorkflowLifecycle) == set(EFFECT_NAMES) | set(VERDICT_NAMES)
    for name in GUARD_NAMES + EFFECT_NAMES:
        assert getattr(WorkflowLifecycleModel, name).__doc__, name


def test_every_phase_has_a_state_and_back() -> None:
    assert set(PHASE_STATES) == set(PHASES)
    states = {s.id: s for s in chart_data.states(WorkflowLifecycle)}
    for phase, state_id in PHASE_STATES.items():
        assert states[state_id].phase == phase
        assert STATE_PHASES[state_id] == phase
        assert not states[state_id].compound


def test_every_non_final_top_state_handles_errors() -> None:
    handled = {
        t.source for t in chart_data.transitions(WorkflowLifecycle) if t.event == "error.execution"
    }
    assert handled == {"live", "deleting"}


def test_only_finalized_is_final() -> None:
    assert [s.id for s in chart_data.states(WorkflowLifecycle) if s.final] == ["finalized"]


def test_configuration_restores_ancestors() -> None:
    assert configuration_for_phase("AwaitingCompletion") == [
        "live",
        "started",
        "awaiting_completion",
    ]
    assert configuration_for_phase("Failed") == ["live", "terminated", "failed"]
    assert configuration_for_phase("") == ["live", "new"]
    assert configuration_for_phase("Bogus") == ["live", "new"]


# -- events ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "events"),
    [
        ({}, ("finalizer_missing", "labels_missing", "tasks_counted", "observed", "settled")),
        (SET_UP, ("observed", "settled")),
        ({**SET_UP, "list_error": "x"}, ("tasks_unlisted",)),
        ({**SET_UP, "total": 1, "failed": 1}, ("task_failed", "observed", "settled")),
        ({**SET_UP, "counts_recorded": False}, ("tasks_counted", "observed", "settled")),
        ({**SET_UP, "deletion_requested": True}, ("deletion_requested", "observed", "settled")),
        ({"deletion_requested": True, "labels_set": False}, ("deletion_requested", "observed")),
        (
            {
                **SET_UP,
                "deletion_requested": True,
                "total": 1,
                "failed": 1,
                "failed_tasks": (("t", ""),),
            },
            ("deletion_requested", "observed", "settled"),
        ),
        (
            {**SET_UP, "deletion_requested": True, "list_error": "x"},
            ("deletion_requested", "tasks_unlisted"),
        ),
    ],
)
def test_events_for(fields: dict[str, Any], events: tuple[str, ...]) -> None:
    assert events_for(obs(**fields)) == events


# -- observation -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"total": 1},
        {"total": 1, "active": 2, "failed": -1},
        {"total": 1, "active": 1, "failed_tasks": (("t", ""),)},
        {"waiting_seconds": -1},
    ],
)
def test_contradictory_counts_are_rejected(fields: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"."):  # any message: the field names vary
        obs(**fields)


def test_observation_derived_facts() -> None:
    o = obs(
        phase=None,
        seconds_since_end=5.0,
        waiting_seconds=20.0,
        total=2,
        failed=2,
        failed_tasks=(("b", ""), ("a", "")),
    )
    assert o.phase == ""
    assert o.failed_tasks == (("a", ""), ("b", ""))
    assert o.end_time_set
    assert o.remaining_wait == 15.0
    assert obs().remaining_wait == obs().waiting_seconds
    assert obs(seconds_since_end=99.0).remaining_wait == 0.0


# -- driver ----------------------------------------------------------------------------------


def test_the_timed_transition_asks_for_the_rest_of_the_wait() -> None:
    base = {**SET_UP, "phase": "AwaitingCompletion", "total": 1, "succeeded": 1}
    out = run_pass(obs(**base, seconds_since_end=7.5, waiting_seconds=20), Recorder(), now=NOW)
    assert (out.phase, out.requeue_after) == ("AwaitingCompletion", 12.5)
    out = run_pass(obs(**base, seconds_since_end=20, waiting_seconds=20), Recorder(), now=NOW)
    assert (out.phase, out.requeue_after) == ("Succeeded", None)


def test_entering_awaiting_completion_asks_for_the_whole_wait() -> None:
    # A stale endTime from an earlier round must not shorten the new wait.
    o = obs(
        **SET_UP, phase="Running", total=1, succeeded=1, seconds_since_end=300.0, waiting_seconds=20
    )
    out = run_pass(o, Recorder(), now=NOW)
    assert (out.phase, out.effects, out.requeue_after) == (
        "AwaitingCompletion",
        ("record_end_time",),
        20,
    )


def test_a_zero_wait_succeeds_at_once() -> None:
    o = obs(
        **SET_UP,
        phase="AwaitingCompletion",
        total=1,
        succeeded=1,
        seconds_since_end=0.0,
        waiting_seconds=0,
    )
    assert run_pass(o, Recorder(), now=NOW).phase == "Succeeded"


def test_a_model_lacking_callbacks_is_an_error_not_a_crash() -> None:
    class Incomplete(WorkflowObservationGuards):
        pass

    out = run_pass(obs(**SET_UP, phase="Running", total=1, active=1), Incomplete(), now=NOW)
    assert out.phase == "Running"
    assert "lacks add_workflow_finalizer" in out.message
    assert [c.type for c in out.conditions] == ["Ready"]
    assert out.conditions[0].status == "False"


def test_a_raising_guard_ends_the_pass_with_its_error() -> None:
    class Broken(Recorder):
        def tasks_active(self, observation: WorkflowObservation) -> bool:
            raise RuntimeError("guard exploded")

    out = run_pass(obs(**SET_UP, phase="Running", total=1, active=1), Broken(), now=NOW)
    assert out.phase == "Running"
    assert out.message == "guard exploded"
    assert out.error is not None
    assert out.error.action == "tasks_active"


def test_several_fatal_failures_are_named_in_the_reason() -> None:
    o = obs(
        **SET_UP, phase="Running", total=3, active=1, failed=2, failed_tasks=(("b", ""), ("a", ""))
    )
    out = run_pass(o, Recorder(), now=NOW)
    assert out.reason is WorkflowReason.TASK_FAILED
    assert out.reason_message == "Tasks a, b failed and their jobFailurePolicy is FailWorkflow"
    failed = next(c for c in out.conditions if c.type == "Failed")
    assert (failed.reason, failed.message) == ("TaskFailed", out.reason_message)


# -- D20 -------------------------------------------------------------------------------------


def test_d20_task_list_error_is_returned_not_swallowed() -> None:
    """The reference swallowed a list error and went on with stale counters; here it is the
    pass's error, no counters are written and the phase does not move."""
    model = Recorder()
    o = obs(**SET_UP, phase="Running", total=0, list_error="the Task cache has not synced yet")
    out = run_pass(o, model, now=NOW)
    assert out.message == "failed to list Tasks: the Task cache has not synced yet"
    assert (out.phase, model.calls, out.requeue_after) == ("Running", [], None)


def test_d20_failed_is_final_within_the_pass_that_decides_it() -> None:
    """The reference could overwrite Failed in the same pass (Initializing → Running,
    Running → AwaitingCompletion, AwaitingCompletion → Succeeded)."""
    fatal = {"failed": 1, "failed_tasks": (("t", ""),)}
    cases = [
        obs(**SET_UP, phase="Initializing", total=2, active=1, **fatal),
        obs(**SET_UP, phase="Running", total=1, **fatal),
        obs(**SET_UP, phase="AwaitingCompletion", total=1, seconds_since_end=60.0, **fatal),
    ]
    for o in cases:
        out = run_pass(o, Recorder(), now=NOW)
        assert (out.phase, out.reason, out.requeue_after) == (
            "Failed",
            WorkflowReason.TASK_FAILED,
            None,
        ), o.phase
        assert not any("observed" in key for key in out.transitions), out.transitions


# -- conditions ------------------------------------------------------------------------------


def _types(conds: tuple[Condition, ...]) -> dict[str, str]:
    return {c.type: c.status for c in conds}


@pytest.mark.parametrize(
    ("phase", "failed", "expected"),
    [
        ("", False, {}),
        ("Bogus", False, {}),
        ("Initializing", False, {"Ready": "False"}),
        ("Initializing", True, {"Ready": "False"}),
        ("Running", False, {"Ready": "True"}),
        ("Running", True, {"Ready": "False"}),
        ("AwaitingCompletion", False, {"Ready": "True"}),
        ("AwaitingCompletion", True, {"Ready": "False"}),
        ("Succeeded", False, {"Ready": "False", "Complete": "True"}),
        ("Failed", False, {"Ready": "False", "Failed": "True"}),
    ],
)
def test_condition_table(phase: str, failed: bool, expected: dict[str, str]) -> None:
    conds = compute_workflow_conditions(phase, failed_pass=failed, existing=(), now=NOW)
    assert _types(conds) == expected


def test_conditions_keep_their_stamp_unless_they_change() -> None:
    first = compute_workflow_conditions("Running", failed_pass=False, existing=(), now=NOW)
    later = NOW + timedelta(minutes=5)
    again = compute_workflow_conditions(
        "AwaitingCompletion", failed_pass=False, existing=first, now=later
    )
    assert again == first
    done = compute_workflow_conditions(
        "Succeeded",
        failed_pass=False,
        existing=again,
        now=later,
        reason=WorkflowReason.TASKS_COMPLETED,
        message="3 Tasks terminated",
    )
    ready, complete = done
    assert (ready.status, ready.last_transition_time) == ("False", later)
    assert (complete.reason, complete.message) == ("TasksCompleted", "3 Tasks terminated")


def test_the_failure_policy_is_the_charts_unset_or_fail_workflow_fails_ignore_does_not() -> None:
    """The observation carries each Failed Task's action as written; which of them fail the
    Workflow is decided here, once (§4.3: FailWorkflow is the default)."""
    o = obs(
        total=3,
        failed=3,
        failed_tasks=(("unset", ""), ("ignored", "Ignore"), ("explicit", "FailWorkflow")),
    )
    assert fatal_failures(o) == ("explicit", "unset")
    assert not fatal_failures(obs(total=1, failed=1, failed_tasks=(("ignored", "Ignore"),)))
