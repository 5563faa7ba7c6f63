"""Benchmark: the controller's RSS with 10,000 Tasks and their Jobs cached, lever by lever.

Run: ``make bench`` (after the controller benchmark) or ``.venv/bin/python benchmarks/bench_memory.py``
(``--quick`` for a smoke run on 30 Tasks; ``--help``). Nothing is asserted: the table goes to
stdout, to the ``## Controller memory, lever by lever`` section of ``docs/benchmarks.md`` (replaced
in place, the rest of the file kept) and to ``benchmarks/last-memory-run.json`` (``--from-json``
renders the section again).

What it does, on a local control plane of its own (the controller benchmark's harness,
``bench_controller.Bench``: kube-controller-manager with raised client limits, the pooled simulated
kubelet):

1. one burst of N Tasks (10,000 by default) run to ``Succeeded`` by ``taskfsm run`` (16 workers),
   which leaves N finished Tasks and their Jobs in one namespace, as a real cluster holds them;
2. for every variant, fresh ``taskfsm run`` processes (4 workers) on that namespace: RSS
   (``/proc/<pid>/status`` VmRSS) once the start-up pass over every Task has drained and the
   process sat idle 3 s (``Bench.memory``), three processes per variant, the variants' order
   alternating; median and every run (heap fragmentation makes RSS vary between processes);
3. the variants switch one memory lever at a time, in the child process only
   (``benchmarks/memory_hooks/sitecustomize.py`` reads ``TASKFSM_BENCH_MEMORY``; glibc's
   allocator takes its settings from the environment): none of the levers (the controller before
   them), ``gc.freeze()`` after the first lists, ``malloc_trim(0)`` after the start-up pass,
   glibc limited to 2 arenas (``MALLOC_ARENA_MAX=2``), both of the last two, the same with
   Python's small-object allocator replaced by glibc's (``PYTHONMALLOC=malloc``, so the trim can
   reach small objects' memory too), and the controller as shipped;
4. what one cached object costs: every Task and Job of the namespace through the cache
   transforms, measured as live Python objects (``sys.getsizeof`` over the object graph, each
   shared string counted once), by top-level part (metadata, spec, status): the ceiling of what
   slimmer cached objects could save.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from harness import KCM_ARGS, Bench  # noqa: E402 (after the sys.path entries above)
from report import publish  # noqa: E402 (this script's folder is on sys.path)

from taskfsm.kube import transforms  # noqa: E402 (after the sys.path entries above)
from taskfsm.kube.resources import TASKS  # noqa: E402 (after the sys.path entries above)
from taskfsm.kube.rest import JOBS  # noqa: E402 (after the sys.path entries above)

SECTION = "## Controller memory, lever by lever"
EXPIRED_SECTION = "## Controller memory, finished Tasks whose Jobs expired"
"""The section of a ``--jobs-expired`` run (``make bench`` runs both)."""
HOOKS = REPO / "benchmarks" / "memory_hooks"

#: label -> (levers for the hook, extra environment of the child)
VARIANTS: dict[str, tuple[str, dict[str, str]]] = {
    "none of the levers": ("none", {}),
    "gc.freeze() after the first lists": ("freeze", {}),
    "malloc_trim(0) after the start-up pass": ("trim", {}),
    "MALLOC_ARENA_MAX=2": ("none", {"MALLOC_ARENA_MAX": "2"}),
    "malloc_trim(0) and MALLOC_ARENA_MAX=2": ("trim", {"MALLOC_ARENA_MAX": "2"}),
    "PYTHONMALLOC=malloc, malloc_trim(0), MALLOC_ARENA_MAX=2": (
        "trim",
        {"PYTHONMALLOC": "malloc", "MALLOC_ARENA_MAX": "2"},
    ),
    "as shipped": ("shipped", {}),
}


def log(text: str) -> None:
    print(f"[bench-memory {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


@contextmanager
def child_env(levers: str, extra: dict[str, str]) -> Iterator[None]:
    """The environment the next controller process starts with (ControllerProcess copies
    ``os.environ``)."""
    saved = dict(os.environ)
    os.environ["TASKFSM_BENCH_MEMORY"] = levers
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(HOOKS), saved.get("PYTHONPATH", "")) if p
    )
    os.environ.update(extra)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def deep_size(obj: Any, seen: set[int]) -> int:
    """Bytes of ``obj``'s object graph not in ``seen`` (each object counted once)."""
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        for key, value in obj.items():
            size += deep_size(key, seen) + deep_size(value, seen)
    elif isinstance(obj, list):
        for value in obj:
            size += deep_size(value, seen)
    return size


def object_sizes(bench: Bench, namespace: str) -> dict[str, dict[str, float]]:
    """Bytes per cached Task and Job (after the cache transforms), by top-level part; strings
    shared between objects (interned) are counted once, for the first object holding them."""
    out: dict[str, dict[str, float]] = {}
    for res, transform in ((TASKS, transforms.default_transform), (JOBS, transforms.job_transform)):
        items = bench.rest.list(res, namespace).get("items") or []
        cached = [transform(item) for item in items]
        seen: set[int] = set()
        parts: dict[str, int] = {}
        for obj in cached:
            seen.add(id(obj))
            parts["(the object)"] = parts.get("(the object)", 0) + sys.getsizeof(obj)
            for key, value in obj.items():
                parts[key] = parts.get(key, 0) + deep_size(key, seen) + deep_size(value, seen)
        n = max(1, len(cached))
        out[res.kind] = {k: v / n for k, v in parts.items()} | {"objects": float(len(cached))}
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    from taskfsm.api.crdgen import crd_documents
    from taskfsm_dev.controlplane import ControlPlane
    from taskfsm_dev.crds import install_crds

    labels = [v for v in VARIANTS if v in args.variants] if args.variants else list(VARIANTS)
    results: dict[str, list[dict[str, float]]] = {label: [] for label in labels}
    log_dir = Path(
        os.environ.get("TASKFSM_BENCH_LOGS")
        or Path(os.environ.get("TMPDIR", "/tmp")) / f"taskfsm-bench-memory-{os.getpid()}"
    )
    log_dir.mkdir(parents=True, exist_ok=True)
    with ControlPlane(name="taskfsm-bench-memory", controller_manager_args=KCM_ARGS) as plane:
        install_crds(plane.api_client(), crd_documents())
        bench = Bench(plane, log_dir=log_dir)
        bench.start_kubelet()
        try:
            if args.jobs_expired:
                log(f"{args.tasks} finished Tasks whose Jobs expired to fill the namespace")
                namespace = bench.finished(args.tasks)
            else:
                log(f"burst of {args.tasks} Tasks to fill the namespace")
                burst = bench.run(args.tasks, 16)
                if not burst.complete:
                    raise RuntimeError(f"the burst of {args.tasks} Tasks did not complete")
                namespace = burst.namespace
        finally:
            bench.stop_kubelet()
        sizes = object_sizes(bench, namespace)
        profile: dict[str, Any] = {}
        if args.profile:
            out = log_dir / "tracemalloc.json"
            with child_env("traced", {"TASKFSM_BENCH_TRACEMALLOC": str(out)}):
                point = bench.memory(
                    namespace, args.tasks, settle=5 + args.tasks / 1000, until=out.exists
                )
            profile = json.loads(out.read_text()) | {"rss_mib": point["rss_mib"]}
            log(
                f"traced: {point['rss_mib']:.1f} MiB RSS, {profile['total_bytes'] / 2**20:.1f} MiB live"
            )
        for r in range(args.repeats):
            order = list(labels)
            random.shuffle(order)
            for label in order:
                levers, extra = VARIANTS[label]
                with child_env(levers, extra):
                    point = bench.memory(namespace, args.tasks)
                results[label].append(point)
                log(f"round {r + 1}: {label}: {point['rss_mib']:.1f} MiB")
    return {
        "results": results,
        "sizes": sizes,
        "profile": profile,
        "meta": {
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": os.popen(f"git -C {REPO} rev-parse --short HEAD").read().strip() or "?",
            "tasks": args.tasks,
            "jobs": not args.jobs_expired,
            "repeats": args.repeats,
            "load": os.getloadavg(),
        },
    }


def render(data: dict[str, Any]) -> str:
    results, meta = data["results"], data["meta"]

    def base_of(label: str) -> float | None:
        """The median RSS without levers in the same run (a merged report prefixes the labels
        of a later run with ``run N: ``)."""
        prefix = label.split(": ", 1)[0] + ": " if label.startswith("run ") else ""
        runs = results.get(prefix + "none of the levers") or []
        return statistics.median(r["rss_mib"] for r in runs) if runs else None

    held = (
        f"the {meta['tasks']:,} finished Tasks of one burst and their Jobs"
        if meta.get("jobs", True)
        else f"{meta['tasks']:,} finished Tasks whose Jobs expired (copies of a few run ones)"
    )
    lines = [
        SECTION if meta.get("jobs", True) else EXPIRED_SECTION,
        "",
        f"`benchmarks/bench_memory.py`: RSS of fresh `taskfsm run` processes (4 workers) whose "
        f"caches hold {held}, once the "
        "start-up pass over every Task has drained; each lever switched on alone in the child "
        f"process; {meta['repeats']} processes per variant (median, and every run). Measured, not "
        f"asserted; {meta['date']}, commit {meta['commit']}.",
        "",
        "| variant | RSS median (MiB) | vs none | RSS of each run (MiB) | peak RSS median (MiB) |",
        "|---|---:|---:|---|---:|",
    ]
    for label, runs in results.items():
        if not runs:
            continue
        rss = statistics.median(r["rss_mib"] for r in runs)
        base = base_of(label)
        delta = f"{rss - base:+.1f}" if base is not None else "-"
        each = " / ".join(f"{r['rss_mib']:.1f}" for r in runs)
        hwm = statistics.median(r["hwm_mib"] for r in runs)
        lines.append(f"| {label} | {rss:.1f} | {delta} | {each} | {hwm:.1f} |")
    lines += [
        "",
        "One cached object, as live Python objects after the cache transforms (bytes; strings "
        "shared between objects counted once):",
        "",
        "| kind | objects | whole object | " + " | ".join(("metadata", "spec", "status")) + " |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for kind, parts in data["sizes"].items():
        total = sum(v for k, v in parts.items() if k != "objects")
        cells = [f"{parts.get(p, 0):,.0f}" for p in ("metadata", "spec", "status")]
        lines.append(
            f"| {kind} | {parts['objects']:,.0f} | {total:,.0f} | " + " | ".join(cells) + " |"
        )
    profile = data.get("profile") or {}
    if profile:
        total = profile["total_bytes"]
        lines += [
            "",
            f"Where the live memory is: one process of the shipped controller traced with "
            f"`tracemalloc` (`--profile`), {total / 2**20:.1f} MiB of live Python allocations at "
            f"{profile['rss_mib']:.1f} MiB RSS once its start-up pass drained; the source lines "
            "holding the most (tracing adds its own memory to the RSS):",
            "",
            "| source line | MiB | share | blocks |",
            "|---|---:|---:|---:|",
        ]
        for where, size, count in profile["lines"][:15]:
            where = where.replace(str(REPO) + "/", "")
            lines.append(f"| `{where}` | {size / 2**20:.1f} | {size / total:.0%} | {count:,} |")
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 30 Tasks, 1 process each"
    )
    parser.add_argument("--tasks", type=int, default=10_000, help="Tasks cached (default 10000)")
    parser.add_argument(
        "--jobs-expired",
        action="store_true",
        help="fill the namespace with finished Tasks whose Jobs expired (copies of a few run "
        "ones; no Jobs cached) instead of a burst: how 100,000 Tasks are measured",
    )
    parser.add_argument("--repeats", type=int, default=3, help="processes per variant (default 3)")
    parser.add_argument(
        "--variants", type=lambda s: s.split("|"), help="'|'-separated subset of the variants"
    )
    parser.add_argument(
        "--output",
        default=str(REPO / "docs" / "benchmarks.md"),
        help=f"report whose '{SECTION}' section (with --jobs-expired: '{EXPIRED_SECTION}') is "
        "replaced ('' = none)",
    )
    parser.add_argument(
        "--json", default=str(REPO / "benchmarks" / "last-memory-run.json"), help="raw results"
    )
    parser.add_argument("--from-json", help="render from a --json file instead of running")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also one process of the shipped controller with tracemalloc: its live memory by "
        "source line once the start-up pass drained",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.tasks, args.repeats = 30, 1
    if args.from_json:
        data = json.loads(Path(args.from_json).read_text())
    else:
        data = run(args)
        if args.json:
            Path(args.json).write_text(json.dumps(data, indent=1))
    section = render(data)
    publish(section, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
