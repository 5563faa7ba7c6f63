"""Regression tests named after the defects whose fix lives in the lifecycle chart.

Each runs the scenario of `scenarios/*.yaml` that tells the story; the names follow
docs/behaviour.md §6 (`test_d<N>_...`). D9/D10/D18/D22 also hold as invariants in every scenario
(`lifecycle_harness._check_invariants`).
"""

from __future__ import annotations

import lifecycle_harness


def run(stem: str, name: str) -> None:
    scenario = next(s for s in lifecycle_harness.scenarios_named(stem) if s["name"] == name)
    lifecycle_harness.run_scenario(scenario)


def test_d3_job_pending_without_refs_goes_back_to_initializing() -> None:
    run("decisions", "D3 JobPending without its refs goes back to Initializing, startTime set once")


def test_d18b_a_vanished_job_fails_the_task_and_is_never_recreated() -> None:
    run("job-lost", "a Job that vanishes while Running fails the Task and is never re-created")
    run("job-lost", "a Job deleted by someone while Running fails the Task, then is let go")


def test_d18b_a_job_lost_before_it_was_recorded_is_not_made_again() -> None:
    run("job-lost", "a Job created, then removed before status.jobRef recorded it, fails the Task")
    run(
        "job-lost",
        "a Running Task with no jobRef and no Job (a restored status) fails instead of running again",
    )


def test_d18b_an_observable_outcome_wins_over_workflow_termination() -> None:
    run("workflow", "terminated while Running whose Job already succeeded records the success")
    run("workflow", "terminated while Running whose Job already failed keeps the real reason")
    run("workflow", "terminated while JobPending whose unrecorded Job already succeeded")


def test_d6_job_with_another_uid_is_adopted_while_running() -> None:
    run("decisions", "D6 a Job under our name with another UID is adopted while Running")
    run("decisions", "D6 a Running Task without jobRef adopts the Job found under its name")


def test_d6_replaced_job_reference_is_cleared_in_terminal_phases() -> None:
    run(
        "decisions",
        "D6 a terminal Task forgets a replaced Job reference but still cleans up the Job",
    )
    run("decisions", "D6 a terminal Task forgets a reference to a finished replacement Job")


def test_d9_workflow_deletion_deletes_the_task_and_stops_the_pass() -> None:
    run("workflow", "D9 the Workflow is being deleted while Running")
    run("workflow", "D9 the Workflow is being deleted before the Task got its finalizer")


def test_d10_end_time_on_entering_a_terminal_phase() -> None:
    run("workflow", "terminated while JobPending, no Job yet")
    run("happy-path", "the Job fails")


def test_d18_job_finalizer_released_once_outcome_recorded() -> None:
    run("decisions", "D18 the Job finalizer waits until the outcome is persisted")


def test_d22_terminating_task_never_gets_its_finalizer_back() -> None:
    run("deletion", "D22 the finalizer is already gone (another finalizer keeps the Task)")


def test_d22_terminating_task_can_always_be_deleted() -> None:
    run("deletion", "D22 the MPE is unreachable, the Task goes anyway")
    run("unknown-phase", "a Task with an unknown phase can still be deleted")


def test_f9a_deleting_the_job_of_a_succeeded_task_keeps_succeeded() -> None:
    run("job-lost", "a Job that vanishes after its outcome was recorded changes nothing (F9a)")


def test_f10_job_finished_before_seen_active_still_succeeds() -> None:
    run("job-finishes-early", "completes between the pass that created it and the next")
    run(
        "job-finishes-early",
        "already complete when the pass finds it (the status write recording it was lost)",
    )
