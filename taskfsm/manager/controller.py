"""The controller process: watches → work queues → reconcile workers, plus leader election,
metrics, probes and graceful shutdown. ``taskfsm run`` and the demo build one :class:`Controller`.

Data flow (controller-runtime's source → handler → queue → reconcile):

* informers of the main cluster (:class:`taskfsm.kube.cache.Caches`) and one Job informer per
  MediaProcessingEntity namespace (:class:`taskfsm.controllers.mpe.registry.MpeRegistry`) turn
  every event into the key of the Task it concerns (Task events: the Task; Workflow events: its
  Tasks; Job events: the Task named by the Job's labels; Function/TaskTemplate/MediaLocation
  events: the Tasks of that namespace still before Running);
* the Task queue (:class:`taskfsm.manager.queue.WorkQueue`) de-duplicates keys and hands each to
  one of ``workers`` threads running
  :meth:`taskfsm.controllers.task.reconciler.TaskReconciler.reconcile`;
* MediaProcessingEntity events go to their own queue and reconcile
  (:mod:`taskfsm.controllers.mpe.reconciler`); an MPE becoming ready requeues the Tasks waiting
  for it.

Who works on which key (:mod:`taskfsm.manager.ownership`): without leader election, or with the
one Lease, this replica does everything; with ``--buckets`` above 1 only the keys of the bucket
Leases it holds (:mod:`taskfsm.kube.buckets`), each reconcile's writes gated by its key's
bucket. ``--controllers`` leaves out the Task, Workflow or MediaProcessingEntity status
controller (docs/operations.md, "Running several replicas" and "Flags").
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

from taskfsm.api import constants as c
from taskfsm.api.config import NatsConfiguration
from taskfsm.controllers.mpe.reconciler import MpeReconciler, mpe_key_string, parse_mpe_key
from taskfsm.controllers.mpe.registry import MpeKey, MpeRegistry, key_of
from taskfsm.controllers.mpe.waiters import MpeWaiters
from taskfsm.controllers.result import Result
from taskfsm.controllers.task.orphans import OrphanCollector
from taskfsm.controllers.task.reconciler import TaskReconciler
from taskfsm.controllers.task.watch import MPE_KINDS, TaskWatch, task_key
from taskfsm.controllers.workflow.reconciler import CONTROLLER_LABEL as WORKFLOW_CONTROLLER
from taskfsm.controllers.workflow.reconciler import WorkflowReconciler
from taskfsm.controllers.workflow.watch import WorkflowWatch
from taskfsm.kube.buckets import BucketElector, bucket_lease_name
from taskfsm.kube.cache import Caches
from taskfsm.kube.client import ApiClient
from taskfsm.kube.events import EventRecorder
from taskfsm.kube.informer import EventHandler
from taskfsm.kube.kubeconfig import STRICT as STRICT_KUBECONFIGS
from taskfsm.kube.kubeconfig import KubeconfigPolicy
from taskfsm.kube.leader import LeaderElector
from taskfsm.kube.rest import Rest
from taskfsm.manager import logs
from taskfsm.manager.metrics import CONTROLLER, Metrics
from taskfsm.manager.metrics_auth import MetricsAuthorizer
from taskfsm.manager.ownership import MPE_BUCKET, Ownership
from taskfsm.manager.queue import QueueMetrics, ShutDown, WorkQueue
from taskfsm.manager.server import EndpointServer
from taskfsm.manager.serving_cert import ServingCertificate

log = logging.getLogger(__name__)

WORKFLOW_COALESCE_SECONDS = 0.5
"""How long a Task's change waits before it wakes its Workflow, so the changes of many Tasks
make one Workflow reconcile (its counters are at most this much behind)."""

MPE_CONTROLLER = "mediaprocessingentity"
"""The ``controller`` label of the MediaProcessingEntity reconcile's metrics."""

GATE_RECHECK_SECONDS = 0.5
"""With ``--buckets``: how soon a key is taken again whose bucket's write gate was closed while
this replica still held its Lease (its renewal late; taskfsm/kube/buckets.py)."""

CONTROLLERS = ("task", "workflow", "mpe")
"""What ``--controllers`` may name: the Task controller, the Workflow controller and the
MediaProcessingEntity status controller (finalizer, Ready/Failed). Without ``mpe`` the MPE
clients are still built, for the Tasks, but nothing is written to the MPEs."""


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
    """Server-side watch duration (s); a dead connection is noticed within this plus
    ``read_margin``."""
    read_margin: float = 30.0
    watch_max_backoff: float = 30.0
    """Cap (s) on the wait before re-opening a failing watch (jittered to 0.5-1.5 times)."""
    metrics_address: str | None = ":8080"
    """``host:port`` for /metrics; None disables it."""
    health_address: str | None = ":8081"
    """``host:port`` for /healthz and /readyz; None disables them."""
    leader_election: bool = False
    lease_namespace: str = "default"
    lease_name: str = "taskfsm-task-controller"
    identity: str = ""
    lease_duration: float = 15.0
    """Leader election (s): a follower takes a Lease not renewed for this long."""
    renew_deadline: float = 10.0
    """Leader election (s): a leader whose renewal is not answered within this long after the
    previous one gives up (and exits); writes need a renewal sent less than this long ago."""
    retry_period: float = 2.0
    """Leader election (s): pause between renewals and between acquisition attempts."""
    cache_sync_timeout: float = 120.0
    shutdown_timeout: float = 30.0
    """Seconds in-flight reconciles get to finish on shutdown."""
    nats: NatsConfiguration | None = None
    cleanup_timeout: float = 120.0
    """Seconds a deleting Task keeps retrying to clean up its Job in an unreachable
    MediaProcessingEntity before it abandons the Job (Warning Event ``JobAbandoned``)."""
    workflow_termination_waiting: float = 20.0
    """``workflowTerminationWaitingDuration`` (s): how long a Workflow with no active Task waits."""
    job_ttl_seconds: int = 86400
    """``ttlSecondsAfterFinished`` of every Job: how long a finished Job (and its logs) stays."""
    job_pods_refused_timeout: float = 600.0
    """Seconds a Running Task waits while its Job's pods are refused (Pod Security, an
    admission policy, a quota) before it fails with ``JobPodsRefused``; 0 waits for ever."""
    orphan_sweep_seconds: float = 60.0
    """How often Jobs and Secrets of Tasks that are gone are looked for
    (:mod:`taskfsm.controllers.task.orphans`); they are also found on every reconcile of their
    Task's key."""
    api_error_max_backoff: float = 30.0
    """Cap (s) on the retry backoff of reconciles that failed because the API was unreachable
    or refused (other errors back off up to ~16 min)."""
    buckets: int = 1
    """Keys are split into this many buckets, each owned through a Lease of its own
    (``taskfsm-bucket-<i>-of-<B>``), so several replicas work at once; 1: one leader (or none,
    without leader election) does everything. Above 1 needs ``leader_election``."""
    controllers: frozenset[str] = frozenset(CONTROLLERS)
    """Which of :data:`CONTROLLERS` run."""
    metrics_secure: bool = False
    """Serve ``/metrics`` over HTTPS to callers the API server authenticates and authorizes
    (:mod:`taskfsm.manager.metrics_auth`)."""
    metrics_cert_dir: str | None = None
    """``tls.crt`` and ``tls.key`` for the secure metrics endpoint; None: self-signed."""
    kubeconfig_policy: KubeconfigPolicy = STRICT_KUBECONFIGS
    """What ClusterMediaProcessingEntities' kubeconfigs may hold beyond the allow-list of
    :mod:`taskfsm.kube.kubeconfig` (a namespaced MPE's never may: docs/security.md)."""


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
        api_client: ApiClient,
        settings: Settings | None = None,
        *,
        metrics: Metrics | None = None,
        rest_factory: Callable[[ApiClient], Rest] | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.metrics = metrics or Metrics()
        self.api_client = api_client

        def default_factory(api: ApiClient) -> Rest:
            return Rest(api, observer=self.metrics.request_observer(api.configuration.host))

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
        self._check_settings()
        self.ownership = Ownership(self.settings.buckets)
        self.queue = WorkQueue(metrics=self._queue_metrics(CONTROLLER))
        self.mpe_queue = WorkQueue(
            base_delay=0.5, max_delay=60.0, metrics=self._queue_metrics(MPE_CONTROLLER)
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
        self.orphans = OrphanCollector(
            rest=self.rest,
            registry=self.registry,
            events=self.events,
            cached_task=lambda ns, name: self.caches.informers[c.KIND_TASK].get(ns, name),
            enqueue=self._add_task,
            owns=self.ownership.owns,
            scope=self.ownership.scope,
        )
        self.reconciler = TaskReconciler(
            rest=self.rest,
            caches=self.caches,
            mpes=self.registry,
            events=self.events,
            nats=self.settings.nats,
            on_job_created=self.metrics.job_creation_latency.observe,
            resync_seconds=self.settings.resync_seconds,
            cleanup_timeout=self.settings.cleanup_timeout,
            job_ttl_seconds=self.settings.job_ttl_seconds,
            job_pods_refused_timeout=self.settings.job_pods_refused_timeout,
            orphans=self.orphans,
            waiters=self.waiters,
        )
        self.mpe_reconciler = MpeReconciler(
            rest=self.rest,
            registry=self.registry,
            events=self.events,
            get=self.caches.get,
            tasks_using=lambda key: self.task_watch.tasks_using(key),
            on_ready=self._mpe_ready,
            collect_orphans=self.orphans.collect_cluster,
            cleanup_timeout=self.settings.cleanup_timeout,
            manages_status=self._manages_mpe_status,
        )
        self.workflow_queue = WorkQueue(metrics=self._queue_metrics(WORKFLOW_CONTROLLER))
        self.workflow_reconciler = WorkflowReconciler(
            rest=self.rest,
            caches=self.caches,
            events=self.events,
            waiting_seconds=self.settings.workflow_termination_waiting,
            resync_seconds=self.settings.resync_seconds,
        )
        self.task_watch = TaskWatch(self.caches, self._add_task, self.reconciler.forget_jobs_of)
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

    def start(self) -> Controller:
        """Start caches, endpoints and (once leading, or at once without election) the workers.

        Returns early when a stop is requested meanwhile. Raises ``TimeoutError`` when the
        caches do not sync within ``cache_sync_timeout``.
        """
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
        deadline = time.monotonic() + s.cache_sync_timeout
        while not self.caches.synced():
            if self._stop_requested.is_set():
                return self
            if time.monotonic() >= deadline:
                raise TimeoutError(f"caches did not sync within {s.cache_sync_timeout:.0f}s")
            time.sleep(0.05)
        log.info("caches synced")
        if s.leader_election:
            identity = s.identity or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
            host = self.api_client.configuration.host
            # The Lease's own Rest: its writes are the one thing the write gate lets through.
            lease_rest = Rest(self.api_client, observer=self.metrics.request_observer(host))
            self._lease_rest = lease_rest
            if self.ownership.bucketed:
                self.elector = self.ownership.elector = BucketElector(
                    lease_rest,
                    namespace=s.lease_namespace,
                    buckets=s.buckets,
                    identity=identity,
                    on_acquired=self._on_bucket_acquired,
                    on_given_up=self._on_bucket_given_up,
                    lease_duration=s.lease_duration,
                    renew_deadline=s.renew_deadline,
                    retry_period=s.retry_period,
                )
            else:
                self.metrics.leader.labels(s.lease_name).set(0)
                self.elector = LeaderElector(
                    lease_rest,
                    namespace=s.lease_namespace,
                    name=s.lease_name,
                    identity=identity,
                    on_started=self._start_workers,
                    on_stopped=self._on_lost_leadership,
                    lease_duration=s.lease_duration,
                    renew_deadline=s.renew_deadline,
                    retry_period=s.retry_period,
                )
            # The write gate (taskfsm/kube/leader.py): no write of this replica, to the main or any
            # MediaProcessingEntity cluster, is sent unless it can show it holds the Lease (with
            # buckets: the Lease of the bucket of the key it works for, taskfsm/kube/buckets.py).
            guard = self.elector.write_guard
            self.rest.write_guard = guard
            make_rest = self.registry.rest_factory

            def guarded_rest(api: ApiClient) -> Rest:
                rest = make_rest(api)
                rest.write_guard = guard
                return rest

            self.registry.rest_factory = guarded_rest
            self.elector.start()
            if self.ownership.bucketed:  # the workers take only keys of the buckets held
                self._start_workers()
        else:
            self._start_workers()
        return self

    def _check_settings(self) -> None:
        s = self.settings
        unknown = sorted(set(s.controllers) - set(CONTROLLERS))
        if unknown:
            raise ValueError(
                f"unknown controller(s) {', '.join(unknown)}: choose from {', '.join(CONTROLLERS)}"
            )
        if s.buckets < 1:
            raise ValueError(f"buckets must be at least 1, got {s.buckets}")
        if s.buckets > 1 and not s.leader_election:
            raise ValueError("buckets above 1 need leader election (--leader-elect)")

    def _start_workers(self) -> None:
        if self._stop_requested.is_set():
            return
        self.leading.set()
        if not self.ownership.bucketed:
            self.metrics.leader.labels(self.settings.lease_name).set(1)
        for kind in MPE_KINDS:
            for obj in self.caches.informers[kind].list():
                self.mpe_queue.add(mpe_key_string(key_of({**obj, "kind": kind})))
        for task in self.caches.informers[c.KIND_TASK].list():
            self._add_task(task_key(task))
        for key in self.workflow_watch.cached_keys():
            self._add_workflow(key)
        # Task workers start at once: a Task whose MPE client is still being set up waits for
        # it quietly and is woken by the MPE reconcile (taskfsm.controllers.mpe.waiters), not by
        # a timeout. The MPE worker runs whatever --controllers says: the Tasks need the clients.
        self._spawn(self._mpe_worker, "mpe-worker")
        enabled = self.settings.controllers
        if "task" in enabled:
            for i in range(self.settings.workers):
                self._spawn(self._task_worker, f"task-worker-{i}")
            self._spawn(self._orphan_sweeper, "orphan-sweeper")
        if "workflow" in enabled:
            self._spawn(self._workflow_worker, "workflow-worker-0")

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

    def _mpe_bucket(self, _key: str) -> int | None:
        return MPE_BUCKET if self.ownership.bucketed else None

    def _on_bucket_acquired(self, bucket: int) -> None:
        """A bucket became this replica's: its metrics, and every cached key of it queued (the
        previous holder may have left any of them half done)."""
        self.metrics.bucket_handovers.labels("acquired").inc()
        self.metrics.leader.labels(bucket_lease_name(bucket, self.settings.buckets)).set(1)
        for task in self.caches.informers[c.KIND_TASK].list():
            key = task_key(task)
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

    @property
    def endpoint_ports(self) -> list[int]:
        return [server.port for server in self._servers]

    def readiness(self) -> str:
        """ "" when ready; else why not (``/readyz``)."""
        if not self.caches.synced():
            return "caches not synced"
        unhealthy = [name for name, ok in self.caches.healthy() if not ok]
        if unhealthy:
            return f"watches failing: {', '.join(unhealthy)}"
        if not self.registry.healthy():
            return "a MediaProcessingEntity Job watch is failing"
        denied = {**self.rest.denied, **(self._lease_rest.denied if self._lease_rest else {})}
        if denied:
            # A permission the controller needs is missing (the RBAC was changed or is older
            # than this version): say which, instead of failing quietly (docs/install.md).
            missing = ", ".join(f"{verb} {resource}" for verb, resource in sorted(denied))
            return f"permissions missing: {missing}"
        return ""

    # -- workers ---------------------------------------------------------------------------------

    def _task_worker(self) -> None:
        self._work(self.queue, self.reconciler.reconcile, CONTROLLER, self.ownership.bucket)

    def _workflow_worker(self) -> None:
        self._work(
            self.workflow_queue,
            self.workflow_reconciler.reconcile,
            WORKFLOW_CONTROLLER,
            self.ownership.bucket,
        )

    def _mpe_worker(self) -> None:
        # Every replica reconciles every MPE (its clients); only bucket 0's holder writes.
        self._work(
            self.mpe_queue, self._reconcile_mpe, MPE_CONTROLLER, self._mpe_bucket, owned_only=False
        )

    def _reconcile_mpe(self, text_key: str) -> Result:
        """The MPE reconcile, then wake the Tasks waiting for that MPE's client: it is ready,
        failed or gone now, and each of them decides again (taskfsm.controllers.mpe.waiters)."""
        try:
            return self.mpe_reconciler.reconcile(text_key)
        finally:
            self.waiters.wake(parse_mpe_key(text_key))

    def _work(
        self,
        queue: WorkQueue,
        reconcile: Callable[[str], Result],
        controller: str,
        bucket_of_key: Callable[[str], int | None],
        *,
        owned_only: bool = True,
    ) -> None:
        """One worker: take a key, reconcile it, record the metrics, requeue as the result says.

        ``bucket_of_key``: the bucket whose Lease gates the reconcile's writes (None: the one
        Lease, or none); with ``owned_only`` a key whose bucket this replica does not hold
        (any more) is dropped unreconciled: its holder works on it."""
        m = self.metrics
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
            bucket = bucket_of_key(key)
            if owned_only and not self.ownership.holds(bucket):
                queue.forget(key)
                queue.done(key)
                if self.ownership.leads(bucket):  # a renewal is late: the gate may reopen
                    queue.add_after(key, GATE_RECHECK_SECONDS)
                continue
            m.active_workers.labels(controller).inc()
            logs.bind(key=key, reconcile_id=uuid.uuid4().hex[:12])
            if bucket is not None:
                logs.bind(bucket=bucket)
            log.debug("reconcile", extra={"controller": controller})
            started = time.monotonic()
            try:
                with self.ownership.scope_bucket(bucket):
                    result = reconcile(key)
                m.reconcile_time.labels(controller).observe(time.monotonic() - started)
                outcome = (
                    "error"
                    if result.error
                    else ("requeue_after" if result.requeue_after else "success")
                )
                m.reconcile_total.labels(controller, outcome).inc()
                if result.error:
                    m.reconcile_errors.labels(controller).inc()
                if result.error:
                    cap = self.settings.api_error_max_backoff if result.transient else None
                    queue.add_rate_limited(key, max_delay=cap, min_delay=result.retry_after)
                else:
                    queue.forget(key)
                    if result.requeue_after:
                        queue.add_after(key, result.requeue_after)
            finally:
                logs.clear()
                m.active_workers.labels(controller).dec()
                queue.done(key)

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
        kind, namespace, name = key
        cluster = self.registry.get({"kind": kind, "namespace": namespace, "name": name})
        if cluster is not None:  # its Job watch has (re)synced: children of gone Tasks go now
            self.orphans.sweep([cluster])

    # -- metrics ---------------------------------------------------------------------------------

    def _queue_metrics(self, name: str) -> QueueMetrics:
        return self.metrics.queue(name)

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


def default_identity() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"
