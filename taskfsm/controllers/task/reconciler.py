"""One Task reconcile: key in, :class:`Result` out, level-triggered. The pipeline:

1. **read** the Task (:class:`~taskfsm.controllers.task.store.TaskStore`: cache, or this
   process's newer write, or a fresh GET when neither is known), after collecting the children
   of earlier Tasks of this key that are gone (:mod:`taskfsm.controllers.task.orphans`);
2. **read** the pass's world (:mod:`taskfsm.controllers.task.read`: Workflow, MPE and its
   client, the Job) and **observe** it (:mod:`taskfsm.controllers.task.observe`, pure) into a
   ``TaskObservation``;
3. **pass**: the Task chart decides (``machines.task.driver.reconcile``): the engine takes passes
   while they move the phase forward, re-reading and re-observing before each, and stops where
   the chart ends the reconcile, waits, fails or finishes;
4. **effects** of each pass act through the ports (:mod:`taskfsm.controllers.task.effects`),
   collecting one metadata and status patch;
5. **write** the patch and the Events the outcome names (:mod:`taskfsm.controllers.task.write`);
6. **requeue** as the outcome says (:meth:`TaskReconciler._requeue`): after an error with
   backoff, at once for the housekeeping after a terminal phase, when the MPE's client is set
   up for a Task waiting for it, after the resync period while the Job may still change.

One Task's exception never escapes (D23): it becomes ``status.message`` and a retry with backoff.
Spec: docs/behaviour.md §3.2; docs/architecture.md draws the route.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from machines.task.driver import WAIT_MPE_CLIENT, WAKE_MPE, TaskReconcileOutcome, reconcile
from taskfsm import defaults
from taskfsm.api.timestamps import parse_time
from taskfsm.controllers.clusters.cluster import MpeKey, key_of_ref
from taskfsm.controllers.clusters.registry import MpeRegistry
from taskfsm.controllers.result import Result, internal_error, is_transient
from taskfsm.controllers.task.effects import TaskEffects
from taskfsm.controllers.task.inputs import JobSettings
from taskfsm.controllers.task.jobsite import JobSite
from taskfsm.controllers.task.observe import observe
from taskfsm.controllers.task.orphans import OrphanCollector
from taskfsm.controllers.task.read import TaskReader
from taskfsm.controllers.task.seen_jobs import SeenJobs
from taskfsm.controllers.task.store import TaskStore
from taskfsm.controllers.task.working_copy import WorkingCopy
from taskfsm.controllers.task.write import TaskWriter, Written
from taskfsm.kube.cache import Caches
from taskfsm.kube.errors import KubeError
from taskfsm.kube.events import EventRecorder
from taskfsm.kube.rest import Rest

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MpeSignals:
    """How a Task reconcile talks to the MediaProcessingEntity controller, through the manager.

    Attributes:
        wait: registers a Task key as waiting for an MPE's client (the MPE's reconcile wakes it)
            and returns whether that client is still being set up (False: look again now).
        recheck: queues an MPE's reconcile now (its cluster refused a Task's read).
    """

    wait: Callable[[MpeKey, str], bool]
    recheck: Callable[[MpeKey], None]


class TaskReconciler:
    """Reconciles Tasks of the main cluster (the pipeline above).

    Args:
        reader: the read step (it holds the Task store and the MPE clients).
        effects: builds the chart's model for one reconcile's working copy.
        writer: the write step.
        signals: waiting for an MPE's client, and asking an MPE's reconcile to look now.
        orphans: deletes the Jobs and Secrets of Tasks that are gone (None: nobody does).
        resync_seconds: how often a Task whose Job may still change is looked at again without
            an event (bounds how long a missed Job event can go unnoticed, F4).
        finished_ttl: ``--finished-ttl`` in seconds: a finished Task whose Workflow does not
            exist is deleted that long after its endTime (None: kept forever).
        clock: wall-clock ``now`` for timestamps (injected by tests).
    """

    def __init__(
        self,
        *,
        reader: TaskReader,
        effects: Callable[[WorkingCopy], TaskEffects],
        writer: TaskWriter,
        signals: MpeSignals,
        orphans: OrphanCollector | None = None,
        resync_seconds: float = defaults.RESYNC_SECONDS,
        finished_ttl: float | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.reader = reader
        self.effects = effects
        self.writer = writer
        self.signals = signals
        self.orphans = orphans
        self.resync_seconds = resync_seconds
        self.finished_ttl = finished_ttl
        self.clock = clock

    @property
    def cleanup_timeout(self) -> float:
        """``--cleanup-timeout`` (the read step counts it)."""
        return self.reader.cleanup_timeout

    @cleanup_timeout.setter
    def cleanup_timeout(self, seconds: float) -> None:
        self.reader.cleanup_timeout = seconds

    def read_task(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Task as this process knows it best (see :meth:`TaskStore.read`)."""
        return self.reader.store.read(namespace, name)

    # -- the reconcile ---------------------------------------------------------------------------

    def reconcile(self, key: str) -> Result:
        """Reconcile the Task ``namespace/name``; never raises (D23)."""
        try:
            return self._reconcile(key)
        except Exception as exc:  # a bug or an API failure outside the machine: retry later
            if is_transient(exc):
                log.warning("reconcile failed", extra={"task": key, "error": str(exc)})
            else:
                log.exception("reconcile failed", extra={"task": key})
            return internal_error(exc)

    def _reconcile(self, key: str) -> Result:
        namespace, name = key.split("/", 1)
        task = self.read_task(namespace, name)
        orphan_error = self._collect_orphans(key, task)
        if task is None:
            return Result(error=orphan_error, transient=True) if orphan_error else Result()
        result = self._reconcile_task(task)
        if orphan_error and not result.error:
            return Result(error=orphan_error, transient=True)
        return result

    def _collect_orphans(self, key: str, task: dict[str, Any] | None) -> str:
        """Delete the children of earlier Tasks of this name; "" or why that failed. Runtime
        mechanics: they belong to no Task the chart could decide about."""
        if self.orphans is None:
            return ""
        try:
            self.orphans.collect(key, task)
        except KubeError as exc:
            return f"failed to delete orphaned Jobs or Secrets of Task {key}: {exc}"
        return ""

    def _reconcile_task(self, task: dict[str, Any]) -> Result:
        work = WorkingCopy.of(task, self.clock())
        effects = self.effects(work)

        def read_and_observe() -> Any:
            work.reads = self.reader.read(work)
            return observe(
                work.reads,
                resync_seconds=self.resync_seconds,
                finished_ttl=self.finished_ttl,
                now=work.now,
            )

        outcome = reconcile(
            read_and_observe, effects, now=work.now, apply=lambda o: self.writer.apply(work, o)
        )
        if outcome.finalized:
            self.reader.seen.forget(work.meta.get("uid") or "")
        written = self.writer.write(work, outcome)
        return self._requeue(work, outcome, written)

    def _requeue(
        self, work: WorkingCopy, outcome: TaskReconcileOutcome, written: Written
    ) -> Result:
        """When to look at the Task again, as the outcome says (and who else must look now)."""
        last = outcome.last
        mpe = key_of_ref((work.reads.mpe_ref if work.reads else None) or {})
        if WAKE_MPE in last.wake and any(mpe):
            self.signals.recheck(mpe)
        if written.conflict:
            return Result(error=written.conflict, transient=True)
        if written.error:
            return Result(
                error=written.error, transient=written.transient, retry_after=written.retry_after
            )
        if outcome.finalized:
            return Result()
        if last.waiting and last.waiting_on == WAIT_MPE_CLIENT:
            # Waiting for something that announces itself: the MPE's reconcile wakes this Task.
            ref = work.status.get("mediaProcessingEntityRef") or {}
            if self.signals.wait(key_of_ref(ref), work.key):
                return Result.after(last.requeue_after)
            return Result.at_once()  # ready or failed meanwhile: decide again now
        return Result.after(last.requeue_after)


def build_reconciler(
    *,
    rest: Rest,
    caches: Caches,
    registry: MpeRegistry,
    events: EventRecorder,
    signals: MpeSignals,
    seen: SeenJobs,
    orphans: OrphanCollector | None,
    job: JobSettings,
    resync_seconds: float,
    cleanup_timeout: float,
    job_pods_refused_timeout: float,
    finished_ttl: float | None = None,
    on_job_created: Callable[[float], None] | None = None,
    phase_events: bool = False,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> TaskReconciler:
    """A :class:`TaskReconciler` on the real ports: the main cluster (``rest``, ``caches``),
    the MPE clusters (``registry``), ``events``; the settings are ``taskfsm run``'s
    (docs/operations.md, "Flags")."""
    store = TaskStore(rest, caches)
    jobsite = JobSite(caches, registry)
    reader = TaskReader(
        store=store,
        caches=caches,
        clusters=registry,
        jobs=jobsite,
        seen=seen,
        clock=clock,
        cleanup_timeout=cleanup_timeout,
        job_pods_refused_timeout=job_pods_refused_timeout,
        job_settings=job,
    )

    def job_made(task: dict[str, Any], made: dict[str, Any]) -> None:
        if on_job_created is None:
            return
        created = parse_time(task["metadata"].get("creationTimestamp"))
        job_created = parse_time(made["metadata"].get("creationTimestamp"))
        if created and job_created:
            on_job_created(max(0.0, (job_created - created).total_seconds()))

    def effects(work: WorkingCopy) -> TaskEffects:
        return TaskEffects(
            work,
            store=store,
            jobs=jobsite,
            catalog=caches,
            seen=seen,
            job_made=job_made,
        )

    return TaskReconciler(
        reader=reader,
        effects=effects,
        writer=TaskWriter(store, events, phase_events=phase_events),
        signals=signals,
        orphans=orphans,
        resync_seconds=resync_seconds,
        finished_ttl=finished_ttl,
        clock=clock,
    )
