"""One reconcile pass through a lifecycle statechart, for any chart: the pass engine.

Where this sits in the flow: a reconciler reads the cluster, condenses it into an observation
and asks the engine of its chart (`machines.task.driver.TASK_ENGINE`,
`machines.workflow.driver.WORKFLOW_ENGINE`, `machines.mpe.driver.MPE_ENGINE`) to `reconcile`
it. One **pass** (`run`) puts the machine in the configuration of the persisted `status.phase`
(no entry action runs for it), sends the events the chart derives from the observation, and
returns a `PassOutcome`: the phase to persist, the effects performed, the errors, the
conditions, the Events to write, and what the chart decided about the rest of the reconcile
(wait quietly, end the reconcile, look again after some seconds). A **reconcile** (`reconcile`)
takes passes while they move the phase forward: after each pass the runtime applies the
outcome to its working copy and observes again, and the engine stops where the chart ends the
reconcile, waits, fails, finishes, stops moving, or after `ChartSpec.max_passes`; it returns a
`ReconcileOutcome`, which adds the path of phases taken and the phase-change Event. Neither
raises (D23 in docs/behaviour.md §6): a raising effect, a blocker the chart reports, an unknown
phase or a programming error all come back as `errors`.

Two objects are attached to the machine:

* a **pass record** (`PassRecord` subclass), the chart's own model: it holds the configuration
  the pass starts from and collects what the pass decided. Verdict actions (`note_*`: a reason
  or an Event; `report_*`: an error; `wait_*`: a quiet wait; `schedule_*`: when to look again;
  `end_reconcile`) are its methods: they decide, they do no I/O;
* a **model binding** (`binding_class`), a listener with one method per guard and effect name
  that calls the runtime's model with the pass's observation. A real method per name lets the
  library check every name of the chart when the machine is built.

Both stop a pass at its first error or wait: after a callback raised, or a verdict reported an
error or decided to wait, guards answer False so no further guarded transition is taken (a
raising guard alone would count as False for the library, which would then try the next
candidate transition). A pass also sends no further event once a verdict ended the reconcile
(`end_reconcile`), or once the chart's `stop` says it is over.

**One machine per thread, reused.** Building a `StateChart` registers every callback of the
chart (about a millisecond); a pass itself costs a fraction of that. So each thread keeps one
machine per chart and starts every pass by resetting its record and binding and setting the
configuration from the persisted phase; a machine whose pass ended in an internal error, or in
a top-level final state (after which a statechart accepts no more events), is dropped and built
again. See docs/benchmarks.md for the measured difference.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Generic, Protocol, TypeVar

from statemachine import StateChart
from statemachine.orderedset import OrderedSet
from statemachine.transition import Transition

from machines.chart_data import transition_key
from machines.conditions import Condition, bounded_message
from machines.transition_index import IndexedEngine

ERROR_EVENT = "error.execution"

NORMAL: Final = "Normal"
WARNING: Final = "Warning"
"""The two Kubernetes Event types."""


@dataclass(frozen=True, slots=True)
class EventNote:
    """An Event the chart asks the runtime to write on the object (`type` is `NORMAL` or
    `WARNING`, `reason` a CamelCase word, `note` the text; `phase_change`: the Event of a
    reconcile's phase path, which a runtime may leave out when it is `NORMAL`)."""

    type: str
    reason: str
    note: str
    phase_change: bool = False


@dataclass(frozen=True, slots=True)
class PassError:
    """Why a pass ended in error. `action` names the callback that raised or reported it.

    `outside` is set by a verdict that blames something outside the object (its cluster does
    not answer): the runtime retries such errors with its short backoff cap, like API failures.
    """

    message: str
    action: str | None = None
    exception: BaseException | None = field(default=None, compare=False)
    outside: bool = False


R = TypeVar("R")
"""The chart's reason type (an enum written as the terminal condition's reason)."""


@dataclass(frozen=True, slots=True)
class PassOutcome(Generic[R]):
    """What one pass decided and did.

    Attributes:
        phase: `status.phase` to persist; the persisted one when the pass did not move it
            (always a str, never None).
        state: the state id the pass ended in (`"running"`, `"deleting"`, `"finalized"`...),
            `""` when the pass could not start.
        effects: model effects performed, in order; a raising one is not listed.
        errors: what ended the pass in error, in order (usually one).
        reason: set when this pass entered a terminal phase.
        reason_message: what that reason means for this object (the condition's message).
        reason_note: what the phase-change Event says of that reason (`""`: nothing).
        conditions: `status.conditions` to persist.
        events: the Events the chart decided on in this pass, in order.
        detail: a further verdict of the chart on the object's status (the Task chart: why
            `Ready` is False; the MPE chart: its `Ready` verdict), as the conditions saw it.
        transitions: keys (`machines.chart_data`) of the transitions taken, in order.
        waiting: set (the status message) when the chart decided to wait quietly for
            something that announces itself (an MPE client being set up): no error, no
            backoff, no Event.
        waiting_quietly: the wait leaves `status.message` as it is (a finished object's
            housekeeping waiting for a moment, e.g. while clients are set up at start-up).
        waiting_on: what the wait is for (e.g. `"mpe_client"`), so the runtime knows what
            announces its end.
        wake: related objects whose own reconcile is due now (e.g. `"mpe"`: the Task's MPE,
            whose cluster refused the Task's read), for the runtime to queue.
        end_reconcile: the chart decided that the reconcile takes no further step after this
            pass (what it wrote, once durable, triggers the next one).
        requeue_after: seconds after which the object must be looked at again even if
            nothing happens (0: at once); None when only events matter.
    """

    phase: str
    state: str
    effects: tuple[str, ...] = ()
    errors: tuple[PassError, ...] = ()
    reason: R | None = None
    reason_message: str = ""
    reason_note: str = ""
    conditions: tuple[Condition, ...] = ()
    events: tuple[EventNote, ...] = ()
    detail: Any = None
    transitions: tuple[str, ...] = ()
    waiting: str = ""
    waiting_quietly: bool = False
    waiting_on: str = ""
    wake: tuple[str, ...] = ()
    end_reconcile: bool = False
    requeue_after: float | None = None

    @property
    def error(self) -> PassError | None:
        """The first error, or None for a successful pass."""
        return self.errors[0] if self.errors else None

    @property
    def message(self) -> str:
        """`status.message`: the error text, `[a, b]` for several, the waiting reason, or `""`
        (cut to `MAX_MESSAGE_BYTES`)."""
        if len(self.errors) > 1:
            return bounded_message("[" + ", ".join(e.message for e in self.errors) + "]")
        if self.errors:
            return bounded_message(self.errors[0].message)
        return bounded_message(self.waiting)

    @property
    def finalized(self) -> bool:
        """The object's finalizer is gone: persist nothing more, the object is going."""
        return self.state == "finalized"


class PassRecord:
    """The chart's model for one pass: its starting configuration and what the pass decided.

    Subclasses add the verdict callbacks of their chart and set `chart` (for transition keys).
    One record serves every pass of its thread's machine: `begin` resets it.
    """

    chart: type[StateChart[PassRecord]]

    def __init__(self) -> None:
        self.state: Any = OrderedSet()
        self.begin((), None)

    def begin(self, configuration: Sequence[str], observation: Any) -> None:
        """Start a pass in `configuration` (outermost state first) for `observation`."""
        self.state = OrderedSet(configuration)
        self.observation = observation
        self.effects: list[str] = []
        self.errors: list[PassError] = []
        self.reason: Any = None
        self.reason_message = ""
        self.reason_note = ""
        self.events: list[EventNote] = []
        self.taken: list[str] = []
        self.running_callback: str | None = None
        self.failed = False
        """Set as soon as a callback raises, before error.execution is even processed."""
        self.waiting = ""
        self.quiet = False
        self.waiting_on = ""
        self.wake: list[str] = []
        self.ended = False
        self.requeue_after: float | None = None
        self.detail: Any = None
        """A chart's further verdict for its conditions (the Task chart: why Ready is False)."""

    def report_error(self, error: BaseException) -> None:
        """Verdict on `error.execution`: an effect or guard raised; its exception is the pass's
        error."""
        # Nothing may raise here, or the library would drop the error with only a log line.
        message = str(error) or type(error).__name__
        self.errors.append(PassError(message, action=self.running_callback, exception=error))
        self.running_callback = None

    def end_reconcile(self) -> None:
        """Verdict: no further event in this pass and no further pass in this reconcile (what
        the pass wrote, once durable, is what the next one starts from)."""
        self.ended = True

    def wait(self, message: str, *, on: str, quiet: bool = False) -> None:
        """Verdict helper: wait quietly for `on` (what announces the end of the wait), saying
        why in `status.message` (``quiet``: leaving `status.message` as it is)."""
        self.waiting, self.waiting_on, self.quiet = message, on, quiet

    def look_again(self, seconds: float) -> None:
        """Verdict helper: the object is looked at again after `seconds` at the latest (the
        soonest of all such verdicts of the pass wins; 0: at once)."""
        if self.requeue_after is None or seconds < self.requeue_after:
            self.requeue_after = seconds

    def wake_related(self, what: str) -> None:
        """Verdict helper: the reconcile of a related object (`what`) is due now."""
        if what not in self.wake:
            self.wake.append(what)

    def note_event(self, type_: str, reason: str, note: str) -> None:
        """Verdict helper: write an Event on the object once the pass is persisted."""
        self.events.append(EventNote(type_, reason, note))

    def note_outcome(self, reason: Any, message: str, event_text: str = "") -> None:
        """Verdict helper: the pass enters a terminal phase for `reason` (the condition's
        reason, with `message`); `event_text` is what the phase-change Event adds (by default
        the reason's value)."""
        self.reason, self.reason_message = reason, message
        self.reason_note = event_text or str(getattr(reason, "value", reason))

    def report(
        self,
        message: str,
        action: str,
        *,
        outside: bool = False,
        exception: BaseException | None = None,
    ) -> None:
        """Verdict helper: end the pass with an error the chart decided on (no I/O);
        ``outside``: see `PassError`; ``exception``: what raised, when the verdict words it."""
        self.errors.append(PassError(message, action=action, exception=exception, outside=outside))

    def after_transition(self, transition: Transition) -> None:
        self.taken.append(transition_key(transition, self.chart))


class LifecycleChart(StateChart[PassRecord]):
    """What every lifecycle chart is to the engine (the Task, Workflow and MPE charts subclass
    it): its model is the pass record, and these library settings hold.

    Within a state, transitions for the same event are tried in declaration order and the first
    whose guards all hold is taken. Effects run as `before` actions, so an effect that raises
    aborts its transition (the state does not change) and becomes `error.execution`, which
    every non-final state handles.
    """

    # The phase is held on the pass record, never on the object: writing states one at a time
    # would leave the configuration empty (None) mid-transition.
    atomic_configuration_update = True
    # A targetless transition must not re-run the entry actions of the state it stays in.
    enable_self_transition_entries = False
    # Phases are levels: an event a state has no use for is simply ignored.
    allow_event_without_transition = True
    # Exceptions from actions become error.execution, handled explicitly by every chart.
    catch_errors_as_events = True

    def _get_engine(self) -> IndexedEngine:
        # The library's engine, selecting transitions from an index of the chart
        # (machines/transition_index.py says why and what is checked).
        return IndexedEngine(self)


class ModelBinding:
    """Listener that resolves guards and effects on the model, with the observation bound.

    Use `binding_class` to get a subclass with one method per guard and effect name.
    """

    def __init__(self, record: PassRecord) -> None:
        self._record = record
        self._model: object = None
        self._observation: Any = None

    def begin(self, model: object, observation: Any) -> None:
        self._model, self._observation = model, observation

    def _guard(self, name: str) -> bool:
        record = self._record
        if record.failed or record.errors or record.waiting:
            # The pass already failed, or decided to wait: take no further guarded transition
            # (a waiting eventless transition would otherwise be taken again and again). Error
            # handlers have no guards, so the error itself is still recorded.
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


def _bound(name: str, kind: Callable[[ModelBinding, str], Any]) -> Callable[[ModelBinding], Any]:
    def callback(self: ModelBinding) -> Any:
        return kind(self, name)

    callback.__name__ = name
    return callback


def binding_class(
    name: str, guard_names: Sequence[str], effect_names: Sequence[str]
) -> type[ModelBinding]:
    """A `ModelBinding` subclass with a method for every guard and effect name."""
    methods: dict[str, Any] = {n: _bound(n, ModelBinding._guard) for n in guard_names}
    methods.update({n: _bound(n, ModelBinding._effect) for n in effect_names})
    return type(name, (ModelBinding,), methods)


@functools.cache
def missing_callbacks(model_type: type, names: tuple[str, ...]) -> tuple[str, ...]:
    """The guard/effect `names` that `model_type` does not provide as callables."""
    return tuple(n for n in names if not callable(getattr(model_type, n, None)))


class UnknownPhaseError(ValueError):
    """The persisted `status.phase` is none of the phases the chart knows."""

    def __init__(self, phase: str, known: Sequence[str]) -> None:
        listed = ", ".join(repr(p) for p in known)
        super().__init__(f"unknown status.phase {phase!r}; expected one of {listed}")
        self.phase = phase


class Conditions(Protocol):
    """The chart's condition function (`machines.task.conditions.compute_conditions`...)."""

    def __call__(
        self,
        phase: str,
        *,
        failed_pass: bool,
        existing: Sequence[Condition],
        now: datetime,
        reason: Any = None,
        message: str = "",
        detail: Any = None,
    ) -> tuple[Condition, ...]: ...


@dataclass(frozen=True)
class ChartSpec:
    """What the engine needs to know about one chart.

    Attributes:
        chart: the `StateChart` class.
        record: its `PassRecord` subclass (with the chart's verdicts).
        guard_names, effect_names: the names resolved on the runtime's model.
        configuration: the configuration a persisted observation starts in (may raise
            `UnknownPhaseError`).
        events: the events one pass sends, in order.
        conditions: the chart's `status.conditions` function.
        phase_of: the `status.phase` to persist for the state id a pass ended in, given its
            observation (None, the default: keep the persisted one, e.g. for states that are
            not phases, or a chart without phases).
        stop: after each event, whether the pass is over (default: it reached `finalized`).
        warning_phases: phases whose phase-change Event is a Warning (others: Normal).
        max_passes: the most passes one reconcile takes (a bound, never reached by a chart
            whose every forward path is shorter; it stops a bug from looping).
    """

    chart: type[StateChart[PassRecord]]
    record: type[PassRecord]
    guard_names: tuple[str, ...]
    effect_names: tuple[str, ...]
    configuration: Callable[[Any], list[str]]
    events: Callable[[Any], tuple[str, ...]]
    conditions: Conditions
    phase_of: Callable[[str, Any], str | None] = lambda _state, _observation: None
    stop: Callable[[OrderedSet[Any]], bool] = lambda configuration: "finalized" in configuration
    warning_phases: frozenset[str] = frozenset()
    max_passes: int = 8


@dataclass(frozen=True, slots=True)
class ReconcileOutcome(Generic[R]):
    """What one reconcile (one or more passes) decided and did.

    Attributes:
        last: the outcome of its last pass (phase, conditions, errors, waits, requeue).
        path: the persisted phase, then every phase a pass moved to, in order.
        passes: how many passes it took.
        effects: every effect performed, in order, over all passes.
        events: the Events to write, in order: the phase change (when the reconcile moved the
            phase: Warning for the chart's `warning_phases`, reason the new phase, the path
            taken and the terminal reason), then those the passes' verdicts decided on.
        reason, reason_message: the terminal reason of the pass that entered a terminal
            phase, if any pass did.
    """

    last: PassOutcome[R]
    path: tuple[str, ...]
    passes: int
    effects: tuple[str, ...]
    events: tuple[EventNote, ...]
    reason: R | None = None
    reason_message: str = ""

    @property
    def phase(self) -> str:
        return self.last.phase

    @property
    def error(self) -> PassError | None:
        return self.last.error

    @property
    def message(self) -> str:
        return self.last.message

    @property
    def finalized(self) -> bool:
        return self.last.finalized

    @property
    def moved(self) -> bool:
        """The reconcile left the persisted phase for another (a phase-change Event is due)."""
        return bool(self.path[-1]) and self.path[-1] != self.path[0]


class PassEngine:
    """Runs passes of one chart, with one reused machine per thread (see the module doc)."""

    def __init__(self, spec: ChartSpec) -> None:
        self.spec = spec
        self._binding_class = binding_class(
            f"{spec.chart.__name__}Binding", spec.guard_names, spec.effect_names
        )
        self._local = threading.local()

    def _slot(self) -> tuple[StateChart[PassRecord], PassRecord, ModelBinding]:
        slot: tuple[StateChart[PassRecord], PassRecord, ModelBinding] | None = getattr(
            self._local, "slot", None
        )
        if slot is None:
            record = self.spec.record()
            # The record holds a configuration before the machine exists, so the engine finds
            # a current state and runs no initial transition or entry action.
            record.state = OrderedSet(self.spec.configuration(_BUILD_OBSERVATION))
            binding = self._binding_class(record)
            machine = self.spec.chart(model=record, listeners=[binding])
            slot = self._local.slot = (machine, record, binding)
        return slot

    def build(self, observation: Any, model: object) -> tuple[StateChart[PassRecord], PassRecord]:
        """A fresh machine in `observation`'s configuration (for tools that render or inspect
        one; passes use `run`). Raises `UnknownPhaseError` like `run` would report it."""
        record = self.spec.record()
        record.begin(self.spec.configuration(observation), observation)
        binding = self._binding_class(record)
        binding.begin(model, observation)
        return self.spec.chart(model=record, listeners=[binding]), record

    def reconcile(
        self,
        observe: Callable[[], Any],
        model: object,
        *,
        now: datetime,
        apply: Callable[[PassOutcome[Any]], None],
    ) -> ReconcileOutcome[Any]:
        """Take passes while they move the phase forward; never raises.

        Args:
            observe: reads the world into a fresh observation (called before every pass).
            model: the chart's guards and effects (one model for the whole reconcile).
            now: the time stamped on conditions that change.
            apply: called with every pass's outcome before the next observation (the runtime
                puts its phase, conditions and message into its working copy).

        The loop stops after a pass that ended in error, waits, reached `finalized`, ended the
        reconcile (`end_reconcile`), or left the phase where it was; and after
        `ChartSpec.max_passes` passes.
        """
        observation = observe()
        path = [getattr(observation, "phase", "") or ""]
        effects: list[str] = []
        events: list[EventNote] = []
        reason: Any = None
        reason_message = reason_note = ""
        passes = 0
        while True:
            before = path[-1]
            outcome = self.run(observation, model, now=now)
            passes += 1
            apply(outcome)
            effects += outcome.effects
            events += outcome.events
            if outcome.reason is not None:
                reason, reason_message = outcome.reason, outcome.reason_message
                reason_note = outcome.reason_note
            if outcome.phase and outcome.phase != before:
                path.append(outcome.phase)
            if (
                outcome.error
                or outcome.waiting
                or outcome.finalized
                or outcome.end_reconcile
                or outcome.phase == before
                or passes >= self.spec.max_passes
            ):
                break
            observation = observe()
        if path[-1] and path[-1] != path[0]:
            text = " -> ".join(p or "(new)" for p in path)
            if reason_note:
                text += f": {reason_note}"
            kind = WARNING if path[-1] in self.spec.warning_phases else NORMAL
            events.insert(0, EventNote(kind, path[-1], text, phase_change=True))
        return ReconcileOutcome(
            last=outcome,
            path=tuple(path),
            passes=passes,
            effects=tuple(effects),
            events=tuple(events),
            reason=reason,
            reason_message=reason_message,
        )

    def run(self, observation: Any, model: object, *, now: datetime) -> PassOutcome[Any]:
        """Drive one pass and report it; never raises.

        Args:
            observation: what the reconciler read for this pass.
            model: the chart's guards and effects; effects may raise.
            now: the time stamped on conditions that change.
        """
        spec = self.spec
        # Plain `type`: mypy does not see a `type[X]` as Hashable (python/mypy#11470).
        model_type: type = type(model)
        missing = missing_callbacks(model_type, spec.guard_names + spec.effect_names)
        if missing:
            return self._stopped(
                observation, now, f"model {model_type.__name__} lacks {', '.join(missing)}"
            )
        try:
            configuration = spec.configuration(observation)
        except UnknownPhaseError as err:
            return self._stopped(observation, now, str(err), err)
        machine, record, binding = self._slot()
        record.begin(configuration, observation)
        binding.begin(model, observation)
        try:
            for event in spec.events(observation):
                machine.send(event)
                if (
                    record.failed
                    or record.errors
                    or record.ended
                    or spec.stop(machine.configuration_values)
                ):
                    break
        except Exception as err:  # D23: a library or programming error must not stop the controller
            record.errors.append(
                PassError(f"internal error: {err}", action=record.running_callback, exception=err)
            )
            self._local.slot = None  # its engine may hold half a step: build a new one
        finally:
            binding.begin(None, None)  # keep no reference to the reconcile's objects
        state = next(s.id for s in machine.configuration if s.is_atomic)
        if any(s.final and s.parent is None for s in machine.configuration):
            # A machine that reached a top-level final state has stopped for good (SCXML): the
            # next pass of this thread gets a new one.
            self._local.slot = None
        phase = spec.phase_of(state, observation)
        if phase is None:
            phase = getattr(observation, "phase", "") or ""
        conditions = spec.conditions(
            phase,
            failed_pass=bool(record.errors),
            existing=observation.conditions,
            now=now,
            reason=record.reason,
            message=record.reason_message,
            detail=record.detail,
        )
        outcome: PassOutcome[Any] = PassOutcome(
            phase=phase,
            state=state,
            effects=tuple(record.effects),
            errors=tuple(record.errors),
            reason=record.reason,
            reason_message=record.reason_message,
            reason_note=record.reason_note,
            conditions=conditions,
            events=tuple(record.events),
            detail=record.detail,
            transitions=tuple(record.taken),
            waiting="" if record.errors else record.waiting,
            waiting_quietly=record.quiet and not record.errors,
            waiting_on="" if record.errors else record.waiting_on,
            wake=tuple(record.wake),
            end_reconcile=record.ended,
            requeue_after=None if record.errors else record.requeue_after,
        )
        record.begin((), None)  # the record keeps nothing of this pass either
        record.state = OrderedSet(configuration)
        return outcome

    def _stopped(
        self, observation: Any, now: datetime, message: str, exc: BaseException | None = None
    ) -> PassOutcome[Any]:
        """An outcome for a pass that could not start: nothing done, phase left as persisted."""
        phase = getattr(observation, "phase", "") or ""
        conditions = self.spec.conditions(
            phase, failed_pass=True, existing=observation.conditions, now=now
        )
        state = _state_of_phase(self.spec, phase)
        return PassOutcome(
            phase=phase,
            state=state,
            errors=(PassError(message, exception=exc),),
            conditions=conditions,
        )


def _state_of_phase(spec: ChartSpec, phase: str) -> str:
    for state_id in spec.chart.states_map:
        if spec.phase_of(state_id, _BUILD_OBSERVATION) == phase:
            return str(state_id)
    return ""


class _BuildObservation:
    """What a machine is built in before its first pass: the New state of the chart."""

    phase = ""
    phase_known = True
    deletion_requested = False
    conditions: tuple[Condition, ...] = ()


_BUILD_OBSERVATION = _BuildObservation()
