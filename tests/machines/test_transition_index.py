"""The indexed engine (machines/transition_index.py) selects exactly what the library's own
walk selects: for every state of every lifecycle chart, every event the chart declares (and the
error event and the eventless "null" trigger), and many ways the guards can answer."""

from __future__ import annotations

import random
from typing import Any

import pytest
from statemachine.engines.sync import SyncEngine
from statemachine.event import Event
from statemachine.event_data import TriggerData
from statemachine.orderedset import OrderedSet

from machines import chart_data
from machines.engine import _BUILD_OBSERVATION, ERROR_EVENT, PassEngine
from machines.mpe.driver import MPE_ENGINE
from machines.task.driver import TASK_ENGINE
from machines.transition_index import IndexedEngine
from machines.workflow.driver import WORKFLOW_ENGINE

ENGINES = {"task": TASK_ENGINE, "workflow": WORKFLOW_ENGINE, "mpe": MPE_ENGINE}
ANSWERS_PER_CASE = 40


class Answers:
    """A model whose guards answer from a table and whose effects do nothing."""

    def __init__(self, guards: tuple[str, ...], effects: tuple[str, ...]) -> None:
        self.table: dict[str, bool] = {}
        for name in guards:
            setattr(self, name, lambda observation, name=name: self.table[name])
        for name in effects:
            setattr(self, name, lambda observation: None)


def _configuration(state: Any) -> list[Any]:
    chain = [state, *state.ancestors()]
    return [s.value for s in reversed(chain)]


@pytest.mark.parametrize("chart", sorted(ENGINES))
def test_the_index_selects_what_the_library_walk_selects(chart: str) -> None:
    engine: PassEngine = ENGINES[chart]
    spec = engine.spec
    model = Answers(spec.guard_names, spec.effect_names)
    machine, record = engine.build(_BUILD_OBSERVATION, model)
    assert isinstance(machine._engine, IndexedEngine)
    library = SyncEngine(machine)
    events: list[str | None] = [*chart_data.events(spec.chart), ERROR_EVENT, None]
    rng = random.Random(chart)
    compared = selected = 0
    for state in machine.states_map.values():
        if not state.is_atomic or state.final:
            continue
        record.state = OrderedSet(_configuration(state))
        for event in events:
            trigger = TriggerData(machine, event=Event(event) if event else None)
            for _ in range(ANSWERS_PER_CASE):
                model.table = {name: rng.random() < 0.5 for name in spec.guard_names}
                machine._engine.clear_cache()
                fast = list(machine._engine.select_transitions(trigger))
                library.clear_cache()
                slow = list(library.select_transitions(trigger))
                assert fast == slow, (chart, state.id, event, model.table)
                compared += 1
                selected += bool(slow)
    # The comparison saw transitions taken, not only empty selections.
    assert compared > 100
    assert selected > compared // 10
