"""Benchmark: what the Task CRD's validation rules (CEL) cost kube-apiserver per Task write.

Run: ``make bench`` (after the controller benchmark) or
``.venv/bin/python benchmarks/bench_admission.py`` (``--quick`` for a smoke run; ``--help``).
Nothing is asserted: the table goes to stdout, to the ``## Task admission: what the CRD's rules
cost`` section of ``docs/benchmarks.md`` (replaced in place, the rest of the file kept) and to
``benchmarks/last-admission-run.json`` (``--from-json`` renders the section again).

What it does, on one local control plane of its own (etcd and kube-apiserver; no controller
manager, nothing else writes):

1. installs the Task CRD of ``taskfsm.api.crdgen`` several times, each copy in an API group of its
   own (``<variant>.bench.nagare.media``) so every variant is served by the same API server in the
   same run: the project's CRD as generated (``project``); the same without any
   ``x-kubernetes-validations`` (``no rules``); without one rule at a time (``without <rule>``,
   to find the costly ones); and without the rules and the size bounds (``maxItems``,
   ``maxProperties``, ``maxLength``: what the upstream CRDs carry, ``no rules, no bounds``);
2. for each variant, in a fresh namespace, the writes a Task costs in its life: the user's
   ``POST``, the controller's metadata merge patch (finalizer, owner reference, labels, with a
   resourceVersion precondition), and two ``/status`` merge patches (``Running``, then
   ``Succeeded``: the second is where the phase transition rule compares with the stored phase);
   N Tasks (500 by default) by 8 client threads, one phase after the other. The Tasks name a
   TaskTemplate, a Function and a MediaProcessingEntity by reference, so every rule of the spec
   is evaluated;
3. kube-apiserver's and etcd's CPU seconds (``/proc/<pid>/stat``: user + system, every thread)
   over each phase, and its wall time; rounds alternate the variants' order, the table gives the
   median over the rounds and the spread.

The figures answer "what does rule X cost per write" to within the noise of the machine (the
rounds' spread says how large that is); they are measured, not asserted.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import ssl
import statistics
import sys
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from report import publish  # noqa: E402 (this script's folder is on sys.path)

from taskfsm.api import constants as c  # noqa: E402 (after the sys.path entry above)
from taskfsm.api.crdgen import crd_documents  # noqa: E402 (after the sys.path entry above)
from taskfsm.kube.rest import NAMESPACES, Resource, Rest  # noqa: E402 (after the sys.path entry above)
from taskfsm_dev.controlplane import ControlPlane  # noqa: E402 (after the sys.path entry above)
from taskfsm_dev.crds import install_crds  # noqa: E402 (after the sys.path entry above)

SECTION = "## Task admission: what the CRD's rules cost"
PHASES = ("create", "metadata patch", "status Running", "status Succeeded")
THREADS = 8
BOUNDS = ("maxItems", "maxProperties", "maxLength")


def log(text: str) -> None:
    print(f"[bench-admission {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


METRICS = {
    "cel_seconds": "apiserver_cel_evaluation_duration_seconds_sum",
    "cel_evaluations": "apiserver_cel_evaluation_duration_seconds_count",
    "ratcheting_seconds": "apiextensions_apiserver_validation_ratcheting_seconds_sum",
}
"""What the API server's own metrics say about validation: seconds spent evaluating CEL rules
(every rule of one object is one evaluation), and comparing old and new objects for validation
ratcheting on updates. Sums of wall time inside the API server, so far less sensitive to the
machine's load than its CPU seconds."""


def metrics_reader(cp: ControlPlane) -> Callable[[], dict[str, float]]:
    """A function returning :data:`METRICS` from kube-apiserver's ``/metrics`` now."""
    context = ssl.create_default_context(cafile=str(cp.ca_file))
    request = urllib.request.Request(
        f"{cp.server}/metrics", headers={"Authorization": f"Bearer {cp.token}"}
    )

    def read() -> dict[str, float]:
        with urllib.request.urlopen(request, context=context, timeout=60) as answer:
            text = answer.read().decode()
        found = dict.fromkeys(METRICS, 0.0)
        names = {v: k for k, v in METRICS.items()}
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name in names:
                found[names[name]] = float(value)
        return found

    return read


def plane_pids(cp: ControlPlane) -> dict[str, int]:
    """kube-apiserver's and etcd's pids (the control plane keeps its processes in ``_procs``)."""
    return {p.name: p.popen.pid for p in cp._procs if p.name in ("etcd", "kube-apiserver")}


# -- the CRD variants ------------------------------------------------------------------------------


def task_crd() -> dict[str, Any]:
    (doc,) = [d for d in crd_documents() if d["spec"]["names"]["kind"] == c.KIND_TASK]
    return doc


def rules(node: Any, path: str = "") -> list[tuple[str, str]]:
    """(where, rule) of every ``x-kubernetes-validations`` entry below ``node``."""
    found: list[tuple[str, str]] = []
    if isinstance(node, dict):
        for entry in node.get("x-kubernetes-validations") or []:
            where = path + (entry.get("fieldPath") or "")
            found.append((where or ".", entry["rule"]))
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for name, child in value.items():
                    found += rules(child, f"{path}.{name}")
            elif key == "items":
                found += rules(value, f"{path}[]")
    return found


def strip(
    node: Any, keep: Callable[[str, dict[str, Any]], bool], bounds: bool, path: str = ""
) -> Any:
    """A copy of the schema ``node`` keeping the rules ``keep(where, entry)`` allows (and, with
    ``bounds``, without the size bounds)."""
    if isinstance(node, list):
        return [strip(v, keep, bounds, path) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if bounds and key in BOUNDS:
            continue
        if key == "x-kubernetes-validations":
            kept = [e for e in value if keep(path + (e.get("fieldPath") or ""), e)]
            if kept:
                out[key] = copy.deepcopy(kept)
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {n: strip(v, keep, bounds, f"{path}.{n}") for n, v in value.items()}
        elif key == "items":
            out[key] = strip(value, keep, bounds, f"{path}[]")
        else:
            out[key] = strip(value, keep, bounds, path)
    return out


def variant_crd(
    base: dict[str, Any], slug: str, keep: Callable[[str, dict[str, Any]], bool], bounds: bool
) -> dict[str, Any]:
    """``base`` in the group ``<slug>.bench.nagare.media``, its rules filtered by ``keep``."""
    doc = copy.deepcopy(base)
    group = f"{slug}.bench.nagare.media"
    doc["metadata"] = {"name": f"{doc['spec']['names']['plural']}.{group}"}
    doc["spec"]["group"] = group
    names = doc["spec"]["names"]
    names.pop("shortNames", None)
    names.pop("categories", None)
    for version in doc["spec"]["versions"]:
        schema = version["schema"]["openAPIV3Schema"]
        version["schema"]["openAPIV3Schema"] = strip(schema, keep, bounds)
    return doc


def variants(per_rule: bool) -> list[tuple[str, str, dict[str, Any]]]:
    """(label, group slug, CRD) of every variant measured."""
    base = task_crd()
    out = [
        ("project", "project", variant_crd(base, "project", lambda w, e: True, False)),
        ("no rules", "norules", variant_crd(base, "norules", lambda w, e: False, False)),
    ]
    if per_rule:
        schema = base["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        for i, (where, _) in enumerate(rules(schema)):
            out.append(
                (
                    f"without `{where}`",
                    f"without{i}",
                    variant_crd(base, f"without{i}", lambda w, e, x=where: w != x, False),
                )
            )
        out.append(
            ("no rules, no bounds", "bare", variant_crd(base, "bare", lambda w, e: False, True))
        )
    return out


# -- the writes ------------------------------------------------------------------------------------


def task_body(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {c.LABEL_WORKFLOW_NAME: "wf"}},
        "spec": {
            "workflowRef": {"name": "wf"},
            "taskTemplateRef": {"kind": "TaskTemplate", "name": "template"},
            "functionRef": {"kind": "Function", "name": "function"},
            "mediaProcessingEntityRef": {"kind": "MediaProcessingEntity", "name": "mpe"},
            "humanReadable": {"name": name, "description": "an admission benchmark Task"},
            "config": {"key": "value", "other": "value"},
            "inputs": [
                {
                    "id": "in",
                    "type": "media",
                    "url": "http://example.invalid/in",
                    "portBindings": [{"id": "in"}],
                    "metadata": {},
                }
            ],
            "outputs": [
                {
                    "id": "out",
                    "type": "media",
                    "url": "http://example.invalid/out",
                    "portBindings": [{"id": "out"}],
                    "metadata": {},
                }
            ],
        },
    }


def status(phase: str) -> dict[str, Any]:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions = [
        {
            "type": "Ready",
            "status": "True" if phase == "Running" else "False",
            "lastTransitionTime": now,
            "reason": "JobRunning" if phase == "Running" else "JobSucceeded",
            "message": "",
        }
    ]
    if phase == "Succeeded":
        conditions.append(
            {
                "type": "Complete",
                "status": "True",
                "lastTransitionTime": now,
                "reason": "JobSucceeded",
                "message": "",
            }
        )
    out: dict[str, Any] = {
        "phase": phase,
        "queuedTime": now,
        "startTime": now,
        "observedGeneration": 1,
        "conditions": conditions,
        "functionRef": {"apiVersion": c.API_VERSION, "kind": "Function", "name": "function"},
        "mediaProcessingEntityRef": {
            "apiVersion": c.API_VERSION,
            "kind": "MediaProcessingEntity",
            "name": "mpe",
        },
        "jobRef": {"apiVersion": "batch/v1", "kind": "Job", "name": "job", "uid": "0" * 36},
    }
    if phase == "Succeeded":
        out["endTime"] = now
    return out


def run_variant(
    rest: Rest,
    pool: ThreadPoolExecutor,
    pids: dict[str, int],
    metrics: Callable[[], dict[str, float]],
    group: str,
    n: int,
    tag: str,
) -> dict[str, dict[str, float]]:
    """The four write phases of ``n`` Tasks of one variant; per phase: API server and etcd CPU
    seconds, wall seconds."""
    res = Resource(group, "v1alpha1", "tasks", "Task")
    namespace = f"adm-{tag}"
    rest.create(NAMESPACES, None, {"metadata": {"name": namespace}})
    names = [f"task-{i:05d}" for i in range(n)]
    versions: dict[str, str] = {}

    def create(name: str) -> None:
        versions[name] = rest.create(res, namespace, task_body(name))["metadata"]["resourceVersion"]

    def metadata(name: str) -> None:
        patch = {
            "metadata": {
                "resourceVersion": versions[name],
                "finalizers": [c.FINALIZER_TASK_PROTECTION],
                "ownerReferences": [
                    {
                        "apiVersion": c.API_VERSION,
                        "kind": "Workflow",
                        "name": "wf",
                        "uid": "1" * 36,
                    }
                ],
                "labels": {c.LABEL_WORKFLOW_NAME: "wf", "engine.nagare.media/extra": "x"},
            }
        }
        versions[name] = rest.patch(res, namespace, name, patch)["metadata"]["resourceVersion"]

    def status_patch(phase: str) -> Callable[[str], None]:
        def write(name: str) -> None:
            patch = {"metadata": {"resourceVersion": versions[name]}, "status": status(phase)}
            updated = rest.patch(res, namespace, name, patch, subresource="status")
            versions[name] = updated["metadata"]["resourceVersion"]

        return write

    steps: list[tuple[str, Callable[[str], None]]] = [
        ("create", create),
        ("metadata patch", metadata),
        ("status Running", status_patch("Running")),
        ("status Succeeded", status_patch("Succeeded")),
    ]
    out: dict[str, dict[str, float]] = {}
    for phase, write in steps:
        before = {name: cpu_seconds(pid) for name, pid in pids.items()} | metrics()
        start = time.perf_counter()
        list(pool.map(write, names))
        wall = time.perf_counter() - start
        after = {name: cpu_seconds(pid) for name, pid in pids.items()} | metrics()
        out[phase] = {
            "apiserver": after["kube-apiserver"] - before["kube-apiserver"],
            "etcd": after["etcd"] - before["etcd"],
            "wall": wall,
        } | {key: after[key] - before[key] for key in METRICS}
    # Not measured: the Tasks go (finalizers first), so every round starts from the same store.
    for name in names:
        rest.patch(res, namespace, name, {"metadata": {"finalizers": None}})
    rest.request("DELETE", res, res.path(namespace), timeout=(10.0, 300.0))
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    measured = variants(args.per_rule)
    results: dict[str, list[dict[str, dict[str, float]]]] = {label: [] for label, _, _ in measured}
    with ControlPlane(name="taskfsm-bench-admission", controller_manager=False) as cp:
        pids = plane_pids(cp)
        metrics = metrics_reader(cp)
        with cp.api_client() as api:
            install_crds(api, [doc for _, _, doc in measured])
            rest = Rest(api)
            with ThreadPoolExecutor(THREADS) as pool:
                # warm-up: one small run per variant (CEL programs, caches, connections)
                for _label, slug, doc in measured:
                    run_variant(rest, pool, pids, metrics, doc["spec"]["group"], 20, f"warm-{slug}")
                for r in range(args.rounds):
                    order = list(measured)
                    random.shuffle(order)
                    log(f"round {r + 1} of {args.rounds}")
                    for label, slug, doc in order:
                        phases = run_variant(
                            rest,
                            pool,
                            pids,
                            metrics,
                            doc["spec"]["group"],
                            args.tasks,
                            f"r{r}-{slug}",
                        )
                        results[label].append(phases)
                        total = sum(p["apiserver"] for p in phases.values())
                        cel = sum(p["cel_seconds"] for p in phases.values())
                        log(
                            f"  {label}: API server {total * 1000 / args.tasks:.2f} ms/Task, "
                            f"CEL {cel * 1e6 / args.tasks:.1f} µs/Task"
                        )
    schema = task_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return {
        "results": results,
        "rules": [{"where": w, "rule": r} for w, r in rules(schema)],
        "meta": {
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": os.popen(f"git -C {REPO} rev-parse --short HEAD").read().strip() or "?",
            "tasks": args.tasks,
            "rounds": args.rounds,
            "load": os.getloadavg(),
        },
    }


def render(data: dict[str, Any]) -> str:
    results, meta = data["results"], data["meta"]
    n = meta["tasks"]

    def per_task(
        runs: list[dict[str, dict[str, float]]], key: str, phase: str | None
    ) -> list[float]:
        return [
            sum(p[key] for name, p in r.items() if phase in (None, name)) * 1000 / n for r in runs
        ]

    def cell(values: list[float]) -> str:
        text = f"{statistics.median(values):.2f}"
        if len(values) > 1:
            text += f" ({min(values):.2f}-{max(values):.2f})"
        return text

    base = statistics.median(per_task(results["project"], "apiserver", None))
    lines = [
        SECTION,
        "",
        f"`benchmarks/bench_admission.py`: {n} Tasks per variant, each created, metadata-patched "
        "and status-patched twice (Running, then Succeeded) by 8 client threads against one local "
        "kube-apiserver, every variant of the Task CRD in an API group of its own on the same "
        "server; kube-apiserver's CPU (user + system) per Task over the four writes, median over "
        f"{meta['rounds']} rounds (min-max). The CEL and ratcheting columns are the API server's "
        "own metrics (`apiserver_cel_evaluation_duration_seconds`, "
        "`apiextensions_apiserver_validation_ratcheting_seconds`): time spent evaluating the "
        "rules and comparing old with new objects, summed over the four writes. Measured, not "
        f"asserted; {meta['date']}, commit {meta['commit']}.",
        "",
        "| Task CRD | kube-apiserver CPU ms / Task | vs project | "
        + " | ".join(f"{p} (ms)" for p in PHASES)
        + " | etcd CPU ms / Task | wall s (all writes) | CEL evaluation µs / Task "
        "| CEL evaluations / Task | ratcheting µs / Task |",
        "|---|---:|---:|" + "---:|" * len(PHASES) + "---:|---:|---:|---:|---:|",
    ]
    for label, runs in results.items():
        if not runs:
            continue
        total = per_task(runs, "apiserver", None)
        walls = [sum(p["wall"] for p in r.values()) for r in runs]
        lines.append(
            f"| {label} | {cell(total)} | {statistics.median(total) - base:+.2f} | "
            + " | ".join(cell(per_task(runs, "apiserver", p)) for p in PHASES)
            + f" | {cell(per_task(runs, 'etcd', None))} | {statistics.median(walls):.1f} | "
            + f"{cell([v * 1000 for v in per_task(runs, 'cel_seconds', None)])} | "
            + f"{statistics.median(per_task(runs, 'cel_evaluations', None)) / 1000:.1f} | "
            + f"{cell([v * 1000 for v in per_task(runs, 'ratcheting_seconds', None)])} |"
        )
    lines += ["", "The rules of the Task CRD (`where` is the field they are attached to):", ""]
    lines += [f"- `{r['where']}`: `{r['rule']}`" for r in data["rules"]]
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 20 Tasks, 1 round")
    parser.add_argument("--tasks", type=int, default=500, help="Tasks per variant (default 500)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    parser.add_argument(
        "--no-per-rule",
        dest="per_rule",
        action="store_false",
        help="only the project's CRD and the one without rules",
    )
    parser.add_argument(
        "--output",
        default=str(REPO / "docs" / "benchmarks.md"),
        help=f"report whose '{SECTION}' section is replaced ('' = none)",
    )
    parser.add_argument(
        "--json",
        default=str(REPO / "benchmarks" / "last-admission-run.json"),
        help="raw results",
    )
    parser.add_argument("--from-json", help="render from a --json file instead of running")
    args = parser.parse_args(argv)
    if args.quick:
        args.tasks, args.rounds = 20, 1
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
