"""A plain-data catalogue of a lifecycle statechart, read from its class.

Where this sits in the flow: the diagrams and `docs/lifecycle.md` (`machines.diagrams.render`), the
engine's record of which transitions a pass took (`machines.engine`) and the scenario tests'
transition coverage all need the chart as data. This module reads it once from the chart
class (`machines.task.chart.TaskLifecycle`, `machines.workflow.chart.WorkflowLifecycle`,
`machines.mpe.chart.MpeLifecycle`), through the library's public state and transition
objects, so no copy of a chart exists anywhere else. It imports no chart: the charts' own
modules (through the engine) use it.

Every function takes the chart class as `machine`. A state's `status.phase` comes from the
chart's `state_phases` class attribute (state id → phase; none for a chart without phases).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from statemachine import StateChart
from statemachine.callbacks import CallbackSpec
from statemachine.transition import Transition

ERROR_EVENT = "error.execution"

ChartClass: TypeAlias = type[StateChart[Any]]
"""A statechart class, whatever its model: the catalogue reads only its states and
transitions."""


@dataclass(frozen=True, slots=True)
class StateInfo:
    """One state of the chart: `phase` is its `status.phase`, None for non-phase states."""

    id: str
    name: str
    parent: str | None
    phase: str | None
    entry: tuple[str, ...]
    final: bool
    compound: bool


@dataclass(frozen=True, slots=True)
class TransitionInfo:
    """One transition: `event` is `""` when eventless, `target` None when targetless.

    `guards` read `name` for `cond` and `not name` for `unless`; `effects` are the `before`
    actions resolved on the model, `verdicts` the `on` actions resolved on the pass record.
    `rank` is the 1-based priority among the source's transitions for the same event.
    """

    key: str
    source: str
    event: str
    target: str | None
    guards: tuple[str, ...]
    effects: tuple[str, ...]
    verdicts: tuple[str, ...]
    rank: int

    @property
    def label(self) -> str:
        """`event [guard, ...] / action, ...` as drawn on diagram edges."""
        parts = [self.event] if self.event else []
        if self.guards:
            parts.append(f"[{', '.join(self.guards)}]")
        actions = self.effects + self.verdicts
        if actions:
            parts.append(f"/ {', '.join(actions)}")
        return " ".join(parts)


def _names(specs: Iterable[CallbackSpec]) -> tuple[str, ...]:
    return tuple(spec.attr_name for spec in specs if not spec.is_convention)


def _guards(transition: Transition) -> tuple[str, ...]:
    return tuple(
        spec.attr_name if spec.expected_value is not False else f"not {spec.attr_name}"
        for spec in transition.cond
        if not spec.is_convention
    )


def _event(transition: Transition) -> str:
    ids = [str(event) for event in transition.events]
    if not ids:
        return ""
    # The library registers error_execution under both spellings; show the SCXML one.
    return ERROR_EVENT if ERROR_EVENT in ids else ids[0]


def _key(source: str, event: str, guards: tuple[str, ...], target: str | None) -> str:
    guard_text = f" [{', '.join(guards)}]" if guards else ""
    return f"{source} --{event or '(eventless)'}{guard_text}--> {target or '(stays)'}"


def _state_phases(machine: ChartClass) -> Mapping[str, str]:
    """The chart's `state_phases` (empty when it has none)."""
    phases: Mapping[str, str] = getattr(machine, "state_phases", {})
    return phases


def transition_key(transition: Transition, machine: ChartClass) -> str:
    """Return the stable key of a transition of `machine` (what coverage counts)."""
    known = _keys_by_identity(machine).get(id(transition))
    if known is not None:
        return known
    target = transition.target.id if transition.target else None
    return _key(transition.source.id, _event(transition), _guards(transition), target)


@functools.cache
def states(machine: ChartClass) -> tuple[StateInfo, ...]:
    """Every state in document order (parents before children)."""
    phases = _state_phases(machine)
    return tuple(
        StateInfo(
            id=state.id,
            name=str(state.name),
            parent=state.parent.id if state.parent else None,
            phase=phases.get(state.id),
            entry=_names(state.enter),
            final=state.final,
            compound=bool(state.states),
        )
        for state in machine.states_map.values()
    )


def _chart_transitions(machine: ChartClass) -> list[Transition]:
    # A compound state's default entry is an `initial` transition too; it is structure
    # (drawn as the start marker), never taken by a pass, so it is not catalogued.
    return [t for state in machine.states_map.values() for t in state.transitions if not t.initial]


@functools.cache
def transitions(machine: ChartClass) -> tuple[TransitionInfo, ...]:
    """Every transition, grouped by source state in document order, in priority order."""
    out = []
    seen: dict[tuple[str, str], int] = {}
    for t in _chart_transitions(machine):
        source, event = t.source.id, _event(t)
        rank = seen[(source, event)] = seen.get((source, event), 0) + 1
        target = t.target.id if t.target else None
        guards = _guards(t)
        out.append(
            TransitionInfo(
                key=_key(source, event, guards, target),
                source=source,
                event=event,
                target=target,
                guards=guards,
                effects=_names(t.before),
                verdicts=_names(t.on),
                rank=rank,
            )
        )
    return tuple(out)


@functools.cache
def _keys_by_identity(machine: ChartClass) -> dict[int, str]:
    return {
        id(t): info.key
        for t, info in zip(_chart_transitions(machine), transitions(machine), strict=True)
    }


def events(machine: ChartClass) -> tuple[str, ...]:
    """Every event the chart reacts to, in first-use order (`""` excluded)."""
    return tuple(dict.fromkeys(t.event for t in transitions(machine) if t.event))


def guard_names(machine: ChartClass) -> frozenset[str]:
    """Every guard name the chart uses (without `not`)."""
    return frozenset(g.removeprefix("not ") for t in transitions(machine) for g in t.guards)


def action_names(machine: ChartClass) -> frozenset[str]:
    """Every action name the chart uses: transition effects and verdicts, state entries."""
    names = {a for t in transitions(machine) for a in t.effects + t.verdicts}
    names.update(a for s in states(machine) for a in s.entry)
    return frozenset(names)
