"""Text renderings of a lifecycle: Mermaid, Graphviz DOT and Markdown tables.

Where this sits in the flow: `machines.diagrams.render` writes these to `diagrams/` and into the
generated blocks of `docs/lifecycle.md` (and `docs/workflow-lifecycle.md`); the freshness
tests render them again in memory and compare. Everything is built from `machines.chart_data`,
so guards and actions appear exactly as the chart names them, and the output is
deterministic (no object ids, unlike the library's own DOT renderer, which also needs pydot
and shows no actions on edges).

Every renderer takes `chart`, a `Chart` describing which statechart to draw: `TASK` (the
default) or another built the same way (`WORKFLOW`; both in `machines.diagrams.charts`). Both
diagram renderers take `highlight`, a state id or a phase, to mark one state (the CLI's
`explain` command uses it to show where a Task or Workflow is).
"""

from __future__ import annotations

import html
from collections.abc import Iterable

import graphviz

from machines import chart_data
from machines.chart_data import StateInfo, TransitionInfo
from machines.diagrams.charts import TASK, Chart

HIGHLIGHT_FILL = "#40E0D0"
_INDENT = "    "


def resolve_state(name: str | None, chart: Chart = TASK) -> str | None:
    """Map a state id, state name or `status.phase` to a state id; None stays None.

    Raises:
        ValueError: for a name that is none of these.
    """
    if name is None:
        return None
    if name in chart.phase_states:
        return chart.phase_states[name]
    for state in chart_data.states(chart.machine):
        if name in (state.id, state.name):
            return state.id
    raise ValueError(f"unknown state or phase {name!r}")


def _display_name(state: StateInfo) -> str:
    if state.phase == "":
        return "New (phase unset)"
    return state.name


def _children(parent: str | None, chart: Chart) -> list[StateInfo]:
    return [s for s in chart_data.states(chart.machine) if s.parent == parent]


def _initial_path(chart: Chart) -> list[str]:
    """States a new object enters by default, outermost first (for the Task: Live, Active,
    New); only they get a start marker.

    The library also gives Terminated an implicit initial child, but nothing ever enters
    Terminated by default, so drawing that marker would mislead.
    """
    path, state = [], chart.machine.initial_state
    while state is not None:
        path.append(state.id)
        state = next((child for child in state.states if child.initial), None)
    return path


def _ancestors(state_id: str, chart: Chart) -> list[str]:
    by_id = {s.id: s for s in chart_data.states(chart.machine)}
    chain, current = [], by_id[state_id].parent
    while current is not None:
        chain.append(current)
        current = by_id[current].parent
    return chain


def _scope(t: TransitionInfo, chart: Chart) -> str | None:
    """The innermost compound state containing both ends: where Mermaid must draw the edge."""
    assert t.target is not None
    target_chain = [t.target, *_ancestors(t.target, chart)]
    for candidate in _ancestors(t.source, chart):
        if candidate in target_chain and candidate not in (t.source, t.target):
            return candidate
    return None


def _internal_lines(state: StateInfo, chart: Chart) -> list[str]:
    lines = [f"entry / {', '.join(state.entry)}"] if state.entry else []
    lines += [
        t.label
        for t in chart_data.transitions(chart.machine)
        if t.source == state.id and t.target is None
    ]
    return lines


# Mermaid ------------------------------------------------------------------------------------


def render_mermaid(highlight: str | None = None, chart: Chart = TASK) -> str:
    """Return the chart as Mermaid `stateDiagram-v2` source.

    Targetless transitions and entry actions of atomic states are state descriptions; those
    of compound states are notes. Edges are drawn in the innermost compound holding both ends.

    Raises:
        ValueError: if `highlight` names no state or phase.
    """
    marked = resolve_state(highlight, chart)
    lines = ["stateDiagram-v2", f"{_INDENT}direction TB"]
    lines += _mermaid_scope(None, 1, chart)
    if marked is not None:
        lines.append(f"{_INDENT}classDef highlighted fill:{HIGHLIGHT_FILL},stroke:#333")
        lines.append(f"{_INDENT}class {marked} highlighted")
    return "\n".join(lines) + "\n"


def _mermaid_scope(parent: str | None, depth: int, chart: Chart) -> list[str]:
    pad = _INDENT * depth
    lines: list[str] = []
    children = _children(parent, chart)
    initial = next((s for s in children if s.id in _initial_path(chart)), None)
    if initial is not None:
        lines.append(f"{pad}[*] --> {initial.id}")
    for state in children:
        if state.compound:
            lines.append(f'{pad}state "{_display_name(state)}" as {state.id} {{')
            lines += _mermaid_scope(state.id, depth + 1, chart)
            lines.append(f"{pad}}}")
            notes = _internal_lines(state, chart)
            if notes:
                lines.append(f"{pad}note right of {state.id}")
                lines += [f"{pad}{_INDENT}{note}" for note in notes]
                lines.append(f"{pad}end note")
        else:
            lines.append(f'{pad}state "{_display_name(state)}" as {state.id}')
            lines += [f"{pad}{state.id} : {text}" for text in _internal_lines(state, chart)]
    for t in chart_data.transitions(chart.machine):
        if t.target is not None and _scope(t, chart) == parent:
            label = f" : {t.label}" if t.label else ""
            lines.append(f"{pad}{t.source} --> {t.target}{label}")
    lines += [f"{pad}{s.id} --> [*]" for s in children if s.final]
    return lines


# Graphviz DOT -------------------------------------------------------------------------------


def _html_lines(title: str, lines: Iterable[str], *, size: int = 9) -> str:
    body = "".join(f'<br/><font point-size="{size}">{html.escape(line)}</font>' for line in lines)
    return f"<<b>{html.escape(title)}</b>{body}>"


def _anchor(state_id: str) -> str:
    return f"{state_id}__anchor"


def render_dot(highlight: str | None = None, chart: Chart = TASK) -> str:
    """Return the chart as Graphviz DOT source (compound states as clusters).

    Raises:
        ValueError: if `highlight` names no state or phase.
    """
    marked = resolve_state(highlight, chart)
    graph = graphviz.Digraph(
        chart.machine.__name__,
        graph_attr={
            "label": chart.title,
            "labelloc": "t",
            "fontname": "Helvetica",
            "rankdir": "TB",
            "compound": "true",
            "nodesep": "0.4",
            "ranksep": "0.5",
        },
        node_attr={"fontname": "Helvetica", "fontsize": "11", "shape": "box"},
        edge_attr={"fontname": "Helvetica", "fontsize": "9"},
    )
    graph.node(
        "__start",
        label="",
        shape="circle",
        style="filled",
        fillcolor="black",
        width="0.15",
        height="0.15",
        fixedsize="true",
    )
    _dot_scope(graph, None, marked, chart)
    graph.edge("__start", _initial_path(chart)[-1])
    by_id = {s.id: s for s in chart_data.states(chart.machine)}
    for t in chart_data.transitions(chart.machine):
        if t.target is None:
            continue
        attrs: dict[str, str] = {}
        tail, head = t.source, t.target
        if by_id[tail].compound:
            attrs["ltail"], tail = f"cluster_{tail}", _anchor(tail)
        if by_id[head].compound:
            attrs["lhead"], head = f"cluster_{head}", _anchor(head)
        lines = [" ".join([t.event, *([f"[{', '.join(t.guards)}]"] if t.guards else [])])]
        if t.effects or t.verdicts:
            lines.append("/ " + ", ".join(t.effects + t.verdicts))
        label = "<" + "<br/>".join(html.escape(line) for line in lines if line) + ">"
        graph.edge(tail, head, label=label, **attrs)
    source: str = graph.source
    return source


def _dot_scope(
    graph: graphviz.Digraph, parent: str | None, marked: str | None, chart: Chart
) -> None:
    for state in _children(parent, chart):
        fill = HIGHLIGHT_FILL if state.id == marked else "white"
        if state.compound:
            with graph.subgraph(name=f"cluster_{state.id}") as cluster:
                cluster.attr(
                    label=_html_lines(_display_name(state), _internal_lines(state, chart)),
                    # Below the children: edges entering the cluster then never cross it.
                    labelloc="b",
                    style="rounded,filled",
                    fillcolor=fill if state.id == marked else "#f7f7f7",
                    penwidth="3" if state.id == marked else "1.5",
                )
                cluster.node(
                    _anchor(state.id), label="", shape="point", style="invis", width="0", height="0"
                )
                _dot_scope(cluster, state.id, marked, chart)
        else:
            graph.node(
                state.id,
                label=_html_lines(_display_name(state), _internal_lines(state, chart)),
                style="rounded,filled",
                fillcolor=fill,
                penwidth="3" if state.id == marked else "1.5",
                peripheries="2" if state.final else "1",
            )


# Markdown tables for docs/lifecycle.md ------------------------------------------------------


def _source_name(state_id: str, chart: Chart) -> str:
    by_id = {s.id: s for s in chart_data.states(chart.machine)}
    state = by_id[state_id]
    if not state.compound:
        return _display_name(state)
    leaves = [
        s.name
        for s in chart_data.states(chart.machine)
        if not s.compound and state_id in _ancestors(s.id, chart)
    ]
    return f"{state.name} (any of {', '.join(leaves)})"


def _code(items: Iterable[str]) -> str:
    return ", ".join(f"`{item}`" for item in items) or "-"


def render_transition_table(chart: Chart = TASK) -> str:
    """Return every transition as a Markdown table, in priority order per source and event."""
    by_id = {s.id: s for s in chart_data.states(chart.machine)}
    rows = [
        "| Source | # | Event | Guards (all must hold) | Target | Effects (model) | Verdicts |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for t in chart_data.transitions(chart.machine):
        target = "(stays)" if t.target is None else _display_name(by_id[t.target])
        event = f"`{t.event}`" if t.event else "(eventless)"
        rows.append(
            f"| {_source_name(t.source, chart)} | {t.rank} | {event} | {_code(t.guards)} | {target}"
            f" | {_code(t.effects)} | {_code(t.verdicts)} |"
        )
    entries = "; ".join(
        f"{_display_name(s)}: {_code(s.entry)}" for s in chart_data.states(chart.machine) if s.entry
    )
    rows += ["", f"Entry actions: {entries}."]
    return "\n".join(rows) + "\n"


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0] if doc else ""


def render_contract_tables(chart: Chart = TASK) -> str:
    """Return the observation fields, guards and effects as Markdown tables."""
    rows = ["| Observation field | Type | Meaning |", "| --- | --- | --- |"]
    rows += [f"| `{name}` | `{type_}` | {doc} |" for name, type_, doc in chart.field_docs()]
    rows += ["", "| Guard | Question |", "| --- | --- |"]
    rows += [
        f"| `{name}` | {_first_line(getattr(chart.model, name).__doc__)} |"
        for name in chart.guard_names
    ]
    rows += ["", "| Effect | What the model does |", "| --- | --- |"]
    rows += [
        f"| `{name}` | {_first_line(getattr(chart.model, name).__doc__)} |"
        for name in chart.effect_names
    ]
    return "\n".join(rows) + "\n"


# The user view: phases and reasons ---------------------------------------------------------


def phase_edges(chart: Chart = TASK) -> dict[tuple[str, str], list[str]]:
    """The user view's edges: (source, target) → labels, where both ends are states with a
    `status.phase` or compound states holding some (drawn as boxes around them), and each label
    is the reason a transition writes (`Chart.reasons`), else its guards, else its effects, in
    words. Transitions to or from states without a phase (deletion) and targetless ones are
    left out; a pair reached by several transitions gets each label once."""
    by_id = {s.id: s for s in chart_data.states(chart.machine)}
    shown = _phase_view_states(chart)
    edges: dict[tuple[str, str], list[str]] = {}
    for t in chart_data.transitions(chart.machine):
        if t.target is None or t.source not in shown or t.target not in shown:
            continue
        if t.source == t.target or by_id[t.target].compound:
            continue
        reasons = [chart.reasons[v] for v in t.verdicts if v in chart.reasons]
        label = ", ".join(reasons) or " and ".join(_words(g) for g in t.guards)
        label = label or ", ".join(_words(e) for e in t.effects)
        labels = edges.setdefault((t.source, t.target), [])
        if label and label not in labels:
            labels.append(label)
    return edges


def _words(name: str) -> str:
    return name.replace("_", " ")


def _phase_view_states(chart: Chart) -> set[str]:
    """The phase states and the compound states (not the outermost) that hold some."""
    states = chart_data.states(chart.machine)
    phases = {s.id for s in states if s.phase is not None and not s.compound}
    holders = {a for p in phases for a in _ancestors(p, chart)}
    roots = {s.id for s in states if s.parent is None}
    return phases | (holders - roots)


def render_phases_dot(highlight: str | None = None, chart: Chart = TASK) -> str:
    """Return the user view as Graphviz DOT: the phases (the new object's state included), in
    boxes for the compound states that group them, and the reasons that lead between them.

    Node names are state ids and edge ends the same anchors as `render_dot` uses, so a page can
    find a state's node (SVG `<title>`) in either diagram.
    """
    marked = resolve_state(highlight, chart)
    shown = _phase_view_states(chart)
    by_id = {s.id: s for s in chart_data.states(chart.machine)}
    name = chart.machine.__name__
    graph = graphviz.Digraph(
        f"{name}Phases",
        graph_attr={
            "label": f"{name.removesuffix('Lifecycle')} phases (user view of {chart.title})",
            "labelloc": "t",
            "fontname": "Helvetica",
            "rankdir": "LR",
            "compound": "true",
            "nodesep": "0.5",
        },
        node_attr={"fontname": "Helvetica", "fontsize": "12", "shape": "box"},
        edge_attr={"fontname": "Helvetica", "fontsize": "10"},
    )

    def scope(g: graphviz.Digraph, parent: str | None) -> None:
        for state in chart_data.states(chart.machine):
            if state.id not in shown or state.parent != parent:
                if state.id not in shown and state.parent == parent and state.compound:
                    scope(g, state.id)  # the outermost compound state: not drawn, its children are
                continue
            if state.compound:
                with g.subgraph(name=f"cluster_{state.id}") as cluster:
                    cluster.attr(label=state.name, style="rounded,dashed", fontname="Helvetica")
                    cluster.node(
                        _anchor(state.id), label="", shape="point", style="invis", width="0"
                    )
                    scope(cluster, state.id)
            else:
                g.node(
                    state.id,
                    label=_display_name(state),
                    style="rounded,filled",
                    fillcolor=HIGHLIGHT_FILL if state.id == marked else "white",
                    penwidth="3" if state.id == marked else "1.5",
                )

    scope(graph, None)
    for (source, target), labels in phase_edges(chart).items():
        attrs: dict[str, str] = {}
        tail = source
        if by_id[source].compound:
            attrs["ltail"], tail = f"cluster_{source}", _anchor(source)
        graph.edge(tail, target, label="\n".join(labels), **attrs)
    source_text: str = graph.source
    return source_text
