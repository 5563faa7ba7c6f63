"""Benchmark: taskfsm as deployed (``taskfsm run`` in its own process) on a real control plane.

Run: ``make bench`` (``.venv/bin/python benchmarks/bench_controller.py``); ``--quick`` for a smoke
run of a few minutes; ``--help`` for the knobs. Not part of the test suite (a smoke test runs
``--quick`` on a tiny N to prove the harness works; timings are asserted nowhere).

What it does, in one process that starts everything it needs on loopback:

1. a local control plane (etcd, kube-apiserver, kube-controller-manager with client rate limits
   raised so the Job controller keeps up) and taskfsm's CRDs;
2. a pooled simulated kubelet (a child process of this script, ``--kubelet``): every Job pod is
   completed (``Succeeded``) as soon as the helper Secret it mounts exists, by a thread pool;
3. for every scenario a fresh namespace with a local default MediaProcessingEntity, a Function
   and a Workflow, and a fresh ``taskfsm run --namespace <ns> --workers W`` process; Tasks are
   created either all at once (8 client threads) or at a steady rate;
4. watches (this process) time every Task: created (the POST returned) → its Job appears →
   the Task is ``Succeeded``; the run ends once every Job's protection finalizer is released
   (the last write of a Task's happy path);
5. API cost from the API server's own ``apiserver_request_total`` (``GET {server}/metrics`` with
   the admin token) scraped before and after each run: the rows only taskfsm writes or reads
   (Tasks, their status, Jobs, Secrets, events.k8s.io Events, Workflows, MPEs) divided by N;
   pods, ``jobs/status`` and core Events belong to the Job controller and the kubelet, and
   lists/watches are shown but not counted per Task. The controller's own
   ``rest_client_requests_total`` is scraped too, as a cross-check;
6. controller memory: RSS (``/proc/<pid>/status``) of a fresh process whose caches hold 0 Tasks,
   and of fresh processes started on the namespace the largest run left behind (10,000 Tasks
   with their Jobs), once its start-up reconcile of every Task has drained; three fresh
   processes per size (median and each run: fragmentation makes RSS vary between runs);
7. one extra burst profiled with py-spy (``cpu_profile.py``): where the controller's CPU goes;
8. the API server's bare write ceiling, in the same run: small ConfigMaps POSTed by several
   processes for 20 s; the report gives taskfsm's Tasks/s as a share of what that ceiling allows
   at taskfsm's writes per Task;
9. a steady arrival of 50 Tasks/s for 60 s (Task→Job latency), and issue 16's replica rows
   (1 leader, then 1, 2 and 4 replicas sharing Lease-held buckets, ``bench_replicas.py``);
10. start-up (issue 12 item 10): Tasks created while no controller runs, then the controller
    started (seconds to ready, to the first and to every Job), and a Task created right after a
    new MediaProcessingEntity with a Job watch of its own (Task→Job); ``--startup-only`` runs just
    these and renders the report again from the ``--json`` file;
11. issue 30's flood: one controller watching every namespace; tenant A creates 5,000 Tasks at
    once while tenant B creates one a second; B's Task→Job p50/p99 during the flood against B
    alone (idle), and A's Tasks/s, with the queue FIFO (``--queue-fairness=fifo``), fair
    across namespaces (the default), and fair with a per-namespace cap of 3/4 of the workers; ``--flood-only`` runs just these;
12. Markdown tables on stdout and in ``docs/benchmarks.md`` (machine, versions, date), medians
    of the repeated runs, and each target of issue 14 marked met or not.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import ssl
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from harness import (  # noqa: E402 (after the sys.path entries above)
    CREATE_THREADS,
    KCM_ARGS,
    KUBELET_THREADS,
    Bench,
    RunResult,
    log,
    median,
    memory_point,
    run_kubelet,
    run_writer,
)
from report import write_report  # noqa: E402 (after the sys.path entries above)

#: (group, resource, subresource) rows of apiserver_request_total that only taskfsm touches in
#: these runs, by what they are for. Leases are not taskfsm's here (no leader election; the API
#: server renews its own identity Leases).
TASK_ROWS = {
    ("engine.nagare.media", "tasks", ""),
    ("engine.nagare.media", "tasks", "status"),
    ("batch", "jobs", ""),
    ("", "secrets", ""),
}
CONTROLLER_ROWS = {
    **{row: "Task lifecycle" for row in TASK_ROWS},
    ("engine.nagare.media", "workflows", ""): "Workflow controller",
    ("engine.nagare.media", "workflows", "status"): "Workflow controller",
    ("engine.nagare.media", "mediaprocessingentities", ""): "MPE controller",
    ("engine.nagare.media", "mediaprocessingentities", "status"): "MPE controller",
    ("engine.nagare.media", "functions", ""): "Task lifecycle",
    ("engine.nagare.media", "tasktemplates", ""): "Task lifecycle",
    ("engine.nagare.media", "medialocations", ""): "Task lifecycle",
    ("events.k8s.io", "events", ""): "Events",
}
WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE", "APPLY")
# The goals the report marks met or not (docs/performance.md discusses them); every sentence of
# the report that states a goal takes it from here, so two sentences cannot state two goals.
GOAL_CPU_MS = 8.0  # controller CPU per Task, burst of 1,000 (issue 31)
GOAL_RATIO = 0.5  # Tasks/s to Job created over what the measured write ceiling allows
GOAL_STEADY_P99 = 1.0  # Task→Job p99 (s) at a 50/s arrival, where the API server keeps up
STEADY_KEPT_UP = 0.9  # a steady row "kept up" when Tasks reach their Jobs at ≥ this x the rate
GOAL_CPU_GROWTH = 1.2  # CPU per Task, largest burst over smallest
GOAL_MEMORY_MIB = 120  # RSS of a fresh process ...
GOAL_MEMORY_TASKS = 10_000  # ... with this many Tasks (and their Jobs) cached
GOAL_TASK_WRITES = 6  # Task-lifecycle writes per Task
GOAL_ALL_WRITES = (
    6.5  # every write per Task: the lifecycle's, Events and Workflow status (issue 31)
)
GOAL_READS = 0  # uncached single-object reads per Task
GOAL_FLOOD_LATENCY = 2.0  # B's Task→Job p50/p99 during A's flood, at most this times idle
GOAL_FLOOD_THROUGHPUT = 0.95  # A's Tasks/s with fair queueing, at least this share of FIFO's
READ_VERBS = ("GET",)


@dataclass
class Cost:
    """One run's API requests per Task."""

    rows: dict[str, tuple[float, str]]
    """``"VERB resource[/sub]"`` → (requests per Task, who made them)."""
    task_writes: float
    """Writes of the Task lifecycle (Task metadata and status, Job, Secret): GOAL_TASK_WRITES."""
    reads: float
    """Single-object GETs by taskfsm (lists and watches fill caches): GOAL_READS."""
    events: float
    workflow_writes: float


def per_task_cost(result: RunResult) -> Cost:
    rows: dict[str, tuple[float, str]] = {}
    task_writes = reads = events = workflow_writes = 0.0
    for key, count in result.api_rows.items():
        verb, group, resource, sub = ([*key.split(" "), "", "", "", ""])[:4]
        label = f"{verb} {resource}{'/' + sub if sub else ''}"
        if group not in ("", "batch", "engine.nagare.media"):
            label += f" ({group})"
        per_task = count / result.n
        role = CONTROLLER_ROWS.get((group, resource, sub))
        if role is None and verb in ("LIST", "WATCH"):
            continue  # other components' caches: not about taskfsm
        if role is None or verb in ("LIST", "WATCH") or (resource, verb) == ("tasks", "POST"):
            who = (
                "this benchmark"
                if (resource, verb) == ("tasks", "POST")
                else "others (Job controller, kubelet, GC, API server)"
            )
            if role is not None and verb in ("LIST", "WATCH"):
                who = f"taskfsm ({role}) and others: caches"
            rows[label] = (per_task, who)
            continue
        rows[label] = (per_task, f"taskfsm: {role}")
        if verb in READ_VERBS:
            reads += per_task
            rows[label] = (
                per_task,
                f"taskfsm: {role} (or the garbage collector: see the cross-check)",
            )
        elif role == "Task lifecycle":
            task_writes += per_task
        elif role == "Events":
            events += per_task
        elif role == "Workflow controller":
            workflow_writes += per_task
    # The API server cannot tell taskfsm's GETs from the garbage collector's (it GETs owners it
    # has not seen yet); the controller's own count (lists and watches included) bounds them.
    own_gets = result.controller_methods.get("GET", 0) / result.n
    reads = min(reads, own_gets)
    rows = {k: v for k, v in rows.items() if v[0] >= 0.005 or v[1].startswith("taskfsm")}
    return Cost(rows, task_writes, reads, events, workflow_writes)


def fmt(value: float | None, digits: int = 2) -> str:
    if value is None or value != value:
        return "-"
    return f"{value:.{digits}f}"


def aggregate(results: list[RunResult]) -> dict[tuple[str, int, int], dict[str, Any]]:
    """Medians over repeats, keyed by (scenario, n, workers)."""
    groups: dict[tuple[str, int, int], list[RunResult]] = defaultdict(list)
    for r in results:
        groups[(r.scenario, r.n, r.workers)].append(r)
    out = {}
    for key, runs in groups.items():
        out[key] = {
            "runs": len(runs),
            "complete": all(r.complete for r in runs),
            "job_p50": median([r.job_latency["p50"] for r in runs]),
            "job_p95": median([r.job_latency["p95"] for r in runs]),
            "job_p99": median([r.job_latency["p99"] for r in runs]),
            "done_p50": median([r.done_latency["p50"] for r in runs]),
            "done_p95": median([r.done_latency["p95"] for r in runs]),
            "done_p99": median([r.done_latency["p99"] for r in runs]),
            "tput_job": median([r.throughput_job for r in runs]),
            "tput_done": median([r.throughput_done for r in runs]),
            "wall": median([r.wall_seconds for r in runs]),
            "workflow": median(
                [r.workflow_seconds for r in runs if r.workflow_seconds is not None]
            ),
            "rss_end": median([r.rss_end_mib for r in runs]),
            "writes": median([per_task_cost(r).task_writes for r in runs]),
            "reads": median([per_task_cost(r).reads for r in runs]),
            "events": median([per_task_cost(r).events for r in runs]),
            "wf_writes": median([per_task_cost(r).workflow_writes for r in runs]),
            "reconciles": median([r.reconciles_per_task for r in runs]),
            "cpu_ms": median([r.cpu_ms_per_task for r in runs]),
            "api_write_p99": median([r.api_write_p99 for r in runs]),
        }
    return out


def render(
    results: list[RunResult],
    memory: list[dict[str, float]],
    meta: dict[str, str],
    config: dict[str, Any],
    notes: list[str] | None = None,
    ceiling: dict[str, float] | None = None,
    replicas: list[dict[str, Any]] | None = None,
    startup: dict[str, Any] | None = None,
    flood: list[dict[str, Any]] | None = None,
) -> str:
    notes = list(notes or [])
    ceiling = ceiling or {}
    replicas = replicas or []
    agg = aggregate(results)
    lines: list[str] = []
    add = lines.append
    add("# taskfsm benchmarks")
    add("")
    add(
        "Written by `make bench` (`benchmarks/bench_controller.py`); do not edit by hand. "
        "Every figure is the median of the repeated runs (column *runs*)."
    )
    add("")
    add("| | |")
    add("|---|---|")
    for k, v in meta.items():
        add(f"| {k} | {v} |")
    add("")
    add(
        "Setup: `taskfsm run --workers W --namespace <run>` as its own process; a local control plane "
        "(etcd, kube-apiserver, kube-controller-manager with `"
        + " ".join(KCM_ARGS)
        + "`); a pooled "
        f"simulated kubelet ({KUBELET_THREADS} threads) completing each pod as soon as its Secret exists; "
        f"Tasks created by {CREATE_THREADS} client threads. Everything shares the machine's cores, so the "
        "figures are an end-to-end lower bound for the controller, not its ceiling. Latencies are measured "
        "from the Task's create call returning to this script's watch seeing the Job / the `Succeeded` phase."
    )
    add("")
    add("## Throughput and latency")
    add("")
    add(
        "| scenario | Tasks | workers | runs | Task→Job p50 / p95 / p99 (s) | Task→Succeeded p50 / p95 / p99 (s) | Tasks/s to Job created | Tasks/s to Succeeded | wall (s) |"
    )
    add("|---|---:|---:|---:|---|---|---:|---:|---:|")
    for (scenario, n, w), a in sorted(
        agg.items(), key=lambda kv: (kv[0][0] != "burst", kv[0][1], kv[0][0], kv[0][2])
    ):
        flag = "" if a["complete"] else " (incomplete)"
        add(
            f"| {scenario}{flag} | {n:,} | {w} | {a['runs']} | {fmt(a['job_p50'])} / {fmt(a['job_p95'])} / {fmt(a['job_p99'])} | "
            f"{fmt(a['done_p50'])} / {fmt(a['done_p95'])} / {fmt(a['done_p99'])} | {fmt(a['tput_job'], 1)} | {fmt(a['tput_done'], 1)} | {fmt(a['wall'], 1)} |"
        )
    add("")
    figures = ceiling_figures(agg, ceiling)
    if figures is not None:
        add("## Against the API server's write ceiling")
        add("")
        add(
            f"The same control plane's bare write capacity, measured in this run: {ceiling['processes']:.0f} "
            f"processes of {ceiling['threads']:.0f} threads POSTing small ConfigMaps for "
            f"{ceiling['seconds']:g} s, nothing else running: **{ceiling['writes_per_second']:.0f} writes/s**. "
            f"At {figures['writes_per_task']:.2f} writes per Task (lifecycle writes, Events and Workflow "
            f"status writes of the {figures['n']:,}-Task burst) the API server could carry "
            f"{figures['allowed']:.1f} Tasks/s; taskfsm made {figures['tput']:.1f} Tasks/s to Job created "
            f"({figures['workers']} workers): **ratio {figures['ratio']:.2f}** (goal ≥ {GOAL_RATIO:g})."
        )
        add("")
    profiled = [r for r in results if r.scenario == "burst (profiled)" and r.profile]
    if profiled:
        add("## Where the controller's CPU goes")
        add("")
        add(
            "`py-spy record --gil --threads` attached to the controller for one extra burst (not in the "
            "medians above); each sample goes to its innermost frame in a known place (a library cost or "
            "a package of taskfsm's), so a guard's own time counts for the guard, not for the statechart "
            "library that called it (benchmarks/cpu_profile.py)."
        )
        add("")
        add(render_profile(profiled[-1]))
        add("")
    if replicas:
        from bench_replicas import table

        add("## Several replicas (Lease-held buckets)")
        add("")
        add(
            f"One burst of {replicas[0]['tasks']:,} Tasks per row on the same control plane: a single leader "
            "(`--buckets 1`), then 1, 2 and 4 replicas sharing 12 buckets (`--leader-elect --buckets 12`, "
            "4 workers each). CPU is user + system time of each process over the burst; the machine has "
            f"{os.cpu_count()} cores for everything (benchmarks/bench_replicas.py)."
        )
        add("")
        add(table(replicas))
    if startup:
        add(render_startup(startup))
    if flood:
        add(render_flood(flood))
    wf_rows = [
        (k, a) for k, a in sorted(agg.items()) if k[0] == "burst" and a["workflow"] == a["workflow"]
    ]
    if wf_rows:
        add("## Workflows of N Tasks")
        add("")
        add(
            "One Workflow holding all N Tasks of a burst run: seconds from the first Task created until the "
            "Workflow controller has counted every Task `Succeeded` (phase `AwaitingCompletion`; it turns "
            "`Succeeded` after `workflowTerminationWaitingDuration`, 20 s by default, which is not counted)."
        )
        add("")
        add("| Tasks in the Workflow | workers | runs | all Tasks counted (s) | Tasks/s |")
        add("|---:|---:|---:|---:|---:|")
        for (_, n, w), a in wf_rows:
            add(
                f"| {n:,} | {w} | {a['runs']} | {fmt(a['workflow'], 1)} | {fmt(n / a['workflow'], 1)} |"
            )
        add("")
    cost_runs = [r for r in results if r.scenario == "burst" and r.complete]
    if cost_runs:
        largest = max(r.n for r in cost_runs)
        ref = [r for r in cost_runs if r.n == largest]
        add("## API cost per Task (happy path: created → Succeeded → Job finalizer released)")
        add("")
        add(
            "From kube-apiserver's `apiserver_request_total`, scraped before and after each run, divided by N; "
            "medians over the burst runs. "
            f"Goal: at most {GOAL_TASK_WRITES} Task writes and {GOAL_READS} uncached reads per Task. "
            "*Task writes* are the lifecycle's own (Task metadata and status, Job, Secret, Job finalizer "
            "release); Events and the Workflow controller's status writes are counted apart."
        )
        add("")
        add(
            "| Tasks | workers | runs | Task writes / Task | uncached reads / Task | Events / Task | Workflow writes / Task |"
        )
        add("|---:|---:|---:|---:|---:|---:|---:|")
        for (scenario, n, w), a in sorted(agg.items()):
            if scenario == "burst":
                add(
                    f"| {n:,} | {w} | {a['runs']} | {fmt(a['writes'])} | {fmt(a['reads'])} | {fmt(a['events'])} | {fmt(a['wf_writes'])} |"
                )
        add("")
        add(
            f"By verb and resource, N = {largest:,} (median over its {len(ref)} burst runs); taskfsm's lists and "
            "watches are long-lived cache traffic, shown for completeness; other components' rows under 0.005 "
            "per Task and their lists and watches are left out:"
        )
        add("")
        per_row: dict[str, list[float]] = defaultdict(list)
        who: dict[str, str] = {}
        for r in ref:
            for k, (v, by) in per_task_cost(r).rows.items():
                per_row[k].append(v)
                who[k] = by
        add("| request | per Task | made by |")
        add("|---|---:|---|")
        for k in sorted(per_row, key=lambda k: (not who[k].startswith("taskfsm:"), who[k], k)):
            add(
                f"| {k} | {fmt(median(per_row[k] + [0.0] * (len(ref) - len(per_row[k]))), 3)} | {who[k]} |"
            )
        add("")
        methods: dict[str, list[float]] = defaultdict(list)
        for r in ref:
            for m, v in r.controller_methods.items():
                methods[m].append(v / r.n)
        if methods:
            add(
                "Cross-check, the controller's own `rest_client_requests_total` per Task (Events and the "
                "Workflow controller included; lists and watches count as GET there): "
                + ", ".join(f"{m} {fmt(median(v))}" for m, v in sorted(methods.items()))
                + "."
            )
            add("")
    if memory:
        add("## Controller memory")
        add("")
        add(
            "RSS of a fresh `taskfsm run` process whose caches hold the Tasks of a finished run (and their "
            "Jobs), after its start-up reconcile of every Task drained; "
            f"goal: ≤ {GOAL_MEMORY_MIB} MiB with {GOAL_MEMORY_TASKS:,}. "
            "Each size is measured in several fresh processes: median, and every run (the spread is heap "
            "fragmentation left by the start-up pass)."
        )
        add("")
        add(
            "| Tasks in cache | runs | RSS median (MiB) | RSS of each run (MiB) | peak RSS median (MiB) |"
        )
        add("|---:|---:|---:|---|---:|")
        for m in memory:
            runs = m.get("rss_runs") or [m["rss_mib"]]
            add(
                f"| {int(m['tasks']):,} | {len(runs)} | {fmt(m['rss_mib'], 1)} | {' / '.join(fmt(r, 1) for r in runs)} | {fmt(m['hwm_mib'], 1)} |"
            )
        add("")
    sizes = sorted({n for (s, n, _w) in agg if s == "burst"})
    if len(sizes) > 1:
        add("## Scaling")
        add("")
        add(
            f"How each figure grows from {sizes[0]:,} Tasks (burst, best worker count per size by throughput); "
            "*per-Task* figures should stay flat for linear scaling."
        )
        add("")
        add(
            "*RSS after the run* is the running process at the end of the burst (it held every object while "
            "working); *cache MiB per 1,000 Tasks* comes from the memory table (a fresh process, minus the "
            "empty one)."
        )
        add("")
        add(
            "| Tasks | best workers | Tasks/s to Job | Task→Job p50 (s) | Task→Succeeded p50 (s) | reconciles / Task | controller CPU ms / Task | Task writes / Task | reads / Task | RSS after the run (MiB) | cache MiB per 1,000 Tasks |"
        )
        add("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        base_rss = next((m["rss_mib"] for m in memory if m["tasks"] == 0), None)
        for n in sizes:
            best = max(
                ((w, a) for (s, nn, w), a in agg.items() if s == "burst" and nn == n),
                key=lambda wa: wa[1]["tput_job"],
            )
            w, a = best
            cached = next((m["rss_mib"] for m in memory if m["tasks"] == n), None)
            per_k = (
                (cached - base_rss) / n * 1000
                if cached is not None and base_rss is not None
                else None
            )
            add(
                f"| {n:,} | {w} | {fmt(a['tput_job'], 1)} | {fmt(a['job_p50'])} | {fmt(a['done_p50'])} | {fmt(a['reconciles'], 1)} | {fmt(a['cpu_ms'], 1)} | {fmt(a['writes'])} | {fmt(a['reads'])} | {fmt(a['rss_end'], 1)} | {fmt(per_k, 1)} |"
            )
        add("")
    for title, items in (
        ("Against the targets", _verdicts(agg, memory, figures)),
        ("Notes", notes or []),
    ):
        if items:
            add(f"## {title}")
            add("")
            for item in items:
                add(f"- {item}")
            add("")
    add("## Configuration")
    add("")
    add("```")
    add(json.dumps(config, indent=None))
    add("```")
    add("")
    return "\n".join(lines)


def _verdicts(
    agg: dict[tuple[str, int, int], dict[str, Any]],
    memory: list[dict[str, float]],
    figures: dict[str, Any] | None = None,
) -> list[str]:
    """Plain statements of the figures against the GOAL_* targets (computed, not hand-written)."""
    out = []

    def verdict(ok: bool) -> str:
        return "**met**" if ok else "**NOT met**"

    bursts = {k: a for k, a in agg.items() if k[0] == "burst"}
    sizes = sorted({k[1] for k in bursts})

    def best(n: int) -> dict[str, Any]:
        return max((a for k, a in bursts.items() if k[1] == n), key=lambda a: a["tput_job"])

    if bursts:
        n = min(sizes, key=lambda size: abs(size - 1000))
        cpu = best(n)["cpu_ms"]
        out.append(
            f"Controller CPU per Task, burst of {n:,} (best worker count): {cpu:.1f} ms "
            f"(target ≤ {GOAL_CPU_MS:g} ms): {verdict(cpu <= GOAL_CPU_MS)}."
        )
    if figures is not None:
        out.append(
            f"Tasks/s to Job created, burst of {figures['n']:,}: {figures['tput']:.1f}, "
            f"{figures['ratio']:.2f} of what the measured write ceiling allows "
            f"(target ≥ {GOAL_RATIO:g}): {verdict(figures['ratio'] >= GOAL_RATIO)}."
        )
    for (scenario, n, _w), a in sorted(agg.items()):
        if scenario.startswith("steady"):
            rate = float(scenario.removeprefix("steady ").removesuffix("/s"))
            # The target holds where the API server keeps up: the Tasks reach their Jobs at
            # (nearly) the rate they arrive. Where the whole cluster falls behind, the queue it
            # builds is no figure of the controller's.
            kept_up = a["tput_job"] >= STEADY_KEPT_UP * rate
            outcome = (
                verdict(a["job_p99"] <= GOAL_STEADY_P99 and rate == 50.0)
                if kept_up
                else f"**not testable here** (the cluster fell behind the {rate:g}/s arriving)"
            )
            out.append(
                f"Task→Job p99 at a {scenario.removeprefix('steady ')} arrival ({n:,} Tasks): "
                f"{a['job_p99']:.2f} s, beside the API server's own p99 for Task, Job and Secret "
                f"writes of {a.get('api_write_p99', float('nan')):g} s and "
                f"{a['tput_job']:.1f} Tasks/s to Job (target ≤ {GOAL_STEADY_P99:g} s at 50/s where "
                f"the API server keeps up): {outcome}."
            )
    if len(sizes) > 1:
        lo, hi = best(sizes[0]), best(sizes[-1])
        growth = hi["cpu_ms"] / lo["cpu_ms"]
        out.append(
            f"Scaling {sizes[0]:,} → {sizes[-1]:,} Tasks: controller CPU per Task x{growth:.2f} "
            f"(target within x{GOAL_CPU_GROWTH:g}): {verdict(growth <= GOAL_CPU_GROWTH)}; Tasks/s to Job "
            f"x{hi['tput_job'] / lo['tput_job']:.2f}, reconciles per Task "
            f"x{hi['reconciles'] / lo['reconciles']:.2f}."
        )
    big = max((m for m in memory if m["tasks"]), key=lambda m: m["tasks"], default=None)
    if big is not None:
        mib = big["rss_mib"]
        worst = max(big.get("rss_runs") or [big["rss_mib"]])
        ok = big["tasks"] >= GOAL_MEMORY_TASKS and mib <= GOAL_MEMORY_MIB
        out.append(
            f"Memory: median {mib:.0f} MiB RSS with {int(big['tasks']):,} Tasks in cache, largest "
            f"run {worst:.0f} MiB (target ≤ {GOAL_MEMORY_MIB} MiB with {GOAL_MEMORY_TASKS:,}): "
            + (
                verdict(ok)
                if big["tasks"] >= GOAL_MEMORY_TASKS
                else f"not measured at {GOAL_MEMORY_TASKS:,}"
            )
            + ("" if not ok or worst <= GOAL_MEMORY_MIB else " by the median, not by every run")
            + "."
        )
    if bursts:
        writes = max(a["writes"] for a in bursts.values())
        reads = max(a["reads"] for a in bursts.values())
        out.append(
            f"API cost: at most {writes:.2f} Task-lifecycle writes and {reads:.2f} uncached reads per "
            f"Task in any burst (target ≤ {GOAL_TASK_WRITES} and {GOAL_READS}): "
            f"{verdict(writes <= GOAL_TASK_WRITES + 1e-9 and reads < GOAL_READS + 0.005)}."
        )
        every = max(a["writes"] + a["events"] + a["wf_writes"] for a in bursts.values())
        out.append(
            f"Writes per Task, all of them (lifecycle, Events, Workflow status): at most "
            f"{every:.2f} in any burst (target ≤ {GOAL_ALL_WRITES:g}): "
            f"{verdict(every <= GOAL_ALL_WRITES + 1e-9)}."
        )
    return out


def git_commit() -> str:
    """The short hash of this checkout's HEAD, or ``?``."""
    with contextlib.suppress(Exception):
        return (
            subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"],
                cwd=REPO,
                capture_output=True,
                text=True,
                check=False,
            ).stdout.strip()
            or "?"
        )
    return "?"


def now_utc() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def machine_meta(plane: Any) -> dict[str, str]:
    import kubernetes

    version = "?"
    with contextlib.suppress(Exception):
        context = ssl.create_default_context(cafile=str(plane.ca_file))
        req = urllib.request.Request(
            f"{plane.server}/version", headers={"Authorization": f"Bearer {plane.token}"}
        )
        with urllib.request.urlopen(req, timeout=10, context=context) as r:
            version = json.loads(r.read())["gitVersion"]
    cpu = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = "?"
    with contextlib.suppress(OSError):
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{kb / 1024 / 1024:.0f} GiB"
    commit = git_commit()
    return {
        "date": now_utc(),
        "machine": f"{cpu}, {os.cpu_count()} cores, {mem} RAM, {platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "kubernetes (control plane)": f"kube-apiserver / kube-controller-manager {version}",
        "kubernetes client": kubernetes.__version__,
        "taskfsm commit": commit,
        "load average at start (1/5/15 min)": " / ".join(f"{x:.1f}" for x in os.getloadavg()),
    }


# -- main ------------------------------------------------------------------------------------------

DEFAULTS: dict[str, Any] = {
    "sizes": [100, 1000, 5000, 10000],
    "workers": {100: [1, 4, 16], 1000: [4, 16], 5000: [16], 10000: [16]},
    "repeats": {100: 3, 1000: 2, 5000: 1, 10000: 1},
    "steady": [(3000, 50.0)],
    "memory": [0, 10000],
    "memory_repeats": 3,
    "ceiling_seconds": 20.0,
    "profile": [1000, 16],
    "replicas": [1, 2, 4],
    "replica_tasks": 1000,
    "startup": [1000, 16],
    "new_mpe_samples": 10,
    "budget_minutes": 30,
    "flood": [5000, 16],
    "flood_idle": 20,
    "flood_repeats": 2,
}
QUICK: dict[str, Any] = {
    "sizes": [20],
    "workers": {20: [1, 4]},
    "repeats": {20: 1},
    "steady": [(20, 10.0)],
    "memory": [0, 20],
    "memory_repeats": 1,
    "ceiling_seconds": 3.0,
    "profile": None,
    "replicas": [],
    "replica_tasks": 0,
    "startup": [5, 4],
    "new_mpe_samples": 2,
    "budget_minutes": 3,
    "flood": [30, 4],
    "flood_idle": 3,
    "flood_repeats": 1,
}


def plan(args: argparse.Namespace) -> dict[str, Any]:
    config = dict(QUICK if args.quick else DEFAULTS)
    if args.sizes:
        config["sizes"] = [int(x) for x in args.sizes.split(",")]
        config["memory"] = [0, config["sizes"][-1]]
        steady_n = config["sizes"][-2] if len(config["sizes"]) > 1 else config["sizes"][0]
        config["steady"] = [(steady_n, config["steady"][0][1])]
    workers = config["workers"]
    if args.workers:
        listed = [int(x) for x in args.workers.split(",")]
        workers = dict.fromkeys(config["sizes"], listed)
    config["workers"] = {
        n: workers.get(n, [max(max(w) for w in workers.values())]) for n in config["sizes"]
    }
    if args.budget_minutes:
        config["budget_minutes"] = args.budget_minutes
    for name in args.skip or ():
        config[name] = [] if name in ("steady", "memory", "replicas") else None
    repeats = config["repeats"]
    config["repeats"] = {n: args.repeats or repeats.get(n, 1) for n in config["sizes"]}
    return config


def run_replicas(bench: Bench, config: dict[str, Any], fits: Any) -> list[dict[str, Any]]:
    """Issue 16's rows: one burst of ``replica_tasks`` with a single leader (``--buckets 1``),
    then with each replica count sharing 12 Lease-held buckets (benchmarks/bench_replicas.py)."""
    from bench_replicas import one_row

    tasks = config["replica_tasks"]
    rows = []
    for count, buckets in [(1, 1), *((n, 12) for n in config["replicas"])]:
        if not fits(tasks, 4, f"replicas: {count} x --buckets {buckets}"):
            continue
        log(f"replicas: {tasks} Tasks, {count} replica(s), --buckets {buckets}")
        rows.append(one_row(bench, tasks, count, buckets, 4))
        log(f"  {rows[-1]['tasks_per_s_to_job']:.1f} Tasks/s to Job")
    return rows


def ceiling_figures(
    agg: dict[tuple[str, int, int], dict[str, Any]], ceiling: dict[str, float]
) -> dict[str, Any] | None:
    """Issue 14's ratio for the burst closest to 1,000 Tasks (its best worker count):
    Tasks/s to Job ÷ (bare writes/s ÷ writes per Task), writes counting Events and the
    Workflow's status writes."""
    bursts = {k: a for k, a in agg.items() if k[0] == "burst"}
    if not bursts or not ceiling.get("writes_per_second"):
        return None
    n = min({k[1] for k in bursts}, key=lambda size: abs(size - 1000))
    w, a = max(
        ((k[2], a) for k, a in bursts.items() if k[1] == n), key=lambda wa: wa[1]["tput_job"]
    )
    writes = a["writes"] + a["events"] + a["wf_writes"]
    allowed = ceiling["writes_per_second"] / writes
    return {
        "n": n,
        "workers": w,
        "tput": a["tput_job"],
        "writes_per_task": writes,
        "allowed": allowed,
        "ratio": a["tput_job"] / allowed,
    }


def render_flood(rows: list[dict[str, Any]]) -> str:
    """Issue 30's flood rows: B's latency during A's flood against idle, A's throughput, for
    each queue order, and the targets against FIFO."""
    lines = [
        "## Fair share under a flood",
        "",
        f"One `taskfsm run` watching every namespace; tenant A creates {rows[0]['a_tasks']:,} "
        f"Tasks at once ({CREATE_THREADS} client threads) while tenant B creates one every "
        f"{1 / rows[0]['b_rate']:g} s until A's last Job exists; then B goes on alone "
        "(*idle*, same process). Task→Job from the create call returning to the Job seen. "
        "*Probe*: half-way between B's Tasks the benchmark POSTs one small ConfigMap and times "
        "it, the API server's own latency for one write at that moment (B's Task needs three "
        "writes in a row before its Job exists: the finalizer, the Secret, the Job).",
        "",
        "| queue | workers | B during the flood: Tasks, p50 / p99 (s) | B idle: Tasks, p50 / p99 (s) "
        "| probe p50 flood / idle (s) | A: Tasks/s to Job | A complete |",
        "|---|---:|---|---|---|---:|---|",
    ]
    for r in rows:
        fl, idle = r["b_flood"], r["b_idle"]
        lines.append(
            f"| {r['fairness']} | {r['workers']} | {fl['done']}/{fl['tasks']}, "
            f"{fmt(fl['p50'])} / {fmt(fl['p99'])} | {idle['done']}/{idle['tasks']}, "
            f"{fmt(idle['p50'])} / {fmt(idle['p99'])} | {_probe_cell(r)} "
            f"| {fmt(r['a_tasks_per_s_to_job'], 1)} "
            f"| {'yes' if r['a_complete'] else 'no'} |"
        )
    if rows[0].get("measured"):
        lines += ["", f"Measured {rows[0]['measured']}."]
    fifo = _flood_medians(rows, "fifo")
    if len(rows) > 3:
        lines.append("")
        lines.append(
            "The queue orders ran alternately (ABBA: later runs share the control plane with "
            "the Tasks and Jobs of earlier ones); the verdicts below use each order's medians."
        )
    lines.append("")
    for label in dict.fromkeys(r["fairness"] for r in rows if r["fairness"] != "fifo"):
        fair = _flood_medians(rows, label)
        assert fair is not None
        ratio50 = fair["b_flood"]["p50"] / fair["b_idle"]["p50"]
        ratio99 = fair["b_flood"]["p99"] / fair["b_idle"]["p99"]
        met = ratio50 <= GOAL_FLOOD_LATENCY and ratio99 <= GOAL_FLOOD_LATENCY
        lines.append(
            f"- {label}: B's Task→Job during the flood {fmt(fair['b_flood']['p50'])} / "
            f"{fmt(fair['b_flood']['p99'])} s, x{ratio50:.2f} (p50) and x{ratio99:.2f} (p99) of "
            f"idle (target within x{GOAL_FLOOD_LATENCY:g}): "
            + ("**met**" if met else "**NOT met**")
            + (
                f"; A's Tasks/s {fair['a_tasks_per_s_to_job'] / fifo['a_tasks_per_s_to_job']:.1%}"
                f" of FIFO's (target ≥ {GOAL_FLOOD_THROUGHPUT:.0%}): "
                + (
                    "**met**."
                    if fair["a_tasks_per_s_to_job"]
                    >= GOAL_FLOOD_THROUGHPUT * fifo["a_tasks_per_s_to_job"]
                    else "**NOT met**."
                )
                if fifo is not None
                else "."
            )
        )
        if fair["probe"] is not None:
            probe50 = fair["probe"]["flood"] / fair["probe"]["idle"]
            lines.append(
                f"  Meanwhile one write's own latency (probe) rose x{probe50:.2f} (p50, "
                f"{fmt(fair['probe']['flood'], 3)} s against {fmt(fair['probe']['idle'], 3)} s "
                f"idle): B's Task→Job rose x{ratio50 / probe50:.2f} of that."
            )
    if fifo is not None:
        lines.append(
            f"- For comparison, FIFO: B's p50 / p99 during the flood "
            f"{fmt(fifo['b_flood']['p50'])} / {fmt(fifo['b_flood']['p99'])} s."
        )
    lines.append("")
    return "\n".join(lines)


def _flood_medians(rows: list[dict[str, Any]], fairness: str) -> dict[str, Any] | None:
    """The median figures of the flood rows of one queue order (None: none ran)."""
    mine = [r for r in rows if r["fairness"] == fairness]
    if not mine:
        return None
    return {
        "a_tasks_per_s_to_job": median([r["a_tasks_per_s_to_job"] for r in mine]),
        "b_flood": {q: median([r["b_flood"][q] for r in mine]) for q in ("p50", "p99")},
        "b_idle": {q: median([r["b_idle"][q] for r in mine]) for q in ("p50", "p99")},
        "probe": (
            {
                phase: median([r[f"probe_{phase}"]["p50"] for r in mine])
                for phase in ("flood", "idle")
            }
            if all(_probed(r) for r in mine)
            else None
        ),
    }


def _probed(row: dict[str, Any]) -> bool:
    """Whether a flood row has the probe's figures (rows measured before it have not)."""
    return bool(row.get("probe_flood") and row.get("probe_idle"))


def _probe_cell(row: dict[str, Any]) -> str:
    """The probe's p50 during the flood and idle (n/a for a row measured before the probe)."""
    if not _probed(row):
        return "n/a"
    return f"{fmt(row['probe_flood']['p50'], 3)} / {fmt(row['probe_idle']['p50'], 3)}"


def run_flood(bench: Bench, config: dict[str, Any]) -> list[dict[str, Any]]:
    """The flood with each queue order, alternately (ABBA) when repeated, so neither order
    always runs on the fuller control plane."""
    n, w = config["flood"]
    # FIFO, fair, and fair with a per-namespace cap that leaves a quarter of the workers to
    # the other namespaces.
    orders = [("fifo", 0), ("namespace", 0), ("namespace", max(1, w * 3 // 4))]
    sequence: list[tuple[str, int]] = []
    for i in range(config.get("flood_repeats", 1)):
        sequence += orders if i % 2 == 0 else orders[::-1]
    rows = []
    for fairness, cap in sequence:
        log(
            f"flood: tenant A {n} Tasks, tenant B 1/s, {w} workers, --queue-fairness={fairness} "
            f"--max-in-flight-per-namespace={cap}"
        )
        rows.append(bench.flood(n, w, fairness, cap=cap, idle_samples=config["flood_idle"]))
        r = rows[-1]
        log(
            f"  B p50/p99 flood {fmt(r['b_flood']['p50'])}/{fmt(r['b_flood']['p99'])}s, idle "
            f"{fmt(r['b_idle']['p50'])}/{fmt(r['b_idle']['p99'])}s; "
            f"A {fmt(r['a_tasks_per_s_to_job'], 1)} Tasks/s"
        )
    return rows


def render_startup(startup: dict[str, Any]) -> str:
    """The start-up section (issue 12 item 10): Tasks present when the controller starts, and a
    Task created right after a new MediaProcessingEntity."""
    lines = ["## Start-up and a new MediaProcessingEntity", ""]
    boot = startup.get("boot")
    if boot:
        lines += [
            f"{boot['tasks']:,} Tasks created while no controller runs, then `taskfsm run "
            f"--workers {boot['workers']}` started; seconds from starting the process:",
            "",
            "| Tasks | workers | `/readyz` (s) | first Job (s) | Jobs p50 / p99 (s) | last Job (s) "
            "| complete |",
            "|---:|---:|---:|---:|---|---:|---|",
            f"| {boot['tasks']:,} | {boot['workers']} | {fmt(boot['ready_s'])} "
            f"| {fmt(boot['first_job_s'])} | {fmt(boot['job_p50_s'])} / {fmt(boot['job_p99_s'])} "
            f"| {fmt(boot['last_job_s'])} | {'yes' if boot['complete'] else 'no'} |",
            "",
        ]
    fresh = startup.get("new_mpe")
    if fresh:
        lines += [
            f"A running controller; {fresh['samples']} times a MediaProcessingEntity with a Job "
            "namespace of its own (so a client and Job watch of its own) and, right after it, a "
            "Task naming it: Task→Job p50 "
            f"**{fmt(fresh['job_p50_s'], 3)} s**, max {fmt(fresh['job_max_s'], 3)} s "
            "(the Job polled every 2 ms).",
            "",
        ]
    if startup.get("measured"):
        lines += [f"Measured {startup['measured']}.", ""]
    return "\n".join(lines)


def run_startup(bench: Bench, config: dict[str, Any]) -> dict[str, Any]:
    n, w = config["startup"]
    log(f"startup: {n} Tasks present when the controller starts, {w} workers")
    boot = bench.startup(n, w)
    log(f"  first Job {fmt(boot['first_job_s'])}s, last {fmt(boot['last_job_s'])}s")
    log(f"new MPE: {config['new_mpe_samples']} MPEs, a Task right after each")
    fresh = bench.new_mpe(config["new_mpe_samples"])
    log(f"  Task→Job p50 {fmt(fresh['job_p50_s'], 3)}s")
    return {"boot": boot, "new_mpe": fresh}


def render_profile(result: RunResult) -> str:
    """The profile of one run as a Markdown table: category, share of samples, ms per Task."""
    samples = result.profile or {}
    total = sum(samples.values()) or 1
    lines = [
        f"Profile of one burst ({result.n:,} Tasks, {result.workers} workers): "
        f"{total:,} samples of the controller holding the GIL, "
        f"{fmt(result.cpu_ms_per_task, 1)} ms of CPU per Task in all.",
        "",
        "| where | share | ms per Task |",
        "|---|---:|---:|",
    ]
    for name, count in sorted(samples.items(), key=lambda kv: -kv[1]):
        share = count / total
        lines.append(f"| {name} | {share:.1%} | {share * result.cpu_ms_per_task:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: tiny N, one repeat (a few minutes)"
    )
    parser.add_argument("--sizes", help="comma-separated Task counts (default 100,1000,5000)")
    parser.add_argument("--workers", help="comma-separated worker counts (default 1,4,16)")
    parser.add_argument(
        "--repeats", type=int, help="runs per (size, workers) (default 3, 1 for the largest size)"
    )
    parser.add_argument(
        "--budget-minutes",
        type=float,
        help="stop starting runs beyond this (default 24; --quick 3)",
    )
    parser.add_argument(
        "--output", default=str(REPO / "docs" / "benchmarks.md"), help="Markdown report ('' = none)"
    )
    parser.add_argument(
        "--json",
        default=str(REPO / "benchmarks" / "last-run.json"),
        help="also write the raw results here, for --from-json ('' = none; default benchmarks/last-run.json)",
    )
    parser.add_argument(
        "--from-json", help="re-render the report from a --json file instead of running"
    )
    parser.add_argument(
        "--record",
        help="with --profile: append the run's figures and profile to this JSON-lines file "
        "(benchmarks/before_after.py renders before/after rows from it)",
    )
    parser.add_argument(
        "--skip",
        type=lambda text: [x for x in text.split(",") if x],
        help="comma-separated scenarios left out of a full run: flood, profile, steady, memory, "
        "replicas, startup (the burst sizes always run)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="only one profiled burst (--sizes/--workers, default 1000 x 16): where the CPU goes",
    )
    parser.add_argument(
        "--startup-only",
        action="store_true",
        help="only the start-up scenarios; their figures replace those of the --json file, "
        "and the report is rendered again from it",
    )
    parser.add_argument(
        "--flood-only",
        action="store_true",
        help="only the flood rows (--sizes: tenant A's Tasks, default 5000; --workers, default "
        "16); their figures replace those of the --json file, and the report is rendered again",
    )
    parser.add_argument("--kubelet", help=argparse.SUPPRESS)
    parser.add_argument("--writer", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.kubelet:
        run_kubelet(args.kubelet, KUBELET_THREADS)
        return 0
    if args.writer:
        kubeconfig, namespace, seconds, threads = args.writer.split(",")
        run_writer(kubeconfig, namespace, float(seconds), int(threads))
        return 0
    if args.from_json:
        data = json.loads(Path(args.from_json).read_text())
        report = render(
            [RunResult(**r) for r in data["results"]],
            data["memory"],
            data["meta"],
            data.get("config", {}),
            data.get("notes"),
            data.get("ceiling") or {},
            data.get("replicas") or [],
            data.get("startup"),
            data.get("flood"),
        )
        print(report)
        if args.output:
            write_report(Path(args.output), report)
        return 0

    from taskfsm.api.crdgen import crd_documents
    from taskfsm_dev.controlplane import ControlPlane
    from taskfsm_dev.crds import install_crds

    config = plan(args)
    log(f"plan: {config}")
    started = time.monotonic()
    results: list[RunResult] = []
    memory: list[dict[str, float]] = []
    notes: list[str] = []
    log_dir = Path(
        os.environ.get("TASKFSM_BENCH_LOGS")
        or Path(os.environ.get("TMPDIR", "/tmp")) / f"taskfsm-bench-{os.getpid()}"
    )
    log_dir.mkdir(parents=True, exist_ok=True)
    with ControlPlane(name="taskfsm-bench", controller_manager_args=KCM_ARGS) as plane:
        install_crds(plane.api_client(), crd_documents())
        bench = Bench(plane, log_dir=log_dir)
        bench.start_kubelet()
        if args.startup_only:
            try:
                startup = run_startup(bench, config)
            finally:
                bench.stop_kubelet()
            meta = machine_meta(plane)
            startup["measured"] = (
                f"in a run of its own (`--startup-only`), {meta['date']}, "
                f"commit {meta['taskfsm commit']}"
            )
            data = json.loads(Path(args.json).read_text())
            data["startup"] = startup
            Path(args.json).write_text(json.dumps(data, indent=1))
            return main(["--from-json", args.json, "--output", args.output])
        if args.flood_only:
            config["flood"] = list(config["flood"])
            if args.sizes:
                config["flood"][0] = int(args.sizes.split(",")[0])
            if args.workers:
                config["flood"][1] = int(args.workers.split(",")[0])
            try:
                flood = run_flood(bench, config)
            finally:
                bench.stop_kubelet()
            path = Path(args.json)
            data = json.loads(path.read_text()) if path.exists() else {}
            data.setdefault("results", [])
            data.setdefault("memory", [])
            data.setdefault("meta", machine_meta(plane))
            meta = machine_meta(plane)
            flood[0]["measured"] = (
                f"in a run of its own (`--flood-only`, tenant A {config['flood'][0]:,} Tasks), "
                f"{meta['date']}, commit {meta['taskfsm commit']}, load average at start "
                f"{meta['load average at start (1/5/15 min)']}"
            )
            data["flood"] = flood
            path.write_text(json.dumps(data, indent=1))
            return main(["--from-json", args.json, "--output", args.output])
        if args.profile:
            try:
                n = int((args.sizes or "1000").split(",")[0])
                w = int((args.workers or "16").split(",")[0])
                result = bench.run(n, w, profile=log_dir / "profile.txt")
                print(render_profile(result))
                cost = per_task_cost(result)
                print(
                    f"\n{fmt(result.throughput_job, 1)} Tasks/s to Job, "
                    f"{fmt(result.reconciles_per_task, 2)} Task reconciles / Task, "
                    f"{result.workflow_reconciles:.0f} Workflow reconciles, "
                    f"{fmt(cost.task_writes, 2)} Task writes, {fmt(cost.events, 2)} Events, "
                    f"{fmt(cost.workflow_writes, 2)} Workflow writes, {fmt(cost.reads, 2)} reads per Task; "
                    f"controller CPU {fmt(result.cpu_ms_per_task, 1)} ms, kube-apiserver + etcd CPU "
                    f"{fmt(result.plane_cpu_ms_per_task, 1)} ms per Task"
                )
                log(f"raw profile: {log_dir / 'profile.txt'}")
                if args.record:  # one JSON line per run, for benchmarks/before_after.py
                    line = asdict(result) | {"commit": git_commit(), "date": now_utc()}
                    with Path(args.record).open("a") as out:
                        out.write(json.dumps(line) + "\n")
            finally:
                bench.stop_kubelet()
            return 0
        try:
            meta = machine_meta(plane)
            ceiling: dict[str, float] = {}
            replicas: list[dict[str, Any]] = []
            startup: dict[str, Any] = {}
            flood: list[dict[str, Any]] = []
            budget_end = started + config["budget_minutes"] * 60
            namespaces: dict[int, str] = {}
            sizes = config["sizes"]
            largest = max(sizes)

            def tput(n: int, w: int) -> float:
                done = [
                    r.throughput_done
                    for r in results
                    if r.n == n and r.workers == w and r.scenario == "burst"
                ]
                if done:
                    return median(done)
                # Not run yet: as the largest size run so far with these workers (or any).
                known = [r for r in results if r.scenario == "burst"]
                same = [r for r in known if r.workers == w] or known
                if not same:
                    return 5.0
                biggest = max(r.n for r in same)
                return median([r.throughput_done for r in same if r.n == biggest])

            def fits(n: int, w: int, what: str, *, rate: float | None = None) -> bool:
                capacity = n / max(1.0, tput(n, w) * (0.85 if n == largest else 1.0))
                if what.startswith("memory"):
                    seconds = n / (rate or 1.0) * 1.3 + 25
                else:
                    seconds = max(n / rate if rate else 0.0, capacity) * 1.3 + 25
                reserve = (
                    min(150.0, 0.15 * config["budget_minutes"] * 60)
                    if not what.startswith("memory")
                    else 0.0
                )
                if time.monotonic() + seconds + reserve <= budget_end:
                    return True
                notes.append(
                    f"skipped {what} (estimated {seconds / 60:.1f} min, beyond the {config['budget_minutes']} min budget)"
                )
                log(f"skip {what}: over budget")
                return False

            def burst(n: int, w: int) -> None:
                if not fits(n, w, f"burst {n:,} Tasks x {w} workers"):
                    return
                log(f"burst: {n} Tasks, {w} workers")
                result = bench.run(n, w)
                results.append(result)
                namespaces[n] = result.namespace
                log(
                    f"  Job p50 {fmt(result.job_latency['p50'])}s, {fmt(result.throughput_job, 1)} Tasks/s to Job, "
                    f"{fmt(result.wall_seconds, 1)}s, complete={result.complete}"
                )

            # The flood first, while no earlier run's Tasks load the all-namespace controller.
            if config.get("flood"):
                flood = run_flood(bench, config)
            # First every size once (small first), then the profiled burst, the ceiling, the
            # steady rate, memory and replicas, then the remaining repeats while time lasts.
            first_reps = {n: (config["repeats"].get(n, 1) if n == min(sizes) else 1) for n in sizes}
            for n in sizes:
                for _ in range(first_reps[n]):
                    for w in config["workers"][n]:
                        burst(n, w)
            if config.get("profile"):
                n, w = config["profile"]
                if fits(n, w, f"profiled burst {n:,} Tasks x {w} workers"):
                    log(f"profile: {n} Tasks, {w} workers, py-spy --gil")
                    result = bench.run(n, w, profile=log_dir / "profile.txt")
                    result.scenario = "burst (profiled)"
                    results.append(result)
            log(f"ceiling: bare ConfigMap POSTs for {config['ceiling_seconds']:g} s")
            ceiling = bench.ceiling(config["ceiling_seconds"])
            log(f"  {ceiling['writes_per_second']:.0f} writes/s")
            for n, rate in config["steady"]:
                w = max(
                    config["workers"].get(n) or [max(max(x) for x in config["workers"].values())]
                )
                if fits(n, w, f"steady {n:,} Tasks at {rate:g}/s", rate=rate):
                    log(f"steady: {n} Tasks at {rate:g}/s, {w} workers")
                    result = bench.run(n, w, rate=rate)
                    results.append(result)
                    log(
                        f"  Job p50 {fmt(result.job_latency['p50'])}s p99 {fmt(result.job_latency['p99'])}s, complete={result.complete}"
                    )
            for tasks in config["memory"]:
                if tasks and tasks not in namespaces:
                    continue
                if not fits(
                    tasks, 4, f"memory at {tasks:,} Tasks", rate=200.0 / config["memory_repeats"]
                ):
                    continue
                log(
                    f"memory: controller with {tasks} Tasks in cache, {config['memory_repeats']} fresh processes"
                )
                memory.append(
                    memory_point(
                        [
                            bench.memory(namespaces.get(tasks), tasks)
                            for _ in range(config["memory_repeats"])
                        ]
                    )
                )
                log(
                    f"  RSS median {fmt(memory[-1]['rss_mib'], 1)} MiB, runs {memory[-1]['rss_runs']}"
                )
            if config.get("replicas"):
                replicas = run_replicas(bench, config, fits)
            if config.get("startup"):  # short and fixed in size: never skipped for time
                startup = run_startup(bench, config)
            for n in sizes:
                for _ in range(config["repeats"].get(n, 1) - first_reps[n]):
                    for w in config["workers"][n]:
                        burst(n, w)
        finally:
            bench.stop_kubelet()
    meta["benchmark wall time"] = f"{(time.monotonic() - started) / 60:.1f} min"
    meta["load average at end (1/5/15 min)"] = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    printable = {
        k: (v if not isinstance(v, dict) else {str(a): b for a, b in v.items()})
        for k, v in config.items()
    }
    report = render(results, memory, meta, printable, notes, ceiling, replicas, startup, flood)
    print(report)
    if args.output:
        write_report(Path(args.output), report)
        log(f"wrote {args.output}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "results": [asdict(r) for r in results],
                    "memory": memory,
                    "ceiling": ceiling,
                    "replicas": replicas,
                    "startup": startup,
                    "flood": flood,
                    "meta": meta,
                    "config": printable,
                    "notes": notes,
                },
                indent=1,
            )
        )
    return 0 if all(r.complete for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
