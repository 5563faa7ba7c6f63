"""Write the lifecycle diagrams and the generated parts of `docs/lifecycle.md`.

Where this sits in the flow: a developer changes `machines/task/chart.py` (or
`machines/workflow/chart.py`), then runs

    python -m machines.diagrams.render          # rewrite diagrams/ and the docs' generated blocks
    python -m machines.diagrams.render --check  # exit 1 if anything committed is stale
    python -m machines.diagrams.render --highlight Running --format svg --output running.svg
    python -m machines.diagrams.render --chart workflow --highlight Running --format mermaid

Each chart has its `Outputs`: the Task lifecycle (`TASK`, the default of every function:
`diagrams/task-lifecycle.*`, its user view `diagrams/task-phases.*` (the README's picture, and
the overview of `taskfsm ui`), `docs/lifecycle.md`), the Workflow lifecycle (`WORKFLOW`:
`diagrams/workflow-lifecycle.*`, `diagrams/workflow-phases.*`, `docs/workflow-lifecycle.md`)
and the MediaProcessingEntity lifecycle (`MPE`: `diagrams/mpe-lifecycle.*`,
`docs/mpe-lifecycle.md`); `charts()` lists them by name. Writing and checking from the command
line cover every chart unless `--chart` picks one.

The CLI (`taskfsm diagram`, `taskfsm explain`) wraps `write_all`, `stale_files` and
`render`. The freshness tests compare the text forms (Mermaid, DOT, the docs blocks) with a
fresh render; SVG and PNG come from Graphviz (`dot` on PATH) and are not compared, since
their bytes depend on the Graphviz version.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import graphviz

from machines.diagrams import graph as diagram
from machines.diagrams.charts import MPE as MPE_CHART
from machines.diagrams.charts import TASK as TASK_CHART
from machines.diagrams.charts import WORKFLOW as WORKFLOW_CHART
from machines.diagrams.charts import Chart

ROOT: Final = Path(__file__).resolve().parents[2]
"""The repository root (the parent of `machines/`)."""

DIAGRAM_STEM: Final = "diagrams/task-lifecycle"
DOCS_PATH: Final = "docs/lifecycle.md"
WORKFLOW_DIAGRAM_STEM: Final = "diagrams/workflow-lifecycle"
WORKFLOW_DOCS_PATH: Final = "docs/workflow-lifecycle.md"
MPE_DIAGRAM_STEM: Final = "diagrams/mpe-lifecycle"
MPE_DOCS_PATH: Final = "docs/mpe-lifecycle.md"
PHASES_STEM: Final = "diagrams/task-phases"
WORKFLOW_PHASES_STEM: Final = "diagrams/workflow-phases"

TEXT_FORMATS: Final = ("mermaid", "dot")
IMAGE_FORMATS: Final = ("svg", "png")
_SUFFIX: Final = {"mermaid": "mmd", "dot": "dot", "svg": "svg", "png": "png"}

_BLOCK = re.compile(
    r"(<!-- BEGIN GENERATED: (?P<name>[a-z-]+) -->\n)"
    r"(?P<body>.*?)"
    r"(<!-- END GENERATED: (?P=name) -->)",
    re.DOTALL,
)


def _doc_blocks(chart: Chart) -> dict[str, Callable[[], str]]:
    """The generated blocks of a chart's docs page, by marker name."""

    def mermaid_block() -> str:
        return "```mermaid\n" + diagram.render_mermaid(chart=chart) + "```\n"

    return {
        "diagram": mermaid_block,
        "transitions": lambda: diagram.render_transition_table(chart),
        "contract": lambda: diagram.render_contract_tables(chart),
    }


@dataclass(frozen=True)
class Outputs:
    """Where one chart is written: `diagram_stem` + `.mmd/.dot/.svg/.png`, its user view (the
    phases and the reasons between them, `graph.render_phases_dot`) `phases_stem` +
    `.dot/.svg/.png`, and its docs page (relative to the repository root) with the generated
    blocks `blocks`."""

    chart: Chart
    diagram_stem: str
    docs_path: str
    blocks: Mapping[str, Callable[[], str]]
    phases_stem: str = ""


DOC_BLOCKS: Final[dict[str, Callable[[], str]]] = _doc_blocks(TASK_CHART)
"""Generated blocks of `docs/lifecycle.md`, by marker name."""

TASK: Final = Outputs(TASK_CHART, DIAGRAM_STEM, DOCS_PATH, DOC_BLOCKS, PHASES_STEM)
"""The Task lifecycle's outputs, the default of every function here."""

WORKFLOW: Final = Outputs(
    WORKFLOW_CHART,
    WORKFLOW_DIAGRAM_STEM,
    WORKFLOW_DOCS_PATH,
    _doc_blocks(WORKFLOW_CHART),
    WORKFLOW_PHASES_STEM,
)
"""The Workflow lifecycle's outputs."""

MPE: Final = Outputs(MPE_CHART, MPE_DIAGRAM_STEM, MPE_DOCS_PATH, _doc_blocks(MPE_CHART))
"""The MediaProcessingEntity lifecycle's outputs (no user view: it has no phases)."""


def charts() -> dict[str, Outputs]:
    """Every chart's outputs, by the name `--chart` takes."""
    return {"task": TASK, "workflow": WORKFLOW, "mpe": MPE}


def render_phases(fmt: str, chart: Chart = TASK_CHART) -> bytes:
    """Render `chart`'s user view (`graph.render_phases_dot`) as `dot`, `svg` or `png`."""
    source = diagram.render_phases_dot(chart=chart)
    if fmt == "dot":
        return source.encode()
    if fmt in IMAGE_FORMATS:
        image: bytes = graphviz.Source(source).pipe(format=fmt)
        return image
    raise ValueError(f"unknown format {fmt!r} for the user view; expected dot, svg or png")


def render(fmt: str, highlight: str | None = None, chart: Chart = TASK_CHART) -> bytes:
    """Render `chart` in `fmt` (`mermaid`, `dot`, `svg`, `png`), one state highlighted.

    Raises:
        ValueError: for an unknown format or state.
        graphviz.ExecutableNotFound: for an image format without Graphviz installed.
    """
    if fmt == "mermaid":
        return diagram.render_mermaid(highlight, chart).encode()
    if fmt == "dot":
        return diagram.render_dot(highlight, chart).encode()
    if fmt in IMAGE_FORMATS:
        image: bytes = graphviz.Source(diagram.render_dot(highlight, chart)).pipe(format=fmt)
        return image
    raise ValueError(f"unknown format {fmt!r}; expected one of {TEXT_FORMATS + IMAGE_FORMATS}")


def update_generated_blocks(text: str, outputs: Outputs = TASK) -> str:
    """Return `text` with every `<!-- BEGIN GENERATED: name -->` block rendered afresh.

    Raises:
        ValueError: if a block of `outputs.blocks` has no markers, or a marker names no block.
    """
    found: set[str] = set()
    blocks, docs_path = outputs.blocks, outputs.docs_path

    def replace(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in blocks:
            raise ValueError(f"{docs_path}: no generator for block {name!r}")
        found.add(name)
        return match.group(1) + blocks[name]() + match.group(4)

    out = _BLOCK.sub(replace, text)
    missing = set(blocks) - found
    if missing:
        raise ValueError(f"{docs_path}: missing generated blocks {sorted(missing)}")
    return out


def expected_texts(root: Path = ROOT, outputs: Outputs = TASK) -> dict[Path, str]:
    """Return the text files `write_all` produces under `root`, with their fresh contents.

    Raises:
        FileNotFoundError: if the docs page does not exist (its prose is hand-written).
    """
    docs = root / outputs.docs_path
    stem = outputs.diagram_stem
    texts = {
        root / f"{stem}.mmd": diagram.render_mermaid(chart=outputs.chart),
        root / f"{stem}.dot": diagram.render_dot(chart=outputs.chart),
        docs: update_generated_blocks(docs.read_text(encoding="utf-8"), outputs),
    }
    if outputs.phases_stem:
        texts[root / f"{outputs.phases_stem}.dot"] = diagram.render_phases_dot(chart=outputs.chart)
    return texts


def stale_files(root: Path = ROOT, outputs: Outputs = TASK) -> list[Path]:
    """Return the committed text files under `root` that differ from a fresh render."""
    return [
        path
        for path, fresh in expected_texts(root, outputs).items()
        if not path.exists() or path.read_text(encoding="utf-8") != fresh
    ]


def write_all(root: Path = ROOT, outputs: Outputs = TASK) -> list[Path]:
    """Write the Mermaid, DOT, SVG and PNG diagrams and refresh the docs blocks.

    Returns the paths written. Raises `graphviz.ExecutableNotFound` without Graphviz.
    """
    written = []
    for path, text in expected_texts(root, outputs).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    for fmt in IMAGE_FORMATS:
        path = root / f"{outputs.diagram_stem}.{_SUFFIX[fmt]}"
        path.write_bytes(render(fmt, chart=outputs.chart))
        written.append(path)
        if outputs.phases_stem:
            path = root / f"{outputs.phases_stem}.{_SUFFIX[fmt]}"
            path.write_bytes(render_phases(fmt, outputs.chart))
            written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `python -m machines.diagrams.render`; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m machines.diagrams.render", description="Render the lifecycle statecharts."
    )
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root")
    parser.add_argument(
        "--chart",
        choices=("task", "workflow", "mpe"),
        help="one chart only (default: every chart; the Task chart for --highlight)",
    )
    parser.add_argument("--check", action="store_true", help="only report stale files")
    parser.add_argument("--highlight", help="state id, state name or phase to mark")
    parser.add_argument("--format", choices=TEXT_FORMATS + IMAGE_FORMATS, default="svg")
    parser.add_argument("--output", default="-", help="file for --highlight ('-' = stdout)")
    args = parser.parse_args(argv)
    every = charts()
    selected = [every[args.chart]] if args.chart else list(every.values())

    if args.highlight is not None:
        try:
            data = render(args.format, args.highlight, every[args.chart or "task"].chart)
        except ValueError as err:
            parser.error(str(err))
        if args.output == "-":
            sys.stdout.buffer.write(data)
        else:
            Path(args.output).write_bytes(data)
        return 0
    if args.check:
        stale = []
        for outputs in selected:
            try:
                stale += stale_files(args.root, outputs)
            except FileNotFoundError as err:  # no docs page: stale by definition
                stale.append(Path(err.filename or args.root / outputs.docs_path))
        for path in stale:
            print(f"stale: {path} (run `make generate`)", file=sys.stderr)
        return 1 if stale else 0
    for outputs in selected:
        for path in write_all(args.root, outputs):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
