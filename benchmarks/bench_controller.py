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
11. Markdown tables on stdout and in ``docs/benchmarks.md`` (machine, versions, date), medians
    of the repeated runs, and each target of issue 14 marked met or not.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import ssl
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402 (after the sys.path entries above)

from taskfsm.api import constants as c  # noqa: E402 (after the sys.path entries above)
from taskfsm.kube.informer import ADDED, DELETED, MODIFIED, Informer  # noqa: E402 (after the sys.path entries above)
from taskfsm.kube.resources import BY_KIND, TASKS, WORKFLOWS  # noqa: E402 (after the sys.path entries above)
from taskfsm.kube.rest import JOBS, NAMESPACES, PODS, SECRETS, Resource, Rest  # noqa: E402 (after the sys.path entries above)

KCM_ARGS = (
    "--kube-api-qps=1000",
    "--kube-api-burst=2000",
    "--concurrent-job-syncs=50",
    "--concurrent-gc-syncs=50",
)
CREATE_THREADS = 8
KUBELET_THREADS = 8
#: The ceiling measurement: processes x threads posting small ConfigMaps (enough concurrency to
#: saturate the API server here; one Python process alone could not).
CEILING_PROCESSES, CEILING_THREADS = 4, 8

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
GOAL_CPU_MS = 5.0  # controller CPU per Task, burst of 1,000
GOAL_RATIO = 0.5  # Tasks/s to Job created over what the measured write ceiling allows
GOAL_STEADY_P99 = 0.25  # Task→Job p99 (s) at a 50/s arrival
GOAL_CPU_GROWTH = 1.2  # CPU per Task, largest burst over smallest
GOAL_MEMORY_MB = 150  # RSS of a fresh process ...
GOAL_MEMORY_TASKS = 10_000  # ... with this many Tasks (and their Jobs) cached
GOAL_TASK_WRITES = 6  # Task-lifecycle writes per Task
GOAL_READS = 0  # uncached single-object reads per Task
READ_VERBS = ("GET",)


# -- small helpers --------------------------------------------------------------------------------


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def median(values: list[float]) -> float:
    values = [v for v in values if v == v]  # drop NaN
    return statistics.median(values) if values else float("nan")


def rss_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of ``pid`` in MiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return fields.get("VmRSS", float("nan")), fields.get("VmHWM", float("nan"))


def scrape_apiserver(plane: Any) -> Counter[tuple[str, str, str, str]]:
    """``apiserver_request_total`` summed by (verb, group, resource, subresource)."""
    context = ssl.create_default_context(cafile=str(plane.ca_file))
    request = urllib.request.Request(
        f"{plane.server}/metrics", headers={"Authorization": f"Bearer {plane.token}"}
    )
    with urllib.request.urlopen(request, timeout=30, context=context) as response:
        text = response.read().decode()
    out: Counter[tuple[str, str, str, str]] = Counter()
    for family in text_string_to_metric_families(text):
        if family.name != "apiserver_request":
            continue
        for sample in family.samples:
            if sample.name != "apiserver_request_total":
                continue
            labels = sample.labels
            key = (
                labels.get("verb", ""),
                labels.get("group", ""),
                labels.get("resource", ""),
                labels.get("subresource", ""),
            )
            out[key] += int(sample.value)
    return out


def controller_counters(proc: Any) -> Counter[str]:
    """The controller's own ``rest_client_requests_total`` by method (``GET``, ``PATCH``, ...),
    its Task and Workflow reconciles (``reconciles:task``...) and its CPU seconds (``cpu``)."""
    out: Counter[str] = Counter()
    for (name, labels), value in proc.samples().items():
        if name == "rest_client_requests_total":
            out[dict(labels).get("method", "")] += int(value)
        elif name == "controller_runtime_reconcile_total":
            out[f"reconciles:{dict(labels).get('controller', '')}"] += int(value)
    out["cpu"] = cpu_seconds(proc.pid)
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- the pooled simulated kubelet (child process) -------------------------------------------------


def run_kubelet(kubeconfig: str, threads: int) -> None:
    """Complete every Job pod (all namespaces) once the Secrets it mounts exist; until SIGTERM.

    Unlike :class:`taskfsm.testing.kubelet.SimulatedKubelet` (one namespace, pod outcomes from
    annotations, one thread), pods succeed at once and status writes run on a thread pool; the
    status itself is the simulated kubelet's.
    """
    from taskfsm.kube.client import from_kubeconfig
    from taskfsm.testing.kubelet import secret_volumes, terminated_status

    rest = Rest(from_kubeconfig(kubeconfig))
    lock = threading.Lock()
    secrets: set[tuple[str, str]] = set()
    parked: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    seen: set[str] = set()
    pool = ThreadPoolExecutor(threads)
    stop = threading.Event()

    def complete(pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        # No Running step here, so the start time is set with the outcome.
        status = {
            **terminated_status(pod, 0),
            "startTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        for attempt in range(20):
            try:
                rest.patch(
                    PODS, meta["namespace"], meta["name"], {"status": status}, subresource="status"
                )
                return
            except Exception:
                if stop.is_set():
                    return
                time.sleep(0.2 * (attempt + 1))

    def wanted(pod: dict[str, Any]) -> list[tuple[str, str]]:
        return [(pod["metadata"]["namespace"], name) for name in secret_volumes(pod)]

    def on_pod(kind: str, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        if kind == DELETED or meta.get("deletionTimestamp"):
            return
        if ((pod.get("status") or {}).get("phase") or "Pending") != "Pending":
            return
        with lock:
            if meta["uid"] in seen:
                return
            seen.add(meta["uid"])
            missing = [s for s in wanted(pod) if s not in secrets]
            if missing:
                parked[missing[0]].append(pod)
                return
        pool.submit(complete, pod)

    def on_secret(kind: str, secret: dict[str, Any]) -> None:
        if kind == DELETED:
            return
        key = (secret["metadata"]["namespace"], secret["metadata"]["name"])
        with lock:
            secrets.add(key)
            waiting = parked.pop(key, [])
        for pod in waiting:
            with lock:
                missing = [s for s in wanted(pod) if s not in secrets]
                if missing:
                    parked[missing[0]].append(pod)
                    continue
            pool.submit(complete, pod)

    secret_informer = Informer(rest, SECRETS, label_selector=c.LABEL_TASK_NAME, watch_timeout=300)
    pod_informer = Informer(
        rest, PODS, label_selector="batch.kubernetes.io/job-name", watch_timeout=300
    )
    secret_informer.add_handler(on_secret)
    pod_informer.add_handler(on_pod)
    secret_informer.start()
    secret_informer.wait_synced(60)
    pod_informer.start()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print("kubelet ready", flush=True)
    stop.wait()
    pod_informer.stop()
    secret_informer.stop()
    pool.shutdown(wait=False, cancel_futures=True)


def run_writer(kubeconfig: str, namespace: str, seconds: float, threads: int) -> None:
    """One process of the ceiling measurement: ``threads`` threads POST small ConfigMaps to
    ``namespace`` for ``seconds``; prints how many were accepted."""
    from taskfsm.kube.client import from_kubeconfig

    api = from_kubeconfig(kubeconfig)
    rest = Rest(api)
    configmaps = Resource("", "v1", "configmaps", "ConfigMap")
    end = time.monotonic() + seconds
    prefix = f"w{os.getpid()}"
    counts = [0] * threads

    def post(index: int) -> None:
        i = 0
        while time.monotonic() < end:
            i += 1
            body = {"metadata": {"name": f"{prefix}-{index}-{i}"}, "data": {"k": "v"}}
            with contextlib.suppress(Exception):
                rest.create(configmaps, namespace, body)
                counts[index] += 1

    workers = [threading.Thread(target=post, args=(i,)) for i in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    print(sum(counts), flush=True)


# -- one run ---------------------------------------------------------------------------------------


@dataclass
class RunResult:
    scenario: str
    n: int
    workers: int
    rate: float | None
    job_latency: dict[str, float]
    done_latency: dict[str, float]
    throughput_job: float
    throughput_done: float
    wall_seconds: float
    workflow_seconds: float | None
    rss_end_mib: float
    hwm_mib: float
    api_rows: dict[str, int] = field(default_factory=dict)
    controller_methods: dict[str, int] = field(default_factory=dict)
    complete: bool = True
    namespace: str = ""
    reconciles_per_task: float = float("nan")
    workflow_reconciles: float = float("nan")
    cpu_ms_per_task: float = float("nan")
    profile: dict[str, int] | None = None
    """Samples by category (benchmarks/cpu_profile.py) when the run was profiled."""


class Timeline:
    """First-seen times (monotonic) of each Task's Job, its Succeeded phase and the release of
    its Job's protection finalizer, and of the Workflow finishing, from watches on one namespace."""

    def __init__(self, rest: Rest, namespace: str, workflow: str, n: int) -> None:
        self.lock = threading.Lock()
        self.job: dict[str, float] = {}
        self.done: dict[str, float] = {}
        self.released: dict[str, float] = {}
        self.workflow_done: float | None = None
        self.n, self.workflow = n, workflow
        self.all_released = threading.Event()
        self.informers = [
            Informer(
                rest, JOBS, namespace=namespace, label_selector=c.LABEL_TASK_NAME, watch_timeout=300
            ),
            Informer(rest, TASKS, namespace=namespace, watch_timeout=300),
            Informer(rest, WORKFLOWS, namespace=namespace, watch_timeout=300),
        ]
        self.informers[0].add_handler(self._on_job)
        self.informers[1].add_handler(self._on_task)
        self.informers[2].add_handler(self._on_workflow)

    def start(self) -> Timeline:
        for informer in self.informers:
            informer.start()
        for informer in self.informers:
            informer.wait_synced(60)
        return self

    def stop(self) -> None:
        for informer in self.informers:
            informer.stop()

    def _on_job(self, kind: str, job: dict[str, Any]) -> None:
        if kind not in (ADDED, MODIFIED):
            return
        now = time.monotonic()
        task = job["metadata"]["labels"][c.LABEL_TASK_NAME]
        with self.lock:
            self.job.setdefault(task, now)
            if c.FINALIZER_JOB_PROTECTION not in (job["metadata"].get("finalizers") or []):
                self.released.setdefault(task, now)
                if len(self.released) >= self.n:
                    self.all_released.set()

    def _on_task(self, kind: str, task: dict[str, Any]) -> None:
        if kind not in (ADDED, MODIFIED):
            return
        if ((task.get("status") or {}).get("phase") or "") == "Succeeded":
            with self.lock:
                self.done.setdefault(task["metadata"]["name"], time.monotonic())

    def _on_workflow(self, kind: str, workflow: dict[str, Any]) -> None:
        status = workflow.get("status") or {}
        if (
            kind in (ADDED, MODIFIED)
            and workflow["metadata"]["name"] == self.workflow
            and status.get("phase") in ("AwaitingCompletion", "Succeeded")
            and int(status.get("succeeded") or 0) >= self.n
        ):
            with self.lock:
                if self.workflow_done is None:
                    self.workflow_done = time.monotonic()


class Bench:
    def __init__(self, plane: Any, *, log_dir: Path) -> None:
        from taskfsm.kube.client import from_kubeconfig

        self.plane = plane
        self.api = from_kubeconfig(plane.kubeconfig)
        self.api.configuration.connection_pool_maxsize = 64
        self.rest = Rest(self.api)
        self.log_dir = log_dir
        self.kubelet: subprocess.Popen[bytes] | None = None

    # -- fixtures ------------------------------------------------------------------------------

    def start_kubelet(self) -> None:
        log_file = (self.log_dir / "kubelet.log").open("ab")
        self.kubelet = subprocess.Popen(
            [sys.executable, __file__, "--kubelet", str(self.plane.kubeconfig)],
            stdout=subprocess.PIPE,
            stderr=log_file,
            stdin=subprocess.DEVNULL,
            cwd=REPO,
        )
        assert self.kubelet.stdout is not None
        line = self.kubelet.stdout.readline().decode()
        if "kubelet ready" not in line:
            raise RuntimeError(f"the benchmark kubelet did not start: {line!r}")

    def stop_kubelet(self) -> None:
        if self.kubelet is not None and self.kubelet.poll() is None:
            self.kubelet.send_signal(signal.SIGTERM)
            try:
                self.kubelet.wait(10)
            except subprocess.TimeoutExpired:
                self.kubelet.kill()

    def namespace(self, prefix: str) -> str:
        from taskfsm.testing import objects

        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        self.rest.create(NAMESPACES, None, {"metadata": {"name": name}})
        for obj in (objects.local_mpe("local", default=True), objects.function("bench")):
            self.rest.create(BY_KIND[obj["kind"]], name, obj)
        return name

    def installed(self, namespace: str) -> Path:
        """The kubeconfig of a controller installed with the project's generated RBAC, its
        Leases in ``namespace`` (tests/support/identity.py): benchmarks measure what ships."""
        from tests.support import identity

        return identity.install_controller(self.api, self.plane, namespace, self.log_dir)

    def controller(
        self, namespace: str | None, workers: int, name: str, *, lease_ns: str = ""
    ) -> Any:
        from tests.support.process import ControllerProcess

        proc = ControllerProcess(
            self.installed(lease_ns or namespace or "default"),
            namespace=namespace,
            log_dir=self.log_dir,
            name=name,
            args=[f"--workers={workers}", "--log-level=WARNING"],
        )
        return proc.start(timeout=120)

    # -- scenarios -----------------------------------------------------------------------------

    def run(
        self,
        n: int,
        workers: int,
        *,
        rate: float | None = None,
        timeout: float | None = None,
        profile: Path | None = None,
    ) -> RunResult:
        from taskfsm.testing import objects

        scenario = "burst" if rate is None else f"steady {rate:g}/s"
        ns = self.namespace(f"bench-{n}-w{workers}")
        workflow = "wf"
        self.rest.create(WORKFLOWS, ns, objects.workflow(workflow))
        proc = self.controller(ns, workers, f"ctl-{ns}")
        timeline = Timeline(self.rest, ns, workflow, n).start()
        time.sleep(0.5)
        api_before, ctl_before = scrape_apiserver(self.plane), controller_counters(proc)
        recorder = None
        if profile is not None:
            from cpu_profile import Recorder  # benchmarks/cpu_profile.py

            recorder = Recorder(proc.pid, profile)
        created: dict[str, float] = {}
        names = [f"t{i:05d}" for i in range(n)]
        started = time.monotonic()

        def create(name: str) -> None:
            body = objects.task(name, workflow_name=workflow, function_name="bench")
            for attempt in range(5):
                try:
                    self.rest.create(TASKS, ns, body)
                    break
                except Exception:
                    time.sleep(0.2 * (attempt + 1))
            created[name] = time.monotonic()

        if rate is None:
            with ThreadPoolExecutor(CREATE_THREADS) as pool:
                list(pool.map(create, names))
        else:
            with ThreadPoolExecutor(CREATE_THREADS) as pool:
                for i, name in enumerate(names):
                    delay = started + i / rate - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                    pool.submit(create, name)
        limit = timeout if timeout is not None else 120 + n * 0.4
        complete = timeline.all_released.wait(max(1.0, limit - (time.monotonic() - started)))
        wall = time.monotonic() - started
        if complete:  # let the Workflow's last status writes land inside the window
            deadline = time.monotonic() + 10
            while timeline.workflow_done is None and time.monotonic() < deadline:
                time.sleep(0.1)
        time.sleep(1.0)
        api_after, ctl_after = scrape_apiserver(self.plane), controller_counters(proc)
        samples = recorder.stop() if recorder is not None else None
        rss, hwm = rss_mib(proc.pid)
        proc.terminate(60)
        timeline.stop()

        with timeline.lock:
            job_lat = [
                timeline.job[t] - created[t] for t in names if t in timeline.job and t in created
            ]
            done_lat = [
                timeline.done[t] - created[t] for t in names if t in timeline.done and t in created
            ]
            last_job = max(timeline.job.values(), default=float("nan"))
            last_done = max(timeline.done.values(), default=float("nan"))
            wf_done = timeline.workflow_done
        first = min(created.values())
        rows = {" ".join(k): v for k, v in sorted((api_after - api_before).items()) if v > 0}
        return RunResult(
            scenario=scenario,
            n=n,
            workers=workers,
            rate=rate,
            job_latency=_dist(job_lat),
            done_latency=_dist(done_lat),
            throughput_job=len(job_lat) / max(1e-9, last_job - first),
            throughput_done=len(done_lat) / max(1e-9, last_done - first),
            wall_seconds=wall,
            workflow_seconds=(wf_done - first) if wf_done is not None else None,
            rss_end_mib=rss,
            hwm_mib=hwm,
            api_rows=rows,
            controller_methods={
                k: v
                for k, v in (ctl_after - ctl_before).items()
                if not k.startswith("reconciles:") and k != "cpu"
            },
            reconciles_per_task=(ctl_after["reconciles:task"] - ctl_before["reconciles:task"]) / n,
            workflow_reconciles=ctl_after["reconciles:workflow"]
            - ctl_before["reconciles:workflow"],
            cpu_ms_per_task=(ctl_after["cpu"] - ctl_before["cpu"]) * 1000 / n,
            complete=complete and len(done_lat) == n,
            namespace=ns,
            profile=dict(samples) if samples is not None else None,
        )

    def startup(self, n: int, workers: int) -> dict[str, Any]:
        """Issue 12 item 10, start-up: ``n`` Tasks created while no controller runs, then a
        ``taskfsm run`` process started: seconds from starting it to ``/readyz``, to the first
        Job and to each Job (p50, p99, last)."""
        from taskfsm.testing import objects

        ns = self.namespace(f"bench-startup-{n}")
        self.rest.create(WORKFLOWS, ns, objects.workflow("wf"))
        timeline = Timeline(self.rest, ns, "wf", n).start()
        bodies = [
            objects.task(f"t{i:05d}", workflow_name="wf", function_name="bench") for i in range(n)
        ]
        with ThreadPoolExecutor(CREATE_THREADS) as pool:
            list(pool.map(lambda body: self.rest.create(TASKS, ns, body), bodies))
        started = time.monotonic()
        proc = self.controller(ns, workers, f"ctl-{ns}")
        ready = time.monotonic() - started
        complete = timeline.all_released.wait(120 + n * 0.4)
        proc.terminate(60)
        timeline.stop()
        with timeline.lock:
            jobs = sorted(t - started for t in timeline.job.values())
        return {
            "tasks": n,
            "workers": workers,
            "ready_s": ready,
            "first_job_s": percentile(jobs, 0.0),
            "job_p50_s": percentile(jobs, 0.5),
            "job_p99_s": percentile(jobs, 0.99),
            "last_job_s": percentile(jobs, 1.0),
            "complete": complete and len(jobs) == n,
        }

    def new_mpe(self, samples: int) -> dict[str, Any]:
        """A new MPE: with the controller running, ``samples`` times a
        ClusterMediaProcessingEntity with a Job namespace of its own (so a Job watch of its own;
        a namespaced MPE runs Jobs in its own namespace only) and, right after it, a Task naming
        it: seconds from the Task's create call returning to its Job existing (polled). The
        controller watches every namespace, as one serving cluster MPEs does."""
        from taskfsm.build.jobs import job_name
        from taskfsm.kube.resources import CLUSTER_MEDIA_PROCESSING_ENTITIES
        from taskfsm.testing import objects

        ns = self.namespace("bench-new-mpe")
        self.rest.create(WORKFLOWS, ns, objects.workflow("wf"))
        proc = self.controller(None, 4, f"ctl-{ns}", lease_ns=ns)
        latencies: list[float] = []
        try:
            for i in range(samples):
                jobs_ns = f"{ns}-jobs-{i}"
                self.rest.create(NAMESPACES, None, {"metadata": {"name": jobs_ns}})
                self.rest.create(
                    CLUSTER_MEDIA_PROCESSING_ENTITIES,
                    None,
                    objects.local_mpe(f"{jobs_ns}-m", namespace=jobs_ns, cluster=True),
                )
                body = objects.task(
                    f"t{i:03d}",
                    workflow_name="wf",
                    function_name="bench",
                    mediaProcessingEntityRef={
                        "kind": c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY,
                        "name": f"{jobs_ns}-m",
                    },
                )
                task = self.rest.create(TASKS, ns, body)
                created, name = time.monotonic(), job_name(task)
                while time.monotonic() - created < 60:
                    try:
                        self.rest.get(JOBS, jobs_ns, name)
                    except Exception:
                        time.sleep(0.002)
                        continue
                    latencies.append(time.monotonic() - created)
                    break
        finally:
            proc.terminate(60)
        latencies.sort()
        return {
            "samples": samples,
            "job_p50_s": percentile(latencies, 0.5),
            "job_max_s": percentile(latencies, 1.0),
            "complete": len(latencies) == samples,
        }

    def ceiling(self, seconds: float) -> dict[str, float]:
        """The API server's bare write capacity on this machine now: small ConfigMaps POSTed by
        :data:`CEILING_PROCESSES` processes of :data:`CEILING_THREADS` threads for ``seconds``
        (nothing else runs meanwhile); accepted writes per second."""
        ns = f"bench-ceiling-{uuid.uuid4().hex[:6]}"
        self.rest.create(NAMESPACES, None, {"metadata": {"name": ns}})
        started = time.monotonic()
        writers = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--writer",
                    f"{self.plane.kubeconfig},{ns},{seconds},{CEILING_THREADS}",
                ],
                stdout=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                cwd=REPO,
            )
            for _ in range(CEILING_PROCESSES)
        ]
        total = 0
        for writer in writers:
            out, _ = writer.communicate(timeout=seconds + 120)
            total += int((out.decode().strip().splitlines() or ["0"])[-1])
        wall = time.monotonic() - started
        with contextlib.suppress(Exception):  # 10,000s of ConfigMaps: let the namespace go
            self.rest.delete(NAMESPACES, None, ns)
        return {
            "writes": total,
            "seconds": seconds,
            "wall": wall,
            "writes_per_second": total / seconds,
            "processes": CEILING_PROCESSES,
            "threads": CEILING_THREADS,
        }

    def memory(self, namespace: str | None, tasks: int) -> dict[str, float]:
        """RSS of a fresh controller whose caches hold the Tasks (and Jobs) of ``namespace``,
        measured once its start-up pass over every Task has drained and it sat idle 3 s."""
        ns = namespace or self.namespace("bench-empty")
        proc = self.controller(ns, 4, f"mem-{ns}")
        deadline = time.monotonic() + 60 + tasks * 0.1
        drained_at = None
        while time.monotonic() < deadline:
            samples = proc.samples()
            depth = sum(v for (name, _), v in samples.items() if name == "workqueue_depth")
            active = sum(
                v for (name, _), v in samples.items() if name == "controller_runtime_active_workers"
            )
            cached = sum(v for (name, _), v in samples.items() if name == "taskfsm_tasks")
            if depth == 0 and active == 0 and cached >= tasks:
                drained_at = drained_at or time.monotonic()
                if time.monotonic() - drained_at >= 3:
                    break
            else:
                drained_at = None
            time.sleep(0.5)
        rss, hwm = rss_mib(proc.pid)
        proc.terminate(60)
        return {"tasks": tasks, "rss_mib": rss, "hwm_mib": hwm}


def memory_point(samples: list[dict[str, float]]) -> dict[str, Any]:
    """Several fresh processes at one cache size: medians, and every run's RSS (the spread
    comes from heap fragmentation, which depends on how allocations of the start-up pass
    interleave)."""
    return {
        "tasks": samples[0]["tasks"],
        "rss_mib": median([m["rss_mib"] for m in samples]),
        "hwm_mib": median([m["hwm_mib"] for m in samples]),
        "rss_runs": [round(m["rss_mib"], 1) for m in samples],
    }


def _dist(values: list[float]) -> dict[str, float]:
    return {
        "p50": percentile(values, 0.50),
        "p95": percentile(values, 0.95),
        "p99": percentile(values, 0.99),
        "max": max(values) if values else float("nan"),
    }


# -- reporting -------------------------------------------------------------------------------------


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
            f"goal: ≤ {GOAL_MEMORY_MB} MB with {GOAL_MEMORY_TASKS:,}. "
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
            out.append(
                f"Task→Job p99 at a {scenario.removeprefix('steady ')} arrival ({n:,} Tasks): "
                f"{a['job_p99']:.2f} s (target ≤ {GOAL_STEADY_P99:g} s at 50/s): "
                f"{verdict(a['job_p99'] <= GOAL_STEADY_P99 and '50/s' in scenario)}."
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
        mb = big["rss_mib"] * 1.048576
        worst = max(big.get("rss_runs") or [big["rss_mib"]]) * 1.048576
        ok = big["tasks"] >= GOAL_MEMORY_TASKS and mb <= GOAL_MEMORY_MB
        out.append(
            f"Memory: median {mb:.0f} MB RSS with {int(big['tasks']):,} Tasks in cache, largest run "
            f"{worst:.0f} MB (target ≤ {GOAL_MEMORY_MB} MB with {GOAL_MEMORY_TASKS:,}): "
            + (
                verdict(ok)
                if big["tasks"] >= GOAL_MEMORY_TASKS
                else f"not measured at {GOAL_MEMORY_TASKS:,}"
            )
            + ("" if not ok or worst <= GOAL_MEMORY_MB else " by the median, not by every run")
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
    return out


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
    commit = "?"
    with contextlib.suppress(Exception):
        commit = (
            subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"],
                cwd=REPO,
                capture_output=True,
                text=True,
                check=False,
            ).stdout.strip()
            or "?"
        )
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
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
        )
        print(report)
        if args.output:
            Path(args.output).write_text(report)
        return 0

    from taskfsm.api.crdgen import crd_documents
    from taskfsm.testing.controlplane import ControlPlane
    from taskfsm.testing.crds import install_crds

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
                    f"{fmt(cost.workflow_writes, 2)} Workflow writes, {fmt(cost.reads, 2)} reads per Task"
                )
                log(f"raw profile: {log_dir / 'profile.txt'}")
            finally:
                bench.stop_kubelet()
            return 0
        try:
            meta = machine_meta(plane)
            ceiling: dict[str, float] = {}
            replicas: list[dict[str, Any]] = []
            startup: dict[str, Any] = {}
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
    report = render(results, memory, meta, printable, notes, ceiling, replicas, startup)
    print(report)
    if args.output:
        Path(args.output).write_text(report)
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
