"""One reconcile pass through the Task lifecycle: observation and model in, outcome out.

Where this sits in the flow: the reconciler reads the cluster into a `TaskObservation` and
calls `run_pass(observation, model, now=...)` once per pass. The driver rebuilds
`TaskLifecycle` in the configuration of the persisted `status.phase` (no entry action runs
for it), sends the events `events_for` derives, and returns a `PassOutcome`: the phase to
persist, the effects performed in order, the error that ended the pass, the conditions.
The reconciler then patches status from the outcome (unless `finalized`) and requeues with
backoff when `error` is set. Level-triggered: the next pass starts again from what is
persisted, so a pass that failed halfway is simply repeated.

Two kinds of names are resolved at runtime. Guards and effects resolve on the model through
`_ModelBinding`, which hands each the observation, records effects, and stops all further
guards once the pass has an error. Verdicts (`note_*`, `report_*`, `record_error`) resolve on
`_PassRecord`, the machine's own model: pure bookkeeping of the pass's reason and error.

Spec: task-controller.md §3.2-§3.4, §3.14 (errors, aggregation) and decisions.md D23.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from statemachine.orderedset import OrderedSet

from machines.catalog import transition_key
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
class PassError:
    """Why a pass ended in error. `action` names the callback that raised or reported it."""

    message: str
    action: str | None = None
    exception: BaseException | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class PassOutcome:
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

    @property
    def error(self) -> PassError | None:
        """The first error, or None for a successful pass."""
        return self.errors[0] if self.errors else None

    @property
    def message(self) -> str:
        """`status.message`: the error text, `[a, b]` for several (§3.14), `""` on success."""
        if len(self.errors) > 1:
            return "[" + ", ".join(e.message for e in self.errors) + "]"
        return self.errors[0].message if self.errors else ""

    @property
    def finalized(self) -> bool:
        """The Task's finalizer is gone: persist nothing more, the Task is going."""
        return self.state == "finalized"


class _PassRecord:
    """The statechart's model for one pass: its configuration and the verdict callbacks."""

    def __init__(self, configuration: list[str], observation: TaskObservation) -> None:
        self.state: Any = OrderedSet(configuration)
        self.observation = observation
        self.effects: list[str] = []
        self.errors: list[PassError] = []
        self.reason: TerminalReason | None = None
        self.reason_message = ""
        self.taken: list[str] = []
        self.running_callback: str | None = None
        self.failed = False
        """Set as soon as a callback raises, before error.execution is even processed."""

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

    def record_error(self, error: BaseException) -> None:
        # error.execution: an effect or guard raised. Nothing may raise here, or the library
        # would drop the error with only a log line.
        message = str(error) or type(error).__name__
        self.errors.append(PassError(message, action=self.running_callback, exception=error))
        self.running_callback = None

    def after_transition(self, transition: Any) -> None:
        self.taken.append(transition_key(transition))


class _ModelBinding:
    """Listener that resolves guards and effects on the model, with the observation bound.

    The class gets one method per name of `TaskLifecycleModel` (below), so the library
    validates the chart's names against the protocol when it builds the machine.
    """

    def __init__(
        self, model: TaskLifecycleModel, observation: TaskObservation, record: _PassRecord
    ) -> None:
        self._model = model
        self._observation = observation
        self._record = record

    def _guard(self, name: str) -> bool:
        record = self._record
        if record.failed or record.errors:
            # The pass already failed: take no further transition. A raising guard counts
            # as False for the library, which would go on to the next candidate transition;
            # this stops that. Error handlers have no guards, so the error is still recorded.
            return False
        try:
            return bool(getattr(self._model, name)(self._observation))
        except Exception:
            record.running_callback, record.failed = name, True
            raise

    def _effect(self, name: str) -> None:
        record = self._record
        record.running_callback = name
        try:
            getattr(self._model, name)(self._observation)
        except Exception:
            record.failed = True
            raise
        record.running_callback = None
        record.effects.append(name)


def _bind(name: str, kind: Callable[[_ModelBinding, str], Any]) -> Callable[[_ModelBinding], Any]:
    def callback(self: _ModelBinding) -> Any:
        return kind(self, name)

    callback.__name__ = name
    return callback


for _name in GUARD_NAMES:
    setattr(_ModelBinding, _name, _bind(_name, _ModelBinding._guard))
for _name in EFFECT_NAMES:
    setattr(_ModelBinding, _name, _bind(_name, _ModelBinding._effect))


@functools.cache
def _missing_callbacks(model_type: type) -> tuple[str, ...]:
    return tuple(
        name for name in GUARD_NAMES + EFFECT_NAMES if not callable(getattr(model_type, name, None))
    )


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
    missing = _missing_callbacks(type(model))
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

