"""`run_pass` edge cases: it never raises, and no exception an action raises is dropped."""

from __future__ import annotations

import copy
import functools
from datetime import UTC, datetime

import lifecycle_harness
import pytest

from machines.task.chart import TaskLifecycle
from machines.task.driver import PassError, PassOutcome, run_pass
from machines.task.guards import ObservationGuards
from machines.task.model import EFFECT_NAMES
from machines.task.observation import JobState, TaskObservation

NOW = datetime(2024, 5, 1, tzinfo=UTC)
PENDING = TaskObservation(
    phase="JobPending",
    has_finalizer=True,
    owned_by_workflow=True,
    mpe_selected=True,
    function_selected=True,
    mpe_ready=True,
)


@functools.cache
def _first_passes() -> dict[str, tuple[dict, int]]:
    """For each effect, the first scenario pass that performs it."""
    found: dict[str, tuple[dict, int]] = {}
    for _, scenario in lifecycle_harness.load_scenarios():
        for index, outcome in enumerate(lifecycle_harness.run_scenario(scenario)):
            for effect in outcome.effects:
                found.setdefault(effect, (scenario, index))
    return found


def _first_pass_performing(effect: str) -> tuple[dict, int]:
    found = _first_passes()
    assert effect in found, f"no scenario performs {effect}"
    return found[effect]


@pytest.mark.parametrize("effect", EFFECT_NAMES)
def test_every_raising_effect_ends_the_pass_with_its_error(effect: str) -> None:
    """Make each effect raise where a scenario performs it: the outcome names it."""
    scenario, index = _first_pass_performing(effect)
    failing = copy.deepcopy(scenario)
    failing["passes"] = failing["passes"][: index + 1]
    failing["passes"][index]["fail"] = {effect: f"{effect} exploded"}
    outcomes = _run_without_expectations(failing)
    error = outcomes[-1].error
    assert error is not None
    assert error.action == effect
    assert error.message == f"{effect} exploded"
    assert effect not in outcomes[-1].effects


def _run_without_expectations(scenario: dict) -> list[PassOutcome]:
    world = dict(lifecycle_harness.DEFAULT_WORLD)
    lifecycle_harness.apply_changes(world, scenario.get("start", {}))
    model = lifecycle_harness.FakeModel(world)
    outcomes = []
    for spec in scenario["passes"]:
        lifecycle_harness.apply_changes(world, spec.get("given", {}))
        model.fail_effects = dict(spec.get("fail", {}))
        outcome = run_pass(lifecycle_harness.observe(world), model, now=NOW)
        world["phase"], world["conditions"] = outcome.phase, outcome.conditions
        outcomes.append(outcome)
    return outcomes


def test_a_raising_entry_action_is_reported_after_the_transition() -> None:
    """Entry actions run once the state is entered: the error is kept, the phase moved."""
    model = lifecycle_harness.FakeModel({})
    model.fail_effects = {"record_start_time": "clock broken"}
    outcome = run_pass(PENDING, model, now=NOW)
    assert outcome.phase == "Running"
    assert outcome.effects == ("create_job_and_secret",)
    assert outcome.error == PassError("clock broken", action="record_start_time")


def test_a_model_lacking_callbacks_is_an_error_not_a_crash() -> None:
    class Incomplete(ObservationGuards):
        def create_job_and_secret(self, observation: TaskObservation) -> None:
            pass

    outcome = run_pass(PENDING, Incomplete(), now=NOW)  # type: ignore[arg-type]  # deliberately invalid input: the engine must report it
    assert outcome.phase == "JobPending"
    assert outcome.effects == ()
    assert "lacks add_task_finalizer" in outcome.message


def test_an_internal_error_is_an_error_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    """D23: whatever raises inside the driver comes back in the outcome."""

    def broken(self: TaskLifecycle, event: str, *args: object, **kwargs: object) -> None:
        raise RuntimeError("library bug")

    monkeypatch.setattr(TaskLifecycle, "send", broken)
    outcome = run_pass(PENDING, lifecycle_harness.FakeModel({}), now=NOW)
    assert outcome.phase == "JobPending"
    assert outcome.message == "internal error: library bug"


def test_several_errors_aggregate_like_the_reference() -> None:
    """`status.message` joins several errors as `[a, b]` (§3.14)."""
    outcome = PassOutcome(phase="Running", state="running", errors=(PassError("a"), PassError("b")))
    assert outcome.message == "[a, b]"
    assert outcome.error == PassError("a")
    assert PassOutcome(phase="", state="new").message == ""


def test_a_missing_phase_is_never_none() -> None:
    observation = TaskObservation(phase=None)  # type: ignore[arg-type]  # deliberately invalid input: the engine must report it
    assert observation.phase == ""
    assert run_pass(observation, lifecycle_harness.FakeModel({}), now=NOW).phase == "Initializing"


@pytest.mark.parametrize(
    "changes",
    [
        {"job": JobState.ABSENT, "job_uid": "u1"},
        {"job": JobState.ABSENT, "job_protected": True},
        {"job": JobState.ACTIVE},
    ],
)
def test_contradictory_job_fields_are_rejected(changes: dict[str, object]) -> None:
    """A Job without uid, or an absent Job with one, is a reconciler bug."""
    with pytest.raises(ValueError, match="Job"):
        TaskObservation(**changes)  # type: ignore[arg-type]  # deliberately invalid input: the engine must report it


def test_effects_receive_the_observation() -> None:
    seen: list[TaskObservation] = []

    class Spy(lifecycle_harness.FakeModel):
        def create_job_and_secret(self, observation: TaskObservation) -> None:
            seen.append(observation)

    run_pass(PENDING, Spy({}), now=NOW)
    assert seen == [PENDING]
