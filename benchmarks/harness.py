"""What the benchmarks share: the fixtures and measurements of a run against a real control plane.

`bench_controller.py` (``make bench``) and `bench_replicas.py` build on this module; neither
imports the other's fixtures. A run (:class:`Bench`) starts ``taskfsm run`` as its own process
on a fresh namespace, creates Tasks, times them with watches (:class:`Timeline`) and reads the
API server's and the controller's counters, CPU and memory.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from taskfsm.api import constants as c
from taskfsm.kube.errors import AlreadyExists, KubeError
from taskfsm.kube.informer import ADDED, DELETED, MODIFIED, Informer
from taskfsm.kube.resources import BY_KIND, TASKS, WORKFLOWS
from taskfsm.kube.rest import JOBS, NAMESPACES, PODS, SECRETS, Resource, Rest

REPO = Path(__file__).resolve().parent.parent
CONTROLLER_SCRIPT = Path(__file__).with_name("bench_controller.py")
"""The script whose ``--kubelet`` and ``--writer`` modes run the benchmark's helper processes."""
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")

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


def apiserver_write_buckets(plane: Any) -> Counter[float]:
    """``apiserver_request_duration_seconds`` of writes (POST, PUT, PATCH, DELETE) of Tasks, Jobs
    and Secrets so far: cumulative count per bucket bound (``le``, seconds)."""
    context = ssl.create_default_context(cafile=str(plane.ca_file))
    request = urllib.request.Request(
        f"{plane.server}/metrics", headers={"Authorization": f"Bearer {plane.token}"}
    )
    with urllib.request.urlopen(request, timeout=30, context=context) as response:
        text = response.read().decode()
    out: Counter[float] = Counter()
    for family in text_string_to_metric_families(text):
        if family.name != "apiserver_request_duration_seconds":
            continue
        for sample in family.samples:
            labels = sample.labels
            if (
                sample.name.endswith("_bucket")
                and labels.get("verb") in ("POST", "PUT", "PATCH", "DELETE")
                and labels.get("resource") in ("tasks", "jobs", "secrets")
            ):
                out[float(labels["le"])] += int(sample.value)
    return out


def bucket_quantile(before: Counter[float], after: Counter[float], q: float) -> float:
    """The upper bound of the bucket holding the ``q`` quantile of what was observed between
    two :func:`apiserver_write_buckets` scrapes (nan when nothing was)."""
    bounds = sorted(after)
    total = after[math.inf] - before[math.inf] if math.inf in after else 0
    if total <= 0:
        return math.nan
    for bound in bounds:
        if after[bound] - before[bound] >= q * total:
            return bound
    return math.inf


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


def plane_cpu_seconds(plane: Any) -> float:
    """User + system CPU seconds so far of the control plane's kube-apiserver and etcd."""
    return sum(
        cpu_seconds(proc.popen.pid)
        for proc in plane._procs
        if proc.name in ("kube-apiserver", "etcd")
    )


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- the pooled simulated kubelet (child process) -------------------------------------------------


def run_kubelet(kubeconfig: str, threads: int) -> None:
    """Complete every Job pod (all namespaces) once the Secrets it mounts exist; until SIGTERM.

    Unlike :class:`taskfsm_dev.kubelet.SimulatedKubelet` (one namespace, pod outcomes from
    annotations, one thread), pods succeed at once and status writes run on a thread pool; the
    status itself is the simulated kubelet's.
    """
    from taskfsm.kube.client import from_kubeconfig
    from taskfsm_dev.kubelet import secret_volumes, terminated_status

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
    end = time.monotonic() + seconds
    prefix = f"w{os.getpid()}"
    counts = [0] * threads

    def post(index: int) -> None:
        i = 0
        while time.monotonic() < end:
            i += 1
            body = {"metadata": {"name": f"{prefix}-{index}-{i}"}, "data": {"k": "v"}}
            with contextlib.suppress(Exception):
                rest.create(CONFIGMAPS, namespace, body)
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
    plane_cpu_ms_per_task: float = float("nan")
    """kube-apiserver + etcd CPU (user + system) over the run, per Task."""
    api_write_p99: float = float("nan")
    """The API server's own p99 latency of Task, Job and Secret writes over the run (seconds, the
    upper bound of its histogram bucket)."""
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
            [sys.executable, str(CONTROLLER_SCRIPT), "--kubelet", str(self.plane.kubeconfig)],
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
        from taskfsm_dev import objects

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
        self,
        namespace: str | None,
        workers: int,
        name: str,
        *,
        lease_ns: str = "",
        args: tuple[str, ...] = (),
    ) -> Any:
        from taskfsm_dev.process import ControllerProcess

        proc = ControllerProcess(
            self.installed(lease_ns or namespace or "default"),
            namespace=namespace,
            log_dir=self.log_dir,
            name=name,
            args=[f"--workers={workers}", "--log-level=WARNING", *args],
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
        from taskfsm_dev import objects

        scenario = "burst" if rate is None else f"steady {rate:g}/s"
        ns = self.namespace(f"bench-{n}-w{workers}")
        workflow = "wf"
        self.rest.create(WORKFLOWS, ns, objects.workflow(workflow))
        proc = self.controller(ns, workers, f"ctl-{ns}")
        timeline = Timeline(self.rest, ns, workflow, n).start()
        time.sleep(0.5)
        api_before, ctl_before = scrape_apiserver(self.plane), controller_counters(proc)
        plane_before = plane_cpu_seconds(self.plane)
        writes_before = apiserver_write_buckets(self.plane)
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
        plane_after = plane_cpu_seconds(self.plane)
        writes_after = apiserver_write_buckets(self.plane)
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
            plane_cpu_ms_per_task=(plane_after - plane_before) * 1000 / n,
            api_write_p99=bucket_quantile(writes_before, writes_after, 0.99),
            complete=complete and len(done_lat) == n,
            namespace=ns,
            profile=dict(samples) if samples is not None else None,
        )

    def finished(self, n: int, *, sample: int = 3) -> str:
        """A namespace holding ``n`` Tasks that finished long ago, their Jobs expired: what a
        cluster holds after months of Tasks, and the only way to hold 100,000 of them without
        running 100,000 Jobs first. ``sample`` Tasks are run to ``Succeeded`` by ``taskfsm run``
        (so the Tasks are the controller's own, status and finalizer included), their Jobs are
        deleted (expired), and the first one is copied under the other names, status included,
        by ``CREATE_THREADS`` threads. Needs the simulated kubelet running."""
        burst = self.run(sample, 4)
        if not burst.complete:
            raise RuntimeError(f"the sample burst of {sample} Tasks did not complete")
        ns = burst.namespace
        for job in self.rest.list(JOBS, ns, label_selector=c.LABEL_TASK_NAME).get("items") or []:
            self.rest.delete(JOBS, ns, job["metadata"]["name"], propagation="Background")
        template = self.rest.get(TASKS, ns, "t00000")
        meta = template["metadata"]
        for field_name in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
            meta.pop(field_name, None)
        status = template.pop("status")
        # Once its Job has expired, the controller has cleared the Task's reference to it.
        status.pop("jobRef", None)
        body_text, status_text = json.dumps(template), json.dumps({"status": status})
        log(f"copying a finished Task {n - sample:,} times into {ns}")

        def copy(i: int) -> None:
            name = f"t{i:05d}"
            body = json.loads(body_text.replace("t00000", name))
            for attempt in range(5):
                try:
                    with contextlib.suppress(AlreadyExists):
                        self.rest.create(TASKS, ns, body)
                    self.rest.patch(
                        TASKS,
                        ns,
                        name,
                        json.loads(status_text.replace("t00000", name)),
                        subresource="status",
                    )
                    return
                except KubeError:
                    time.sleep(0.2 * (attempt + 1))
            raise RuntimeError(f"could not create the finished Task {name}")

        with ThreadPoolExecutor(CREATE_THREADS) as pool:
            list(pool.map(copy, range(sample, n)))
        return ns

    def startup(self, n: int, workers: int) -> dict[str, Any]:
        """Issue 12 item 10, start-up: ``n`` Tasks created while no controller runs, then a
        ``taskfsm run`` process started: seconds from starting it to ``/readyz``, to the first
        Job and to each Job (p50, p99, last)."""
        from taskfsm_dev import objects

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
        from taskfsm.kube.resources import CLUSTER_MEDIA_PROCESSING_ENTITIES
        from taskfsm.manifests.jobs import job_name
        from taskfsm_dev import objects

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

    def flood(
        self,
        n: int,
        workers: int,
        fairness: str,
        *,
        cap: int = 0,
        rate: float = 1.0,
        idle_samples: int = 20,
    ) -> dict[str, Any]:
        """Issue 30's flood: one controller watching every namespace (``--queue-fairness
        fairness``); tenant A creates ``n`` Tasks at once while tenant B creates one every
        ``1/rate`` s until A's last Job exists; then B goes on alone for ``idle_samples`` Tasks
        (the idle reference, same process). B's Task→Job latencies during the flood and idle,
        and A's Tasks/s to Job created. ``cap``: ``--max-in-flight-per-namespace`` (0: none)."""
        from taskfsm_dev import objects

        tenant_a, tenant_b = self.namespace("bench-flood-a"), self.namespace("bench-flood-b")
        for ns in (tenant_a, tenant_b):
            self.rest.create(WORKFLOWS, ns, objects.workflow("wf"))
        proc = self.controller(
            None,
            workers,
            f"ctl-flood-{fairness}",
            lease_ns=tenant_a,
            args=(f"--queue-fairness={fairness}", f"--max-in-flight-per-namespace={cap}"),
        )
        self._drained(proc, 120 + n * 0.1)  # earlier runs' Tasks: the start-up pass first
        line_a = Timeline(self.rest, tenant_a, "wf", n).start()
        line_b = Timeline(self.rest, tenant_b, "wf", 10**9).start()
        created_a: dict[str, float] = {}
        created_b: dict[str, float] = {}

        def create(ns: str, name: str, created: dict[str, float]) -> None:
            body = objects.task(name, workflow_name="wf", function_name="bench")
            for attempt in range(5):
                try:
                    self.rest.create(TASKS, ns, body)
                    break
                except Exception:
                    time.sleep(0.2 * (attempt + 1))
            created[name] = time.monotonic()

        def probe(name: str) -> float | None:
            """The API server's own latency for one small write now: a ConfigMap POST's round
            trip (what the controller pays for each of the writes before B's Job)."""
            began = time.monotonic()
            try:
                self.rest.create(CONFIGMAPS, tenant_b, {"metadata": {"name": name}})
            except Exception:
                return None
            return time.monotonic() - began

        def b_until(
            stop: Callable[[], bool], prefix: str, limit: float, count: int | None = None
        ) -> tuple[list[str], list[float]]:
            """B's Tasks, one every 1/rate s, until ``stop()``, ``count`` Tasks or ``limit`` s;
            with each, one probe write timed."""
            names: list[str] = []
            probes: list[float] = []
            started = time.monotonic()
            while not stop() and time.monotonic() - started < limit:
                if count is not None and len(names) >= count:
                    break
                name = f"{prefix}{len(names):05d}"
                names.append(name)
                create(tenant_b, name, created_b)
                # Half-way between B's Tasks, so the probe does not race B's own writes.
                time.sleep(max(0.0, started + (len(names) - 0.5) / rate - time.monotonic()))
                if (took := probe(f"probe-{name}")) is not None:
                    probes.append(took)
                time.sleep(max(0.0, started + len(names) / rate - time.monotonic()))
            return names, probes

        limit = 120 + n * 0.4
        started = time.monotonic()
        pool = ThreadPoolExecutor(CREATE_THREADS)
        futures = [pool.submit(create, tenant_a, f"a{i:05d}", created_a) for i in range(n)]
        during, probe_flood = b_until(lambda: len(line_a.job) >= n, "flood", limit)
        for future in futures:
            future.result()
        pool.shutdown()
        complete_a = len(line_a.job) >= n
        line_a.all_released.wait(max(1.0, limit - (time.monotonic() - started)))
        self._drained(proc, 60)
        idle, probe_idle = b_until(lambda: False, "idle", idle_samples / rate + 30, idle_samples)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(t in line_b.job for t in during + idle):
            time.sleep(0.1)
        proc.terminate(60)
        line_a.stop()
        line_b.stop()
        with line_a.lock, line_b.lock:
            jobs_a = [line_a.job[t] for t in created_a if t in line_a.job]
            flood_b = [line_b.job[t] - created_b[t] for t in during if t in line_b.job]
            idle_b = [line_b.job[t] - created_b[t] for t in idle if t in line_b.job]
        first_a = min(created_a.values(), default=started)
        return {
            "fairness": fairness + (f", cap {cap}" if cap else ""),
            "a_tasks": n,
            "workers": workers,
            "b_rate": rate,
            "a_tasks_per_s_to_job": len(jobs_a) / max(1e-9, max(jobs_a, default=0) - first_a),
            "a_complete": complete_a,
            "b_flood": {"tasks": len(during), "done": len(flood_b), **_dist(flood_b)},
            "b_idle": {"tasks": len(idle), "done": len(idle_b), **_dist(idle_b)},
            "probe_flood": _dist(probe_flood),
            "probe_idle": _dist(probe_idle),
        }

    def _drained(self, proc: Any, limit: float) -> None:
        """Wait (at most ``limit`` s) until the controller's queues are empty and no worker is
        busy, for 2 s in a row."""
        deadline, since = time.monotonic() + limit, None
        while time.monotonic() < deadline:
            samples = proc.samples()
            depth = sum(v for (name, _), v in samples.items() if name == "workqueue_depth")
            active = sum(
                v for (name, _), v in samples.items() if name == "controller_runtime_active_workers"
            )
            if depth == 0 and active == 0:
                since = since or time.monotonic()
                if time.monotonic() - since >= 2:
                    return
            else:
                since = None
            time.sleep(0.2)

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
                    str(CONTROLLER_SCRIPT),
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

    def memory(
        self,
        namespace: str | None,
        tasks: int,
        settle: float = 3.0,
        until: Callable[[], bool] | None = None,
    ) -> dict[str, float]:
        """RSS of a fresh controller whose caches hold the Tasks (and Jobs) of ``namespace``,
        measured once its start-up pass over every Task has drained and it sat idle ``settle``
        seconds; with ``until``, not before that is also true (a traced process writing its
        snapshot takes longer on a loaded machine)."""
        ns = namespace or self.namespace("bench-empty")
        proc = self.controller(ns, 4, f"mem-{ns}")
        deadline = time.monotonic() + 60 + tasks * 0.1
        drained_at = None
        while time.monotonic() < deadline:
            try:
                samples = proc.samples()
            except OSError:  # a controller busy with 100,000 Tasks may answer a scrape late
                drained_at = None
                time.sleep(1.0)
                continue
            depth = sum(v for (name, _), v in samples.items() if name == "workqueue_depth")
            active = sum(
                v for (name, _), v in samples.items() if name == "controller_runtime_active_workers"
            )
            cached = sum(v for (name, _), v in samples.items() if name == "taskfsm_tasks")
            if depth == 0 and active == 0 and cached >= tasks:
                drained_at = drained_at or time.monotonic()
                if time.monotonic() - drained_at >= settle and (until is None or until()):
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
