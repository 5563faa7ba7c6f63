"""The charts ``taskfsm ui`` draws, and how its page finds states and transitions in them.

Both views of each chart come from the same source as ``diagrams/`` (the statecharts in
``machines/``, rendered by ``machines.diagrams``): the user view (``diagrams/*-phases.svg``: the
phases and the reasons between them) and the full chart (``diagrams/*-lifecycle.svg``: every
state, guard and effect). In those SVGs Graphviz names each state's node by its state id (the
``<title>`` of the node's group) and each edge ``tail->head``, compound states' edges ending at
an anchor ``<state>__anchor``; :func:`chart_info` gives the page, per view, which edge titles a
move from one state to another emphasises (the shortest way through the chart when a watch saw
several steps as one).

The SVG files are the committed ones: packaged in the wheel (``taskfsm/tools/ui/diagrams/``,
pyproject's force-include) or, in a checkout, read from ``diagrams/``; so the page needs no
Graphviz at run time.
"""

from __future__ import annotations

import functools
import itertools
from collections import deque
from importlib import resources
from pathlib import Path
from typing import Any

from machines import chart_data
from machines.diagrams import graph
from machines.diagrams.charts import TASK, WORKFLOW, Chart

CHARTS: dict[str, Chart] = {"task": TASK, "workflow": WORKFLOW}
VIEWS = ("phases", "lifecycle")
"""``phases``: the user view; ``lifecycle``: the full chart."""

DELETING = "deleting"
"""The state of an object being deleted (full chart only; the user view counts it in its
phase)."""


def svg(chart: str, view: str) -> bytes:
    """The SVG of ``chart`` (``task``, ``workflow``) in ``view`` (``phases``, ``lifecycle``)."""
    if chart not in CHARTS or view not in VIEWS:
        raise KeyError(f"{chart}-{view}")
    name = f"{chart}-{view}.svg"
    packaged = resources.files("taskfsm.tools.ui").joinpath("diagrams").joinpath(name)
    if packaged.is_file():
        return packaged.read_bytes()
    return (_checkout_diagrams() / name).read_bytes()


def _checkout_diagrams() -> Path:
    from machines.diagrams.render import ROOT

    return ROOT / "diagrams"


def state_of(chart: str, obj: dict[str, Any], *, view: str = "lifecycle") -> str:
    """The state id ``obj`` is counted in: its phase's state; in the full chart ``deleting``
    while it is being deleted."""
    if view == "lifecycle" and (obj.get("metadata") or {}).get("deletionTimestamp"):
        return DELETING
    phases = CHARTS[chart].phase_states
    return phases.get((obj.get("status") or {}).get("phase") or "", phases[""])


def _anchor_or_id(state: str, compound: set[str]) -> str:
    return f"{state}__anchor" if state in compound else state


def _ancestors(chart: Chart) -> dict[str, list[str]]:
    by_id = {s.id: s for s in chart_data.states(chart.machine)}
    chains: dict[str, list[str]] = {}
    for state in by_id:
        chain, parent = [state], by_id[state].parent
        while parent is not None:
            chain.append(parent)
            parent = by_id[parent].parent
        chains[state] = chain
    return chains


def _leaf_edges(chart: Chart, view: str) -> dict[tuple[str, str], set[str]]:
    """(source leaf, target leaf) → SVG edge titles of the transitions between them, those
    of the innermost source only (a Running Task that succeeded took Running's own edge, not
    the one every active state has)."""
    states = chart_data.states(chart.machine)
    compound = {s.id for s in states if s.compound}
    leaves = [s.id for s in states if not s.compound]
    chains = _ancestors(chart)
    if view == "phases":
        pairs = list(graph.phase_edges(chart))
    else:
        pairs = [(t.source, t.target) for t in chart_data.transitions(chart.machine) if t.target]
    found: dict[tuple[str, str], tuple[int, set[str]]] = {}
    for source, target in pairs:
        if target in compound:
            continue
        title = f"{_anchor_or_id(source, compound)}->{target}"
        for leaf in leaves:
            if source not in chains[leaf] or leaf == target:
                continue
            depth = chains[leaf].index(source)
            best, titles = found.get((leaf, target), (depth, set()))
            if depth < best:
                found[(leaf, target)] = (depth, {title})
            elif depth == best:
                found[(leaf, target)] = (depth, titles | {title})
    return {pair: titles for pair, (_, titles) in found.items()}


@functools.cache
def chart_info(chart: str) -> dict[str, Any]:
    """What the page needs to know about ``chart``: its phases (phase → state id), and per
    view the states shown and, for every move ``from->to`` between shown states, the edge
    titles to emphasise."""
    machine = CHARTS[chart]
    info: dict[str, Any] = {"phases": dict(machine.phase_states), "views": {}}
    for view in VIEWS:
        edges = _leaf_edges(machine, view)
        nodes = sorted({a for a, _ in edges} | {b for _, b in edges})
        moves: dict[str, list[str]] = {}
        for source in nodes:
            for target in nodes:
                if source != target:
                    route = _route(edges, source, target)
                    if route:
                        moves[f"{source}->{target}"] = route
        info["views"][view] = {"states": nodes, "moves": moves}
    return info


def _route(edges: dict[tuple[str, str], set[str]], source: str, target: str) -> list[str]:
    """The edge titles along the shortest way from ``source`` to ``target`` (breadth first)."""
    step: dict[str, tuple[str, str] | None] = {source: None}
    todo = deque([source])
    while todo:
        here = todo.popleft()
        if here == target:
            break
        for a, b in sorted(edges):
            if a == here and b not in step:
                step[b] = (a, b)
                todo.append(b)
    if target not in step:
        return []
    titles: list[str] = []
    here = target
    while step[here] is not None:
        pair = step[here]
        assert pair is not None
        titles = sorted(edges[pair]) + titles
        here = pair[0]
    return titles


def path_moves(chart: str, view: str, states: list[str]) -> list[str]:
    """The edge titles of a path through ``states`` (consecutive duplicates ignored)."""
    moves = chart_info(chart)["views"][view]["moves"]
    titles: list[str] = []
    for a, b in itertools.pairwise(states):
        for title in moves.get(f"{a}->{b}", []):
            if title not in titles:
                titles.append(title)
    return titles
