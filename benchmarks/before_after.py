"""Render issue 31's targets as before/after rows from profiled bursts of two commits.

Run: ``.venv/bin/python benchmarks/bench_controller.py --profile --record runs.jsonl`` on a
checkout of each commit, alternating (the harness is the same for both: copy this folder into the
older checkout), then::

    .venv/bin/python benchmarks/before_after.py runs.jsonl --before 449307e --after e981dd2 \
        --run last-run.json

It replaces the ``## Before and after`` section of ``docs/benchmarks.md`` (``--output``; ``''``
prints only): each figure the median of the runs of each commit, every run listed, and the
profile of the after commit's last run. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_controller import (  # noqa: E402 (after the sys.path entries above)
    GOAL_ALL_WRITES,
    GOAL_CPU_MS,
    per_task_cost,
    render_profile,
)
from bench_controller import render as bench_render  # noqa: E402 (after the sys.path entries)
from harness import RunResult  # noqa: E402 (after the sys.path entries above)
from report import publish, sections  # noqa: E402 (this script's folder is on sys.path)

SECTION = "## Before and after"
FROM_FULL_RUN = (
    "## Throughput and latency",
    "## Controller memory",
    "## Scaling",
    "## Against the targets",
)
"""The sections of a full run (``--run``) the before/after section quotes."""

ROWS: list[tuple[str, Callable[[RunResult], float], str, str]] = [
    (
        "controller CPU per Task (ms)",
        lambda r: r.cpu_ms_per_task,
        "{:.1f}",
        f"≤ {GOAL_CPU_MS:g}",
    ),
    (
        "kube-apiserver + etcd CPU per Task (ms)",
        lambda r: r.plane_cpu_ms_per_task,
        "{:.1f}",
        "≤ 0.75 x before",
    ),
    (
        "writes per Task: lifecycle, Events, Workflow status",
        lambda r: (c := per_task_cost(r)).task_writes + c.events + c.workflow_writes,
        "{:.2f}",
        f"≤ {GOAL_ALL_WRITES:g}",
    ),
    ("of which Events", lambda r: per_task_cost(r).events, "{:.2f}", ""),
    ("Tasks/s to Job created", lambda r: r.throughput_job, "{:.1f}", ""),
    ("Task reconciles per Task", lambda r: r.reconciles_per_task, "{:.2f}", ""),
]


def load(path: Path) -> list[tuple[str, str, RunResult]]:
    """(commit, date, run) of every line of ``path``."""
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            raw: dict[str, Any] = json.loads(line)
            commit, date = raw.pop("commit"), raw.pop("date")
            out.append((commit, date, RunResult(**raw)))
    return out


def render(
    runs: list[tuple[str, str, RunResult]],
    before: str,
    after: str,
    full: dict[str, Any] | None = None,
) -> str:
    # --after may name several commits (runs recorded while small changes landed): one side.
    afters = after.split(",")
    after = afters[-1]
    sides = {
        before: [r for commit, _, r in runs if commit == before],
        after: [r for commit, _, r in runs if commit in afters],
    }
    dates = sorted(date for commit, date, _ in runs if commit == before or commit in afters)
    sizes = sorted({(r.n, r.workers) for rs in sides.values() for r in rs})
    lines = [
        SECTION,
        "",
        f"`benchmarks/before_after.py`: issue 31's targets, profiled bursts "
        f"({', '.join(f'{n:,} Tasks x {w} workers' for n, w in sizes)}) of commit {before} "
        f"(before) and {' and '.join(afters)} (after), run alternately on one machine, {dates[0]} to "
        f"{dates[-1]} ({len(sides[before])} and {len(sides[after])} runs); each figure the median, "
        "every run in brackets. Measured, not asserted.",
        "",
        f"| figure | before ({before}) | after ({after}) | after / before | target |",
        "|---|---|---|---:|---|",
    ]
    for label, figure, form, target in ROWS:
        cells = []
        medians = []
        for commit in (before, after):
            values = [figure(r) for r in sides[commit]]
            medians.append(statistics.median(values))
            each = " / ".join(form.format(v) for v in values)
            cells.append(f"{form.format(medians[-1])} ({each})")
        ratio = f"x{medians[1] / medians[0]:.2f}" if medians[0] else "-"
        lines.append(f"| {label} | {cells[0]} | {cells[1]} | {ratio} | {target} |")
    if full is not None:
        lines += [
            "",
            f"The after commit ({full['meta'].get('taskfsm commit', '?')}) in one run of "
            f"`bench_controller.py` ({full['meta'].get('date', '?')}; configuration "
            f"`{json.dumps(full.get('config', {}), sort_keys=True)}`), for the targets a "
            "profiled burst does not show (the before figures: the main report above, from "
            "an earlier commit, and docs/performance.md):",
        ]
        report = bench_render(
            [RunResult(**r) for r in full["results"]],
            full["memory"],
            full["meta"],
            full.get("config", {}),
            full.get("notes"),
            full.get("ceiling") or {},
        )
        for heading, body in sections(report):
            if heading in FROM_FULL_RUN:
                title = heading.removeprefix("## ")
                lines += ["", f"**{title}**", "", body.split("\n", 1)[1].strip()]
    last = sides[after][-1]
    if last.profile:
        lines += ["", f"The after commit's ({after}) last run. {render_profile(last)}"]
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("runs", type=Path, help="JSON lines of bench_controller.py --record")
    parser.add_argument("--before", required=True, help="the commit before (as recorded)")
    parser.add_argument(
        "--after", required=True, help="the commit after (as recorded; several: comma-separated)"
    )
    parser.add_argument(
        "--output",
        default=str(REPO / "docs" / "benchmarks.md"),
        help=f"report whose '{SECTION}' section is replaced ('' = none)",
    )
    parser.add_argument(
        "--run",
        type=Path,
        help="the --json of a bench_controller.py run of the after commit, whose throughput, "
        "memory, scaling and targets sections are quoted",
    )
    args = parser.parse_args(argv)
    full = json.loads(args.run.read_text()) if args.run else None
    section = render(load(args.runs), args.before, args.after, full)
    publish(section, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
