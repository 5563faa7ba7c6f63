"""The pass engine's reconcile loop, the same for every chart: passes while the phase moves, its
stop rules, the path of phases taken and the phase-change Event.

Driven through the Task chart with the scenario harness's fake model (`lifecycle_harness`):
between passes the fake applies what each effect would do, as the runtime's read would see it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import lifecycle_harness

from machines.engine import NORMAL, WARNING
from machines.task.driver import TASK_ENGINE, reconcile
from machines.task.observation import JobState

NOW = datetime(2024, 5, 1, tzinfo=UTC)


def _reconcile(world: dict[str, Any], model: lifecycle_harness.FakeModel) -> Any:
    applied: list[Any] = []

    def apply(outcome: Any) -> None:
        applied.append(outcome)
        world["phase"] = outcome.phase
        world["conditions"] = outcome.conditions

    outcome = reconcile(lambda: lifecycle_harness.observe(world), model, now=NOW, apply=apply)
    assert len(applied) == outcome.passes  # the runtime saw every pass before the next read
    return outcome


def _world(**changes: Any) -> tuple[dict[str, Any], lifecycle_harness.FakeModel]:
    world = dict(lifecycle_harness.DEFAULT_WORLD)
    lifecycle_harness.apply_changes(world, changes)
    return world, lifecycle_harness.FakeModel(world)


def test_a_new_task_goes_to_running_in_one_reconcile_and_says_so_in_one_normal_event():
    world, model = _world()
    outcome = _reconcile(world, model)
    assert outcome.path == ("", "Initializing", "JobPending", "Running")
    # Creating the Job ends the reconcile (none of its pods can be ready yet): no fourth pass
    # that would only schedule the pod check, which the third does itself.
    assert outcome.passes == 3
    assert outcome.last.end_reconcile
    assert outcome.last.requeue_after == 10.0
    assert outcome.events[0].type == NORMAL
    assert outcome.events[0].reason == "Running"
    assert outcome.events[0].note == "(new) -> Initializing -> JobPending -> Running"
    assert "create_job_and_secret" in outcome.effects


def test_entering_a_terminal_phase_ends_the_reconcile_with_a_warning_for_failed():
    world, model = _world(
        phase="Running",
        has_finalizer=True,
        owned_by_workflow=True,
        mpe_selected=True,
        function_selected=True,
        job="failed",
        job_uid="u1",
        job_ref_uid="u1",
        job_protected=True,
    )
    outcome = _reconcile(world, model)
    assert outcome.passes == 1
    assert outcome.last.end_reconcile
    assert outcome.path == ("Running", "Failed")
    event = outcome.events[0]
    assert (event.type, event.reason) == (WARNING, "Failed")
    assert event.note == "Running -> Failed: JobFailed"
    assert outcome.last.requeue_after == 0.0  # the housekeeping is next, at once


def test_a_pass_that_waits_ends_the_reconcile_without_an_event():
    world, model = _world(
        phase="JobPending",
        has_finalizer=True,
        owned_by_workflow=True,
        mpe_selected=True,
        function_selected=True,
        mpe_ready=False,
        mpe_client_pending=True,
    )
    outcome = _reconcile(world, model)
    assert outcome.passes == 1
    assert outcome.last.waiting
    assert outcome.events == ()


def test_a_pass_that_fails_ends_the_reconcile_keeping_the_phases_it_moved():
    world, model = _world()
    model.fail_effects = {"select_function": "no Function matches"}
    outcome = _reconcile(world, model)
    assert outcome.path == ("", "Initializing")
    assert outcome.error is not None
    assert outcome.events[0].reason == "Initializing"


def test_the_loop_is_bounded_by_the_charts_max_passes():
    """A broken world in which every pass moves the phase (the reads alternate between New and
    Initializing) still ends after `max_passes`."""
    world, model = _world()
    reads = iter(["", "Initializing"] * 10)

    def observe() -> Any:
        return lifecycle_harness.observe({**world, "phase": next(reads)})

    outcome = reconcile(observe, model, now=NOW, apply=lambda _outcome: None)
    assert outcome.passes == TASK_ENGINE.spec.max_passes


def test_a_reconcile_that_ends_where_it_started_writes_no_phase_event():
    world, model = _world(
        phase="Running",
        has_finalizer=True,
        owned_by_workflow=True,
        mpe_selected=True,
        function_selected=True,
        job="active",
        job_uid="u1",
        job_ref_uid="u1",
        job_protected=True,
    )
    outcome = _reconcile(world, model)
    assert outcome.path == ("Running",)
    assert outcome.events == ()
    assert world["job"] is JobState.ACTIVE


def test_a_verdict_that_ends_the_reconcile_ends_the_pass_too():
    """The Workflow terminated a running Task: the pass enters Failed and sends no further
    event, so the Job is deleted and released only once the outcome is durable."""
    world, model = _world(
        phase="Running",
        has_finalizer=True,
        owned_by_workflow=True,
        mpe_selected=True,
        function_selected=True,
        workflow="terminated",
        job="active",
        job_uid="u1",
        job_ref_uid="u1",
        job_protected=True,
    )
    outcome = _reconcile(world, model)
    assert outcome.path == ("Running", "Failed")
    assert outcome.last.end_reconcile
    assert "delete_job" not in outcome.effects
    assert "release_job_finalizer" not in outcome.effects
