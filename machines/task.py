"""The Task lifecycle as a statechart: states, events, guards and actions, and nothing else.

Where this sits in the flow: the reconciler condenses the cluster into a `TaskObservation`,
`machines.driver.run_pass` rebuilds `TaskLifecycle` from the persisted `status.phase`, sends
the events `events_for(observation)` derives, and reports the phase reached and the effects
the machine requested. The chart imports nothing from Kubernetes and does no I/O: guards and
effects are names resolved on the runtime model (`machines.model.TaskLifecycleModel`),
verdicts are names resolved on the driver's pass record (`machines.driver`).

What each phase means to a user:

- New (`""`): the Task was just created; nothing has been decided yet.
- Initializing: choosing the MediaProcessingEntity (where to run) and the Function (what).
- JobPending: both are chosen; the Job and its helper-data Secret are being created.
- Running: the Job exists; the Task waits for its outcome (startTime is set once).
- Succeeded / Failed: the outcome is recorded for good (endTime set); the Job is only
  cleaned up from here on. A terminal phase never goes back.
- Deleting / Finalized: the Task is going away; these are not phases (status.phase keeps
  its last value) but steps of one pass: clean up the Job, then drop the finalizer.

Spec: task-controller.md §3 with decisions.md D3, D6, D9, D10, D18, D22 and the
Kubernetes ≥ 1.31 Job conditions.
"""

from __future__ import annotations

from typing import Final

from statemachine import State, StateChart

from machines.observation import TaskObservation, WorkflowState

# Events: what the watch loop observed, derived from the observation by `events_for`.
DELETION_REQUESTED: Final = "deletion_requested"
FINALIZER_MISSING: Final = "finalizer_missing"
WORKFLOW_MISSING: Final = "workflow_missing"
WORKFLOW_DELETING: Final = "workflow_deleting"
OWNERSHIP_MISSING: Final = "ownership_missing"
WORKFLOW_TERMINATED: Final = "workflow_terminated"
OBSERVED: Final = "observed"


class TaskLifecycle(StateChart):
    """Lifecycle of one nagare media engine Task (task-controller.md §3).

    Within a state, transitions for the same event are tried in declaration order and the
    first whose guards all hold is taken. Effects run as `before` actions, so an effect that
    raises aborts its transition (the state does not change) and becomes `error.execution`,
    which every non-final state handles with `record_error`.

    {statechart:md}
    """

    # The phase is held on the driver's pass record, never on the Task object: writing
    # states one at a time would leave the configuration empty (None) mid-transition.
    atomic_configuration_update = True
    # A targetless transition must not re-run the entry actions of the state it stays in.
    enable_self_transition_entries = False
    # Phases are levels: an event a state has no use for is simply ignored.
    allow_event_without_transition = True
    # Exceptions from actions become error.execution, handled explicitly below.
    catch_errors_as_events = True

    class live(State.Compound, name="Live"):
        class active(State.Compound, name="Active"):
            new = State("New", initial=True)
            initializing = State("Initializing")
            job_pending = State("JobPending")
            running = State("Running", enter="record_start_time")

            observed = (
                new.to(initializing, before="record_queued_time")
                | initializing.to(
                    job_pending, before=["select_media_processing_entity", "select_function"]
                )
                # D3: a JobPending Task without its refs goes back instead of forward.
                | job_pending.to(initializing, cond="refs_missing")
                | job_pending.to(None, cond="mpe_unavailable", on="report_mpe_unavailable")
                | job_pending.to(running, before="create_job_and_secret")
                | running.to(None, cond="mpe_unavailable", on="report_mpe_unavailable")
                # D6: a Job under our name with another UID is adopted, not a crash.
                | running.to(None, cond="job_unrecorded", before="adopt_job")
                # Deleted by someone before it finished: let it go (it is then re-created once).
                | running.to(
                    None, cond=["job_deleted_early", "job_protected"], before="release_job_finalizer"
                )
            )

        # D10: entering either terminal phase stamps endTime.
        class terminated(State.Compound, name="Terminated", enter="record_end_time"):
            succeeded = State("Succeeded")
            failed = State("Failed")

        observed = (
            active.running.to(terminated.succeeded, cond="job_succeeded", on="note_job_succeeded")
            | active.running.to(terminated.failed, cond="job_failed", on="note_job_failed")
            # The Job vanished before its outcome was recorded: re-create it exactly once ...
            | active.running.to(
                active.job_pending,
                cond="job_gone",
                unless="job_recreated",
                before=["record_job_recreation", "clear_job_ref"],
            )
            # ... and fail with a clear reason if it vanishes again.
            | active.running.to(
                terminated.failed, cond=["job_gone", "job_recreated"], on="note_job_lost"
            )
            # Terminal housekeeping, one step per pass; each step triggers the next pass.
            | terminated.to(
                None, cond=["mpe_unavailable", "job_ref_set"], on="report_mpe_unavailable"
            )
            | terminated.to(None, cond="job_still_running", before="delete_job")
            # D18: release the Job only once the outcome is durably recorded.
            | terminated.to(
                None, cond=["job_protected", "outcome_recorded"], before="release_job_finalizer"
            )
            | terminated.to(None, cond="job_ref_stale", before="clear_job_ref")
        )
        workflow_terminated = active.to(terminated.failed, on="note_workflow_terminated")

    deleting = State("Deleting")
    finalized = State("Finalized", final=True)

    deletion_requested = live.to(deleting)
    finalizer_missing = live.to(None, before="add_task_finalizer")
    workflow_missing = live.to(None, on="report_workflow_missing")
    # D9: delete the Task and stop; the next pass sees its deletionTimestamp.
    workflow_deleting = live.to(deleting, before="delete_task")
    ownership_missing = live.to(None, before="set_workflow_ownership")
    error_execution = live.to(None, on="record_error") | deleting.to(None, on="record_error")

    # Deleting finishes within the pass that observes the Task's own deletionTimestamp
    # (eventless transitions, first match wins). A pass that only asked for the deletion
    # (D9) ends in Deleting; the next pass finishes it.
    deleting.to(finalized, cond="task_terminating", unless="task_finalizer_present")
    # The MPE is unreachable: its Job cannot be cleaned up, yet the Task must go (D22).
    deleting.to(
        finalized,
        cond=["task_terminating", "mpe_unavailable"],
        before=["abandon_job", "remove_task_finalizer"],
    )
    deleting.to(
        finalized,
        cond=["task_terminating", "job_deletable", "job_protected"],
        before=["delete_job", "release_job_finalizer", "remove_task_finalizer"],
    )
    deleting.to(
        finalized,
        cond=["task_terminating", "job_deletable"],
        before=["delete_job", "remove_task_finalizer"],
    )
    deleting.to(
        finalized,
        cond=["task_terminating", "job_protected"],
        before=["release_job_finalizer", "remove_task_finalizer"],
    )
    deleting.to(finalized, cond="task_terminating", before="remove_task_finalizer")


PHASE_STATES: Final = {
    "": "new",
    "Initializing": "initializing",
    "JobPending": "job_pending",
    "Running": "running",
    "Succeeded": "succeeded",
    "Failed": "failed",
}
"""`status.phase` → state id. `""` is no valid state value for the library, hence the map."""

STATE_PHASES: Final = {state_id: phase for phase, state_id in PHASE_STATES.items()}
"""State id → `status.phase`, for the six phase states only."""


class UnknownPhaseError(ValueError):
    """The persisted `status.phase` is none of the phases this controller knows."""

    def __init__(self, phase: str) -> None:
        known = ", ".join(repr(p) for p in PHASE_STATES)
        super().__init__(f"unknown status.phase {phase!r}; expected one of {known}")
        self.phase = phase


def configuration_for(state_id: str) -> list[str]:
    """Return the configuration (state values, outermost first) that has `state_id` active.

    A compound state is active whenever one of its children is, so restoring only the leaf
    would lose the `Live`/`Active` transitions.

    Raises:
        KeyError: for an unknown state id.
    """
    state = TaskLifecycle.states_map[state_id]
    chain = [state, *state.ancestors()]
    return [s.value for s in reversed(chain)]


def configuration_for_phase(phase: str) -> list[str]:
    """Return the configuration that a persisted `status.phase` stands for.

    Raises:
        UnknownPhaseError: if `phase` is not one of `PHASE_STATES`.
    """
    try:
        return configuration_for(PHASE_STATES[phase])
    except KeyError:
        raise UnknownPhaseError(phase) from None


def events_for(observation: TaskObservation) -> tuple[str, ...]:
    """Return the events one pass sends, in order (task-controller.md §3.2-§3.5).

    The order is the reconcile's order of checks: deletion first (nothing else runs on a
    terminating Task, D22), then the finalizer, the Workflow, and last `observed`, the phase
    step. The driver stops early when a pass ends in error or leaves `Live`.
    """
    if observation.deletion_requested:
        return (DELETION_REQUESTED,)
    events: list[str] = []
    if not observation.has_finalizer:
        events.append(FINALIZER_MISSING)
    if observation.workflow is WorkflowState.MISSING:
        return (*events, WORKFLOW_MISSING)
    if observation.workflow is WorkflowState.DELETING:
        return (*events, WORKFLOW_DELETING)
    if not observation.owned_by_workflow:
        events.append(OWNERSHIP_MISSING)
    if observation.workflow is WorkflowState.TERMINATED:
        events.append(WORKFLOW_TERMINATED)
    events.append(OBSERVED)
    return tuple(events)
