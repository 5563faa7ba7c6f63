"""Scenario tests: the Workflow lifecycle stepped pass by pass, and its transition coverage.

A scenario is a list of passes. Each pass may change the world first (`given`: Tasks were
created or finished, `elapse` seconds went by), may tell the fake model to raise (`fail`), and
states what it expects: phase, effects in order, error, reason, conditions, requeue. Between
passes the harness persists what the reconciler would (phase, conditions) and the fake applies
the obvious consequence of each effect (`record_end_time` sets endTime "now", ...), so
scenarios state only what happened outside the controller.

Every pass is also checked against invariants that hold for any scenario. Together the
scenarios must take every transition of the chart: `test_transition_coverage_is_complete`
computes the figure, prints it in the terminal summary and fails below 100 %.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from machines import chart_data
from machines.workflow.chart import WorkflowLifecycle
from machines.workflow.driver import WorkflowPassOutcome, run_pass
from machines.workflow.guards import WorkflowObservationGuards, fatal_failures
from machines.workflow.model import EFFECT_NAMES, GUARD_NAMES
from machines.workflow.observation import TERMINAL_PHASES, WorkflowObservation

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
WAIT = 20.0
_FIELDS = {f.name for f in dataclasses.fields(WorkflowObservation)}
_COUNTS = ("total", "active", "succeeded", "failed")
_EXPECT_KEYS = {
    "phase",
    "state",
    "effects",
    "error",
    "error_action",
    "reason",
    "conditions",
    "requeue",
    "finalized",
    "transitions",
}


class InjectedError(RuntimeError):
    """What the fake raises when a scenario tells it to fail."""


class FakeWorkflowModel(WorkflowObservationGuards):
    """Records every effect, raises on demand and keeps a tiny simulated world."""

    def __init__(self, world: dict[str, Any]) -> None:
        self.world = world
        self.calls: list[str] = []
        self.fail_effects: dict[str, str] = {}
        self.times: dict[str, int] = {}

    # Simulated consequences, named sim_<effect>.

    def sim_add_workflow_finalizer(self) -> None:
        self.world["has_finalizer"] = True

    def sim_set_workflow_labels(self) -> None:
        self.world["labels_set"] = True

    def sim_record_task_counts(self) -> None:
        self.world["counts_recorded"] = True

    def sim_record_queued_time(self) -> None:
        self.times.setdefault("queuedTime", len(self.times))

    def sim_record_start_time(self) -> None:
        self.times.setdefault("startTime", len(self.times))

    def sim_record_end_time(self) -> None:
        self.world["seconds_since_end"] = 0.0

    def sim_clear_end_time(self) -> None:
        self.world["seconds_since_end"] = None

    def sim_ensure_end_time(self) -> None:
        if self.world.get("seconds_since_end") is None:
            self.world["seconds_since_end"] = 0.0

    def sim_remove_workflow_finalizer(self) -> None:
        self.world["has_finalizer"] = False

    def sim_delete_expired_workflow(self) -> None:
        self.world["deletion_requested"] = True


def _effect(name: str) -> Any:
    def effect(self: FakeWorkflowModel, observation: WorkflowObservation) -> None:
        assert isinstance(observation, WorkflowObservation)
        self.calls.append(name)
        if name in self.fail_effects:
            raise InjectedError(self.fail_effects[name])
        getattr(self, f"sim_{name}")()

    effect.__name__ = name
    return effect


for _name in EFFECT_NAMES:
    setattr(FakeWorkflowModel, _name, _effect(_name))


def observe(world: Mapping[str, Any]) -> WorkflowObservation:
    return WorkflowObservation(**{k: v for k, v in world.items() if k in _FIELDS})


def _given(world: dict[str, Any], changes: Mapping[str, Any]) -> None:
    changes = dict(changes)
    elapse = changes.pop("elapse", 0)
    unknown = set(changes) - _FIELDS
    assert not unknown, f"unknown observation fields {unknown}"
    if any(k in changes for k in (*_COUNTS, "failed_tasks")):
        world["counts_recorded"] = False  # the status counters no longer match
    world.update(changes)
    if elapse and world.get("seconds_since_end") is not None:
        world["seconds_since_end"] += elapse


def _check_invariants(before: WorkflowObservation, outcome: WorkflowPassOutcome) -> None:
    assert isinstance(outcome.phase, str)
    if before.phase in TERMINAL_PHASES:
        assert outcome.phase == before.phase, "a terminal phase never goes back"
    if before.deletion_requested:
        assert "add_workflow_finalizer" not in outcome.effects, "no finalizer while terminating"
        assert "set_workflow_labels" not in outcome.effects
        assert outcome.phase == before.phase, "deletion never changes the phase"
    if "remove_workflow_finalizer" in outcome.effects:
        assert before.active == 0, "released while a Task was active"
    if not before.tasks_listed:
        assert outcome.error is not None, "D20: a list error is returned"
        assert outcome.phase == before.phase
    if outcome.phase == "Failed" and before.phase != "Failed":
        assert fatal_failures(before), "Failed only through a FailWorkflow Task"
    if outcome.phase == "Succeeded" and before.phase != "Succeeded":
        assert before.active == 0
        assert not fatal_failures(before)
        assert before.seconds_since_end is not None
        assert before.seconds_since_end >= before.waiting_seconds
    if "delete_expired_workflow" in outcome.effects:
        assert before.phase in TERMINAL_PHASES, "only a finished Workflow expires"
        assert before.finished_ttl is not None, "retention is opt-in"
        assert before.seconds_since_end is not None
        assert before.seconds_since_end >= before.finished_ttl
    if outcome.requeue_after is not None and outcome.phase in TERMINAL_PHASES:
        # A finished Workflow is looked at again only when its TTL is due.
        assert before.finished_ttl is not None
        assert outcome.requeue_after == before.finished_ttl_left > 0
    elif outcome.requeue_after is not None:
        assert outcome.phase == "AwaitingCompletion"
        assert outcome.error is None
        assert 0 <= outcome.requeue_after <= before.waiting_seconds


def _check(step: int, expect: Mapping[str, Any], outcome: WorkflowPassOutcome) -> None:
    where = f"pass {step}"
    assert not set(expect) - _EXPECT_KEYS, f"{where}: unknown keys {set(expect) - _EXPECT_KEYS}"
    assert outcome.phase == expect["phase"], f"{where}: phase {outcome.phase!r}"
    if "state" in expect:
        assert outcome.state == expect["state"], f"{where}: state {outcome.state!r}"
    assert list(outcome.effects) == list(expect.get("effects", [])), (
        f"{where}: effects {list(outcome.effects)}"
    )
    if "error" in expect:
        assert outcome.error is not None, f"{where}: expected an error"
        assert expect["error"] in outcome.message, f"{where}: message {outcome.message!r}"
        if "error_action" in expect:
            assert outcome.error.action == expect["error_action"], f"{where}: {outcome.error}"
    else:
        assert outcome.error is None, f"{where}: unexpected error {outcome.message!r}"
    reason = outcome.reason.value if outcome.reason else None
    assert reason == expect.get("reason"), f"{where}: reason {reason!r}"
    assert outcome.requeue_after == expect.get("requeue"), (
        f"{where}: requeue_after {outcome.requeue_after!r}"
    )
    if "conditions" in expect:
        got = {cond.type: cond.status for cond in outcome.conditions}
        wanted = {}
        for type_, status in (expect["conditions"] or {}).items():
            status, _, cond_reason = str(status).partition("/")
            wanted[type_] = status
            if cond_reason:
                found = next(cond for cond in outcome.conditions if cond.type == type_)
                assert found.reason == cond_reason, f"{where}: {type_} reason {found.reason!r}"
        assert got == wanted, f"{where}: conditions {got}"
    if "finalized" in expect:
        assert outcome.finalized is expect["finalized"], f"{where}: finalized"
    if "transitions" in expect:
        assert list(outcome.transitions) == list(expect["transitions"]), (
            f"{where}: transitions {list(outcome.transitions)}"
        )


def run_scenario(scenario: Mapping[str, Any]) -> list[WorkflowPassOutcome]:
    """Run every pass of `scenario`, asserting expectations and invariants; return outcomes."""
    world: dict[str, Any] = {"name": "wf", "waiting_seconds": WAIT, **scenario.get("start", {})}
    model = FakeWorkflowModel(world)
    outcomes = []
    for step, spec in enumerate(scenario["passes"], start=1):
        _given(world, spec.get("given", {}))
        model.calls = []
        model.fail_effects = dict(spec.get("fail", {}))
        before = observe(world)
        now = T0 + timedelta(minutes=step)
        outcome = run_pass(before, model, now=now)
        _check_invariants(before, outcome)
        assert list(outcome.effects) == [c for c in model.calls if c not in model.fail_effects]
        _check(step, spec.get("expect", {}), outcome)
        world["phase"] = outcome.phase
        world["conditions"] = outcome.conditions
        outcomes.append(outcome)
        if outcome.finalized:
            assert step == len(scenario["passes"]), "no pass after the Workflow is finalized"
    return outcomes


# -- the scenarios ---------------------------------------------------------------------------

SET_UP = {"has_finalizer": True, "labels_set": True, "counts_recorded": True}
RUNNING = {**SET_UP, "phase": "Running", "total": 3, "active": 3}
AWAITING = {
    **SET_UP,
    "phase": "AwaitingCompletion",
    "total": 3,
    "succeeded": 3,
    "seconds_since_end": 0.0,
}
ALL_DONE = {"active": 0, "succeeded": 3}
FIRST_PASS = [
    "add_workflow_finalizer",
    "set_workflow_labels",
    "record_task_counts",
    "record_queued_time",
]

SCENARIOS: list[dict[str, Any]] = [
    {
        "name": "three Tasks run and the Workflow succeeds after the waiting duration",
        "passes": [
            {
                "expect": {
                    "phase": "Initializing",
                    "effects": FIRST_PASS,
                    "conditions": {"Ready": "False"},
                    "transitions": [
                        "live --finalizer_missing--> (stays)",
                        "live --labels_missing--> (stays)",
                        "live --tasks_counted--> (stays)",
                        "new --observed--> initializing",
                        "started --settled--> (stays)",
                    ],
                }
            },
            {"expect": {"phase": "Initializing"}},  # no Task yet: nothing to do
            {
                "given": {"total": 3, "active": 3},
                "expect": {
                    "phase": "Running",
                    "effects": ["record_task_counts", "record_start_time"],
                    "conditions": {"Ready": "True"},
                },
            },
            {
                "given": {"active": 2, "succeeded": 1},
                "expect": {"phase": "Running", "effects": ["record_task_counts"]},
            },
            {
                "given": ALL_DONE,
                "expect": {
                    "phase": "AwaitingCompletion",
                    "effects": ["record_task_counts", "record_end_time"],
                    "requeue": WAIT,
                    "conditions": {"Ready": "True"},
                },
            },
            {
                "given": {"elapse": 5},
                "expect": {"phase": "AwaitingCompletion", "requeue": WAIT - 5},
            },
            {
                "given": {"elapse": 15},
                "expect": {
                    "phase": "Succeeded",
                    "effects": ["ensure_end_time"],
                    "reason": "TasksCompleted",
                    "conditions": {"Ready": "False", "Complete": "True/TasksCompleted"},
                },
            },
            {
                "expect": {
                    "phase": "Succeeded",
                    "conditions": {"Ready": "False", "Complete": "True"},
                }
            },
        ],
    },
    {
        "name": "a Task added while AwaitingCompletion brings the Workflow back to Running",
        "start": AWAITING,
        "passes": [
            {
                "given": {"elapse": 12, "total": 4, "active": 1},
                "expect": {"phase": "Running", "effects": ["record_task_counts", "clear_end_time"]},
            },
            {
                "given": {"active": 0, "succeeded": 4},
                "expect": {
                    "phase": "AwaitingCompletion",
                    "effects": ["record_task_counts", "record_end_time"],
                    "requeue": WAIT,
                },
            },
            {
                "given": {"elapse": 12},
                "expect": {"phase": "AwaitingCompletion", "requeue": WAIT - 12},
            },
            {
                "given": {"elapse": 8},
                "expect": {
                    "phase": "Succeeded",
                    "effects": ["ensure_end_time"],
                    "reason": "TasksCompleted",
                },
            },
        ],
    },
    {
        "name": "AwaitingCompletion without an endTime runs again and restamps it",
        "start": {**AWAITING, "seconds_since_end": None},
        "passes": [
            {
                "expect": {
                    "phase": "Running",
                    "transitions": [
                        "awaiting_completion --observed [not end_time_set]--> running",
                        "started --settled--> (stays)",
                    ],
                }
            },
            {
                "expect": {
                    "phase": "AwaitingCompletion",
                    "effects": ["record_end_time"],
                    "requeue": WAIT,
                }
            },
        ],
    },
    {
        "name": "a failed Task with FailWorkflow fails the running Workflow",
        "start": RUNNING,
        "passes": [
            {
                "given": {"active": 2, "failed": 1, "failed_tasks": (("t2", ""),)},
                "expect": {
                    "phase": "Failed",
                    "effects": ["record_task_counts", "ensure_end_time"],
                    "reason": "TaskFailed",
                    "conditions": {"Ready": "False", "Failed": "True/TaskFailed"},
                },
            },
            # The Task controller now fails the other Tasks; the counters follow.
            {
                "given": {
                    "active": 0,
                    "failed": 3,
                    "failed_tasks": (("t1", ""), ("t2", ""), ("t3", "")),
                },
                "expect": {"phase": "Failed", "effects": ["record_task_counts"]},
            },
        ],
    },
    {
        "name": "a failed Task with Ignore does not fail the Workflow",
        "start": RUNNING,
        "passes": [
            {
                "given": {"active": 2, "failed": 1, "failed_tasks": (("t1", "Ignore"),)},
                "expect": {
                    "phase": "Running",
                    "effects": ["record_task_counts"],
                    "transitions": [
                        "live --tasks_counted--> (stays)",
                        "started --settled--> (stays)",
                    ],
                },
            },
            {
                "given": {"active": 0, "succeeded": 2},
                "expect": {
                    "phase": "AwaitingCompletion",
                    "effects": ["record_task_counts", "record_end_time"],
                    "requeue": WAIT,
                },
            },
            {
                "given": {"elapse": WAIT},
                "expect": {
                    "phase": "Succeeded",
                    "effects": ["ensure_end_time"],
                    "reason": "TasksCompleted",
                },
            },
        ],
    },
    {
        "name": "a New Workflow whose Task already failed is queued first, then fails",
        "passes": [
            {
                "given": {"total": 1, "failed": 1, "failed_tasks": (("t1", ""),)},
                "expect": {"phase": "Initializing", "effects": FIRST_PASS},
            },
            {"expect": {"phase": "Failed", "effects": ["ensure_end_time"], "reason": "TaskFailed"}},
        ],
    },
    {
        "name": "D20: a Task list error is returned and nothing moves",
        "start": RUNNING,
        "passes": [
            {
                "given": {
                    "list_error": "the Task cache has not synced yet",
                    "active": 0,
                    "succeeded": 3,
                },
                "expect": {
                    "phase": "Running",
                    "error": "failed to list Tasks: the Task cache",
                    "error_action": "report_list_error",
                    "conditions": {"Ready": "False"},
                },
            },
            {
                "given": {"list_error": ""},
                "expect": {
                    "phase": "AwaitingCompletion",
                    "effects": ["record_task_counts", "record_end_time"],
                    "requeue": WAIT,
                    "conditions": {"Ready": "True"},
                },
            },
        ],
    },
    {
        "name": "D20: Failed wins over Succeeded in the pass that decides it",
        "start": {**AWAITING, "seconds_since_end": WAIT + 5},
        "passes": [
            {
                "given": {"total": 4, "failed": 1, "failed_tasks": (("late", ""),)},
                "expect": {
                    "phase": "Failed",
                    "effects": ["record_task_counts", "ensure_end_time"],
                    "reason": "TaskFailed",
                },
            },
        ],
    },
    {
        "name": "D20: Failed wins over Running in Initializing",
        "start": {**SET_UP, "phase": "Initializing"},
        "passes": [
            {
                "given": {"total": 2, "active": 1, "failed": 1, "failed_tasks": (("t1", ""),)},
                "expect": {
                    "phase": "Failed",
                    "effects": ["record_task_counts", "ensure_end_time"],
                    "reason": "TaskFailed",
                },
            },
        ],
    },
    {
        "name": "deleting waits for its active Tasks, then releases the finalizer",
        "start": RUNNING,
        "passes": [
            {
                "given": {"deletion_requested": True},
                "expect": {
                    "phase": "Running",
                    "state": "deleting",
                    "error": "not all Tasks have terminated",
                    "error_action": "report_tasks_active",
                },
            },
            {
                "given": {"total": 1, "active": 1},
                "expect": {
                    "phase": "Running",
                    "state": "deleting",
                    "effects": ["record_task_counts"],
                    "error": "not all Tasks have terminated",
                },
            },
            {
                "given": {"list_error": "boom"},
                "expect": {
                    "phase": "Running",
                    "state": "deleting",
                    "error": "failed to list Tasks",
                },
            },
            {
                "given": {"list_error": "", "total": 0, "active": 0},
                "expect": {
                    "phase": "Running",
                    "state": "finalized",
                    "finalized": True,
                    "effects": ["record_task_counts", "remove_workflow_finalizer"],
                },
            },
        ],
    },
    {
        "name": "a terminating Workflow without our finalizer just goes",
        "start": {"phase": "", "deletion_requested": True, "total": 2, "active": 2},
        "passes": [
            {
                "expect": {
                    "phase": "",
                    "state": "finalized",
                    "finalized": True,
                    "transitions": [
                        "live --deletion_requested--> deleting",
                        "deleting --observed [not finalizer_present]--> finalized",
                    ],
                }
            },
        ],
    },
    {
        "name": "a failing effect ends the pass with its error and no phase change",
        "start": {**SET_UP, "phase": "Initializing"},
        "passes": [
            {
                "given": {"total": 1, "active": 1},
                "fail": {"record_start_time": "boom"},
                "expect": {
                    "phase": "Initializing",
                    "effects": ["record_task_counts"],
                    "error": "boom",
                    "error_action": "record_start_time",
                    "conditions": {"Ready": "False"},
                },
            },
            {"expect": {"phase": "Running", "effects": ["record_start_time"]}},
            {
                "given": {"deletion_requested": True, "active": 0, "succeeded": 1},
                "fail": {"remove_workflow_finalizer": "409 Conflict"},
                "expect": {
                    "phase": "Running",
                    "state": "deleting",
                    "effects": ["record_task_counts"],
                    "error": "409 Conflict",
                    "error_action": "remove_workflow_finalizer",
                },
            },
            {
                "expect": {
                    "phase": "Running",
                    "state": "finalized",
                    "effects": ["remove_workflow_finalizer"],
                }
            },
        ],
    },
    {
        "name": "an unknown phase counts as New, as in the reference",
        "start": {**SET_UP, "phase": "Paused"},
        "passes": [
            {"expect": {"phase": "Initializing", "effects": ["record_queued_time"]}},
        ],
    },
    {
        "name": "a terminated Workflow ignores later Task changes except in its counters",
        "start": {
            **SET_UP,
            "phase": "Succeeded",
            "total": 3,
            "succeeded": 3,
            "seconds_since_end": 30.0,
        },
        "passes": [
            {
                "given": {"total": 4, "active": 1},
                "expect": {"phase": "Succeeded", "effects": ["record_task_counts"]},
            },
            {
                "given": {"active": 0, "failed": 1, "failed_tasks": (("late", ""),)},
                "expect": {"phase": "Succeeded", "effects": ["record_task_counts"]},
            },
        ],
    },
    {
        "name": "retention: a finished Workflow is deleted once --finished-ttl has passed",
        "start": {**AWAITING, "finished_ttl": 100.0},
        "passes": [
            {
                "given": {"elapse": WAIT},
                "expect": {
                    "phase": "Succeeded",
                    "effects": ["ensure_end_time"],
                    "reason": "TasksCompleted",
                },
            },
            # Finished 20 s ago: looked at again when the TTL is due, nothing deleted.
            {
                "expect": {
                    "phase": "Succeeded",
                    "requeue": 100.0 - WAIT,
                    "transitions": ["terminated --observed [finished_ttl_set]--> (stays)"],
                }
            },
            {"given": {"elapse": 79.5}, "expect": {"phase": "Succeeded", "requeue": 0.5}},
            # Due: deleted as read; the next pass is the normal deletion path.
            {
                "given": {"elapse": 0.5},
                "expect": {
                    "phase": "Succeeded",
                    "effects": ["delete_expired_workflow"],
                    "transitions": ["terminated --observed [finished_ttl_passed]--> (stays)"],
                },
            },
            {
                "expect": {
                    "phase": "Succeeded",
                    "state": "finalized",
                    "effects": ["remove_workflow_finalizer"],
                    "finalized": True,
                }
            },
        ],
    },
    {
        "name": "retention: a Failed Workflow without endTime waits the whole TTL",
        "start": {
            **SET_UP,
            "phase": "Failed",
            "total": 1,
            "failed": 1,
            "failed_tasks": (("a", ""),),
            "finished_ttl": 60.0,
        },
        "passes": [{"expect": {"phase": "Failed", "requeue": 60.0}}],
    },
    {
        "name": "retention: without --finished-ttl a finished Workflow stays, however old",
        "start": {
            **SET_UP,
            "phase": "Succeeded",
            "total": 1,
            "succeeded": 1,
            "seconds_since_end": 1e9,
        },
        "passes": [{"expect": {"phase": "Succeeded"}}],
    },
    {
        "name": "retention: a Workflow still running is never deleted by the TTL",
        "start": {**RUNNING, "seconds_since_end": 1e9, "finished_ttl": 1.0},
        "passes": [{"expect": {"phase": "Running"}}],
    },
    {
        "name": "retention: a delete that fails leaves the Workflow as it is, for a retry",
        "start": {
            **SET_UP,
            "phase": "Succeeded",
            "total": 1,
            "succeeded": 1,
            "seconds_since_end": 500.0,
            "finished_ttl": 100.0,
        },
        "passes": [
            {
                "fail": {"delete_expired_workflow": "the API server is unavailable"},
                "expect": {"phase": "Succeeded", "error": "the API server is unavailable"},
            },
            {"expect": {"phase": "Succeeded", "effects": ["delete_expired_workflow"]}},
        ],
    },
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
def test_scenario(scenario: dict[str, Any]) -> None:
    """The scenario's passes decide exactly the phases, effects, errors and waits it expects."""
    run_scenario(scenario)


def test_transition_coverage_is_complete(record_property: Callable[[str, object], None]) -> None:
    """Every transition of the Workflow chart is taken by at least one scenario pass."""
    taken: set[str] = set()
    for scenario in SCENARIOS:
        for outcome in run_scenario(scenario):
            taken.update(outcome.transitions)
    every = [t.key for t in chart_data.transitions(WorkflowLifecycle)]
    unknown = taken - set(every)
    assert not unknown, f"scenarios took transitions the catalogue does not know: {unknown}"
    covered = [key for key in every if key in taken]
    figure = f"{len(covered)}/{len(every)} transitions ({100 * len(covered) / len(every):.1f} %)"
    record_property("summary", f"Workflow lifecycle transition coverage: {figure}")
    print(f"workflow transition coverage: {figure}")
    missing = [key for key in every if key not in taken]
    assert not missing, "transitions no scenario takes:\n  " + "\n  ".join(missing)


def test_every_guard_is_asked_somewhere() -> None:
    """The scenarios reach every guard name of the model (no dead guard)."""
    used = chart_data.guard_names(WorkflowLifecycle)
    assert used == set(GUARD_NAMES)
