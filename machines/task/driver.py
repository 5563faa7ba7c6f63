"""The Task lifecycle's verdicts and its pass engine: observation and model in, outcome out.

Where this sits in the flow: the reconciler reads the cluster and condenses it into a
`TaskObservation`; `TASK_ENGINE.reconcile` takes passes while they move the phase forward (one
pass: `run_pass(observation, model, now=...)`). The pass engine (`machines.engine`) puts the
thread's reused `TaskLifecycle` machine in the configuration of the persisted `status.phase`
(no entry action runs for it), sends the events `events_for` derives, and returns a
`PassOutcome`: the phase to persist, the effects performed in order, the errors, the
conditions, the Events, and what the chart decided about the rest of the reconcile
(`waiting`, `end_reconcile`, `requeue_after`, `wake`). Level-triggered: the next pass starts
again from what is persisted, so a pass that failed halfway is simply repeated.

Guards and effects resolve on the runtime's model; verdicts (`note_*`, `report_*`, `wait_*`,
`schedule_*`, `end_reconcile`) on `_PassRecord`, the machine's own model: pure decisions on the
pass's reason, error, wait, Events and requeue.

Spec: docs/behaviour.md §3.14 (errors and status messages) and D23 (§6).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Final, TypeAlias

from statemachine import StateChart
from statemachine.orderedset import OrderedSet

from machines.engine import (
    NORMAL,
    WARNING,
    ChartSpec,
    PassEngine,
    PassError,
    PassOutcome,
    PassRecord,
    ReconcileOutcome,
    UnknownPhaseError,
)
from machines.task.chart import (
    TaskLifecycle,
    configuration_for,
    configuration_for_phase,
    events_for,
)
from machines.task.conditions import (
    JOB_PODS_REFUSED,
    JOB_SUSPENDED,
    ReadyReason,
    TerminalReason,
    compute_conditions,
)
from machines.task.model import EFFECT_NAMES, GUARD_NAMES, TaskLifecycleModel
from machines.task.observation import JobState, TaskObservation
from machines.task.phases import PHASE_STATES, STATE_PHASES, WARNING_PHASES

__all__ = [
    "MPE_UNAVAILABLE_MESSAGE",
    "TASK_ENGINE",
    "VERDICT_NAMES",
    "WAIT_MPE_CLIENT",
    "WAKE_MPE",
    "PassError",
    "PassOutcome",
    "TaskPassOutcome",
    "TaskReconcileOutcome",
    "build_machine",
    "run_pass",
]

VERDICT_NAMES: Final = (
    "note_job_succeeded",
    "note_job_failed",
    "note_workflow_terminated",
    "note_job_lost",
    "report_workflow_missing",
    "report_input_unusable",
    "report_job_name_taken",
    "report_job_unmakeable",
    "report_job_inputs_unusable",
    "note_helper_data_too_large",
    "note_job_beyond_limits",
    "note_helper_secret_overdue",
    "wait_for_mpe_client",
    "wait_for_mpe_client_quietly",
    "report_mpe_unavailable",
    "report_cleanup_waiting",
    "note_job_suspended",
    "note_job_resumed",
    "note_job_pods_refused",
    "note_job_pods_refused_for_good",
    "note_job_deleted_with_mpe",
    "note_job_abandoned",
    "note_deleted",
    "note_finished_ttl_passed",
    "schedule_pod_check",
    "schedule_finished_ttl_check",
    "schedule_resync",
    "schedule_housekeeping",
    "end_reconcile",
    "report_error",
)
"""Actions resolved on the pass record rather than the model: they decide, they do no I/O."""

MPE_UNAVAILABLE_MESSAGE: Final = "MediaProcessingEntity does not exist or is not ready"

POD_CHECK_SECONDS: Final = 10.0
"""How soon a Running Task none of whose Job's pods is ready is looked at again at first (a
refusal of its pods is an Event, a pod that cannot start is a pod status; no watch of the
controller delivers either). Later checks wait as long as the Job has existed: a refusal shows
at once, so a Job whose pods have waited long without one (a full cluster, a queue) is looked
at ever less often, up to the resync period."""

WAIT_MPE_CLIENT: Final = "mpe_client"
"""`PassOutcome.waiting_on` of a Task waiting for its MPE's client to be set up (the MPE's
reconcile announces the end of the wait)."""

WAKE_MPE: Final = "mpe"
"""`PassOutcome.wake` entry: the Task's MPE must be reconciled now (its cluster refused the
Task's read: its `Ready` condition is due for a look)."""


class _PassRecord(PassRecord):
    """The Task chart's model for one pass: `PassRecord` plus the Task verdicts."""

    chart = TaskLifecycle
    observation: TaskObservation

    def note_job_succeeded(self) -> None:
        self.note_outcome(
            TerminalReason.JOB_SUCCEEDED, f"Job {self.observation.job_name} succeeded"
        )

    def note_job_failed(self) -> None:
        obs = self.observation
        why = f": {obs.job_failure}" if obs.job_failure else ""
        self.note_outcome(TerminalReason.JOB_FAILED, f"Job {obs.job_name} failed{why}")

    def note_workflow_terminated(self) -> None:
        self.note_outcome(
            TerminalReason.WORKFLOW_TERMINATED,
            f"Workflow {self.observation.workflow_name} terminated before the Task finished",
        )

    def note_job_lost(self) -> None:
        obs = self.observation
        if obs.job is not JobState.ABSENT:
            found = "it was deleted before it finished"
        elif obs.job_ref_set:
            found = f"status.jobRef names uid {obs.job_ref_uid}, but no Job of that name exists"
        elif obs.job_was_seen:
            found = "it was created, then removed before status.jobRef recorded it"
        else:
            found = "the Task is Running, but status.jobRef was never set and no Job exists"
        message = (
            f"Job {obs.job_name} was lost before its outcome was recorded ({found}); "
            "a Task runs at most one Job: create a new Task to run it again"
        )
        # The phase-change Event says what was found: a lost Job is news to the user.
        reason = TerminalReason.JOB_LOST
        self.note_outcome(reason, message, f"{reason.value} ({message})")

    def report_workflow_missing(self) -> None:
        name = self.observation.workflow_name
        self.report(
            f'failed to fetch Workflow: workflows.engine.nagare.media "{name}" not found',
            "report_workflow_missing",
        )

    def report_input_unusable(self) -> None:
        self.report(
            f"Task spec cannot be processed: {self.observation.input_problem}",
            "report_input_unusable",
        )

    def report_job_name_taken(self) -> None:
        self.report(
            f"Job {self.observation.job_name} cannot be created: an object of that name exists "
            "in the MediaProcessingEntity's namespace and does not belong to this Task "
            "(taskfsm neither adopts nor deletes it)",
            "report_job_name_taken",
        )

    def report_job_unmakeable(self) -> None:
        self.report(self.observation.job_unmakeable, "report_job_unmakeable")

    def report_job_inputs_unusable(self) -> None:
        self.report(self.observation.job_inputs_problem, "report_job_inputs_unusable")

    def note_helper_data_too_large(self) -> None:
        self.note_outcome(
            TerminalReason.HELPER_DATA_TOO_LARGE, self.observation.helper_data_too_large
        )

    def note_job_beyond_limits(self) -> None:
        self.note_outcome(TerminalReason.JOB_BEYOND_LIMITS, self.observation.job_beyond_limits)

    def note_helper_secret_overdue(self) -> None:
        obs = self.observation
        self.note_outcome(
            TerminalReason.HELPER_DATA_NOT_CREATED,
            f"the helper-data Secret of Job {obs.job_name} could not be created until "
            "--job-pods-refused-timeout ran out (the Job is deleted, so none of its pods waits "
            "for it); the last error is in the Task's ReconcileError Events",
        )

    def _mpe_message(self) -> str:
        obs = self.observation
        problem = obs.job_unreadable or obs.mpe_problem
        return f"{MPE_UNAVAILABLE_MESSAGE}: {problem}" if problem else MPE_UNAVAILABLE_MESSAGE

    def _mpe_refused(self) -> None:
        if self.observation.mpe_refused:
            # Refused (a revoked token, lost RBAC): the MPE's reconcile says so on its Ready
            # condition now rather than at its next resync.
            self.wake_related(WAKE_MPE)

    def wait_for_mpe_client(self) -> None:
        self.wait(
            f"{MPE_UNAVAILABLE_MESSAGE}: waiting for its client to be set up", on=WAIT_MPE_CLIENT
        )

    def wait_for_mpe_client_quietly(self) -> None:
        """A finished Task's housekeeping waits for its MPE's client to be set up (after a
        restart, every finished Task does for a moment): quietly, and without touching the
        recorded outcome's `status.message`, so a restart writes nothing to finished Tasks."""
        self.wait(
            f"{MPE_UNAVAILABLE_MESSAGE}: waiting for its client to be set up",
            on=WAIT_MPE_CLIENT,
            quiet=True,
        )

    def report_mpe_unavailable(self) -> None:
        self._mpe_refused()
        self.report(self._mpe_message(), "report_mpe_unavailable", outside=True)

    def report_cleanup_waiting(self) -> None:
        self._mpe_refused()
        left = self.observation.cleanup_wait_left
        self.report(
            f"{self._mpe_message()}; the Task's deletion waits {left:.0f}s more for it to clean "
            "up the Job, then leaves the Job behind",
            "report_cleanup_waiting",
            outside=True,
        )

    def note_job_suspended(self) -> None:
        obs = self.observation
        message = (
            f"Job {obs.job_name} is suspended (spec.suspend): its pods start when it is resumed"
        )
        self.detail = ReadyReason(JOB_SUSPENDED, message)
        if obs.ready_reason != JOB_SUSPENDED:
            self.note_event(NORMAL, JOB_SUSPENDED, message)

    def note_job_resumed(self) -> None:
        self.note_event(NORMAL, "JobResumed", f"Job {self.observation.job_name} was resumed")

    def note_job_pods_refused(self) -> None:
        obs = self.observation
        message = f"the pods of Job {obs.job_name} do not run: {obs.job_pods_refused}"
        self.detail = ReadyReason(JOB_PODS_REFUSED, message)
        if obs.ready_reason != JOB_PODS_REFUSED:
            self.note_event(WARNING, JOB_PODS_REFUSED, message)

    def note_job_pods_refused_for_good(self) -> None:
        obs = self.observation
        self.note_outcome(
            TerminalReason.JOB_PODS_REFUSED,
            f"the pods of Job {obs.job_name} did not run until --job-pods-refused-timeout ran "
            f"out: {obs.job_pods_refused}",
        )

    def note_job_deleted_with_mpe(self) -> None:
        self.note_event(
            NORMAL,
            "JobDeleted",
            "its MediaProcessingEntity is being deleted; deleted the finished Task's Job "
            f"{self.observation.job_name} (the outcome stays in status)",
        )

    def note_job_abandoned(self) -> None:
        obs = self.observation
        self._mpe_refused()
        if obs.mpe_gone and obs.outcome_recorded:
            # A finished Task deletes its Job while its MPE is being deleted, unless the MPE's
            # cluster could not be reached (then the MPE has a Warning Event OrphansNotChecked).
            note = (
                f"MediaProcessingEntity is deleted; Job {obs.job_name} went with "
                "it or, if its cluster could not be reached, is left behind"
            )
        elif obs.mpe_gone:
            note = (
                f"MediaProcessingEntity is deleted; Job {obs.job_name} "
                "(if it exists) is left behind"
            )
        else:
            note = (
                f"MediaProcessingEntity is not reachable; Job {obs.job_name} "
                "(if it exists) is left behind"
            )
        self.note_event(WARNING, "JobAbandoned", note)

    def note_deleted(self) -> None:
        self.note_event(NORMAL, "Deleted", "Task finalizer released; the Task is deleted")

    def note_finished_ttl_passed(self) -> None:
        ttl = self.observation.finished_ttl
        self.note_event(
            NORMAL,
            "FinishedTTLPassed",
            f"finished {ttl:g}s ago or more and its Workflow does not exist (--finished-ttl): "
            "deleting it",
        )

    def schedule_finished_ttl_check(self) -> None:
        # A finished Task without its Workflow, within its TTL: looked at again when it is due.
        self.look_again(self.observation.finished_ttl_left)

    def schedule_resync(self) -> None:
        self.look_again(self.observation.resync_seconds)

    def schedule_pod_check(self) -> None:
        o = self.observation
        # Refused pods are looked at every POD_CHECK_SECONDS (the refusal may end, or change);
        # pods that merely wait, as often as the Job's age says (see POD_CHECK_SECONDS).
        pace = (
            POD_CHECK_SECONDS if o.job_pods_refused else max(POD_CHECK_SECONDS, o.job_age_seconds)
        )
        self.look_again(min(pace, o.resync_seconds))

    def schedule_housekeeping(self) -> None:
        """The outcome was just entered: once it is written, the reconcile that wrote it looks
        again at once (its own write's watch event wakes nobody) for the housekeeping."""
        self.look_again(0.0)


def _configuration(observation: TaskObservation) -> list[str]:
    """The configuration `observation.phase` stands for; a Task being deleted with an unknown
    phase starts in Deleting, so it can always go (D22)."""
    if observation.phase_known:
        return configuration_for_phase(observation.phase)
    if observation.deletion_requested:
        return configuration_for("deleting")
    raise UnknownPhaseError(observation.phase, list(PHASE_STATES))


def _stop(configuration: OrderedSet[Any]) -> bool:
    return "live" not in configuration


TASK_ENGINE: Final = PassEngine(
    ChartSpec(
        chart=TaskLifecycle,
        record=_PassRecord,
        guard_names=GUARD_NAMES,
        effect_names=EFFECT_NAMES,
        configuration=_configuration,
        events=events_for,
        conditions=compute_conditions,
        phase_of=lambda state, _observation: STATE_PHASES.get(state),
        stop=_stop,
        warning_phases=WARNING_PHASES,
        # The longest forward path (New → Initializing → JobPending → Running → terminal) takes
        # five passes; the terminal entry ends the reconcile.
        max_passes=8,
    )
)
"""The Task chart's pass engine (one reused machine per thread)."""


TaskPassOutcome: TypeAlias = PassOutcome[TerminalReason]
"""A Task pass's outcome (`machines.engine.PassOutcome` with a `TerminalReason`)."""

TaskReconcileOutcome: TypeAlias = ReconcileOutcome[TerminalReason]
"""A Task reconcile's outcome (`machines.engine.ReconcileOutcome`)."""


def run_pass(
    observation: TaskObservation, model: TaskLifecycleModel, *, now: datetime
) -> TaskPassOutcome:
    """Drive one reconcile pass and report it; never raises (see `machines.engine`)."""
    return TASK_ENGINE.run(observation, model, now=now)


def build_machine(
    observation: TaskObservation, model: TaskLifecycleModel
) -> tuple[StateChart[PassRecord], PassRecord]:
    """A fresh machine in `observation`'s configuration, without entering it (for tools and
    tests that inspect one). Raises `UnknownPhaseError` for an unknown phase."""
    return TASK_ENGINE.build(observation, model)


def reconcile(
    observe: Callable[[], TaskObservation],
    model: TaskLifecycleModel,
    *,
    now: datetime,
    apply: Callable[[TaskPassOutcome], None],
) -> TaskReconcileOutcome:
    """Take passes while they move the phase forward; never raises (`PassEngine.reconcile`)."""
    return TASK_ENGINE.reconcile(observe, model, now=now, apply=apply)
