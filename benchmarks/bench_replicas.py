"""Benchmark: Tasks/s with 1, 2 and 4 active replicas sharing Lease-held buckets (issue 16).

Run: ``.venv/bin/python benchmarks/bench_replicas.py [--tasks 300] [--replicas 1,2,4]``; prints a
Markdown table. ``run(...)`` returns the rows as dicts (for ``make bench``).

Same setup as ``benchmarks/bench_controller.py`` (both build on ``benchmarks/harness.py``): a local control
plane with kube-controller-manager's client limits raised, the pooled simulated kubelet, Tasks
created by 8 client threads, a watch timing each Task's Job and ``Succeeded``. Per row, a fresh
namespace holds the Tasks and the Leases, and N ``taskfsm run --leader-elect --buckets B``
processes (docs/operations.md, "Running several replicas") are started and left to balance
(every bucket held, each replica its fair share) before the burst. A row with ``--buckets 1`` is
today's single leader, for comparison. CPU is user + system seconds from ``/proc`` of each
replica, of kube-apiserver and of etcd over the burst, divided by the Tasks; all of them share
the machine's cores, so the ``busy cores`` column says how close the run came to the machine's
limit and the API server's share says whether it, rather than taskfsm, was the bottleneck.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from harness import (  # noqa: E402 (after the sys.path entries above)
    CREATE_THREADS,
    KCM_ARGS,
    Bench,
    Timeline,
    cpu_seconds,
    log,
    percentile,
    rss_mib,
)

from taskfsm.kube.resources import TASKS, WORKFLOWS  # noqa: E402 (after the sys.path entries above)

LEASE_TIMINGS = (15.0, 10.0, 2.0)
"""The defaults of ``taskfsm run`` (lease duration, renew deadline, retry period)."""


def _plane_pids(plane: Any) -> dict[str, int]:
    """kube-apiserver's and etcd's pids (the control plane keeps its processes in ``_procs``)."""
    return {
        p.name: p.popen.pid
        for p in getattr(plane, "_procs", [])
        if p.name in ("etcd", "kube-apiserver")
    }


def _wait_leading(procs: list[Any], buckets: int, rest: Any, namespace: str) -> float:
    """Until every bucket is held and shared fairly (``--buckets 1``: one replica leads)."""
    from taskfsm_dev.replicas import wait_balanced

    if buckets > 1:
        return wait_balanced(rest, namespace, buckets, procs, timeout=120)
    started = time.monotonic()
    while time.monotonic() - started < 120:
        if sum(
            p.metric("leader_election_master_status", name="taskfsm-task-controller") for p in procs
        ):
            return time.monotonic() - started
        time.sleep(0.2)
    raise RuntimeError("no replica leads after 120 s")


def one_row(bench: Bench, tasks: int, replicas: int, buckets: int, workers: int) -> dict[str, Any]:
    from taskfsm_dev import objects
    from taskfsm_dev.replicas import start_replicas

    ns = bench.namespace(f"replicas-{replicas}-b{buckets}")
    bench.rest.create(WORKFLOWS, ns, objects.workflow("wf"))
    procs = start_replicas(
        bench.installed(ns),  # as installed: the generated RBAC, Leases in ns
        replicas,
        buckets=buckets,
        lease_namespace=ns,
        namespace=ns,
        timings=LEASE_TIMINGS,
        prefix=f"r{replicas}b{buckets}",
        args=[f"--workers={workers}", "--log-level=WARNING", "--log-format=text"],
        log_dir=bench.log_dir,
    )
    try:
        balanced = _wait_leading(procs, buckets, bench.rest, ns)
        timeline = Timeline(bench.rest, ns, "wf", tasks).start()
        time.sleep(0.5)
        plane = _plane_pids(bench.plane)
        cpu_before = {p.name: cpu_seconds(p.pid) for p in procs}
        plane_before = {name: cpu_seconds(pid) for name, pid in plane.items()}
        names = [f"t{i:05d}" for i in range(tasks)]
        created: dict[str, float] = {}
        started = time.monotonic()

        def create(name: str) -> None:
            body = objects.task(name, workflow_name="wf", function_name="bench")
            for attempt in range(5):
                try:
                    bench.rest.create(TASKS, ns, body)
                    break
                except Exception:
                    time.sleep(0.2 * (attempt + 1))
            created[name] = time.monotonic()

        with ThreadPoolExecutor(CREATE_THREADS) as pool:
            list(pool.map(create, names))
        complete = timeline.all_released.wait(120 + tasks * 0.4)
        wall = time.monotonic() - started
        cpu = {p.name: cpu_seconds(p.pid) - cpu_before[p.name] for p in procs}
        plane_cpu = {name: cpu_seconds(pid) - plane_before[name] for name, pid in plane.items()}
        rss = [rss_mib(p.pid)[0] for p in procs]
        timeline.stop()
    finally:
        for proc in procs:
            proc.ensure_stopped()
    with timeline.lock:
        job = [timeline.job[t] - created[t] for t in names if t in timeline.job and t in created]
        done = [timeline.done[t] - created[t] for t in names if t in timeline.done and t in created]
        last_job = max(timeline.job.values(), default=float("nan"))
        last_done = max(timeline.done.values(), default=float("nan"))
    first = min(created.values())
    total_cpu = sum(cpu.values())
    return {
        "replicas": replicas,
        "buckets": buckets,
        "tasks": tasks,
        "workers": workers,
        "complete": complete and len(done) == tasks,
        "balanced_s": round(balanced, 1),
        "tasks_per_s_to_job": len(job) / max(1e-9, last_job - first),
        "tasks_per_s_to_succeeded": len(done) / max(1e-9, last_done - first),
        "job_p50_s": percentile(job, 0.5),
        "job_p95_s": percentile(job, 0.95),
        "cpu_ms_per_task": total_cpu * 1000 / tasks,
        "cpu_ms_per_task_per_replica": total_cpu * 1000 / tasks / replicas,
        "cpu_ms_per_task_busiest_replica": max(cpu.values()) * 1000 / tasks,
        "apiserver_cpu_ms_per_task": plane_cpu.get("kube-apiserver", float("nan")) * 1000 / tasks,
        "etcd_cpu_ms_per_task": plane_cpu.get("etcd", float("nan")) * 1000 / tasks,
        "busy_cores": (total_cpu + sum(plane_cpu.values())) / wall,
        "rss_mib_per_replica": [round(r, 1) for r in rss],
        "wall_s": wall,
    }


def run(
    tasks: int = 300,
    replicas: tuple[int, ...] = (1, 2, 4),
    *,
    buckets: int = 12,
    workers: int = 4,
    baseline: bool = True,
    plane: Any = None,
    log_dir: Path | None = None,
) -> list[dict[str, Any]]:
    """One burst of ``tasks`` per replica count (and, with ``baseline``, one single leader with
    ``--buckets 1``); on ``plane`` (with the kube-controller-manager flags of
    ``harness.KCM_ARGS``) or a control plane of its own."""
    from taskfsm.api.crdgen import crd_documents
    from taskfsm_dev.controlplane import ControlPlane
    from taskfsm_dev.crds import install_crds

    log_dir = log_dir or Path(os.environ.get("TMPDIR", "/tmp")) / f"taskfsm-replicas-{os.getpid()}"
    log_dir.mkdir(parents=True, exist_ok=True)
    plan = ([(1, 1)] if baseline else []) + [(n, buckets) for n in replicas]
    own = plane is None
    context = (
        ControlPlane(name="taskfsm-bench-replicas", controller_manager_args=KCM_ARGS)
        if own
        else contextlib.nullcontext(plane)
    )
    with context as cp:
        if own:
            install_crds(cp.api_client(), crd_documents())
        bench = Bench(cp, log_dir=log_dir)
        bench.start_kubelet()
        rows = []
        try:
            for n, b in plan:
                log(f"{tasks} Tasks, {n} replica(s), --buckets {b}")
                rows.append(one_row(bench, tasks, n, b, workers))
                log(f"  {rows[-1]['tasks_per_s_to_job']:.1f} Tasks/s to Job")
        finally:
            bench.stop_kubelet()
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| replicas | buckets | Tasks | Tasks/s to Job | Tasks/s to Succeeded | Task→Job p50 / p95 (s) "
        "| taskfsm CPU ms/Task (all replicas) | per replica | busiest replica "
        "| kube-apiserver CPU ms/Task | etcd CPU ms/Task | busy cores | RSS per replica (MiB) |\n"
        "|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|\n"
    )
    lines = [
        f"| {r['replicas']} | {r['buckets']} | {r['tasks']}{'' if r['complete'] else ' (incomplete)'} "
        f"| {r['tasks_per_s_to_job']:.1f} | {r['tasks_per_s_to_succeeded']:.1f} "
        f"| {r['job_p50_s']:.2f} / {r['job_p95_s']:.2f} | {r['cpu_ms_per_task']:.1f} "
        f"| {r['cpu_ms_per_task_per_replica']:.1f} | {r['cpu_ms_per_task_busiest_replica']:.1f} "
        f"| {r['apiserver_cpu_ms_per_task']:.1f} | {r['etcd_cpu_ms_per_task']:.1f} "
        f"| {r['busy_cores']:.2f} | {', '.join(f'{m:.0f}' for m in r['rss_mib_per_replica'])} |"
        for r in rows
    ]
    return head + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=300, help="Tasks per burst (default 300)")
    parser.add_argument("--replicas", default="1,2,4", help="replica counts (default 1,2,4)")
    parser.add_argument("--buckets", type=int, default=12, help="--buckets (default 12)")
    parser.add_argument("--workers", type=int, default=4, help="--workers per replica (default 4)")
    parser.add_argument(
        "--no-baseline", action="store_true", help="leave out the --buckets 1 single-leader row"
    )
    args = parser.parse_args(argv)
    rows = run(
        args.tasks,
        tuple(int(n) for n in args.replicas.split(",")),
        buckets=args.buckets,
        workers=args.workers,
        baseline=not args.no_baseline,
    )
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
