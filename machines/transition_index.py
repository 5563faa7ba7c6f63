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
  of ours) costs a dictionary lookup instead of a walk.

Everything else (conflict filtering, exit and entry sets, callbacks, the queues) is the
library's, unchanged. The override uses `StateChart._get_engine` and the engine's selection
methods, which are not public API: `tests/unit/machines/test_transition_index.py` checks, for
every state of every lifecycle chart, every event and every way its guards can answer, that the
index selects exactly what the library's own walk selects, so a library upgrade that changes
either side fails there first.
"""

from __future__ import annotations

from itertools import chain
from typing import Any

from statemachine.engines.sync import SyncEngine
from statemachine.event_data import TriggerData
from statemachine.orderedset import OrderedSet
from statemachine.state import State
from statemachine.transition import Transition


class IndexedEngine(SyncEngine):
    """`SyncEngine` whose transition selection reads a per-machine index (see the module doc)."""

    def __init__(self, sm: Any) -> None:
        super().__init__(sm)
        self._chains: dict[str, tuple[State, ...]] = {
            state.id: (state, *state.ancestors()) for state in sm.states_map.values()
        }
        self._handling: dict[tuple[str, str | None], tuple[Transition, ...]] = {}

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
