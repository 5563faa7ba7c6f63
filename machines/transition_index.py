"""python-statemachine's engine, with its transition selection answered from an index.

For every event a machine processes, the library's `SyncEngine` walks every transition of each
active atomic state and its ancestors, asks each one whether it handles the event (splitting
both names on ``.`` every time, for SCXML's dotted event descriptors), and before and after each
external event walks them all again looking for eventless transitions. For the lifecycle charts
that is 30-40 name matches and about 100 eventless checks per pass, a third of the library's
CPU per pass and none of it depending on the observation (docs/performance.md, "The statechart's
transition selection"). What the walk answers depends only on the chart, so this engine:

* asks the library's own `Transition.match` once per (state, event) and remembers which
  transitions of that state handle the event, in declaration order; the guards are still
  evaluated by the library, in that order, on every event (the first whose guards all hold is
  taken, as before);
* does the same for the eventless walk: a state without eventless transitions (all but a few
  of ours) costs a dictionary lookup instead of a walk;
* asks a transition's guards directly when each is a method, taking no argument, of exactly
  one of the machine, its model and its listeners (every guard of ours: a method of the pass
  engine's model binding), and the chart has no `prepare` or validator callbacks. The library
  would build the event's arguments and bind them to each guard's signature first (about
  half of a pass's CPU in `benchmarks/bench_machine.py`); it asks the same methods, in the
  same order, stops at the first False, and turns a raising guard into False and an
  `error.execution`, as this does.

Everything else (conflict filtering, exit and entry sets, callbacks, the queues) is the
library's, unchanged. The override uses `StateChart._get_engine` and the engine's selection
methods, which are not public API: `tests/machines/test_transition_index.py` checks, for every
state of every lifecycle chart, every event and every way its guards can answer (raising
included), that the index selects exactly what the library's own walk selects and queues the
same events, so a library upgrade that changes either side fails there first.
"""

from __future__ import annotations

import inspect
from itertools import chain
from typing import Any

from statemachine.callbacks import SpecReference
from statemachine.engines.sync import SyncEngine
from statemachine.event_data import TriggerData
from statemachine.orderedset import OrderedSet
from statemachine.state import State
from statemachine.transition import Transition

_UNRESOLVED: Any = object()


class IndexedEngine(SyncEngine):
    """`SyncEngine` whose transition selection reads a per-machine index (see the module doc)."""

    def __init__(self, sm: Any) -> None:
        super().__init__(sm)
        self._chains: dict[str, tuple[State, ...]] = {
            state.id: (state, *state.ancestors()) for state in sm.states_map.values()
        }
        self._handling: dict[tuple[str, str | None], tuple[Transition, ...]] = {}
        self._guards: dict[int, tuple[tuple[Any, bool | None], ...] | None] = {}

    def handling(self, state: State, event: str | None) -> tuple[Transition, ...]:
        """The transitions declared on ``state`` itself that handle ``event`` (None: the
        eventless ones), in declaration order; the library's own `Transition.match` and
        `is_eventless`, asked once."""
        key = (state.id, event)
        found = self._handling.get(key)
        if found is None:
            found = tuple(
                t
                for t in state.transitions
                if not t.initial and (t.is_eventless if event is None else t.match(event))
            )
            self._handling[key] = found
        return found

    def select_eventless_transitions(self, trigger_data: TriggerData) -> OrderedSet[Transition]:
        return self._select(None, trigger_data)

    def select_transitions(self, trigger_data: TriggerData) -> OrderedSet[Transition]:
        event = trigger_data.event
        if event is None:  # the library's "null" trigger: it matches the eventless ones
            return self._select(None, trigger_data)
        return self._select(str(event), trigger_data)

    def _select(self, event: str | None, trigger_data: TriggerData) -> OrderedSet[Transition]:
        """Per active atomic state, the first transition, from the state outwards through its
        ancestors, that handles ``event`` and whose guards hold; then the library's conflict
        filter (what `SyncEngine._select_transitions` returns)."""
        enabled: OrderedSet[Transition] = OrderedSet()
        for state in self.sm.configuration:
            if not state.is_atomic:
                continue
            candidates = chain.from_iterable(
                self.handling(s, event) for s in self._chains[state.id]
            )
            for transition in candidates:
                if self._conditions_match(transition, trigger_data):
                    enabled.add(transition)
                    break
        filtered: OrderedSet[Transition] = self._filter_conflicting_transitions(enabled)
        return filtered

    def _conditions_match(self, transition: Transition, trigger_data: TriggerData) -> bool:
        """The library's `_conditions_match`, asking a transition's guards directly where each
        is a plain method of one listener (see the module doc); otherwise the library's own."""
        guards = self._guards.get(id(transition), _UNRESOLVED)
        if guards is _UNRESOLVED:
            guards = self._guards[id(transition)] = self._direct_guards(transition)
        if guards is None:
            return bool(super()._conditions_match(transition, trigger_data))
        try:
            for guard, expected in guards:
                value = guard()
                if (bool(value) != expected) if expected is not None else not value:
                    return False
        except Exception as error:  # the library's `CallbacksExecutor.all`, on_error included
            on_error = self._on_error_handler()
            if on_error is None:
                raise
            on_error(error)
            return False
        return True

    def _direct_guards(self, transition: Transition) -> tuple[tuple[Any, bool | None], ...] | None:
        """(bound method, expected value) per guard of ``transition``, in the library's order,
        when asking them directly is what the library would do: no `prepare` or validator
        callbacks, each guard a name that exactly one of the machine, its model and its
        listeners holds, as a method taking no argument. None: leave it to the library."""
        sm = self.sm
        registry = sm._callbacks
        if _has(registry, sm.prepare.key) or _has(registry, transition.validators.key):
            return None
        wrappers = (
            list(registry[transition.cond.key]) if _has(registry, transition.cond.key) else []
        )
        owners = (sm, sm.model, *sm._listeners.values())
        guards: list[tuple[Any, bool | None]] = []
        for wrapper in wrappers:
            meta = wrapper.meta
            if meta.reference != SpecReference.NAME or meta.cond is not None:
                return None
            holders = [o for o in owners if hasattr(o, meta.attr_name)]
            if len(holders) != 1:
                return None
            method = getattr(holders[0], meta.attr_name)
            if not inspect.ismethod(method) or inspect.signature(method).parameters:
                return None
            guards.append((method, wrapper.expected_value))
        return tuple(guards)


def _has(registry: Any, key: str) -> bool:
    """Whether the library's callback registry holds a callback under ``key`` (its lookups
    by item make empty entries, so being a key is not enough)."""
    return key in registry and bool(registry[key].items)
