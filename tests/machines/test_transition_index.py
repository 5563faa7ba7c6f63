"""The indexed engine (machines/transition_index.py) selects exactly what the library's own
walk selects: for every state of every lifecycle chart, every event the chart declares (and the
error event and the eventless "null" trigger), and many ways the guards can answer, raising
included (a raising guard counts as False and queues the error event, on both)."""

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
        self.table: dict[str, bool | None] = {}
        for name in guards:
            setattr(self, name, lambda observation, name=name: self._answer(name))
        for name in effects:
            setattr(self, name, lambda observation: None)

    def _answer(self, name: str) -> bool:
        answer = self.table[name]
        if answer is None:
            raise RuntimeError(f"guard {name} raised")
        return answer


def _guard_answer(rng: random.Random) -> bool | None:
    """True or False, and now and then None: the guard raises."""
    roll = rng.random()
    return None if roll < 0.1 else roll < 0.55


def _drain(engine: Any) -> list[str]:
    """The events put on the engine's queues (outside a step the error event goes to the
    external one), removed from them."""
    names = []
    for queue in (engine.internal_queue, engine.external_queue):
        while not queue.is_empty():
            names.append(str(queue.pop().event))
    return names


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
    compared = selected = raised = 0
    for state in machine.states_map.values():
        if not state.is_atomic or state.final:
            continue
        record.state = OrderedSet(_configuration(state))
        for event in events:
            trigger = TriggerData(machine, event=Event(event) if event else None)
            for _ in range(ANSWERS_PER_CASE):
                model.table = {name: _guard_answer(rng) for name in spec.guard_names}
                record.failed = False
                machine._engine.clear_cache()
                fast = list(machine._engine.select_transitions(trigger))
                fast_queued = _drain(machine._engine)
                record.failed = False  # a raising guard stops the pass's later guards
                library.clear_cache()
                slow = list(library.select_transitions(trigger))
                slow_queued = _drain(machine._engine)  # put through the machine, on its engine
                assert fast == slow, (chart, state.id, event, model.table)
                assert fast_queued == slow_queued, (chart, state.id, event, model.table)
                raised += bool(slow_queued)
                compared += 1
                selected += bool(slow)
    # The comparison saw transitions taken, not only empty selections.
    assert compared > 100
    assert selected > compared // 10
    assert raised > compared // 100
