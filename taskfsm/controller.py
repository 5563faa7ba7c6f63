"""The controller process: watches → work queues → reconcile workers, plus leader election,
metrics, probes and graceful shutdown. ``taskfsm run`` and the demo build one :class:`Controller`.

Data flow (controller-runtime's source → handler → queue → reconcile):

* informers of the main cluster (:class:`taskfsm.cache.Caches`) and one Job informer per
  MediaProcessingEntity namespace (:class:`taskfsm.mpe.MpeRegistry`) turn every event into the
  key of the Task it concerns (Task events: the Task; Workflow events: its Tasks; Job events: the
  Task named by the Job's labels; Function/TaskTemplate/MediaLocation events: the Tasks of that
  namespace still before Running);
* the Task queue (:class:`taskfsm.queue.WorkQueue`) de-duplicates keys and hands each to one of
  ``workers`` threads running :meth:`taskfsm.reconciler.TaskReconciler.reconcile`;
* MediaProcessingEntity events go to their own queue and reconcile (:mod:`taskfsm.mpe_controller`);
  an MPE becoming ready requeues the Tasks waiting for it.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from taskfsm import constants as c
from taskfsm import logs, workflow_reconciler
from taskfsm.api.config import NatsConfiguration
from taskfsm.cache import Caches
from taskfsm.events import EventRecorder
from taskfsm.kube.rest import Rest
from taskfsm.leader import LeaderElector
from taskfsm.metrics import CONTROLLER, Metrics
from taskfsm.mpe import MpeKey, MpeRegistry, key_of
from taskfsm.mpe_controller import MpeReconciler, mpe_key_string
from taskfsm.queue import QueueMetrics, ShutDown, WorkQueue
from taskfsm.reconciler import Result, TaskReconciler
from taskfsm.server import EndpointServer

log = logging.getLogger(__name__)

MPE_KINDS = (c.KIND_MEDIA_PROCESSING_ENTITY, c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY)
PRE_RUNNING = ("", c.TaskPhase.INITIALIZING, c.TaskPhase.JOB_PENDING)


@dataclass
class Settings:
    """Controller settings (``taskfsm run`` flags map onto these)."""

    workers: int = 4
    """Concurrent Task reconciles (one per Task at a time)."""
    namespace: str | None = None
    """Watch one namespace only; None watches all."""
    resync_seconds: float = 300.0
    """A Task whose Job may still change is reconciled at least this often without events."""
    watch_timeout: float = 240.0
    """Server-side watch duration (s); a dead connection is noticed within this + ``read_margin``."""
    read_margin: float = 30.0
    watch_max_backoff: float = 30.0
    """Cap (s) on the wait before re-opening a failing watch (jittered to 0.5–1.5×)."""
    metrics_address: str | None = ":8080"
    """``host:port`` for /metrics; None disables it."""
    health_address: str | None = ":8081"
    """``host:port`` for /healthz and /readyz; None disables them."""
    leader_election: bool = False
    lease_namespace: str = "default"
    lease_name: str = "taskfsm-task-controller"
    identity: str = ""
    cache_sync_timeout: float = 120.0
    shutdown_timeout: float = 30.0
    """Seconds in-flight reconciles get to finish on shutdown."""
    nats: NatsConfiguration | None = None
    cleanup_timeout: float = 120.0
    """Seconds a deleting Task keeps retrying to clean up its Job in an unreachable
    MediaProcessingEntity before it abandons the Job (Warning Event ``JobAbandoned``)."""
    workflow_termination_waiting: float = 20.0
    """``workflowTerminationWaitingDuration`` (s): how long a Workflow with no active Task waits."""


class Controller:
    """Everything ``taskfsm run`` starts, for one main cluster.

    Args:
        api_client: the main cluster's ``ApiClient``.
        settings: see :class:`Settings`.
        rest_factory: builds a :class:`Rest` for an ``ApiClient`` (remote MPE clusters); tests
            inject request counters through it.
    """

    def __init__(
        self,
        api_client: client.ApiClient,
        settings: Settings | None = None,
        *,
        metrics: Metrics | None = None,
        rest_factory: Callable[[client.ApiClient], Rest] | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.metrics = metrics or Metrics()
        self.api_client = api_client

        def default_factory(api: client.ApiClient) -> Rest:
            return Rest(api, observer=self.metrics.request_observer(api.configuration.host))

        self.rest_factory = rest_factory or default_factory
        self.rest = self.rest_factory(api_client)
        informer_options = {
            "watch_timeout": self.settings.watch_timeout,
            "read_margin": self.settings.read_margin,
            "max_backoff": self.settings.watch_max_backoff,
        }
        self.caches = Caches(self.rest, namespace=self.settings.namespace, informer_options=informer_options)
        self.events = EventRecorder(self.rest)
        self.queue = WorkQueue(metrics=self._queue_metrics(CONTROLLER))
        self.mpe_queue = WorkQueue(base_delay=0.5, max_delay=60.0)
        self.registry = MpeRegistry(
            self.rest,
            on_job_event=self.queue.add,
            rest_factory=self.rest_factory,
            informer_options=informer_options,
        )
        self.reconciler = TaskReconciler(
            rest=self.rest,
            caches=self.caches,
            mpes=self.registry,
            events=self.events,
            nats=self.settings.nats,
            metrics=self.metrics,
            resync_seconds=self.settings.resync_seconds,
            cleanup_timeout=self.settings.cleanup_timeout,
        )
        self.mpe_reconciler = MpeReconciler(
            rest=self.rest,
            registry=self.registry,
            events=self.events,
            get=self.caches.get,
            tasks_using=self._tasks_using,
            on_ready=self._requeue_tasks_of_mpe,
        )
        self._workflow_facts: dict[str, tuple[Any, ...]] = {}
        self._threads: list[threading.Thread] = []
        self._servers: list[EndpointServer] = []
        self._stop_requested = threading.Event()
        self._stopped = threading.Event()
        self._stop_lock = threading.Lock()
        self.leading = threading.Event()
        self.lost_leadership = threading.Event()
        self.elector: LeaderElector | None = None
        self._wire_handlers()
        self.workflows = workflow_reconciler.attach(self)  # Workflow queue, worker, handlers
        self.metrics.watch_tasks_by_phase(self._tasks_by_phase)
        self.metrics.watch_health(self._watch_health)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> Controller:
        """Start caches, endpoints and (once leading, or at once without election) the workers.

        Returns early when a stop is requested meanwhile. Raises ``TimeoutError`` when the
        caches do not sync within ``cache_sync_timeout``.
        """
        s = self.settings
        self.caches.start()
        for address, registry, ready in (
            (s.metrics_address, self.metrics.registry, None),
            (s.health_address, None, self.readiness),
        ):
            if address:
                self._servers.append(EndpointServer(address, registry=registry, ready=ready).start())
        deadline = time.monotonic() + s.cache_sync_timeout
        while not self.caches.synced():
            if self._stop_requested.is_set():
                return self
            if time.monotonic() >= deadline:
                raise TimeoutError(f"caches did not sync within {s.cache_sync_timeout:.0f}s")
            time.sleep(0.05)
        log.info("caches synced")
        if s.leader_election:
            self.metrics.leader.labels(s.lease_name).set(0)
            identity = s.identity or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
            self.elector = LeaderElector(
                self.api_client,
                self.rest,
                namespace=s.lease_namespace,
                name=s.lease_name,
                identity=identity,
                on_started=self._start_workers,
                on_stopped=self._on_lost_leadership,
            ).start()
        else:
            self._start_workers()
        return self

    def _start_workers(self) -> None:
        if self._stop_requested.is_set():
            return
        self.leading.set()
        self.metrics.leader.labels(self.settings.lease_name).set(1)
        for kind in MPE_KINDS:
            for obj in self.caches.informers[kind].list():
                self.mpe_queue.add(mpe_key_string(key_of({**obj, "kind": kind})))
        for task in self.caches.informers[c.KIND_TASK].list():
            self.queue.add(_key(task))
        self._spawn(self._mpe_worker, "mpe-worker")
        self._wait_for_mpes(timeout=10.0)
        for i in range(self.settings.workers):
            self._spawn(self._task_worker, f"task-worker-{i}")
        self.workflows.start()

    def _wait_for_mpes(self, timeout: float) -> None:
        """Give the first MPE reconciles a moment before Task workers start, so a restart does not
        greet every Running Task with "MediaProcessingEntity ... not ready" (bounded: a slow
        remote cluster only delays, never blocks, the Task workers)."""
        deadline = time.monotonic() + timeout
        refs = [
            {"kind": kind, "namespace": (obj["metadata"].get("namespace") or ""), "name": obj["metadata"]["name"]}
            for kind in MPE_KINDS
            for obj in self.caches.informers[kind].list()
        ]
        while time.monotonic() < deadline and any(self.registry.pending(ref) for ref in refs):
            if self._stopped.wait(0.05):
                return

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _on_lost_leadership(self) -> None:
        self.lost_leadership.set()
        self.metrics.leader.labels(self.settings.lease_name).set(0)
        self.request_stop()

    def request_stop(self) -> None:
        """Stop taking work now (safe from a signal handler); :meth:`stop` finishes the shutdown."""
        self._stop_requested.set()
        self.registry.interrupt()
        self.queue.shutdown()
        self.mpe_queue.shutdown()
        self.workflows.shutdown()

    def stop(self) -> None:
        """Graceful shutdown: stop taking work, let in-flight reconciles finish (bounded by
        ``shutdown_timeout``; the rest are abandoned), release the Lease, stop watches and
        endpoints. Idempotent; a second caller returns once the first has finished."""
        with self._stop_lock:
            if self._stopped.is_set():
                return
            self.request_stop()
            deadline = time.monotonic() + self.settings.shutdown_timeout
            for thread in list(self._threads):
                if thread is not threading.current_thread():
                    thread.join(max(0.0, deadline - time.monotonic()))
            busy = [t.name for t in self._threads if t.is_alive() and t is not threading.current_thread()]
            if busy:
                log.warning("shutdown timeout: abandoning in-flight reconciles", extra={"workers": busy})
            if self.elector is not None:
                self.elector.release()
            self.metrics.leader.labels(self.settings.lease_name).set(0)
            self.registry.stop()
            self.caches.stop()
            for server in self._servers:
                server.stop()
            self._stopped.set()
            log.info("controller stopped")

    def wait(self, timeout: float | None = None) -> bool:
        """Block until a stop is requested (signal, lost Lease, :meth:`stop`); False on timeout."""
        return self._stop_requested.wait(timeout)

    @property
    def endpoint_ports(self) -> list[int]:
        return [server.port for server in self._servers]

    def readiness(self) -> str:
        """"" when ready; else why not (``/readyz``)."""
        if not self.caches.synced():
            return "caches not synced"
        unhealthy = [name for name, ok in self.caches.healthy() if not ok]
        if unhealthy:
            return f"watches failing: {', '.join(unhealthy)}"
        if not self.registry.healthy():
            return "a MediaProcessingEntity Job watch is failing"
        return ""

    # -- workers ---------------------------------------------------------------------------------

    def _task_worker(self) -> None:
        self._work(self.queue, self.reconciler.reconcile, track_active=True)

    def _mpe_worker(self) -> None:
        self._work(self.mpe_queue, self.mpe_reconciler.reconcile, track_active=False)

    def _work(self, queue: WorkQueue, reconcile: Callable[[str], Result], *, track_active: bool) -> None:
        while True:
            try:
                key = queue.get()
            except ShutDown:
                return
            if key is None:
                continue
            if self._stop_requested.is_set():  # shutting down: take no new work
                queue.done(key)
                return
            if track_active:
                self.metrics.active_workers.labels(CONTROLLER).inc()
            logs.bind(key=key, reconcile_id=uuid.uuid4().hex[:12])
            try:
                result = reconcile(key)
                if result.error:
                    queue.add_rate_limited(key)
                else:
                    queue.forget(key)
                    if result.requeue_after:
                        queue.add_after(key, result.requeue_after)
            finally:
                logs.clear()
                if track_active:
                    self.metrics.active_workers.labels(CONTROLLER).dec()
                queue.done(key)

    # -- event handlers (informer threads) -------------------------------------------------------

    def _wire_handlers(self) -> None:
        inf = self.caches.informers
        inf[c.KIND_TASK].add_handler(self._on_task)
        inf[c.KIND_WORKFLOW].add_handler(self._on_workflow)
        for kind in MPE_KINDS:
            inf[kind].add_handler(lambda _e, obj, kind=kind: self.mpe_queue.add(mpe_key_string(key_of({**obj, "kind": kind}))))
            # A (default) MPE that appears may be what a Task still before Running waits for.
            inf[kind].add_handler(self._on_dependency)
        for kind in (
            c.KIND_FUNCTION,
            c.KIND_CLUSTER_FUNCTION,
            c.KIND_TASK_TEMPLATE,
            c.KIND_CLUSTER_TASK_TEMPLATE,
            c.KIND_MEDIA_LOCATION,
            c.KIND_CLUSTER_MEDIA_LOCATION,
        ):
            inf[kind].add_handler(self._on_dependency)

    def _on_task(self, event: str, task: dict[str, Any]) -> None:
        if event == "DELETED":
            meta = task["metadata"]
            self.caches.written.gone(("main", "tasks", meta["namespace"], meta["name"]))
        self.queue.add(_key(task))

    def _on_workflow(self, event: str, workflow: dict[str, Any]) -> None:
        # A Task only cares whether its Workflow exists (uid), is being deleted or has terminated.
        # Counter and condition updates of the Workflow controller change none of that, and
        # re-queuing every Task on each of them made reconciles grow with the square of a
        # Workflow's size.
        meta = workflow["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        facts = (
            meta.get("uid"),
            bool(meta.get("deletionTimestamp")),
            ((workflow.get("status") or {}).get("phase") or "") in ("Succeeded", "Failed"),
        )
        if event == "DELETED":
            self._workflow_facts.pop(key, None)
        elif self._workflow_facts.get(key) == facts:
            return
        else:
            self._workflow_facts[key] = facts
        for task in self.caches.informers[c.KIND_TASK].list(meta["namespace"]):
            if ((task.get("spec") or {}).get("workflowRef") or {}).get("name") == meta["name"]:
                self.queue.add(_key(task))

    def _on_dependency(self, _event: str, obj: dict[str, Any]) -> None:
        namespace = (obj.get("metadata") or {}).get("namespace")  # None for cluster kinds: all
        for task in self.caches.informers[c.KIND_TASK].list(namespace):
            if ((task.get("status") or {}).get("phase") or "") in PRE_RUNNING:
                self.queue.add(_key(task))

    def _tasks_using(self, key: MpeKey) -> list[dict[str, Any]]:
        kind, namespace, name = key
        out = []
        for task in self.caches.informers[c.KIND_TASK].list():
            ref = (task.get("status") or {}).get("mediaProcessingEntityRef") or {}
            if (ref.get("kind"), ref.get("namespace") or "", ref.get("name")) == (kind, namespace, name):
                out.append(task)
        return out

    def _requeue_tasks_of_mpe(self, key: MpeKey) -> None:
        for task in self._tasks_using(key):
            self.queue.add(_key(task))

    # -- metrics ---------------------------------------------------------------------------------

    def _queue_metrics(self, name: str) -> QueueMetrics:
        m = self.metrics
        return QueueMetrics(
            on_add=m.queue_adds.labels(name).inc,
            on_retry=m.queue_retries.labels(name).inc,
            on_depth=m.queue_depth.labels(name).set,
        )

    def _tasks_by_phase(self) -> list[tuple[str, float]]:
        counts: dict[str, float] = dict.fromkeys(["", *(p.value for p in c.TaskPhase)], 0.0)
        for task in self.caches.informers[c.KIND_TASK].list():
            phase = (task.get("status") or {}).get("phase") or ""
            counts[phase] = counts.get(phase, 0.0) + 1
        return sorted(counts.items())

    def _watch_health(self) -> list[tuple[str, float]]:
        rows = self.caches.healthy()
        rows += [(cl.jobs.name, 1.0 if cl.healthy else 0.0) for cl in self.registry.clusters()]
        return rows


def _key(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}"


def default_identity() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"
