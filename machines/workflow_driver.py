"""One reconcile pass through the Workflow lifecycle: observation and model in, outcome out.

Where this sits in the flow: the Workflow reconciler counts the Workflow's Tasks into a
`WorkflowObservation` and calls `run_pass(observation, model, now=...)` once per pass. The
driver rebuilds `WorkflowLifecycle` in the configuration of the persisted `status.phase` (no
entry action runs for it), sends the events `events_for` derives, and returns a
`WorkflowPassOutcome`: the phase to persist, the effects performed in order, the error that
ended the pass, the conditions, and `requeue_after`, the seconds after which the termination
wait is due (the timed transition: the reconciler asks its work queue to come back then,
nothing sleeps). Level-triggered like the Task driver (`machines.driver`): the next pass
starts again from what is persisted.

Guards and effects resolve on the model through `_ModelBinding`; verdicts
(`note_*`, `schedule_completion_check`, `report_*`, `record_error`) on `_PassRecord`, the
machine's own model: bookkeeping of the pass's reason, error and wait.

Spec: task-controller.md §4.3 with decisions.md D20 and D23.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from machines.binding import OutcomeErrors, PassError, PassRecord, binding_class, missing_callbacks
from machines.conditions import Condition
from machines.workflow import (
    PHASE_STATES,
    STATE_PHASES,
    WorkflowLifecycle,
    configuration_for_phase,
    events_for,
)
from machines.workflow_conditions import WorkflowReason, compute_workflow_conditions
from machines.workflow_model import EFFECT_NAMES, GUARD_NAMES, WorkflowLifecycleModel
from machines.workflow_observation import WorkflowObservation

VERDICT_NAMES: Final = (
    "note_task_failed",
    "note_completed",
    "schedule_completion_check",
    "report_list_error",
    "report_tasks_active",
    "record_error",
)
"""Actions resolved on the pass record rather than the model: they decide, they do no I/O."""

TASKS_ACTIVE_MESSAGE: Final = "not all Tasks have terminated"
"""The reference's error while a deleting Workflow waits for its Tasks (§4.3)."""


@dataclass(frozen=True, slots=True)
class WorkflowPassOutcome(OutcomeErrors):
    """What one pass decided and did.

    Attributes:
        phase: `status.phase` to persist (the persisted one when the pass did not move it).
        state: the state id the pass ended in (`"awaiting_completion"`, `"deleting"`,
            `"finalized"`...).
        effects: model effects performed, in order; a raising one is not listed.
        errors: what ended the pass in error, in order (usually one).
        reason: set when this pass entered Succeeded/Failed.
        reason_message: the human text going with `reason` (the condition's message).
        conditions: `status.conditions` to persist (§4.3).
        transitions: keys (`machines.catalog`) of the transitions taken, in order.
        requeue_after: seconds after which the Workflow must be looked at again even if
            nothing happens (the termination wait), None when only events matter.
    """

    phase: str
    state: str
    effects: tuple[str, ...] = ()
    errors: tuple[PassError, ...] = ()
    reason: WorkflowReason | None = None
    reason_message: str = ""
    conditions: tuple[Condition, ...] = ()
    transitions: tuple[str, ...] = ()
    requeue_after: float | None = None


class _PassRecord(PassRecord):
    """The Workflow chart's model for one pass: `PassRecord` plus the Workflow verdicts and
    the termination wait."""

    chart = WorkflowLifecycle
    reason: WorkflowReason | None

    def __init__(self, configuration: list[str], observation: WorkflowObservation) -> None:
        super().__init__(configuration, observation)
        self.requeue_after: float | None = None

    def note_task_failed(self) -> None:
        names = self.observation.fatal_failures
        listed = ", ".join(names)
        if len(names) == 1:
            text = f"Task {listed} failed and its jobFailurePolicy is FailWorkflow"
        else:
            text = f"Tasks {listed} failed and their jobFailurePolicy is FailWorkflow"
        self.reason, self.reason_message = WorkflowReason.TASK_FAILED, text
        self.requeue_after = None

    def note_completed(self) -> None:
        o = self.observation
        self.reason = WorkflowReason.TASKS_COMPLETED
        self.reason_message = (
            f"{o.total} Tasks terminated ({o.succeeded} succeeded, {o.failed} failed) and "
            f"none was added within {o.waiting_seconds:g}s"
        )
        self.requeue_after = None

    def schedule_completion_check(self, source: Any) -> None:
        # Entering AwaitingCompletion stamps endTime now: the whole wait lies ahead. Staying
        # there: what is left of it. Either way the Workflow is looked at again when it is due.
        o = self.observation
        wait = o.waiting_seconds if source.id == "running" else o.remaining_wait
        self.requeue_after = wait

    def report_list_error(self) -> None:
        self.errors.append(
            PassError(
                f"failed to list Tasks: {self.observation.list_error}", action="report_list_error"
            )
        )

    def report_tasks_active(self) -> None:
        self.errors.append(PassError(TASKS_ACTIVE_MESSAGE, action="report_tasks_active"))


_ModelBinding = binding_class("_ModelBinding", GUARD_NAMES, EFFECT_NAMES)
"""Guards and effects of `WorkflowLifecycleModel`, resolved on the runtime's model."""


def build_machine(
    observation: WorkflowObservation, model: WorkflowLifecycleModel
) -> tuple[WorkflowLifecycle, _PassRecord]:
    """Build the machine in the configuration of `observation.phase`, without entering it.

    An unknown phase starts in New (`machines.workflow.configuration_for_phase`).
    """
    configuration = configuration_for_phase(observation.phase)
    record = _PassRecord(configuration, observation)
    machine = WorkflowLifecycle(
        model=record, listeners=[_ModelBinding(model, observation, record)]
    )
    return machine, record


def run_pass(
    observation: WorkflowObservation, model: WorkflowLifecycleModel, *, now: datetime
) -> WorkflowPassOutcome:
    """Drive one reconcile pass and report it; never raises.

    Args:
        observation: what the reconciler read for this pass.
        model: guards and effects (`WorkflowLifecycleModel`); effects may raise.
        now: the time stamped on conditions that change.

    Returns:
        The `WorkflowPassOutcome`. An effect that raised, a blocker the chart reports (Tasks
        not listed, Tasks still active while deleting) or a model lacking a callback come
        back as `errors`, with the phase where the pass stopped.
    """
    missing = missing_callbacks(type(model), GUARD_NAMES + EFFECT_NAMES)
    if missing:
        return _stopped(observation, now, f"model {type(model).__name__} lacks {', '.join(missing)}")
    try:
        machine, record = build_machine(observation, model)
    except Exception as err:  # D23: nothing about one Workflow may stop the controller
        return _stopped(observation, now, f"internal error: {err}", err)
    try:
        for event in events_for(observation):
            machine.send(event)
            if record.failed or record.errors or "finalized" in machine.configuration_values:
                break
    except Exception as err:  # D23: a library or programming error must not stop the controller
        record.errors.append(
            PassError(f"internal error: {err}", action=record.running_callback, exception=err)
        )

    state = next(s.id for s in machine.configuration if s.is_atomic)
    phase = STATE_PHASES.get(state, observation.phase)
    if state == "new" and observation.phase:
        phase = observation.phase  # an unknown phase the pass could not move stays as it was
    conditions = compute_workflow_conditions(
        phase,
        failed_pass=bool(record.errors),
        existing=observation.conditions,
        now=now,
        reason=record.reason,
        message=record.reason_message,
    )
    return WorkflowPassOutcome(
        phase=phase,
        state=state,
        effects=tuple(record.effects),
        errors=tuple(record.errors),
        reason=record.reason,
        reason_message=record.reason_message,
        conditions=conditions,
        transitions=tuple(record.taken),
        requeue_after=None if record.errors else record.requeue_after,
    )


def _stopped(
    observation: WorkflowObservation,
    now: datetime,
    message: str,
    exc: BaseException | None = None,
) -> WorkflowPassOutcome:
    """An outcome for a pass that could not start: nothing done, phase left as persisted."""
    phase = observation.phase
    conditions = compute_workflow_conditions(
        phase, failed_pass=True, existing=observation.conditions, now=now
    )
    return WorkflowPassOutcome(
        phase=phase,
        state=PHASE_STATES.get(phase, ""),
        errors=(PassError(message, exception=exc),),
        conditions=conditions,
    )
