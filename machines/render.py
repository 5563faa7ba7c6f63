"""Write the lifecycle diagrams and the generated parts of `docs/lifecycle.md`.

Where this sits in the flow: a developer changes `machines/task.py`, then runs

    python -m machines.render            # rewrite diagrams/ and docs/lifecycle.md's blocks
    python -m machines.render --check    # exit 1 if anything committed is stale
    python -m machines.render --highlight Running --format svg --output running.svg

The CLI (`taskfsm diagram`, `taskfsm explain`) will wrap `write_all`, `stale_files` and
`render`. The freshness test compares the text forms (Mermaid, DOT, the docs blocks) with a
fresh render; SVG and PNG come from Graphviz (`dot` on PATH) and are not compared, since
their bytes depend on the Graphviz version.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import graphviz

from machines import diagram

ROOT: Final = Path(__file__).resolve().parent.parent
"""The repository root (the parent of `machines/`)."""

DIAGRAM_STEM: Final = "diagrams/task-lifecycle"
DOCS_PATH: Final = "docs/lifecycle.md"

TEXT_FORMATS: Final = ("mermaid", "dot")
IMAGE_FORMATS: Final = ("svg", "png")
_SUFFIX: Final = {"mermaid": "mmd", "dot": "dot", "svg": "svg", "png": "png"}

_BLOCK = re.compile(
    r"(<!-- BEGIN GENERATED: (?P<name>[a-z-]+) -->\n)"
    r"(?P<body>.*?)"
    r"(<!-- END GENERATED: (?P=name) -->)",
    re.DOTALL,
)


def _mermaid_block() -> str:
    return "```mermaid\n" + diagram.render_mermaid() + "```\n"


DOC_BLOCKS: Final[dict[str, Callable[[], str]]] = {
    "diagram": _mermaid_block,
    "transitions": diagram.render_transition_table,
    "contract": diagram.render_contract_tables,
}
"""Generated blocks of `docs/lifecycle.md`, by marker name."""


def render(fmt: str, highlight: str | None = None) -> bytes:
    """Render the lifecycle in `fmt` (`mermaid`, `dot`, `svg`, `png`), one state highlighted.

    Raises:
        ValueError: for an unknown format or state.
        graphviz.ExecutableNotFound: for an image format without Graphviz installed.
    """
    if fmt == "mermaid":
        return diagram.render_mermaid(highlight).encode()
    if fmt == "dot":
        return diagram.render_dot(highlight).encode()
    if fmt in IMAGE_FORMATS:
        return graphviz.Source(diagram.render_dot(highlight)).pipe(format=fmt)
    raise ValueError(f"unknown format {fmt!r}; expected one of {TEXT_FORMATS + IMAGE_FORMATS}")


def update_generated_blocks(text: str) -> str:
    """Return `text` with every `<!-- BEGIN GENERATED: name -->` block rendered afresh.

    Raises:
        ValueError: if a block of `DOC_BLOCKS` has no markers, or a marker names no block.
    """
    found: set[str] = set()

    def replace(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in DOC_BLOCKS:
            raise ValueError(f"{DOCS_PATH}: no generator for block {name!r}")
        found.add(name)
        return match.group(1) + DOC_BLOCKS[name]() + match.group(4)

    out = _BLOCK.sub(replace, text)
    missing = set(DOC_BLOCKS) - found
    if missing:
        raise ValueError(f"{DOCS_PATH}: missing generated blocks {sorted(missing)}")
    return out


def expected_texts(root: Path = ROOT) -> dict[Path, str]:
    """Return the text files `write_all` produces under `root`, with their fresh contents.

    Raises:
        FileNotFoundError: if `docs/lifecycle.md` does not exist (its prose is hand-written).
    """
    docs = root / DOCS_PATH
    return {
        root / f"{DIAGRAM_STEM}.mmd": diagram.render_mermaid(),
        root / f"{DIAGRAM_STEM}.dot": diagram.render_dot(),
        docs: update_generated_blocks(docs.read_text(encoding="utf-8")),
    }


def stale_files(root: Path = ROOT) -> list[Path]:
    """Return the committed text files under `root` that differ from a fresh render."""
    return [
        path
        for path, fresh in expected_texts(root).items()
        if not path.exists() or path.read_text(encoding="utf-8") != fresh
    ]


def write_all(root: Path = ROOT) -> list[Path]:
    """Write the Mermaid, DOT, SVG and PNG diagrams and refresh the docs blocks.

    Returns the paths written. Raises `graphviz.ExecutableNotFound` without Graphviz.
    """
    written = []
    for path, text in expected_texts(root).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    for fmt in IMAGE_FORMATS:
        path = root / f"{DIAGRAM_STEM}.{_SUFFIX[fmt]}"
        path.write_bytes(render(fmt))
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `python -m machines.render`; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m machines.render", description="Render the Task lifecycle statechart."
    )
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root")
    parser.add_argument("--check", action="store_true", help="only report stale files")
    parser.add_argument("--highlight", help="state id, state name or phase to mark")
    parser.add_argument("--format", choices=TEXT_FORMATS + IMAGE_FORMATS, default="svg")
    parser.add_argument("--output", default="-", help="file for --highlight ('-' = stdout)")
    args = parser.parse_args(argv)

    if args.highlight is not None:
        try:
            data = render(args.format, args.highlight)
        except ValueError as err:
            parser.error(str(err))
        if args.output == "-":
            sys.stdout.buffer.write(data)
        else:
            Path(args.output).write_bytes(data)
        return 0
    if args.check:
        stale = stale_files(args.root)
        for path in stale:
            print(f"stale: {path} (run: python -m machines.render)", file=sys.stderr)
        return 1 if stale else 0
    for path in write_all(args.root):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
