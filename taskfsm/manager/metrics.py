"""Prometheus metrics, named as operators know them from controller-runtime and client-go.

One :class:`Metrics` object per controller process (tests build their own, each with a private
registry). Series:

=========================================================  =========================================
``controller_runtime_reconcile_total{controller,result}``  passes by result: success, error,
                                                           requeue_after
``controller_runtime_reconcile_errors_total{controller}``  passes that ended in an error
``controller_runtime_reconcile_time_seconds{controller}``  pass duration histogram
``controller_runtime_active_workers{controller}``          workers inside a pass
``workqueue_depth{name}``                                  keys waiting
``workqueue_adds_total{name}``                             keys added (after de-duplication)
``workqueue_retries_total{name}``                          rate-limited re-adds
``rest_client_requests_total{code,method,host}``           requests by HTTP status (0: no answer)
``leader_election_master_status{name}``                    1 while this replica leads (with
                                                           buckets: per bucket Lease it holds)
``taskfsm_buckets_held``                                   bucket Leases this replica holds
``taskfsm_bucket_handovers_total{event}``                  buckets acquired, released, lost
``taskfsm_tasks{phase}``                                   cached Tasks by phase (``""`` = new)
``taskfsm_task_job_creation_seconds``                      Task creation → its Job created
``taskfsm_watch_healthy{resource}``                        1 while that watch is connected
=========================================================  =========================================
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

CONTROLLER = "task"
RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600)


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


class Metrics:
    """The controller's metric families in a dedicated registry (``self.registry``)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.reconcile_total = Counter(
            "controller_runtime_reconcile_total",
            "Reconcile passes by result.",
            ["controller", "result"],
            registry=r,
        )
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors_total",
            "Reconcile passes that failed.",
            ["controller"],
            registry=r,
        )
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Duration of one reconcile pass.",
            ["controller"],
            buckets=RECONCILE_BUCKETS,
            registry=r,
        )
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Workers inside a reconcile pass.",
            ["controller"],
            registry=r,
        )
        self.queue_depth = Gauge(
            "workqueue_depth", "Keys waiting in the work queue.", ["name"], registry=r
        )
        self.queue_adds = Counter(
            "workqueue_adds_total", "Keys added to the work queue.", ["name"], registry=r
        )
        self.queue_retries = Counter(
            "workqueue_retries_total",
            "Rate-limited re-adds to the work queue.",
            ["name"],
            registry=r,
        )
        self.rest_requests = Counter(
            "rest_client_requests_total",
            "API requests by HTTP status code, method and host.",
            ["code", "method", "host"],
            registry=r,
        )
        self.leader = Gauge(
            "leader_election_master_status",
            "1 while this replica holds the Lease.",
            ["name"],
            registry=r,
        )
        self.buckets_held = Gauge(
            "taskfsm_buckets_held",
            "Bucket Leases this replica holds (--buckets above 1; 0 otherwise).",
            registry=r,
        )
        self.bucket_handovers = Counter(
            "taskfsm_bucket_handovers_total",
            "Buckets this replica acquired, released (surplus or shutdown) or lost.",
            ["event"],
            registry=r,
        )
        self.job_creation_latency = Histogram(
            "taskfsm_task_job_creation_seconds",
            "Seconds from a Task's creationTimestamp to the creation of its Job.",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        for result in ("success", "error", "requeue_after"):
            self.reconcile_total.labels(CONTROLLER, result)
        self.reconcile_errors.labels(CONTROLLER)
        self.queue_depth.labels(CONTROLLER)
        self.queue_adds.labels(CONTROLLER)
        self.queue_retries.labels(CONTROLLER)
        for event in ("acquired", "released", "lost"):
            self.bucket_handovers.labels(event)

    def watch_tasks_by_phase(self, read: Callable[[], Iterable[tuple[str, float]]]) -> None:
        """Publish ``taskfsm_tasks{phase}`` from ``read()`` at every scrape."""
        self.registry.register(
            _Snapshot("taskfsm_tasks", "Tasks in the cache by status.phase.", "phase", read)
        )

    def watch_health(self, read: Callable[[], Iterable[tuple[str, float]]]) -> None:
        """Publish ``taskfsm_watch_healthy{resource}`` from ``read()`` at every scrape."""
        self.registry.register(
            _Snapshot(
                "taskfsm_watch_healthy",
                "1 while the watch of that resource is connected.",
                "resource",
                read,
            )
        )

    def request_observer(self, host: str) -> Callable[[str, str, int], None]:
        """A :data:`taskfsm.kube.rest.Observer` counting into ``rest_client_requests_total``."""

        def observe(method: str, _resource: str, code: int) -> None:
            verb = {"LIST": "GET", "WATCH": "GET"}.get(method, method)
            self.rest_requests.labels(str(code), verb, host).inc()

        return observe
