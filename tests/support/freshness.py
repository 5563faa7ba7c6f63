"""The assertion the diagram freshness tests share: a committed generated file equals a fresh
render, else the test fails with the command that regenerates it and a diff."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest


def assert_fresh(path: Path, fresh: str, command: str) -> None:
    """Fail unless ``path`` holds ``fresh``; the message names ``command`` and shows the diff."""
    committed = path.read_text(encoding="utf-8") if path.exists() else ""
    if committed == fresh:
        return
    diff = "".join(
        difflib.unified_diff(
            committed.splitlines(keepends=True),
            fresh.splitlines(keepends=True),
            fromfile=f"{path} (committed)",
            tofile="fresh render",
            n=1,
        )
    )
    pytest.fail(f"{path} is stale; run `make generate` ({command} writes it)\n{diff}")
