"""The chart's structure, checked without running a pass.

- every guard and action name the chart uses resolves: guards and effects on the
  `TaskLifecycleModel` protocol, verdicts on the driver's pass record;
- no callback name shadows an event or a state (it would resolve to the machine itself);
- every state is reachable from the initial state and every non-final state can reach a
  final one, nested states included (the library checks only top-level states);
- the persisted phases map to configurations, and rebuilding from one runs no entry action;
- `events_for` sends the reconcile's checks in the right order.
"""

from __future__ import annotations

import inspect
from collections import deque

import pytest
from statemachine.orderedset import OrderedSet

from machines import chart_data
from machines.task.chart import (
    PHASE_STATES,
    TaskLifecycle,
    UnknownPhaseError,
    configuration_for_phase,
    events_for,
)
from machines.task.driver import VERDICT_NAMES, _PassRecord, build_machine
from machines.task.guards import ObservationGuards
from machines.task.model import EFFECT_NAMES, GUARD_NAMES, TaskLifecycleModel
from machines.task.observation import PHASES, TaskObservation, WorkflowState


def test_guard_names_resolve_on_the_protocol() -> None:
    """Every guard the chart names is a guard of `TaskLifecycleModel`."""
    assert chart_data.guard_names(TaskLifecycle) <= set(GUARD_NAMES)


def test_action_names_resolve_on_the_protocol_or_the_pass_record() -> None:
    """Every action is an effect of the protocol or a verdict of the pass record."""
    used = chart_data.action_names(TaskLifecycle)
    assert used <= set(EFFECT_NAMES) | set(VERDICT_NAMES)
    assert all(callable(getattr(_PassRecord, name)) for name in VERDICT_NAMES)


def test_every_protocol_name_is_used_by_the_chart() -> None:
    """The protocol lists nothing the chart never calls (no dead contract)."""
    assert set(GUARD_NAMES) == chart_data.guard_names(TaskLifecycle)
    assert set(EFFECT_NAMES) | set(VERDICT_NAMES) == chart_data.action_names(TaskLifecycle)


def test_protocol_members_match_the_name_lists() -> None:
    """`GUARD_NAMES`/`EFFECT_NAMES` are exactly the protocol's methods, each documented."""
    members = [
        name
        for name, value in vars(TaskLifecycleModel).items()
        if inspect.isfunction(value) and not name.startswith("_")
    ]
    assert members == [*GUARD_NAMES, *EFFECT_NAMES]
    for name in members:
        doc = getattr(TaskLifecycleModel, name).__doc__
        assert doc, name
        assert len(doc.strip().splitlines()) == 1, name
        assert list(inspect.signature(getattr(TaskLifecycleModel, name)).parameters) == [
            "self",
            "observation",
        ]


def test_observation_guards_implement_every_guard() -> None:
    """The shared guard mixin answers every guard of the protocol."""
    for name in GUARD_NAMES:
        assert callable(getattr(ObservationGuards, name)), name


def test_callback_names_do_not_shadow_events_or_states() -> None:
    """A callback named like an event or state would resolve to the machine's attribute."""
    callbacks = set(GUARD_NAMES) | set(EFFECT_NAMES) | set(VERDICT_NAMES)
    events = set(chart_data.events(TaskLifecycle)) | {"error_execution"}
    states = {s.id for s in chart_data.states(TaskLifecycle)}
    assert not callbacks & events
    assert not callbacks & states


def test_transition_keys_are_unique() -> None:
    """Coverage counts transitions by key, so no two may share one."""
    keys = [t.key for t in chart_data.transitions(TaskLifecycle)]
    assert len(keys) == len(set(keys))


def _successors(state_id: str) -> set[str]:
    """States active right after a transition from `state_id` or any of its ancestors."""
    by_id = {s.id: s for s in chart_data.states(TaskLifecycle)}
    chain, current = [], state_id
    while current is not None:
        chain.append(current)
        current = by_id[current].parent
    return {
        t.target for t in chart_data.transitions(TaskLifecycle) if t.source in chain and t.target
    }


def _default_entry(state_id: str) -> str:
    """The atomic state entered by default when `state_id` is entered."""
    state = TaskLifecycle.states_map[state_id]
    while state.states:
        state = next(child for child in state.states if child.initial)
    return state.id


def _reachable(start: str) -> set[str]:
    seen, queue = set(), deque([_default_entry(start)])
    while queue:
        state = queue.popleft()
        if state in seen:
            continue
        seen.add(state)
        queue.extend(_default_entry(target) for target in _successors(state))
    return seen


def test_every_state_is_reachable() -> None:
    """From a new Task, every atomic state can be reached (so every compound one too)."""
    atomic = {s.id for s in chart_data.states(TaskLifecycle) if not s.compound}
    assert _reachable(TaskLifecycle.initial_state.id) == atomic


def test_every_non_final_state_reaches_a_final_state() -> None:
    """No trap: from every atomic, non-final state some path ends in Finalized."""
    finals = {s.id for s in chart_data.states(TaskLifecycle) if s.final}
    for state in chart_data.states(TaskLifecycle):
        if not state.compound and not state.final:
            assert _reachable(state.id) & finals, state.id


def test_library_validations_are_on() -> None:
    """The definition-time checks stay enabled (a bad chart fails at import)."""
    meta = type(TaskLifecycle)
    assert meta.validate_disconnected_states
    assert meta.validate_trap_states
    assert meta.validate_final_reachability


def test_terminal_phases_have_no_way_back() -> None:
    """Nothing leaves Succeeded/Failed except deletion (they sit inside Live)."""
    terminal = {"terminated", "succeeded", "failed"}
    for t in chart_data.transitions(TaskLifecycle):
        if t.source in terminal:
            assert t.target is None, t.key


@pytest.mark.parametrize("phase", PHASES)
def test_configuration_for_every_phase(phase: str) -> None:
    """Each phase maps to its state plus ancestors, outermost first."""
    configuration = configuration_for_phase(phase)
    assert configuration[0] == "live"
    assert configuration[-1] == PHASE_STATES[phase]


def test_unknown_phase_has_no_configuration() -> None:
    with pytest.raises(UnknownPhaseError, match=r"unknown status\.phase 'Pending'"):
        configuration_for_phase("Pending")


class _CountingModel(ObservationGuards):
    def __init__(self) -> None:
        self.calls: list[str] = []


for _name in EFFECT_NAMES:
    setattr(_CountingModel, _name, lambda self, o, _n=_name: self.calls.append(_n))


@pytest.mark.parametrize("phase", PHASES)
def test_rebuilding_from_a_phase_runs_no_entry_action(phase: str) -> None:
    """The machine is rebuilt in the persisted state without entering it again."""
    model = _CountingModel()
    machine, record = build_machine(TaskObservation(phase=phase), model)
    assert machine.configuration_values == OrderedSet(configuration_for_phase(phase))
    assert model.calls == []
    assert record.taken == []


@pytest.mark.parametrize(
    ("changes", "events"),
    [
        ({}, ("finalizer_missing", "ownership_missing", "observed", "settled")),
        ({"has_finalizer": True, "owned_by_workflow": True}, ("observed", "settled")),
        ({"deletion_requested": True}, ("deletion_requested",)),
        ({"workflow": WorkflowState.MISSING}, ("finalizer_missing", "workflow_missing")),
        ({"has_finalizer": True, "workflow": WorkflowState.DELETING}, ("workflow_deleting",)),
        (
            {
                "has_finalizer": True,
                "owned_by_workflow": True,
                "workflow": WorkflowState.TERMINATED,
            },
            ("workflow_terminated", "observed", "settled"),
        ),
        (
            {"deletion_requested": True, "workflow": WorkflowState.DELETING},
            ("deletion_requested",),
        ),
    ],
)
def test_events_for(changes: dict[str, object], events: tuple[str, ...]) -> None:
    """Deletion first and alone (D22), then finalizer, Workflow, ownership, phase step, and
    last the requeue decision."""
    assert events_for(TaskObservation(**changes)) == events  # type: ignore[arg-type]  # deliberately a field mix the type does not describe
