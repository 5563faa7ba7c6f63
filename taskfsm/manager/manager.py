"""The manager (controller-runtime's word): the process that runs the three controllers. Watches →
work queues → reconcile workers, plus metrics, probes and graceful shutdown; which replica acts is
:mod:`taskfsm.manager.election`. ``taskfsm run`` and the demo build one :class:`Manager`.

Data flow (controller-runtime's source → handler → queue → reconcile; docs/architecture.md):

* informers of the main cluster (:class:`taskfsm.kube.cache.Caches`) and one Job informer per
  MediaProcessingEntity namespace (:class:`taskfsm.controllers.clusters.registry.MpeRegistry`)
  turn every event into the key of the object it concerns (:mod:`taskfsm.controllers.task.handlers`,
  :mod:`taskfsm.controllers.workflow.handlers`, Job events: the Task named by the Job's
  labels);
* the work queues (:class:`taskfsm.manager.queue.WorkQueue`) de-duplicate keys and hand each to
  a worker (:mod:`taskfsm.manager.workers`) running its controller's reconcile: the Task, the
  Workflow and the MediaProcessingEntity reconciler, each the pipeline read → observe → pass →
  effects → write → requeue around its chart;
* this module wires the controllers to each other without either importing the other: a Task
  waiting for an MPE's client is woken by that MPE's reconcile
  (:class:`taskfsm.controllers.clusters.waiters.MpeWaiters`), a Task whose MPE's cluster refused
  it queues that MPE's reconcile, an MPE's reconcile asks which Tasks use it
  (:class:`taskfsm.controllers.task.index.TaskIndex`) and wakes them when it becomes usable.

Who works on which key (:mod:`taskfsm.manager.ownership`): without leader election, or with the
one Lease, this replica does everything; with ``--buckets`` above 1 only the keys of the bucket
Leases it holds (:mod:`taskfsm.kube.buckets`), each reconcile's writes gated by its key's
bucket. ``--controllers`` leaves out the Task, Workflow or MediaProcessingEntity status
controller (docs/operations.md, "Running several replicas" and "Flags").
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from taskfsm.api import constants as c
from taskfsm.controllers.clusters.cluster import MpeKey, key_of, ref_of_key
from taskfsm.controllers.clusters.registry import MpeRegistry
from taskfsm.controllers.clusters.waiters import MpeWaiters
from taskfsm.controllers.mpe.reconciler import MpeReconciler, mpe_key_string, parse_mpe_key
from taskfsm.controllers.result import Result
from taskfsm.controllers.task.handlers import MPE_KINDS, TaskWatch
from taskfsm.controllers.task.index import TaskIndex
from taskfsm.controllers.task.inputs import JobSettings
from taskfsm.controllers.task.orphans import OrphanCollector
from taskfsm.controllers.task.reconciler import MpeSignals, build_reconciler
from taskfsm.controllers.task.seen_jobs import SeenJobs
from taskfsm.controllers.workflow.handlers import WorkflowWatch
from taskfsm.controllers.workflow.reconciler import CONTROLLER_LABEL as WORKFLOW_CONTROLLER
from taskfsm.controllers.workflow.reconciler import WorkflowReconciler
from taskfsm.kube.buckets import BucketElector, bucket_lease_name
from taskfsm.kube.cache import Caches
from taskfsm.kube.client import ApiClient
from taskfsm.kube.events import EventRecorder
from taskfsm.kube.informer import EventHandler
from taskfsm.kube.leader import LeaderElector
from taskfsm.kube.resources import BY_KIND
from taskfsm.kube.rest import Rest
from taskfsm.manager import workers
from taskfsm.manager.election import ElectionHooks, start_election
from taskfsm.manager.metrics import (
    CONTROLLER,
    Metrics,
    job_watch_health,
    remote_host_label,
)
from taskfsm.manager.metrics_auth import MetricsAuthorizer
from taskfsm.manager.ownership import MPE_BUCKET, Ownership
from taskfsm.manager.queue import QueueMetrics, WorkQueue
from taskfsm.manager.server import EndpointServer
from taskfsm.manager.serving_cert import ServingCertificate
from taskfsm.manager.settings import CONTROLLERS, Settings, check

log = logging.getLogger(__name__)

WORKFLOW_COALESCE_SECONDS = 0.5
"""How long a Task's change waits before it wakes its Workflow, so the changes of many Tasks
make one Workflow reconcile (its counters are at most this much behind)."""

MPE_CONTROLLER = "mediaprocessingentity"
"""The ``controller`` label of the MediaProcessingEntity reconcile's metrics."""

__all__ = ["CONTROLLERS", "Manager", "Settings"]


class Manager:
    """Everything ``taskfsm run`` starts, for one main cluster.

    Args:
        api_client: the main cluster's ``ApiClient``.
        settings: see :class:`Settings`.
        rest_factory: builds a :class:`Rest` for an ``ApiClient`` (remote MPE clusters); tests
            inject request counters through it.
    """

    def __init__(
        self,
        api_client: ApiClient,
        settings: Settings | None = None,
        *,
        metrics: Metrics | None = None,
        rest_factory: Callable[[ApiClient], Rest] | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.metrics = metrics or Metrics()
        self.metrics.name_tenants(self.settings.metrics_tenant_labels)
        self.api_client = api_client

        main_host = api_client.configuration.host

        def default_factory(api: ApiClient) -> Rest:
            host = api.configuration.host
            if host != main_host:
                # A remote cluster's address is a tenant's: a label only when the admin opts in.
                host = remote_host_label(host, self.settings.metrics_tenant_labels)
            return self._metered_rest(api, host)

        self.rest_factory = rest_factory or default_factory
        self.rest = self.rest_factory(api_client)
        informer_options = {
            "watch_timeout": self.settings.watch_timeout,
            "read_margin": self.settings.read_margin,
            "max_backoff": self.settings.watch_max_backoff,
        }
        self.caches = Caches(
            self.rest, namespace=self.settings.namespace, informer_options=informer_options
        )
        self.events = EventRecorder(self.rest)
        check(self.settings)
        self.ownership = Ownership(self.settings.buckets)
        fairness = self.settings.queue_fairness
        # Tasks are served fairly across namespaces (docs/operations.md, "Fair share across
        # namespaces"), with the weights and the per-namespace cap of the flags.
        self.queue = WorkQueue(
            metrics=self._queue_metrics(CONTROLLER),
            fair=fairness == "namespace",
            weights=dict(self.settings.namespace_weights),
            max_in_flight_per_namespace=self.settings.max_in_flight_per_namespace,
        )
        # An MPE key is kind/namespace/name and MPEs are few: one FIFO.
        self.mpe_queue = WorkQueue(
            base_delay=0.5,
            max_delay=60.0,
            metrics=self.metrics.queue(MPE_CONTROLLER, namespaced=False),
            fair=False,
        )
        self.registry = MpeRegistry(
            self.rest,
            on_job_event=self._add_task,
            rest_factory=self.rest_factory,
            informer_options=informer_options,
            # kubeconfig Secret changed, Job watch failed or recovered: reconcile that MPE now
            on_mpe_event=lambda key: self.mpe_queue.add(mpe_key_string(key)),
            kubeconfig_policy=self.settings.kubeconfig_policy,
            watch_namespace=self.settings.namespace,
        )
        self.waiters = MpeWaiters(self._add_task)
        self.task_index = TaskIndex(self.caches.informers[c.KIND_TASK])
        self.seen_jobs = SeenJobs()
        self.seen_jobs.watch(self.caches.informers[c.KIND_TASK])
        self.orphans = OrphanCollector(
            rest=self.rest,
            registry=self.registry,
            events=self.events,
            cached_task=lambda ns, name: self.caches.informers[c.KIND_TASK].get(ns, name),
            enqueue=self._add_task,
            owns=self.ownership.owns,
            scope=self.ownership.scope,
        )
        s = self.settings
        self.reconciler = build_reconciler(
            rest=self.rest,
            caches=self.caches,
            registry=self.registry,
            events=self.events,
            signals=MpeSignals(wait=self._wait_for_mpe, recheck=self._recheck_mpe),
            seen=self.seen_jobs,
            orphans=self.orphans,
            job=JobSettings(ttl_seconds=s.job_ttl_seconds, nats=s.nats),
            resync_seconds=s.resync_seconds,
            cleanup_timeout=s.cleanup_timeout,
            finished_ttl=s.finished_ttl or None,
            job_pods_refused_timeout=s.job_pods_refused_timeout,
            on_job_created=self.metrics.job_creation_latency.observe,
            phase_events=s.task_phase_events,
        )
        self.mpe_reconciler = MpeReconciler(
            rest=self.rest,
            registry=self.registry,
            events=self.events,
            get=self.caches.get,
            tasks_using=self.task_index.using,
            on_ready=self._mpe_ready,
            collect_orphans=self.orphans.collect_cluster,
            resync_seconds=s.mpe_resync_seconds,
            cleanup_timeout=s.cleanup_timeout,
            manages_status=self._manages_mpe_status,
            remember=self._remember_mpe,
        )
        self.workflow_queue = WorkQueue(
            metrics=self._queue_metrics(WORKFLOW_CONTROLLER),
            fair=fairness == "namespace",
            weights=dict(self.settings.namespace_weights),
        )
        self.workflow_reconciler = WorkflowReconciler(
            rest=self.rest,
            caches=self.caches,
            events=self.events,
            waiting_seconds=s.workflow_termination_waiting,
            resync_seconds=s.resync_seconds,
            finished_ttl=s.finished_ttl or None,
        )
        self.task_watch = TaskWatch(self.caches, self.task_index, self._add_task)
        self.workflow_watch = WorkflowWatch(
            self.caches, self._add_workflow, self._add_workflow_soon
        )
        self._threads: list[threading.Thread] = []
        self._servers: list[EndpointServer] = []
        self._stop_requested = threading.Event()
        self._stopped = threading.Event()
        self._stop_lock = threading.Lock()
        self.leading = threading.Event()
        self.lost_leadership = threading.Event()
        self.elector: LeaderElector | BucketElector | None = None
        self._lease_rest: Rest | None = None
        self._wire_handlers()
        self.metrics.buckets_held.set_function(lambda: float(len(self.ownership.held())))
        self.metrics.watch_tasks_by_phase(self._tasks_by_phase)
        self.metrics.watch_health(self._watch_health)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> Manager:
        """Start caches, endpoints and (once leading, or at once without election) the workers.

        Returns early when a stop is requested meanwhile. Raises ``TimeoutError`` when the
        caches do not sync within ``cache_sync_timeout``.
        """
        s = self.settings
        with self._stop_lock:  # a stop from another thread either comes first or waits
            if self._stop_requested.is_set():
                return self
            self._start_caches_and_endpoints()
        deadline = time.monotonic() + s.cache_sync_timeout
        while not self.caches.synced():
            if self._stop_requested.is_set():
                return self
            if time.monotonic() >= deadline:
                raise TimeoutError(f"caches did not sync within {s.cache_sync_timeout:.0f}s")
            time.sleep(0.05)
        log.info("caches synced")
        with self._stop_lock:
            if self._stop_requested.is_set():
                return self
            self._start_work()
        return self

    def _start_caches_and_endpoints(self) -> None:
        s = self.settings
        self.caches.start()
        if s.metrics_address:
            secure = s.metrics_secure
            self._servers.append(
                EndpointServer(
                    s.metrics_address,
                    registry=self.metrics.registry,
                    ready=None,
                    tls=ServingCertificate(s.metrics_cert_dir) if secure else None,
                    authorize=MetricsAuthorizer(self.rest) if secure else None,
                ).start()
            )
        if s.health_address:
            self._servers.append(
                EndpointServer(s.health_address, registry=None, ready=self.readiness).start()
            )

    def _start_work(self) -> None:
        """Leader election, or the workers at once without it."""
        s = self.settings
        if s.leader_election:
            host = self.api_client.configuration.host
            election = start_election(
                s,
                lease_rest=self._metered_rest(self.api_client, host),
                rest=self.rest,
                registry=self.registry,
                ownership=self.ownership,
                metrics=self.metrics,
                hooks=ElectionHooks(
                    leading=self._start_workers,
                    lost=self._on_lost_leadership,
                    bucket_acquired=self._on_bucket_acquired,
                    bucket_given_up=self._on_bucket_given_up,
                ),
            )
            self.elector, self._lease_rest = election.elector, election.lease_rest
            if self.ownership.bucketed:  # the workers take only keys of the buckets held
                self._start_workers()
        else:
            self._start_workers()

    def _metered_rest(self, api: ApiClient, host: str) -> Rest:
        """A Rest whose requests count in ``rest_client_requests_total`` and are timed in
        ``rest_client_request_duration_seconds``, labelled ``host``."""
        metrics = self.metrics
        return Rest(
            api,
            observer=metrics.request_observer(host),
            timer=metrics.request_timer(host),
            curl=self.settings.http_transport == "libcurl",
        )

    def _start_workers(self) -> None:
        if self._stop_requested.is_set():
            return
        self.leading.set()
        if not self.ownership.bucketed:
            self.metrics.leader.labels(self.settings.lease_name).set(1)
        for kind in MPE_KINDS:
            for obj in self.caches.informers[kind].list():
                self.mpe_queue.add(mpe_key_string(key_of({**obj, "kind": kind})))
        for key in self.caches.informers[c.KIND_TASK].cached_keys():
            self._add_task(key)
        for key in self.workflow_watch.cached_keys():
            self._add_workflow(key)
        # Task workers start at once: a Task whose MPE client is still being set up waits for
        # it quietly and is woken by the MPE reconcile (taskfsm.controllers.clusters.waiters),
        # not by a timeout. The MPE worker runs whatever --controllers says: the Tasks need the
        # clients.
        self._spawn_workers(self._mpe_worker, MPE_CONTROLLER, "mpe-worker", 1)
        enabled = self.settings.controllers
        if "task" in enabled:
            self._spawn_workers(self._task_worker, CONTROLLER, "task-worker", self.settings.workers)
            self._spawn(self._orphan_sweeper, "orphan-sweeper")
        if "workflow" in enabled:
            self._spawn_workers(self._workflow_worker, WORKFLOW_CONTROLLER, "workflow-worker", 1)

    def _spawn_workers(
        self, target: Callable[[], None], controller: str, name: str, count: int
    ) -> None:
        """Start ``count`` workers of ``controller`` (threads ``<name>-<i>``) and publish their
        number (``controller_runtime_max_concurrent_reconciles``)."""
        self.metrics.controller_series(controller, count)
        for i in range(count):
            self._spawn(target, f"{name}-{i}")

    # -- ownership -------------------------------------------------------------------------------

    def _add_task(self, key: str) -> None:
        """Queue a Task key, if this replica runs the Task controller and works on the key."""
        if "task" in self.settings.controllers and self.ownership.claims(key):
            self.queue.add(key)

    def _add_workflow(self, key: str) -> None:
        if "workflow" in self.settings.controllers and self.ownership.claims(key):
            self.workflow_queue.add(key)

    def _add_workflow_soon(self, key: str) -> None:
        if "workflow" in self.settings.controllers and self.ownership.claims(key):
            self.workflow_queue.add_after(key, WORKFLOW_COALESCE_SECONDS)

    def _manages_mpe_status(self) -> bool:
        """Whether this replica writes the MPEs' finalizer and status (with buckets: the holder
        of bucket 0); every replica keeps the MPE clients its Tasks need."""
        return "mpe" in self.settings.controllers and self.ownership.holds(MPE_BUCKET)

    def _remember_mpe(self, mpe: dict[str, Any]) -> None:
        """An MPE as its status write left it, for the next pass (``caches.get``)."""
        meta, res = mpe["metadata"], BY_KIND.get(mpe.get("kind") or "")
        if res is not None:
            key = ("main", res.plural, meta.get("namespace") or "", meta["name"])
            self.caches.written.wrote(key, mpe)

    def _mpe_bucket(self, _key: str) -> int | None:
        return MPE_BUCKET if self.ownership.bucketed else None

    def _on_bucket_acquired(self, bucket: int) -> None:
        """A bucket became this replica's: its metrics, and every cached key of it queued (the
        previous holder may have left any of them half done)."""
        self.metrics.bucket_handovers.labels("acquired").inc()
        self.metrics.leader.labels(bucket_lease_name(bucket, self.settings.buckets)).set(1)
        for key in self.caches.informers[c.KIND_TASK].cached_keys():
            if self.ownership.bucket(key) == bucket:
                self._add_task(key)
        for key in self.workflow_watch.cached_keys():
            if self.ownership.bucket(key) == bucket:
                self._add_workflow(key)
        if bucket == MPE_BUCKET:
            for kind in MPE_KINDS:
                for obj in self.caches.informers[kind].list():
                    self.mpe_queue.add(mpe_key_string(key_of({**obj, "kind": kind})))

    def _on_bucket_given_up(self, bucket: int, event: str) -> None:
        """Released or lost: its keys are dropped by the workers as they come up."""
        self.metrics.bucket_handovers.labels(event).inc()
        self.metrics.leader.labels(bucket_lease_name(bucket, self.settings.buckets)).set(0)

    def _orphan_sweeper(self) -> None:
        """Look for Jobs and Secrets of Tasks that are gone, every ``orphan_sweep_seconds``."""
        while not self._stop_requested.wait(self.settings.orphan_sweep_seconds):
            try:
                self.orphans.sweep()
            except Exception:  # never let the sweeper die; the next period tries again
                log.exception("orphan sweep failed")

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
        self.workflow_queue.shutdown()

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
            busy = [
                t.name
                for t in self._threads
                if t.is_alive() and t is not threading.current_thread()
            ]
            if busy:
                log.warning(
                    "shutdown timeout: abandoning in-flight reconciles", extra={"workers": busy}
                )
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

    def readiness(self) -> str:
        """ "" when ready; else why not (``/readyz``)."""
        if not self.caches.synced():
            return "caches not synced"
        unhealthy = [name for name, ok in self.caches.healthy() if not ok]
        if unhealthy:
            return f"watches failing: {', '.join(unhealthy)}"
        if not self.registry.healthy():
            return "a MediaProcessingEntity Job watch is failing"
        denied = {**self.rest.denied(), **(self._lease_rest.denied() if self._lease_rest else {})}
        if denied:
            # A permission the controller needs is missing (the RBAC was changed or is older
            # than this version): say which, instead of failing quietly (docs/install.md).
            missing = ", ".join(f"{verb} {resource}" for verb, resource in sorted(denied))
            return f"permissions missing: {missing}"
        return ""

    # -- workers ---------------------------------------------------------------------------------

    def _run(self, worker: workers.Worker) -> None:
        workers.run(
            worker,
            ownership=self.ownership,
            metrics=self.metrics,
            stop=self._stop_requested,
            api_error_max_backoff=self.settings.api_error_max_backoff,
        )

    def _task_worker(self) -> None:
        self._run(
            workers.Worker(self.queue, self.reconciler.reconcile, CONTROLLER, self.ownership.bucket)
        )

    def _workflow_worker(self) -> None:
        self._run(
            workers.Worker(
                self.workflow_queue,
                self.workflow_reconciler.reconcile,
                WORKFLOW_CONTROLLER,
                self.ownership.bucket,
            )
        )

    def _mpe_worker(self) -> None:
        # Every replica reconciles every MPE (its clients); only bucket 0's holder writes.
        self._run(
            workers.Worker(
                self.mpe_queue, self._reconcile_mpe, MPE_CONTROLLER, self._mpe_bucket, False
            )
        )

    def _reconcile_mpe(self, text_key: str) -> Result:
        """The MPE reconcile, then wake the Tasks waiting for that MPE's client: it is ready,
        failed or gone now, and each of them decides again (controllers.clusters.waiters)."""
        try:
            return self.mpe_reconciler.reconcile(text_key)
        finally:
            self.waiters.wake(parse_mpe_key(text_key))

    # -- between the controllers -----------------------------------------------------------------

    def _wait_for_mpe(self, mpe: MpeKey, task: str) -> bool:
        """Register Task ``task`` as waiting for ``mpe``'s client; False when it is no longer
        being set up (ready, failed, released or gone meanwhile: the Task decides again now).
        Registering first and checking second leaves no gap in which a wake-up could be
        missed: the MPE reconcile that wakes waiters runs after the registry and the cache
        changed, so a wake-up that came before the registration shows here. (A gone MPE is
        unknown to the registry, which is why the cache is asked too.)"""
        self.waiters.add(mpe, task)
        kind, namespace, name = mpe
        listed = self.caches.get(kind, namespace or None, name) is not None
        if listed and self.registry.pending(ref_of_key(mpe)):
            return True
        self.waiters.discard(mpe, task)
        return False

    def _recheck_mpe(self, mpe: MpeKey) -> None:
        """A Task's read was refused by ``mpe``'s cluster: its reconcile says so on its Ready
        condition now rather than at its next resync."""
        self.mpe_queue.add(mpe_key_string(mpe))

    # -- event handlers (informer threads) -------------------------------------------------------

    def _wire_handlers(self) -> None:
        inf = self.caches.informers
        for informer in inf.values():
            # A watch that is back after an outage: what failed meanwhile is retried now,
            # not when its backoff ends.
            informer.add_health_handler(self._on_watch_health)
        if "task" in self.settings.controllers:
            self.task_watch.register()
        if "workflow" in self.settings.controllers:
            self.workflow_watch.register()
        for kind in MPE_KINDS:
            inf[kind].add_handler(self._mpe_handler(kind))

    def _mpe_handler(self, kind: str) -> EventHandler:
        """The handler of ``kind``'s informer (an MPE or a ClusterMPE): queue the object's key."""

        def handler(_event: str, obj: dict[str, Any]) -> None:
            self.mpe_queue.add(mpe_key_string(key_of({**obj, "kind": kind})))

        return handler

    def _on_watch_health(self, healthy: bool) -> None:
        if healthy:
            self.queue.retry_failed_now()
            self.workflow_queue.retry_failed_now()

    def _mpe_ready(self, key: MpeKey) -> None:
        """An MPE became usable: its Tasks go on, and its cluster is searched for orphans."""
        self.task_watch.requeue_tasks_of(key)
        cluster = self.registry.get(ref_of_key(key))
        if cluster is not None:  # its Job watch has (re)synced: children of gone Tasks go now
            self.orphans.sweep([cluster])

    # -- metrics ---------------------------------------------------------------------------------

    def _queue_metrics(self, name: str) -> QueueMetrics:
        return self.metrics.queue(name)

    def _tasks_by_phase(self) -> list[tuple[str, float]]:
        counts: dict[str, float] = dict.fromkeys(["", *(p.value for p in c.TaskPhase)], 0.0)
        counts.update(self.task_index.by_phase())  # an index: no cached Task is read
        return sorted(counts.items())

    def _watch_health(self) -> list[tuple[str, float]]:
        watches = [(cl.jobs.name, cl.remote, cl.healthy) for cl in self.registry.clusters()]
        named = self.settings.metrics_tenant_labels
        return self.caches.healthy() + job_watch_health(watches, named)
