"""One reconcile pass through the Workflow lifecycle: observation and model in, outcome out.

Where this sits in the flow: the Workflow reconciler counts the Workflow's Tasks into a
`WorkflowObservation` and calls `run_pass(observation, model, now=...)` once per pass. The
pass engine (`machines.engine`) puts the thread's reused `WorkflowLifecycle` machine in the
configuration of the persisted `status.phase` (no entry action runs for it), sends the events
`events_for` derives, and returns a `PassOutcome`: the phase to persist, the effects
performed in order, the error that ended the pass, the conditions, and `requeue_after`, the
seconds after which the termination wait is due (the timed transition: the reconciler asks its
work queue to come back then, nothing sleeps). Level-triggered like the Task driver
(`machines.task.driver`): the next pass starts again from what is persisted.

Guards and effects resolve on the model (through the engine's `ModelBinding`); verdicts
(`note_*`, `schedule_*`, `report_*`) on `_PassRecord`, the machine's own model: decisions on
the pass's reason, error, Events and when to look again.

Spec: docs/behaviour.md §4.3 with D20 and D23.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Final, TypeAlias

from statemachine import State

from machines.engine import (
    NORMAL,
    ChartSpec,
    PassEngine,
    PassOutcome,
    PassRecord,
    ReconcileOutcome,
)
from machines.workflow.chart import WorkflowLifecycle, configuration_for_phase, events_for
from machines.workflow.conditions import WorkflowReason, compute_workflow_conditions
from machines.workflow.guards import fatal_failures
from machines.workflow.model import EFFECT_NAMES, GUARD_NAMES, WorkflowLifecycleModel
from machines.workflow.observation import WorkflowObservation
from machines.workflow.phases import STATE_PHASES, WARNING_PHASES

VERDICT_NAMES: Final = (
    "note_task_failed",
    "note_completed",
    "note_deleted",
    "note_finished_ttl_passed",
    "schedule_completion_check",
    "schedule_finished_ttl_check",
    "schedule_resync",
    "report_list_error",
    "report_tasks_active",
    "report_error",
)
"""Actions resolved on the pass record rather than the model: they decide, they do no I/O."""

TASKS_ACTIVE_MESSAGE: Final = "not all Tasks have terminated"
"""The reference's error while a deleting Workflow waits for its Tasks (§4.3)."""


class _PassRecord(PassRecord):
    """The Workflow chart's model for one pass: `PassRecord` plus the Workflow verdicts and
    the termination wait."""

    chart = WorkflowLifecycle
    reason: WorkflowReason | None
    observation: WorkflowObservation

    def note_task_failed(self) -> None:
        names = fatal_failures(self.observation)
        listed = ", ".join(names)
        if len(names) == 1:
            text = f"Task {listed} failed and its jobFailurePolicy is FailWorkflow"
        else:
            text = f"Tasks {listed} failed and their jobFailurePolicy is FailWorkflow"
        self._outcome(WorkflowReason.TASK_FAILED, text)

    def note_completed(self) -> None:
        o = self.observation
        self._outcome(
            WorkflowReason.TASKS_COMPLETED,
            f"{o.total} Tasks terminated ({o.succeeded} succeeded, {o.failed} failed) and "
            f"none was added within {o.waiting_seconds:g}s",
        )

    def _outcome(self, reason: WorkflowReason, message: str) -> None:
        # The phase-change Event says why, with the condition's message.
        self.note_outcome(reason, message, f"{reason.value}: {message}")

    def note_deleted(self) -> None:
        self.note_event(
            NORMAL, "Deleted", "no Task is active any more; Workflow finalizer released"
        )

    def schedule_completion_check(self, source: State) -> None:
        # Entering AwaitingCompletion stamps endTime now: the whole wait lies ahead. Staying
        # there: what is left of it. Either way the Workflow is looked at again when it is due.
        o = self.observation
        self.look_again(o.waiting_seconds if source.id == "running" else o.remaining_wait)

    def note_finished_ttl_passed(self) -> None:
        ttl = self.observation.finished_ttl
        self.note_event(
            NORMAL,
            "FinishedTTLPassed",
            f"finished {ttl:g}s ago or more (--finished-ttl): deleting it with its Tasks",
        )

    def schedule_finished_ttl_check(self) -> None:
        # A finished Workflow within its TTL: looked at again when the TTL is due.
        self.look_again(self.observation.finished_ttl_left)

    def schedule_resync(self) -> None:
        if self.observation.resync_seconds is not None:
            self.look_again(self.observation.resync_seconds)

    def report_list_error(self) -> None:
        self.report(f"failed to list Tasks: {self.observation.list_error}", "report_list_error")

    def report_tasks_active(self) -> None:
        self.report(TASKS_ACTIVE_MESSAGE, "report_tasks_active")


def _phase_of(state: str, observation: WorkflowObservation) -> str | None:
    # An unknown phase starts in New; a pass that could not move it leaves it as it was.
    if state == "new" and observation.phase:
        return observation.phase
    return STATE_PHASES.get(state)


WORKFLOW_ENGINE: Final = PassEngine(
    ChartSpec(
        chart=WorkflowLifecycle,
        record=_PassRecord,
        guard_names=GUARD_NAMES,
        effect_names=EFFECT_NAMES,
        configuration=lambda observation: configuration_for_phase(observation.phase),
        events=events_for,
        conditions=compute_workflow_conditions,
        phase_of=_phase_of,
        warning_phases=WARNING_PHASES,
        # The longest path (New → Initializing → Running → AwaitingCompletion → Succeeded with a
        # zero wait) takes five passes.
        max_passes=6,
    )
)
"""The Workflow chart's pass engine (one reused machine per thread)."""

WorkflowPassOutcome: TypeAlias = PassOutcome[WorkflowReason]
"""A Workflow pass's outcome (`machines.engine.PassOutcome` with a `WorkflowReason`)."""

WorkflowReconcileOutcome: TypeAlias = ReconcileOutcome[WorkflowReason]
"""A Workflow reconcile's outcome (`machines.engine.ReconcileOutcome`)."""


def run_pass(
    observation: WorkflowObservation, model: WorkflowLifecycleModel, *, now: datetime
) -> WorkflowPassOutcome:
    """Drive one reconcile pass and report it; never raises (see `machines.engine`).

    An unknown phase starts in New and stays as it was when the pass cannot move it (the
    CRD's enum keeps such values out in practice).
    """
    return WORKFLOW_ENGINE.run(observation, model, now=now)


def reconcile(
    observe: Callable[[], WorkflowObservation],
    model: WorkflowLifecycleModel,
    *,
    now: datetime,
    apply: Callable[[WorkflowPassOutcome], None],
) -> WorkflowReconcileOutcome:
    """Take passes while they move the phase forward; never raises (`PassEngine.reconcile`)."""
    return WORKFLOW_ENGINE.reconcile(observe, model, now=now, apply=apply)
