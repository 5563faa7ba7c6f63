"""The Task lifecycle as a statechart: states, events, guards and actions, and nothing else.

Where this sits in the flow: the reconciler condenses the cluster into a `TaskObservation`,
`machines.task.driver.run_pass` rebuilds `TaskLifecycle` from the persisted `status.phase`, sends
the events `events_for(observation)` derives, and reports the phase reached and the effects
the machine requested. The chart imports nothing from Kubernetes and does no I/O: guards and
effects are names resolved on the runtime model (`machines.task.model.TaskLifecycleModel`),
verdicts are names resolved on the driver's pass record (`machines.task.driver`).

What each phase means to a user:

- New (`""`): the Task was just created; nothing has been decided yet.
- Initializing: choosing the MediaProcessingEntity (where to run) and the Function (what).
- JobPending: both are chosen; the Job and its helper-data Secret are being created.
- Running: the Job exists; the Task waits for its outcome (startTime is set once).
- Succeeded / Failed: the outcome is recorded for good (endTime set); the Job is only
  cleaned up from here on. A terminal phase never goes back. With `--finished-ttl` set, a
  finished Task whose Workflow does not exist is deleted once that long has passed since
  endTime.
- Deleting / Finalized: the Task is going away; these are not phases (status.phase keeps
  its last value) but steps of one pass: clean up the Job, then drop the finalizer.

Spec: docs/behaviour.md §3 with D3, D6, D9, D10, D18, D18b, D22 and F8 (the
Kubernetes ≥ 1.31 Job conditions).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Final, cast

from statemachine import State

from machines.engine import LifecycleChart, UnknownPhaseError
from machines.task.observation import TaskObservation, WorkflowState
from machines.task.phases import PHASE_STATES, STATE_PHASES

# Events: what the watch loop observed, derived from the observation by `events_for`.
DELETION_REQUESTED: Final = "deletion_requested"
FINALIZER_MISSING: Final = "finalizer_missing"
WORKFLOW_MISSING: Final = "workflow_missing"
WORKFLOW_DELETING: Final = "workflow_deleting"
OWNERSHIP_MISSING: Final = "ownership_missing"
WORKFLOW_TERMINATED: Final = "workflow_terminated"
OBSERVED: Final = "observed"
SETTLED: Final = "settled"


class TaskLifecycle(LifecycleChart):
    """Lifecycle of one nagare media engine Task (docs/behaviour.md §3); the engine's rules of
    a chart are `machines.engine.LifecycleChart`'s. Every non-final state handles
    `error.execution` with `report_error`.

    {statechart:md}
    """

    state_phases: ClassVar[Mapping[str, str]] = STATE_PHASES

    # `cast(State, x)` below: `class x(State.Compound)` binds the State the library builds, but
    # type checkers see a class, whose `to` stub refuses the None of a targetless transition.

    class live(State.Compound, name="Live"):
        class active(State.Compound, name="Active"):
            new = State("New", initial=True)
            initializing = State("Initializing")
            job_pending = State("JobPending")
            running = State("Running", enter="record_start_time")

            observed = (
                # A spec beyond what taskfsm processes (docs/security.md) is reported; nothing
                # is selected or made from it until it is fixed.
                new.to(None, cond="input_unusable", on="report_input_unusable")
                | initializing.to(None, cond="input_unusable", on="report_input_unusable")
                | job_pending.to(None, cond="input_unusable", on="report_input_unusable")
                | new.to(initializing, before="record_queued_time")
                | initializing.to(
                    job_pending, before=["select_media_processing_entity", "select_function"]
                )
                # D3: a JobPending Task without its refs goes back instead of forward.
                | job_pending.to(initializing, cond="refs_missing")
                # An MPE whose client is still being set up is waited for quietly: its
                # reconcile wakes the Task. One tried and found unusable (or whose cluster did
                # not answer this pass's Job read) is an error (backoff).
                | job_pending.to(None, cond="mpe_client_pending", on="wait_for_mpe_client")
                | job_pending.to(None, cond="mpe_unavailable", on="report_mpe_unavailable")
                | running.to(None, cond="mpe_client_pending", on="wait_for_mpe_client")
                | running.to(None, cond="mpe_unavailable", on="report_mpe_unavailable")
                # D6: a Job under our name with another UID is adopted, not a crash.
                | running.to(None, cond="job_unrecorded", before="adopt_job")
                # A Job held by spec.suspend (a queue has not admitted it yet): still Running,
                # but Ready=False says that nothing runs.
                | running.to(None, cond="job_suspended", on="note_job_suspended")
                # Pods refused (Pod Security, an admission policy, a quota) or unable to start
                # (an image, a ConfigMap or Secret, a volume): Ready=False says why, until they
                # run or the Task fails (below).
                | running.to(None, cond="job_pods_refused", on="note_job_pods_refused")
                # A Job that was suspended runs again: Ready turns True, with an Event.
                | running.to(None, cond="job_resumed", on="note_job_resumed")
            )
            # Last in every pass: a Task whose Job may still change is looked at again after
            # the resync period even without events (a missed Job event, F4); a Job none of
            # whose pods is ready sooner, since a refusal of its pods, or a pod that cannot
            # start, changes nothing the Job watch sees.
            settled = (
                job_pending.to(None, on="schedule_resync")
                | running.to(None, cond="job_pods_waiting", on="schedule_pod_check")
                | running.to(None, on="schedule_resync")
            )

        # D10: entering either terminal phase stamps endTime. D18: the pass and the reconcile
        # then end, so the outcome is durable before any housekeeping (the transitions below run
        # only in a pass that starts from the persisted terminal phase), and the Task is looked
        # at again at once for it (the watch event of the reconcile's own write wakes nobody).
        class terminated(
            State.Compound,
            name="Terminated",
            enter=["record_end_time", "end_reconcile", "schedule_housekeeping"],
        ):
            succeeded = State("Succeeded")
            failed = State("Failed")

        observed = (
            active.running.to(terminated.succeeded, cond="job_succeeded", on="note_job_succeeded")
            | active.running.to(terminated.failed, cond="job_failed", on="note_job_failed")
            # D18b: a Task UID gets at most one Job, ever. A Job that vanished, or was deleted
            # before it finished, fails the Task (JobLost); it is never made again.
            | active.running.to(terminated.failed, cond="job_vanished", on="note_job_lost")
            | active.running.to(terminated.failed, cond="job_deleted_early", on="note_job_lost")
            # A Job whose pods were refused for the whole --job-pods-refused-timeout never
            # runs: the Task fails (and its Job is deleted like any unfinished one).
            | active.running.to(
                terminated.failed,
                cond="job_pods_refused_for_good",
                on="note_job_pods_refused_for_good",
            )
            | active.job_pending.to(terminated.failed, cond="job_vanished", on="note_job_lost")
            # An object under the Job's name that is not the Task's (another Task's labels, or
            # none) is never adopted or deleted: the Task says so and retries until it is gone.
            | active.job_pending.to(None, cond="job_name_taken", on="report_job_name_taken")
            # A Job whose helper Secret could not be made for the whole
            # --job-pods-refused-timeout fails the Task (and is deleted like any unfinished
            # one): no pod waits for a Secret that is not coming.
            | active.job_pending.to(
                terminated.failed, cond="helper_secret_overdue", on="note_helper_secret_overdue"
            )
            # What a Job is made from must allow it (the Function exists and is one, a remote
            # MPE is allowed) and must build (patches, MediaLocations and their Secrets):
            # otherwise nothing is created, and the Task says why and retries.
            | active.job_pending.to(None, cond="job_unmakeable", on="report_job_unmakeable")
            | active.job_pending.to(
                None, cond="job_inputs_unusable", on="report_job_inputs_unusable"
            )
            # Helper data beyond what a Secret holds, or a Job the API server refuses for its
            # size or metadata, can never be made: the Task fails at once.
            | active.job_pending.to(
                terminated.failed, cond="helper_data_too_large", on="note_helper_data_too_large"
            )
            | active.job_pending.to(
                terminated.failed, cond="job_beyond_limits", on="note_job_beyond_limits"
            )
            # The Job was just made, so none of its pods can be ready: the pass schedules the pod
            # check itself and ends the reconcile (a further pass could only schedule it).
            | active.job_pending.to(
                active.running,
                before="create_job_and_secret",
                on=["schedule_pod_check", "end_reconcile"],
            )
            # Terminal housekeeping, one step per pass, only once the outcome is durable (D18:
            # entering Terminated ends the pass); the next pass comes from the Job's own event
            # (deleted, gone) or the resync.
            | cast(State, terminated).to(
                None, cond=["mpe_client_pending", "job_ref_set"], on="wait_for_mpe_client_quietly"
            )
            | cast(State, terminated).to(
                None, cond=["mpe_unavailable", "job_ref_set"], on="report_mpe_unavailable"
            )
            | cast(State, terminated).to(None, cond="job_still_running", before="delete_job")
            | cast(State, terminated).to(None, cond="job_protected", before="release_job_finalizer")
            # A finished Job is kept until its TTL, but not beyond its MPE: once the MPE is
            # being deleted, the Task deletes it (no client reaches it after the MPE is gone).
            | cast(State, terminated).to(
                None,
                cond=["mpe_deleting", "job_deletable"],
                before="delete_job",
                on="note_job_deleted_with_mpe",
            )
            | cast(State, terminated).to(None, cond="job_ref_stale", before="clear_job_ref")
        )
        # D18b: an outcome the Job already shows is recorded, never overwritten by the
        # Workflow's termination; a Running Task whose Job cannot be read waits for it.
        settled = cast(State, terminated).to(None, cond="job_ref_set", on="schedule_resync")
        workflow_terminated = (
            active.running.to(None, cond="mpe_client_pending", on="wait_for_mpe_client")
            | active.running.to(None, cond="mpe_unavailable", on="report_mpe_unavailable")
            | active.to(
                terminated.succeeded,
                cond="job_succeeded",
                before="adopt_job",
                on="note_job_succeeded",
            )
            | active.to(
                terminated.failed, cond="job_failed", before="adopt_job", on="note_job_failed"
            )
            | active.to(terminated.failed, on="note_workflow_terminated")
        )

    # D9: a pass that only asked for the Task's deletion ends the reconcile in Deleting; the
    # watch event of the Task's own deletionTimestamp starts the next, which finishes it.
    deleting = State("Deleting", enter="end_reconcile")
    finalized = State("Finalized", final=True, enter="note_deleted")

    # A deleting Task whose status never named its MPE (the create's answer and the status
    # write were both lost) records the MPE selection finds again: its Job would be there, and
    # a deletion that waits for that MPE knows where to look next time. (A Task with an unknown
    # phase starts in Deleting and cleans up there without recording it.)
    deletion_requested = cast(State, live).to(
        deleting, cond="mpe_unrecorded", before="record_reselected_mpe"
    ) | cast(State, live).to(deleting)
    finalizer_missing = cast(State, live).to(None, before="add_task_finalizer")
    # Retention (`--finished-ttl`): a finished Task whose Workflow does not exist is deleted
    # once the TTL has passed since endTime; the watch event of its deletionTimestamp brings
    # the deletion path, which cleans up its Job and Secret as on any deletion. Until then it
    # is looked at again when the TTL is due (no error: its outcome is recorded). Without the
    # flag, a missing Workflow is an error of every pass.
    workflow_missing = (
        cast(State, live.terminated).to(
            None,
            cond="finished_ttl_passed",
            before="delete_expired_task",
            on="note_finished_ttl_passed",
        )
        | cast(State, live.terminated).to(
            None, cond="finished_ttl_set", on="schedule_finished_ttl_check"
        )
        | cast(State, live).to(None, on="report_workflow_missing")
    )
    # D9: delete the Task and stop; the next pass sees its deletionTimestamp.
    workflow_deleting = live.to(deleting, before="delete_task")
    ownership_missing = cast(State, live).to(None, before="set_workflow_ownership")
    error_execution = cast(State, live).to(None, on="report_error") | deleting.to(
        None, on="report_error"
    )

    # Deleting finishes within the pass that observes the Task's own deletionTimestamp
    # (eventless transitions, first match wins).
    deleting.to(finalized, cond="task_terminating", unless="task_finalizer_present")
    # A Task whose MPE never reached a cluster (refused by policy, never connected) has no Job
    # anywhere (none recorded, none makeable there): it goes at once, nothing to wait for.
    deleting.to(
        finalized,
        cond=["task_terminating", "mpe_unavailable", "mpe_never_reached"],
        unless="job_ref_set",
        before="remove_task_finalizer",
    )
    # The Job must be cleaned up through its MPE: one whose client is being set up (a
    # restart) is waited for quietly; one found unreachable is retried until it has been
    # unreachable for the cleanup bound ...
    deleting.to(None, cond=["task_terminating", "mpe_client_pending"], on="wait_for_mpe_client")
    deleting.to(
        None,
        cond=["task_terminating", "mpe_unavailable"],
        unless=["mpe_gone", "cleanup_expired"],
        on="report_cleanup_waiting",
    )
    # ... then, or at once when the MPE itself is gone, the Job is left behind and the Task
    # goes (D22: a terminating Task can always be deleted).
    deleting.to(
        finalized,
        cond=["task_terminating", "mpe_unavailable"],
        before="remove_task_finalizer",
        on="note_job_abandoned",
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
        return list(_PHASE_CONFIGURATIONS[phase])
    except KeyError:
        raise UnknownPhaseError(phase, list(PHASE_STATES)) from None


_PHASE_CONFIGURATIONS: Final = {
    phase: tuple(configuration_for(state)) for phase, state in PHASE_STATES.items()
}
"""The configuration of every persisted phase, worked out once (every pass starts in one)."""


def events_for(observation: TaskObservation) -> tuple[str, ...]:
    """Return the events one pass sends, in order (docs/behaviour.md §3.2-§3.5).

    The order is the reconcile's order of checks: deletion first (nothing else runs on a
    terminating Task, D22), then the finalizer, the Workflow (unless the spec could not be
    read, `input_problem`), `observed`, the phase step, and last `settled`, which decides when to
    look again. The driver stops early when a pass ends
    in error or leaves `Live`.
    """
    if observation.deletion_requested:
        return (DELETION_REQUESTED,)
    events: list[str] = []
    if not observation.has_finalizer:
        events.append(FINALIZER_MISSING)
    if observation.input_problem:
        # The spec was cut on reading (docs/security.md): its Workflow is unknown, so nothing
        # is concluded about it; `observed` reports the problem (or follows a Job made before).
        return (*events, OBSERVED, SETTLED)
    if observation.workflow is WorkflowState.MISSING:
        return (*events, WORKFLOW_MISSING)
    if observation.workflow is WorkflowState.DELETING:
        return (*events, WORKFLOW_DELETING)
    if not observation.owned_by_workflow:
        events.append(OWNERSHIP_MISSING)
    if observation.workflow is WorkflowState.TERMINATED:
        events.append(WORKFLOW_TERMINATED)
    events += [OBSERVED, SETTLED]
    return tuple(events)
