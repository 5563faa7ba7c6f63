"""The committed diagrams and docs tables match a fresh render of the chart.

Compared in text form: Mermaid, DOT (our renderer is deterministic) and the generated blocks
of docs/lifecycle.md. SVG and PNG depend on the Graphviz version, so they are only checked to
exist and to render. Fix a failure with `python -m machines.diagrams.render`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from machines import chart_data
from machines.diagrams import graph as diagram
from machines.diagrams import render
from machines.task.chart import TaskLifecycle
from tests.support.freshness import assert_fresh


@pytest.mark.parametrize("path", list(render.expected_texts()), ids=lambda p: p.name)
def test_committed_text_is_fresh(path: Path) -> None:
    assert_fresh(path, render.expected_texts()[path], "python -m machines.diagrams.render")


def test_check_command_agrees() -> None:
    assert render.main(["--check"]) == 0


def test_committed_images_exist() -> None:
    for suffix in ("svg", "png"):
        path = render.ROOT / f"{render.DIAGRAM_STEM}.{suffix}"
        assert path.stat().st_size > 1000, path


def test_every_transition_appears_in_the_mermaid_text() -> None:
    """Guards and actions are on the edges and states, not only in the table."""
    text = diagram.render_mermaid()
    for t in chart_data.transitions(TaskLifecycle):
        assert t.label in text, t.key


@pytest.mark.parametrize("name", ["Running", "running", "", "Deleting", "terminated"])
def test_highlight_marks_one_state(name: str) -> None:
    state = diagram.resolve_state(name)
    assert f"class {state} highlighted" in diagram.render_mermaid(name)
    assert diagram.HIGHLIGHT_FILL in diagram.render_dot(name)
    assert diagram.HIGHLIGHT_FILL not in diagram.render_dot()


def test_highlight_rejects_unknown_names() -> None:
    with pytest.raises(ValueError, match="unknown state or phase 'Pending'"):
        diagram.render_mermaid("Pending")


def test_highlighted_svg_renders(tmp_path: Path) -> None:
    out = tmp_path / "running.svg"
    assert render.main(["--highlight", "Running", "--format", "svg", "--output", str(out)]) == 0
    assert out.read_bytes().lstrip().startswith(b"<?xml")


def test_stale_files_are_reported(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    docs = render.ROOT / render.DOCS_PATH
    (tmp_path / "docs" / "lifecycle.md").write_text(docs.read_text(encoding="utf-8"))
    stale = {p.name for p in render.stale_files(tmp_path)}
    assert stale == {"task-lifecycle.mmd", "task-lifecycle.dot", "task-phases.dot"}
    assert render.main(["--check", "--root", str(tmp_path)]) == 1


def test_user_view_shows_the_phases_and_the_reasons_between_them() -> None:
    """The user view (diagrams/task-phases.*) has a node per phase (the new Task's included),
    the terminal reasons on the edges into Succeeded and Failed, and nothing of deletion."""
    source = diagram.render_phases_dot()
    for state in ("new", "initializing", "job_pending", "running", "succeeded", "failed"):
        assert f"\t{state} [" in source
    assert "deleting" not in source
    edges = diagram.phase_edges()
    assert edges[("running", "failed")] == ["JobFailed", "JobLost", "JobPodsRefused"]
    assert edges[("running", "succeeded")] == ["JobSucceeded"]
    assert "WorkflowTerminated" in edges[("active", "failed")]
