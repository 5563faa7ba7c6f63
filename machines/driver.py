"""One reconcile pass through the Task lifecycle: observation and model in, outcome out.

Where this sits in the flow: the reconciler reads the cluster into a `TaskObservation` and
calls `run_pass(observation, model, now=...)` once per pass. The driver rebuilds
`TaskLifecycle` in the configuration of the persisted `status.phase` (no entry action runs
for it), sends the events `events_for` derives, and returns a `PassOutcome`: the phase to
persist, the effects performed in order, the error that ended the pass, the conditions.
The reconciler then patches status from the outcome (unless `finalized`) and requeues with
backoff when `error` is set. Level-triggered: the next pass starts again from what is
persisted, so a pass that failed halfway is simply repeated.

Two kinds of names are resolved at runtime (`machines.binding`). Guards and effects resolve on
the model through `_ModelBinding`, which hands each the observation, records effects, and stops
all further guards once the pass has an error. Verdicts (`note_*`, `report_*`, `record_error`)
resolve on `_PassRecord`, the machine's own model: pure bookkeeping of the pass's reason and
error.

Spec: task-controller.md §3.2-§3.4, §3.14 (errors, aggregation) and decisions.md D23.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final

from machines.binding import OutcomeErrors, PassError, PassRecord, binding_class, missing_callbacks
from machines.conditions import Condition, TerminalReason, compute_conditions
from machines.model import EFFECT_NAMES, GUARD_NAMES, TaskLifecycleModel
from machines.observation import TaskObservation
from machines.task import (
    PHASE_STATES,
    STATE_PHASES,
    TaskLifecycle,
    UnknownPhaseError,
    configuration_for,
    configuration_for_phase,
    events_for,
)

VERDICT_NAMES: Final = (
    "note_job_succeeded",
    "note_job_failed",
    "note_workflow_terminated",
    "note_job_lost",
    "report_workflow_missing",
    "report_mpe_unavailable",
    "record_error",
)
"""Actions resolved on the pass record rather than the model: they decide, they do no I/O."""

MPE_UNAVAILABLE_MESSAGE: Final = "MediaProcessingEntity does not exist or is not ready"


@dataclass(frozen=True, slots=True)
class PassOutcome(OutcomeErrors):
    """What one pass decided and did.

    Attributes:
        phase: `status.phase` to persist; the persisted one when the pass did not move it
            (always a str, never None).
        state: the state id the pass ended in (`"running"`, `"deleting"`, `"finalized"`...),
            `""` when the pass could not start (unknown phase).
        effects: model effects performed, in order; a raising one is not listed.
        errors: what ended the pass in error, in order (usually one).
        reason: set when this pass entered Succeeded/Failed.
        conditions: `status.conditions` to persist (task-controller.md §3.3).
        transitions: keys (`machines.catalog`) of the transitions taken, in order.
    """

    phase: str
    state: str
    effects: tuple[str, ...] = ()
    errors: tuple[PassError, ...] = ()
    reason: TerminalReason | None = None
    conditions: tuple[Condition, ...] = ()
    transitions: tuple[str, ...] = ()


class _PassRecord(PassRecord):
    """The Task chart's model for one pass: `PassRecord` plus the Task verdicts."""

    chart = TaskLifecycle
    reason: TerminalReason | None

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
        self._terminal(
            TerminalReason.JOB_LOST,
            f"Job {self.observation.job_name} disappeared before its outcome was recorded, "
            "again after it had been re-created once",
        )

    def report_workflow_missing(self) -> None:
        name = self.observation.workflow_name
        self.errors.append(
            PassError(
                f'failed to fetch Workflow: workflows.engine.nagare.media "{name}" not found',
                action="report_workflow_missing",
            )
        )

    def report_mpe_unavailable(self) -> None:
        self.errors.append(PassError(MPE_UNAVAILABLE_MESSAGE, action="report_mpe_unavailable"))


_ModelBinding = binding_class("_ModelBinding", GUARD_NAMES, EFFECT_NAMES)
"""Guards and effects of `TaskLifecycleModel`, resolved on the runtime's model."""


def build_machine(
    observation: TaskObservation, model: TaskLifecycleModel
) -> tuple[TaskLifecycle, _PassRecord]:
    """Build the machine in the configuration of `observation.phase`, without entering it.

    A Task being deleted with an unknown phase starts in Deleting, so it can always go (D22).

    Raises:
        UnknownPhaseError: for an unknown phase on a Task that is not being deleted.
    """
    if observation.phase_known:
        configuration = configuration_for_phase(observation.phase)
    elif observation.deletion_requested:
        configuration = configuration_for("deleting")
    else:
        raise UnknownPhaseError(observation.phase)
    record = _PassRecord(configuration, observation)
    # The configuration is on the record before the machine exists, so the engine finds a
    # current state and runs no initial transition or entry action.
    machine = TaskLifecycle(model=record, listeners=[_ModelBinding(model, observation, record)])
    return machine, record


def run_pass(
    observation: TaskObservation, model: TaskLifecycleModel, *, now: datetime
) -> PassOutcome:
    """Drive one reconcile pass and report it; never raises.

    Args:
        observation: what the reconciler read for this pass.
        model: guards and effects (`TaskLifecycleModel`); effects may raise.
        now: the time stamped on conditions that change.

    Returns:
        The `PassOutcome`. An effect that raised, a blocker the chart reports (Workflow
        missing, MPE not ready), an unknown phase or a model lacking a callback all come
        back as `errors`, with the phase where the pass stopped.
    """
    missing = missing_callbacks(type(model), GUARD_NAMES + EFFECT_NAMES)
    if missing:
        lacking = f"model {type(model).__name__} lacks {', '.join(missing)}"
        return _stopped(observation, now, lacking)
    try:
        machine, record = build_machine(observation, model)
    except UnknownPhaseError as err:
        return _stopped(observation, now, str(err), err)
    try:
        for event in events_for(observation):
            machine.send(event)
            if record.failed or record.errors or "live" not in machine.configuration_values:
                break
    except Exception as err:  # D23: a library or programming error must not stop the controller
        record.errors.append(
            PassError(f"internal error: {err}", action=record.running_callback, exception=err)
        )

    state = next(s.id for s in machine.configuration if s.is_atomic)
    phase = STATE_PHASES.get(state, observation.phase)
    conditions = compute_conditions(
        phase,
        failed_pass=bool(record.errors),
        existing=observation.conditions,
        now=now,
        reason=record.reason,
        message=record.reason_message,
    )
    return PassOutcome(
        phase=phase,
        state=state,
        effects=tuple(record.effects),
        errors=tuple(record.errors),
        reason=record.reason,
        conditions=conditions,
        transitions=tuple(record.taken),
    )


def _stopped(
    observation: TaskObservation, now: datetime, message: str, exc: BaseException | None = None
) -> PassOutcome:
    """An outcome for a pass that could not start: nothing done, phase left as persisted."""
    phase = observation.phase
    conditions = compute_conditions(
        phase, failed_pass=True, existing=observation.conditions, now=now
    )
    state = PHASE_STATES.get(phase, "")
    return PassOutcome(
        phase=phase, state=state, errors=(PassError(message, exception=exc),), conditions=conditions
    )

