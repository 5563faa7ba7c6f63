"""What both lifecycle drivers share: how a pass binds a model to a chart and records itself.

Where this sits in the flow: `machines.driver` (Task) and `machines.workflow_driver` (Workflow)
each build their chart once per reconcile pass with two objects attached:

* a **pass record** (`PassRecord` subclass), the chart's own model: it holds the configuration
  the pass starts from and collects what the pass decided (effects, errors, reason, the
  transitions taken). Verdict actions (`note_*`, `report_*`) are its methods;
* a **model binding** (`binding_class`), a listener with one method per guard and effect name
  that calls the runtime's model with the pass's observation. Having a real method per name
  lets the library check every name of the chart against the model protocol at build time.

Both stop a pass at its first error: after a callback raised or a verdict reported an error,
guards answer False so no further transition is taken (a raising guard alone would count as
False for the library, which would then try the next candidate transition).

Spec: task-controller.md §3.14 (errors, aggregation) and decisions.md D23.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from statemachine import StateChart
from statemachine.orderedset import OrderedSet

from machines.catalog import transition_key


@dataclass(frozen=True, slots=True)
class PassError:
    """Why a pass ended in error. `action` names the callback that raised or reported it."""

    message: str
    action: str | None = None
    exception: BaseException | None = field(default=None, compare=False)


class OutcomeErrors:
    """`error`, `message` and `finalized` of a pass outcome (a frozen dataclass with `errors`
    and `state`)."""

    __slots__ = ()
    errors: tuple[PassError, ...]
    state: str

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
        """The object's finalizer is gone: persist nothing more, the object is going."""
        return self.state == "finalized"


class PassRecord:
    """The chart's model for one pass: its starting configuration and what the pass decided.

    Subclasses add the verdict callbacks of their chart and set `chart` (for transition keys).
    """

    chart: type[StateChart]

    def __init__(self, configuration: Sequence[str], observation: Any) -> None:
        self.state: Any = OrderedSet(configuration)
        self.observation = observation
        self.effects: list[str] = []
        self.errors: list[PassError] = []
        self.reason: Any = None
        self.reason_message = ""
        self.taken: list[str] = []
        self.running_callback: str | None = None
        self.failed = False
        """Set as soon as a callback raises, before error.execution is even processed."""

    def record_error(self, error: BaseException) -> None:
        # error.execution: an effect or guard raised. Nothing may raise here, or the library
        # would drop the error with only a log line.
        message = str(error) or type(error).__name__
        self.errors.append(PassError(message, action=self.running_callback, exception=error))
        self.running_callback = None

    def after_transition(self, transition: Any) -> None:
        self.taken.append(transition_key(transition, self.chart))


class ModelBinding:
    """Listener that resolves guards and effects on the model, with the observation bound.

    Use `binding_class` to get a subclass with one method per guard and effect name.
    """

    def __init__(self, model: Any, observation: Any, record: PassRecord) -> None:
        self._model = model
        self._observation = observation
        self._record = record

    def _guard(self, name: str) -> bool:
        record = self._record
        if record.failed or record.errors:
            # The pass already failed: take no further transition. Error handlers have no
            # guards, so the error itself is still recorded.
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
