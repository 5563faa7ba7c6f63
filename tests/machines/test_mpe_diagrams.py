"""The committed MediaProcessingEntity diagrams and docs tables match a fresh render.

Compared in text form: Mermaid, DOT and the generated blocks of docs/mpe-lifecycle.md. Fix a
failure with `python -m machines.diagrams.render --chart mpe`.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from machines.diagrams import render
from machines.diagrams.render import MPE as OUTPUTS


@pytest.mark.parametrize("path", list(render.expected_texts(outputs=OUTPUTS)), ids=lambda p: p.name)
def test_committed_text_is_fresh(path: Path) -> None:
    fresh = render.expected_texts(outputs=OUTPUTS)[path]
    committed = path.read_text(encoding="utf-8") if path.exists() else ""
    if committed != fresh:
        diff = "".join(
            difflib.unified_diff(
                committed.splitlines(keepends=True),
                fresh.splitlines(keepends=True),
                fromfile=f"{path} (committed)",
                tofile="fresh render",
                n=1,
            )
        )
        pytest.fail(f"{path} is stale; run: python -m machines.diagrams.render --chart mpe\n{diff}")


def test_check_passes_on_the_committed_files() -> None:
    assert render.main(["--check", "--chart", "mpe"]) == 0


def test_images_exist() -> None:
    for suffix in ("svg", "png"):
        assert (render.ROOT / f"{OUTPUTS.diagram_stem}.{suffix}").stat().st_size > 0
