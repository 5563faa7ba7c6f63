"""One reconcile pass through the Task lifecycle: observation and model in, outcome out.

Where this sits in the flow: the reconciler reads the cluster into a `TaskObservation` and
calls `run_pass(observation, model, now=...)` once per pass. The pass engine
(`machines.engine`) puts the thread's reused `TaskLifecycle` machine in the configuration of
the persisted `status.phase` (no entry action runs for it), sends the events `events_for`
derives, and returns a `PassOutcome`: the phase to persist, the effects performed in order,
the errors, the conditions, and what the chart decided about the rest of the reconcile
(`waiting`, `end_reconcile`, `requeue_after`). The reconciler then patches status from the
outcome (unless `finalized`). Level-triggered: the next pass starts again from what is
persisted, so a pass that failed halfway is simply repeated.

Guards and effects resolve on the runtime's model; verdicts (`note_*`, `report_*`,
`schedule_resync`, `end_reconcile`, `record_error`) on `_PassRecord`, the machine's own
model: pure bookkeeping of the pass's reason, error, wait and requeue.

Spec: docs/behaviour.md §3.14 (errors and status messages) and D23 (§6).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final, TypeAlias

from statemachine import StateChart
from statemachine.orderedset import OrderedSet

from machines.engine import (
    ChartSpec,
    PassEngine,
    PassError,
    PassOutcome,
    PassRecord,
    UnknownPhaseError,
)
from machines.task.chart import (
    PHASE_STATES,
    STATE_PHASES,
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

__all__ = [
    "MPE_UNAVAILABLE_MESSAGE",
    "TASK_ENGINE",
    "VERDICT_NAMES",
    "PassError",
    "PassOutcome",
    "TaskPassOutcome",
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
    "report_mpe_pending",
    "await_mpe_client",
    "report_mpe_unavailable",
    "report_cleanup_waiting",
    "note_job_suspended",
    "note_job_pods_refused",
    "note_job_pods_refused_for_good",
    "schedule_pod_check",
    "schedule_resync",
    "end_reconcile",
    "record_error",
)
"""Actions resolved on the pass record rather than the model: they decide, they do no I/O."""

MPE_UNAVAILABLE_MESSAGE: Final = "MediaProcessingEntity does not exist or is not ready"

POD_CHECK_SECONDS: Final = 10.0
"""How soon a Running Task whose Job has no pods is looked at again (a refusal of its pods is an
Event, which no watch of the controller delivers)."""


class _PassRecord(PassRecord):
    """The Task chart's model for one pass: `PassRecord` plus the Task verdicts."""

    chart = TaskLifecycle
    observation: TaskObservation

    def _terminal(self, reason: TerminalReason, message: str) -> None:
        self.reason, self.reason_message = reason, message

    def note_job_succeeded(self) -> None:
        self._terminal(TerminalReason.JOB_SUCCEEDED, f"Job {self.observation.job_name} succeeded")

    def note_job_failed(self) -> None:
        self._terminal(TerminalReason.JOB_FAILED, f"Job {self.observation.job_name} failed")

    def note_workflow_terminated(self) -> None:
        self._terminal(
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
        self._terminal(
            TerminalReason.JOB_LOST,
            f"Job {obs.job_name} was lost before its outcome was recorded ({found}); "
            "a Task runs at most one Job: create a new Task to run it again",
        )

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

    def _mpe_message(self) -> str:
        problem = self.observation.mpe_problem
        return f"{MPE_UNAVAILABLE_MESSAGE}: {problem}" if problem else MPE_UNAVAILABLE_MESSAGE

    def report_mpe_pending(self) -> None:
        self.wait(f"{MPE_UNAVAILABLE_MESSAGE}: waiting for its client to be set up")

    def await_mpe_client(self) -> None:
        """A finished Task's housekeeping waits for its MPE's client to be set up (after a
        restart, every finished Task does for a moment): quietly, and without touching the
        recorded outcome's `status.message`, so a restart writes nothing to finished Tasks."""
        self.wait(f"{MPE_UNAVAILABLE_MESSAGE}: waiting for its client to be set up", quiet=True)

    def report_mpe_unavailable(self) -> None:
        self.report(self._mpe_message(), "report_mpe_unavailable", outside=True)

    def report_cleanup_waiting(self) -> None:
        left = self.observation.cleanup_wait_left
        self.report(
            f"{self._mpe_message()}; the Task's deletion waits {left:.0f}s more for it to clean "
            "up the Job, then leaves the Job behind",
            "report_cleanup_waiting",
            outside=True,
        )

    def note_job_suspended(self) -> None:
        self.detail = ReadyReason(
            JOB_SUSPENDED,
            f"Job {self.observation.job_name} is suspended (spec.suspend): its pods start when "
            "it is resumed",
        )

    def note_job_pods_refused(self) -> None:
        obs = self.observation
        self.detail = ReadyReason(
            JOB_PODS_REFUSED,
            f"the pods of Job {obs.job_name} are refused: {obs.job_pods_refused}",
        )

    def note_job_pods_refused_for_good(self) -> None:
        obs = self.observation
        self._terminal(
            TerminalReason.JOB_PODS_REFUSED,
            f"the pods of Job {obs.job_name} were refused until --job-pods-refused-timeout ran "
            f"out: {obs.job_pods_refused}",
        )

    def schedule_resync(self) -> None:
        self.requeue_after = self.observation.resync_seconds

    def schedule_pod_check(self) -> None:
        self.requeue_after = min(POD_CHECK_SECONDS, self.observation.resync_seconds)


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
        phase_of=lambda state, _observation: STATE_PHASES.get(state),
        conditions=compute_conditions,
        stop=_stop,
    )
)
"""The Task chart's pass engine (one reused machine per thread)."""


TaskPassOutcome: TypeAlias = PassOutcome[TerminalReason]
"""A Task pass's outcome (`machines.engine.PassOutcome` with a `TerminalReason`)."""


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
