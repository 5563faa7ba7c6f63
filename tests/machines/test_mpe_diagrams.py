"""The committed MediaProcessingEntity diagrams and docs tables match a fresh render.

Compared in text form: Mermaid, DOT and the generated blocks of docs/mpe-lifecycle.md. Fix a
failure with `python -m machines.diagrams.render --chart mpe`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from machines.diagrams import render
from machines.diagrams.render import MPE as OUTPUTS
from tests.support.freshness import assert_fresh


@pytest.mark.parametrize("path", list(render.expected_texts(outputs=OUTPUTS)), ids=lambda p: p.name)
def test_committed_text_is_fresh(path: Path) -> None:
    assert_fresh(
        path,
        render.expected_texts(outputs=OUTPUTS)[path],
        "python -m machines.diagrams.render --chart mpe",
    )


def test_check_passes_on_the_committed_files() -> None:
    assert render.main(["--check", "--chart", "mpe"]) == 0


def test_images_exist() -> None:
    for suffix in ("svg", "png"):
        assert (render.ROOT / f"{OUTPUTS.diagram_stem}.{suffix}").stat().st_size > 0
