"""Scenario harness for the Task lifecycle: a small fake model and a pass-by-pass runner.

A scenario is a list of passes. Each pass may change the world (`given`, what happened in the
cluster between passes: a Job completed, the Workflow terminated...), may tell the fake to
raise (`fail`, `fail_guard`), and states what it `expect`s: the phase, the effects requested
in order, the error, the conditions. Between passes the harness persists what a reconciler
would (phase and conditions from the outcome) and the fake applies the obvious consequence of
each effect (`create_job_and_secret` makes an active Job, `delete_job` marks it terminating),
so scenarios read as a story and state only what happened outside the controller.

Every pass is also checked against invariants that hold for any scenario (terminal phases
never go back, no finalizer on a terminating Task, at most one Job ever...).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from machines.conditions import Condition
from machines.task.driver import PassOutcome, run_pass
from machines.task.guards import ObservationGuards
from machines.task.model import EFFECT_NAMES, GUARD_NAMES
from machines.task.observation import TERMINAL_PHASES, JobState, TaskObservation, WorkflowState

SCENARIO_DIR = Path(__file__).parent / "scenarios"
T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)

DEFAULT_WORLD: dict[str, Any] = {
    # A Task just created by a user; its Workflow and its MPE exist and are healthy.
    "workflow_name": "wf-sleep",
    "job_name": "sleep-a-3f9a2c1d",
    "mpe_ready": True,
}
_JOB_FIELDS = ("job_uid", "job_terminating", "job_protected")
_OBSERVATION_FIELDS = {f.name for f in dataclasses.fields(TaskObservation)}
_EXPECT_KEYS = {
    "phase",
    "state",
    "effects",
    "error",
    "error_action",
    "reason",
    "conditions",
    "message",
    "reason_message",
    "quiet",
    "stamped",
    "finalized",
    "transitions",
    "requeue_after",
    "events",
    "wake",
}


class InjectedError(RuntimeError):
    """What the fake raises when a scenario tells it to fail."""


class FakeModel(ObservationGuards):
    """Records every effect, raises on demand and keeps a tiny simulated world.

    `world` holds the observation fields that effects change; `status` the timestamps.
    """

    def __init__(self, world: dict[str, Any]) -> None:
        self.world = world
        self.status: dict[str, datetime] = {}
        self.calls: list[str] = []
        self.stamped: list[str] = []
        self.jobs_created = 0
        self.fail_effects: dict[str, str] = {}
        self.fail_guards: dict[str, str] = {}
        self.now = T0

    def _stamp(self, field: str) -> None:
        if field not in self.status:  # the contract: set once, never overwritten
            self.status[field] = self.now
            self.stamped.append(field)

    def _job_gone(self) -> None:
        self.world.update(
            job=JobState.ABSENT, job_uid="", job_terminating=False, job_protected=False
        )

    # Simulated consequences, named sim_<effect>.

    def sim_add_task_finalizer(self) -> None:
        self.world["has_finalizer"] = True

    def sim_set_workflow_ownership(self) -> None:
        self.world["owned_by_workflow"] = True

    def sim_delete_task(self) -> None:
        self.world["deletion_requested"] = True

    def sim_delete_expired_task(self) -> None:
        self.world["deletion_requested"] = True

    def sim_record_queued_time(self) -> None:
        self._stamp("queuedTime")

    def sim_select_media_processing_entity(self) -> None:
        self.world["mpe_selected"] = True

    def sim_select_function(self) -> None:
        self.world["function_selected"] = True

    def sim_create_job_and_secret(self) -> None:
        if self.world.get("job", JobState.ABSENT) is JobState.ABSENT:
            self.jobs_created += 1
            self.world.update(
                job=JobState.ACTIVE,
                job_uid=f"job-uid-{self.jobs_created}",
                job_protected=True,
                job_terminating=False,
            )
        self.world["job_ref_uid"] = self.world["job_uid"]  # created or adopted

    def sim_record_start_time(self) -> None:
        self._stamp("startTime")

    def sim_adopt_job(self) -> None:
        self.world["job_ref_uid"] = self.world["job_uid"]

    def sim_clear_job_ref(self) -> None:
        self.world["job_ref_uid"] = ""

    def sim_record_end_time(self) -> None:
        self._stamp("endTime")

    def sim_delete_job(self) -> None:
        if self.world.get("job_protected"):
            self.world["job_terminating"] = True
        else:
            self._job_gone()

    def sim_release_job_finalizer(self) -> None:
        if self.world.get("job_terminating"):
            self._job_gone()
        else:
            self.world["job_protected"] = False

    def sim_remove_task_finalizer(self) -> None:
        self.world["has_finalizer"] = False

    def sim_record_reselected_mpe(self) -> None:
        self.world["mpe_unrecorded"] = False  # status names it from now on


def _effect(name: str) -> Any:
    def effect(self: FakeModel, observation: TaskObservation) -> None:
        assert isinstance(observation, TaskObservation)
        self.calls.append(name)
        if name in self.fail_effects:
            raise InjectedError(self.fail_effects[name])
        simulate = getattr(self, f"sim_{name}", None)
        if simulate is not None:
            simulate()

    effect.__name__ = name
    return effect


def _guard(name: str) -> Any:
    inherited = getattr(ObservationGuards, name)

    def guard(self: FakeModel, observation: TaskObservation) -> bool:
        if name in self.fail_guards:
            raise InjectedError(self.fail_guards[name])
        return bool(inherited(self, observation))

    guard.__name__ = name
    return guard


for _name in EFFECT_NAMES:
    setattr(FakeModel, _name, _effect(_name))
for _name in GUARD_NAMES:
    setattr(FakeModel, _name, _guard(_name))


def _coerce(changes: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in changes.items():
        if key not in _OBSERVATION_FIELDS:
            raise KeyError(f"unknown observation field {key!r}")
        if key == "workflow":
            value = WorkflowState(value)
        elif key == "job":
            value = JobState(value)
        elif key == "phase" and value is None:
            value = ""
        out[key] = value
    return out


def apply_changes(world: dict[str, Any], changes: Mapping[str, Any]) -> None:
    """Apply a scenario's `given` to the world; a Job set `absent` loses its other fields."""
    coerced = _coerce(changes)
    world.update(coerced)
    if coerced.get("job") is JobState.ABSENT:
        for field in _JOB_FIELDS:
            world[field] = TaskObservation.__dataclass_fields__[field].default
    elif "job" in coerced and not world.get("job_uid"):
        world["job_uid"] = "job-uid-external"


def observe(world: Mapping[str, Any]) -> TaskObservation:
    return TaskObservation(**{k: v for k, v in world.items() if k in _OBSERVATION_FIELDS})


def _check_invariants(before: TaskObservation, outcome: PassOutcome, model: FakeModel) -> None:
    assert isinstance(outcome.phase, str), "the phase is never None"
    if before.phase in TERMINAL_PHASES:
        assert outcome.phase == before.phase, "a terminal phase never goes back"
    if before.deletion_requested:
        assert "add_task_finalizer" not in outcome.effects, "D22: no finalizer while terminating"
        assert outcome.phase == before.phase, "deletion never changes the phase"
    if "release_job_finalizer" in outcome.effects:
        assert before.outcome_recorded or before.deletion_requested, (
            "D18: released before the outcome was recorded"
        )
    assert model.jobs_created <= 1, "D18b: a Task gets at most one Job, ever"
    assert list(outcome.effects) == [c for c in model.calls if c not in model.fail_effects]


def _check_condition_stamps(
    before: Iterable[Condition], after: Iterable[Condition], now: datetime
) -> None:
    old = {c.type: c for c in before}
    for cond in after:
        previous = old.get(cond.type)
        same = previous is not None and (previous.status, previous.reason, previous.message) == (
            cond.status,
            cond.reason,
            cond.message,
        )
        if same:
            assert cond.last_transition_time == previous.last_transition_time, cond.type
        else:
            assert cond.last_transition_time == now, f"{cond.type} changed without a new stamp"


def _check_expectations(
    step: int, expect: Mapping[str, Any], outcome: PassOutcome, model: FakeModel
) -> None:
    where = f"pass {step}"
    unknown = set(expect) - _EXPECT_KEYS
    assert not unknown, f"{where}: unknown expectation keys {sorted(unknown)}"
    assert outcome.phase == (expect["phase"] or ""), f"{where}: phase {outcome.phase!r}"
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
    if "message" in expect:
        assert outcome.message == expect["message"], f"{where}: message {outcome.message!r}"
    if "reason_message" in expect:
        assert outcome.reason_message == expect["reason_message"], (
            f"{where}: reason message {outcome.reason_message!r}"
        )
    # A quiet wait leaves status.message as stored (a finished Task's housekeeping).
    assert outcome.waiting_quietly is bool(expect.get("quiet", False)), f"{where}: quiet"
    if "conditions" in expect:
        wanted = expect["conditions"] or {}
        got = {c.type: c.status for c in outcome.conditions}
        if not wanted:
            assert got == {}, f"{where}: conditions {got}"
        for type_, status in wanted.items():
            status, _, cond_reason = str(status).partition("/")
            assert got.get(type_) == status, f"{where}: {type_} is {got.get(type_)!r}"
            if cond_reason:
                found = next(c for c in outcome.conditions if c.type == type_)
                assert found.reason == cond_reason, f"{where}: {type_} reason {found.reason!r}"
    if "stamped" in expect:
        assert model.stamped == list(expect["stamped"]), f"{where}: stamped {model.stamped}"
    if "finalized" in expect:
        assert outcome.finalized is expect["finalized"], f"{where}: finalized"
    if "requeue_after" in expect:
        assert outcome.requeue_after == expect["requeue_after"], (
            f"{where}: requeue_after {outcome.requeue_after}"
        )
    if "transitions" in expect:
        assert list(outcome.transitions) == list(expect["transitions"]), (
            f"{where}: transitions {list(outcome.transitions)}"
        )
    if "events" in expect:
        got_events = [f"{e.type}/{e.reason}" for e in outcome.events]
        assert got_events == list(expect["events"]), f"{where}: events {got_events}"
    assert list(outcome.wake) == list(expect.get("wake", [])), f"{where}: wake {outcome.wake}"


def run_scenario(scenario: Mapping[str, Any]) -> list[PassOutcome]:
    """Run every pass of `scenario`, asserting expectations and invariants; return outcomes."""
    world = dict(DEFAULT_WORLD)
    apply_changes(world, scenario.get("start", {}))
    model = FakeModel(world)
    outcomes = []
    for step, spec in enumerate(scenario["passes"], start=1):
        apply_changes(world, spec.get("given", {}))
        model.now = T0 + timedelta(minutes=step)
        model.calls, model.stamped = [], []
        model.fail_effects = dict(spec.get("fail", {}))
        model.fail_guards = dict(spec.get("fail_guard", {}))
        before = observe(world)
        outcome = run_pass(before, model, now=model.now)
        _check_invariants(before, outcome, model)
        _check_condition_stamps(before.conditions, outcome.conditions, model.now)
        _check_expectations(step, spec.get("expect", {}), outcome, model)
        # What the reconciler persists: the phase and conditions (the Task is gone once
        # finalized, so a scenario ends there).
        world["phase"] = outcome.phase
        world["conditions"] = outcome.conditions
        ready = next((c for c in outcome.conditions if c.type == "Ready"), None)
        world["ready_reason"] = ready.reason if ready is not None else ""
        outcomes.append(outcome)
        if outcome.finalized:
            assert step == len(scenario["passes"]), "no pass after the Task is finalized"
    return outcomes


def load_scenarios() -> list[tuple[str, dict[str, Any]]]:
    """Every scenario under `scenarios/`, as `(id, scenario)`; a file may hold several."""
    found = []
    for path in sorted(SCENARIO_DIR.glob("*.yaml")):
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        for _index, scenario in enumerate(document["scenarios"], start=1):
            found.append((f"{path.stem}/{scenario['name']}", scenario))
    return found


def scenarios_named(stem: str) -> list[dict[str, Any]]:
    """The scenarios of `scenarios/<stem>.yaml`."""
    document = yaml.safe_load((SCENARIO_DIR / f"{stem}.yaml").read_text(encoding="utf-8"))
    return list(document["scenarios"])
