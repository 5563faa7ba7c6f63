"""The committed Workflow diagrams and docs tables match a fresh render of the chart.

Compared in text form: Mermaid, DOT and the generated blocks of docs/workflow-lifecycle.md.
SVG and PNG depend on the Graphviz version, so they are only checked to exist and render.
Fix a failure with `python -m machines.diagrams.render --chart workflow`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from machines import chart_data
from machines.diagrams import graph as diagram
from machines.diagrams import render
from machines.diagrams.charts import WORKFLOW as CHART
from machines.diagrams.render import WORKFLOW as OUTPUTS
from machines.workflow.chart import WorkflowLifecycle
from tests.support.freshness import assert_fresh


@pytest.mark.parametrize("path", list(render.expected_texts(outputs=OUTPUTS)), ids=lambda p: p.name)
def test_committed_text_is_fresh(path: Path) -> None:
    assert_fresh(
        path,
        render.expected_texts(outputs=OUTPUTS)[path],
        "python -m machines.diagrams.render --chart workflow",
    )


def test_check_command_agrees() -> None:
    assert render.main(["--check", "--chart", "workflow"]) == 0


def test_render_knows_every_chart() -> None:
    assert set(render.charts()) == {"task", "workflow", "mpe"}
    assert render.charts()["workflow"] is OUTPUTS


def test_committed_images_exist() -> None:
    for suffix in ("svg", "png"):
        path = render.ROOT / f"{OUTPUTS.diagram_stem}.{suffix}"
        assert path.stat().st_size > 1000, path


def test_every_transition_appears_in_the_mermaid_text() -> None:
    text = diagram.render_mermaid(chart=CHART)
    for t in chart_data.transitions(WorkflowLifecycle):
        assert t.label in text, t.key


def test_every_transition_is_in_the_docs_table() -> None:
    table = diagram.render_transition_table(CHART)
    assert len([line for line in table.splitlines() if line.startswith("| ")]) == (
        2 + len(chart_data.transitions(WorkflowLifecycle))
    )


@pytest.mark.parametrize("name", ["AwaitingCompletion", "awaiting_completion", "", "Deleting"])
def test_highlight_marks_one_state(name: str) -> None:
    state = diagram.resolve_state(name, CHART)
    assert f"class {state} highlighted" in diagram.render_mermaid(name, CHART)
    assert diagram.HIGHLIGHT_FILL in diagram.render_dot(name, CHART)


def test_task_phases_are_not_workflow_states() -> None:
    with pytest.raises(ValueError, match="unknown state or phase 'JobPending'"):
        diagram.resolve_state("JobPending", CHART)


def test_highlighted_svg_renders(tmp_path: Path) -> None:
    out = tmp_path / "awaiting.svg"
    argv = [
        "--chart",
        "workflow",
        "--highlight",
        "AwaitingCompletion",
        "--format",
        "svg",
        "--output",
        str(out),
    ]
    assert render.main(argv) == 0
    assert out.read_bytes().lstrip().startswith(b"<?xml")


def test_a_missing_docs_page_is_reported_stale(tmp_path: Path) -> None:
    assert render.main(["--check", "--chart", "workflow", "--root", str(tmp_path)]) == 1
