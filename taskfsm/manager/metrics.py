"""Prometheus metrics, named as operators know them from controller-runtime and client-go.

One :class:`Metrics` object per controller process (tests build their own, each with a private
registry). Series:

=========================================================  =========================================
``controller_runtime_reconcile_total{controller,result}``  passes by result: success, error,
                                                           requeue_after
``controller_runtime_reconcile_errors_total{controller}``  passes that ended in an error
``controller_runtime_reconcile_time_seconds{controller}``  pass duration histogram
``controller_runtime_active_workers{controller}``          workers inside a pass
``controller_runtime_max_concurrent_reconciles{controller}``  workers of the controller
``controller_runtime_reconcile_panics_total{controller}``  passes that raised an unexpected
                                                           exception (retried as errors)
``controller_runtime_terminal_reconcile_errors_total{...}``  errors not retried: always 0,
                                                           taskfsm retries every error
``workqueue_depth{name,controller}``                       keys waiting
``workqueue_adds_total{name,controller}``                  keys added (after de-duplication)
``workqueue_retries_total{name,controller}``               rate-limited re-adds
``workqueue_queue_duration_seconds{name,controller}``      add → a worker takes the key
``workqueue_work_duration_seconds{name,controller}``       a worker takes the key → done
``workqueue_unfinished_work_seconds{name,controller}``     seconds of work in progress, summed
``workqueue_longest_running_processor_seconds{...}``       the oldest work in progress
``rest_client_requests_total{code,method,host}``           requests by HTTP status (0: no answer;
                                                           host of a remote cluster: ``remote``
                                                           unless tenant labels are opted in)
``rest_client_request_duration_seconds{verb,host}``        request latency histogram (client-go's
                                                           buckets; host as above)
``taskfsm_workqueue_namespace_depth{controller,namespace}``  keys waiting, by namespace: the
                                                           10 deepest namespaces (their rank
                                                           ``#1``... unless tenant labels are
                                                           opted in), the rest summed as
                                                           ``namespace="(other)"``
``leader_election_master_status{name}``                    1 while this replica leads (with
                                                           buckets: per bucket Lease it holds)
``taskfsm_buckets_held``                                   bucket Leases this replica holds
``taskfsm_bucket_handovers_total{event}``                  buckets acquired, released, lost
``taskfsm_tasks{phase}``                                   cached Tasks by phase (``""`` = new)
``taskfsm_task_job_creation_seconds``                      Task creation → its Job created
``taskfsm_watch_healthy{resource}``                        1 while that watch is connected
                                                           (Job watches: ``jobs@main`` and
                                                           ``jobs@remote``, 0 while any fails,
                                                           unless tenant labels are opted in)
``taskfsm_build_info{version}``                            1, labelled with taskfsm's version
``process_*``, ``python_gc_*``, ``python_info``            prometheus-client's process, garbage
                                                           collector and platform collectors
=========================================================  =========================================

The work queues' series carry ``name`` and ``controller``, both the controller's name (``task``,
``workflow``, ``mediaprocessingentity``), as controller-runtime labels them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from taskfsm import __version__
from taskfsm.manager import memory
from taskfsm.manager.queue import QueueMetrics

CONTROLLER = "task"
RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600)
QUEUE_BUCKETS = tuple(10.0**exponent for exponent in range(-8, 4))
"""controller-runtime's work-queue buckets: 10 ns to 1,000 s, a factor of 10 apart."""
REST_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60)
"""client-go's ``rest_client_request_duration_seconds`` buckets: 5 ms to 60 s."""
QUEUE_LABELS = ("name", "controller")
JOB_WATCHES_MAIN = "jobs@main"
"""``taskfsm_watch_healthy``'s resource for MediaProcessingEntities' Job watches in the
controller's own cluster, all in one series (their namespaces are tenants')."""
JOB_WATCHES_REMOTE = "jobs@remote"
"""... and for those in remote clusters (whose addresses are tenants')."""
REMOTE_HOST = "remote"
"""The ``rest_client_*`` series' host for every remote cluster."""


def job_watch_health(
    watches: Iterable[tuple[str, bool, bool]], tenant_labels: bool
) -> list[tuple[str, float]]:
    """``taskfsm_watch_healthy`` rows of MediaProcessingEntities' Job watches, from (watch
    name ``jobs@<server>/<namespace>``, remote, healthy) triples: each by its name with
    ``tenant_labels``, else :data:`JOB_WATCHES_MAIN` and :data:`JOB_WATCHES_REMOTE`, each 0 while
    any of its watches fails (names of tenants' servers and namespaces stay out of the labels)."""
    if tenant_labels:
        return [(name, 1.0 if healthy else 0.0) for name, _, healthy in watches]
    grouped: dict[str, float] = {}
    for _, remote, healthy in watches:
        group = JOB_WATCHES_REMOTE if remote else JOB_WATCHES_MAIN
        grouped[group] = min(grouped.get(group, 1.0), 1.0 if healthy else 0.0)
    return sorted(grouped.items())


def remote_host_label(host: str, tenant_labels: bool) -> str:
    """The host label (``rest_client_requests_total``, ``rest_client_request_duration_seconds``)
    of a remote cluster at ``host``."""
    return host if tenant_labels else REMOTE_HOST


NAMESPACE_DEPTH_TOP = 10
"""Namespaces with a series of their own in ``taskfsm_workqueue_namespace_depth`` (the deepest,
per queue); the others are summed into one series, so the label's cardinality stays bounded
however many tenants there are."""
OTHER_NAMESPACES = "(other)"
"""The ``namespace`` label of the sum over the namespaces beyond the top ones (no namespace
can be named so: it is not a DNS label)."""


class _Snapshot(Collector):
    """Gauges computed at scrape time from a callable (cache contents, watch health)."""

    def __init__(
        self, name: str, doc: str, label: str, read: Callable[[], Iterable[tuple[str, float]]]
    ):
        self._name, self._doc, self._label, self._read = name, doc, label, read

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily(self._name, self._doc, labels=[self._label])
        for value_label, value in self._read():
            family.add_metric([value_label], value)
        yield family


class _QueueProgress(Collector):
    """client-go's ``unfinished_work_seconds`` and ``longest_running_processor_seconds`` of
    every registered work queue, from its :meth:`WorkQueue.in_progress` at scrape time."""

    def __init__(self) -> None:
        self.queues: dict[str, Callable[[], list[float]]] = {}

    def collect(self) -> Iterable[GaugeMetricFamily]:
        unfinished = GaugeMetricFamily(
            "workqueue_unfinished_work_seconds",
            "Seconds of work in progress not yet done, summed over the keys being processed; "
            "a large value that keeps growing means stuck workers.",
            labels=list(QUEUE_LABELS),
        )
        longest = GaugeMetricFamily(
            "workqueue_longest_running_processor_seconds",
            "Seconds the longest-running worker of the queue has been on its key.",
            labels=list(QUEUE_LABELS),
        )
        for name, in_progress in sorted(self.queues.items()):
            seconds = in_progress()
            unfinished.add_metric([name, name], sum(seconds))
            longest.add_metric([name, name], max(seconds, default=0.0))
        yield unfinished
        yield longest


class _MemoryLimit(Collector):
    """``taskfsm_memory_limit_bytes``: the container's memory limit (from its cgroup), read at
    scrape time; no sample when there is no limit."""

    def __init__(self, read: Callable[[], int | None] = memory.memory_limit) -> None:
        self._read = read

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "taskfsm_memory_limit_bytes",
            "The memory limit of the controller's container (its cgroup), in bytes; no sample "
            "without a limit. process_resident_memory_bytes near it means an OOM kill is close.",
        )
        limit = self._read()
        if limit is not None:
            family.add_metric([], float(limit))
        yield family


class _NamespaceDepth(Collector):
    """``taskfsm_workqueue_namespace_depth``: the keys waiting in each work queue by namespace,
    at scrape time; the :data:`NAMESPACE_DEPTH_TOP` deepest namespaces of each queue get a
    series, the rest one summed series (bounded cardinality). A namespace is a tenant's: its
    name is the label only when the admin opts in (``--metrics-tenant-labels``); otherwise the
    label is its rank (``#1`` the deepest), which still shows one namespace flooding the queue."""

    def __init__(self) -> None:
        self.queues: dict[str, Callable[[], dict[str, int]]] = {}
        self.named = False

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "taskfsm_workqueue_namespace_depth",
            f"Keys waiting in the work queue by namespace: the {NAMESPACE_DEPTH_TOP} deepest "
            f'namespaces, the others summed as namespace="{OTHER_NAMESPACES}".',
            labels=["controller", "namespace"],
        )
        for name, read in sorted(self.queues.items()):
            rows = top_namespaces(read(), NAMESPACE_DEPTH_TOP)
            for rank, (namespace, depth) in enumerate(rows, start=1):
                shown = namespace if self.named or namespace == OTHER_NAMESPACES else f"#{rank}"
                family.add_metric([name, shown], depth)
        yield family


def top_namespaces(depths: dict[str, int], top: int) -> list[tuple[str, float]]:
    """The ``top`` deepest namespaces (ties by name), then the others' sum, if any."""
    ranked = sorted(depths.items(), key=lambda item: (-item[1], item[0]))
    rows: list[tuple[str, float]] = [(ns, float(depth)) for ns, depth in ranked[:top]]
    rest = sum(depth for _, depth in ranked[top:])
    if len(ranked) > top:
        rows.append((OTHER_NAMESPACES, float(rest)))
    return rows


class Metrics:
    """The controller's metric families in a dedicated registry (``self.registry``)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.reconcile_total = Counter(
            "controller_runtime_reconcile_total",
            "Reconcile passes by controller (task, workflow, mediaprocessingentity) and result "
            "(success, error, requeue_after).",
            ["controller", "result"],
            registry=r,
        )
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors_total",
            "Reconcile passes that ended in an error (retried with backoff).",
            ["controller"],
            registry=r,
        )
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Seconds one reconcile pass took.",
            ["controller"],
            buckets=RECONCILE_BUCKETS,
            registry=r,
        )
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Workers inside a reconcile pass now.",
            ["controller"],
            registry=r,
        )
        self.max_concurrent_reconciles = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Workers of the controller (--workers for the Task controller, 1 for the others).",
            ["controller"],
            registry=r,
        )
        self.reconcile_panics = Counter(
            "controller_runtime_reconcile_panics_total",
            "Reconcile passes that raised an unexpected exception (a bug, not an answer of the "
            "API); counted as errors too and retried with backoff.",
            ["controller"],
            registry=r,
        )
        self.terminal_reconcile_errors = Counter(
            "controller_runtime_terminal_reconcile_errors_total",
            "Reconcile errors not retried; always 0: taskfsm retries every error with backoff, "
            "and what can never succeed ends in a Failed phase, not an error.",
            ["controller"],
            registry=r,
        )
        self.queue_depth = Gauge(
            "workqueue_depth",
            "Keys waiting in the work queue for a worker.",
            QUEUE_LABELS,
            registry=r,
        )
        self.queue_adds = Counter(
            "workqueue_adds_total",
            "Keys added to the work queue (after de-duplication).",
            QUEUE_LABELS,
            registry=r,
        )
        self.queue_retries = Counter(
            "workqueue_retries_total",
            "Keys re-added with backoff after an error (5 ms doubling to ~16 min, jittered).",
            QUEUE_LABELS,
            registry=r,
        )
        self.queue_duration = Histogram(
            "workqueue_queue_duration_seconds",
            "Seconds a key waited in the work queue before a worker took it.",
            QUEUE_LABELS,
            buckets=QUEUE_BUCKETS,
            registry=r,
        )
        self.work_duration = Histogram(
            "workqueue_work_duration_seconds",
            "Seconds a worker spent on a key, from taking it to done.",
            QUEUE_LABELS,
            buckets=QUEUE_BUCKETS,
            registry=r,
        )
        self._queue_progress = _QueueProgress()
        r.register(self._queue_progress)
        self._namespace_depth = _NamespaceDepth()
        r.register(self._namespace_depth)
        self.rest_requests = Counter(
            "rest_client_requests_total",
            "API requests by HTTP status code (0: no answer; 409: a conflict), method and API "
            "server.",
            ["code", "method", "host"],
            registry=r,
        )
        self.rest_duration = Histogram(
            "rest_client_request_duration_seconds",
            "Seconds from sending an API request to its answer (a watch: to its response head), "
            "by HTTP verb and API server (a remote cluster's: remote, unless "
            "--metrics-tenant-labels).",
            ["verb", "host"],
            buckets=REST_BUCKETS,
            registry=r,
        )
        self.leader = Gauge(
            "leader_election_master_status",
            "1 while this replica does the work (holds the Lease, or runs without election); with "
            "--buckets above 1 one series per bucket Lease it has held, 1 while it holds it.",
            ["name"],
            registry=r,
        )
        self.buckets_held = Gauge(
            "taskfsm_buckets_held",
            "Bucket Leases this replica holds now (0 with --buckets 1).",
            registry=r,
        )
        self.bucket_handovers = Counter(
            "taskfsm_bucket_handovers_total",
            "Buckets this replica acquired, released (above its fair share, or shutting down) or "
            "lost (not renewed within the renew deadline, or taken).",
            ["event"],
            registry=r,
        )
        self.job_creation_latency = Histogram(
            "taskfsm_task_job_creation_seconds",
            "Seconds from a Task's creationTimestamp to its Job's creationTimestamp.",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.build_info = Gauge(
            "taskfsm_build_info",
            "1; its version label is the running taskfsm's version.",
            ["version"],
            registry=r,
        )
        self.build_info.labels(__version__).set(1)
        for result in ("success", "error", "requeue_after"):
            self.reconcile_total.labels(CONTROLLER, result)
        self.controller_series(CONTROLLER)
        self.queue_depth.labels(CONTROLLER, CONTROLLER)
        self.queue_adds.labels(CONTROLLER, CONTROLLER)
        self.queue_retries.labels(CONTROLLER, CONTROLLER)
        for event in ("acquired", "released", "lost"):
            self.bucket_handovers.labels(event)
        # The process (CPU, memory, file descriptors), garbage collector and interpreter series
        # every Python exporter has, in this registry (the default registry's are not used).
        ProcessCollector(registry=r)
        r.register(_MemoryLimit())
        GCCollector(registry=r)
        PlatformCollector(registry=r)

    def controller_series(self, controller: str, workers: int | None = None) -> None:
        """Create ``controller``'s error, panic and terminal-error series at 0 (a rate over
        them reads 0, not "no data"), and with ``workers`` set its
        ``controller_runtime_max_concurrent_reconciles``."""
        self.reconcile_errors.labels(controller)
        self.reconcile_panics.labels(controller)
        self.terminal_reconcile_errors.labels(controller)
        if workers is not None:
            self.max_concurrent_reconciles.labels(controller).set(workers)

    def name_tenants(self, named: bool) -> None:
        """Label series with tenants' namespaces (``--metrics-tenant-labels``), not their ranks."""
        self._namespace_depth.named = named

    def queue(self, name: str, *, namespaced: bool = True) -> QueueMetrics:
        """The hooks of the work queue of controller ``name``: its ``workqueue_*`` series, and
        (``namespaced``: its keys are ``namespace/name``) its depth by namespace."""
        labels = (name, name)
        self._queue_progress.queues.setdefault(name, list)  # 0 until the queue exists

        def on_namespaces(read: Callable[[], dict[str, int]]) -> None:
            if namespaced:
                self._namespace_depth.queues[name] = read

        return QueueMetrics(
            on_namespaces=on_namespaces,
            on_add=self.queue_adds.labels(*labels).inc,
            on_retry=self.queue_retries.labels(*labels).inc,
            on_depth=self.queue_depth.labels(*labels).set,
            on_wait=self.queue_duration.labels(*labels).observe,
            on_work=self.work_duration.labels(*labels).observe,
            on_queue=lambda in_progress: self._queue_progress.queues.__setitem__(name, in_progress),
        )

    def watch_tasks_by_phase(self, read: Callable[[], Iterable[tuple[str, float]]]) -> None:
        """Publish ``taskfsm_tasks{phase}`` from ``read()`` at every scrape."""
        self.registry.register(
            _Snapshot(
                "taskfsm_tasks",
                'Tasks in the cache by status.phase ("": not yet seen by the controller).',
                "phase",
                read,
            )
        )

    def watch_health(self, read: Callable[[], Iterable[tuple[str, float]]]) -> None:
        """Publish ``taskfsm_watch_healthy{resource}`` from ``read()`` at every scrape."""
        self.registry.register(
            _Snapshot(
                "taskfsm_watch_healthy",
                "1 while the watch of that resource is connected (jobs@main, jobs@remote: the "
                "Job watches of MediaProcessingEntities in this cluster and in remote ones, 0 "
                "while any fails; jobs@<server>/<namespace> each with --metrics-tenant-labels).",
                "resource",
                read,
            )
        )

    def request_observer(self, host: str) -> Callable[[str, str, int], None]:
        """A :data:`taskfsm.kube.rest.Observer` counting into ``rest_client_requests_total``."""

        def observe(method: str, _resource: str, code: int) -> None:
            self.rest_requests.labels(str(code), http_verb(method), host).inc()

        return observe

    def request_timer(self, host: str) -> Callable[[str, float], None]:
        """A :data:`taskfsm.kube.rest.Timer` observing ``rest_client_request_duration_seconds``;
        ``host`` as for :meth:`request_observer` (a remote cluster's only with tenant labels)."""

        def observe(method: str, seconds: float) -> None:
            self.rest_duration.labels(http_verb(method), host).observe(seconds)

        return observe


def http_verb(method: str) -> str:
    """The ``method``/``verb`` label of a request: its HTTP method (a LIST or WATCH is a GET)."""
    return {"LIST": "GET", "WATCH": "GET"}.get(method, method)
