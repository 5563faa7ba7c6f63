"""One MediaProcessingEntity reconcile: the MPE chart (``machines.mpe``) on the MPE's ports.

The pipeline is the Task controller's (docs/architecture.md): **read** the MPE from the cache,
what this process holds of its client (:mod:`taskfsm.controllers.clusters`) and the Tasks whose
status names it; **observe** that into an ``MpeObservation`` (pure); the **pass** decides
(finalizer, connect, Ready with its reason, waiting for Tasks, keeping the last client, giving
up after the cleanup bound); the **effects** act through :class:`MpeEffects`; **write** the
status (``Ready``/``Failed`` and ``status.message``, only when they change) and the Events the
outcome names; **requeue** as it says.

``Ready`` means usable: it turns False (``Failed`` True, the reason in ``status.message``) while
the MPE's cluster refuses the controller or does not answer, as its Job watch shows
(:meth:`taskfsm.controllers.clusters.registry.MpeRegistry.refusal`), and True again once it
answers. Nothing waits on a cluster: a new client's Job watch makes its first list while the
chart waits (no error, no Event) and its first sync or failure re-queues the MPE, so one cluster
that does not answer never holds the MPE worker (docs/security.md). A deleting MPE keeps -- or,
after a restart, builds -- its client until its Tasks are done, so they can finish or clean up
their Jobs (docs/operations.md, "MediaProcessingEntity clusters and credentials").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from machines.conditions import Condition, bounded_message
from machines.mpe.driver import MPE_ENGINE, MpeReconcileOutcome
from machines.mpe.observation import MpeObservation
from taskfsm.api import constants as c
from taskfsm.controllers.clusters.cluster import MpeCluster, MpeError, MpeKey, ref_of_key
from taskfsm.controllers.clusters.registry import MpeRegistry
from taskfsm.controllers.mpe.effects import MpeEffects, MpePorts, MpeReads, ShuttingDown
from taskfsm.controllers.result import (
    Result,
    api_failure,
    is_conflict,
    is_transient,
    retry_after_of,
)
from taskfsm.controllers.writes import patch_status, write_failed
from taskfsm.kube.errors import KubeError
from taskfsm.kube.events import EventRecorder
from taskfsm.kube.resources import BY_KIND
from taskfsm.kube.rest import Rest

log = logging.getLogger(__name__)


def mpe_key_string(key: MpeKey) -> str:
    return "/".join(key)


def parse_mpe_key(text: str) -> MpeKey:
    kind, namespace, name = text.split("/", 2)
    return (kind, namespace, name)


class MpeReconciler:
    """Reconciles MediaProcessingEntities and ClusterMediaProcessingEntities.

    Args:
        rest: the main cluster (the MPE's finalizer and status).
        registry: the MPE clients.
        events: where Events go.
        get: cached lookup ``(kind, namespace, name) -> object | None``.
        tasks_using: how many Tasks' ``status.mediaProcessingEntityRef`` names the MPE, and those
            of them not finished or still naming a Job (read one at a time).
        on_ready: called with the MPE key whenever it (re)becomes usable, to requeue waiting Tasks.
        collect_orphans: deletes the children of gone Tasks in one of the MPE's clusters.
        resync_seconds: how often a live MPE is looked at again without events.
        cleanup_timeout: ``--cleanup-timeout``.
        remember: keeps an MPE this process wrote (or found newer on a 409) for ``get`` to return
            until the cache has caught up.
        manages_status: asked at the start of every reconcile; False while another replica (the
            holder of bucket 0 with ``--buckets``) or nobody (``--controllers`` without ``mpe``)
            writes the MPE's finalizer and status: this replica then only keeps the MPE's
            cluster client for its own Tasks (docs/operations.md, "Running several replicas").
    """

    def __init__(
        self,
        *,
        rest: Rest,
        registry: MpeRegistry,
        events: EventRecorder,
        get: Callable[[str, str | None, str], dict[str, Any] | None],
        tasks_using: Callable[[MpeKey], tuple[int, Iterable[dict[str, Any]]]],
        on_ready: Callable[[MpeKey], None],
        collect_orphans: Callable[[MpeCluster], None],
        resync_seconds: float,
        cleanup_timeout: float,
        manages_status: Callable[[], bool] = lambda: True,
        remember: Callable[[dict[str, Any]], None] = lambda _written: None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.rest = rest
        self.remember = remember
        self.manages_status = manages_status
        self.registry = registry
        self.events = events
        self.get = get
        self.tasks_using = tasks_using
        self.resync_seconds = resync_seconds
        self.cleanup_timeout = cleanup_timeout
        self.clock = clock
        self.ports = MpePorts(rest, registry, tasks_using, on_ready, collect_orphans, remember)

    def reconcile(self, text_key: str) -> Result:
        key = parse_mpe_key(text_key)
        kind, namespace, name = key
        cached = self.get(kind, namespace or None, name)
        mpe = None if cached is None else {**cached, "kind": kind}
        effects = MpeEffects(self.ports, key, mpe)

        def observe() -> MpeObservation:
            # The effects act on what this pass read, the observation's source.
            effects.reads = self.read(key, mpe)
            return self.observe(effects.reads)

        outcome = MPE_ENGINE.reconcile(
            observe, effects, now=self.clock(), apply=lambda _outcome: None
        )
        error = outcome.error
        if error is not None and isinstance(error.exception, ShuttingDown):
            return Result()  # say nothing about the MPE
        mpe = effects.mpe  # with the version a metadata write of the pass answered
        written: KubeError | None = None
        if mpe is not None and not outcome.finalized:
            written = self._write_status(mpe, outcome)
        for note in outcome.events:
            if mpe is not None:
                self.events.record(mpe, note.type, note.reason, note.note)
        if error is None and written is not None:
            # The verdict did not land: retried like any failed write (a 409 means the pass read
            # a view that is no longer current; the retry reads again).
            return write_failed(written, "status write failed", events=self.events, obj=mpe)
        if error is not None:
            failure = (
                None if isinstance(error.exception, MpeError) else api_failure(error.exception)
            )
            if failure is None:
                return Result(error=outcome.message)
            if is_conflict(failure):  # the finalizer's write found a newer version: quietly again
                return write_failed(failure, "MediaProcessingEntity write failed")
            log.warning("MediaProcessingEntity reconcile failed", extra={"error": str(error)})
            return Result(
                error=outcome.message,
                transient=is_transient(failure),
                retry_after=retry_after_of(failure),
            )
        return Result.after(outcome.last.requeue_after)

    def read(self, key: MpeKey, mpe: dict[str, Any] | None) -> MpeReads:
        """What the MPE's chart decides from: the MPE (from the cache), the Tasks whose status
        names it, where their Jobs are, and what this process holds of its clients."""
        reads = MpeReads(key=key, mpe=mpe, manages_status=self.manages_status())
        if mpe is None:
            return reads
        ref = ref_of_key(key)
        reads.tasks_using, needing = self.tasks_using(key)
        job_refs: list[dict[str, Any]] = []
        for task in needing:  # one at a time: there may be very many
            status = task.get("status") or {}
            job_ref = status.get("jobRef") or {}
            reads.jobs_recorded = reads.jobs_recorded or bool(job_ref)
            if status.get("phase") not in c.TASK_TERMINAL_PHASES:
                reads.tasks_active += 1
            elif job_ref:
                holder = self.registry.job_cluster(ref, job_ref)
                # A cluster whose client is not set up yet cannot tell: the Job may be there.
                if holder is None or holder.cached_job(job_ref) is not None:
                    reads.jobs_kept += 1
            if job_ref:
                job_refs.append(job_ref)
        retired = self.registry.retired(key)
        reads.retired_locations = len(retired)
        reads.retired_unused = [
            cl for cl in retired if all(cl.cached_job(job_ref) is None for job_ref in job_refs)
        ]
        return reads

    def observe(self, reads: MpeReads) -> MpeObservation:
        """Condense ``reads`` into the chart's observation (pure)."""
        mpe = reads.mpe
        if mpe is None:
            return MpeObservation(exists=False, manages_status=reads.manages_status)
        meta = mpe["metadata"]
        key = reads.key
        ref = ref_of_key(key)
        conditions = tuple(
            Condition.from_dict(d) for d in (mpe.get("status") or {}).get("conditions") or []
        )
        ready = next((cond.status for cond in conditions if cond.type == "Ready"), "")
        return MpeObservation(
            exists=True,
            deletion_requested=bool(meta.get("deletionTimestamp")),
            has_finalizer=c.FINALIZER_MPE_PROTECTION in (meta.get("finalizers") or []),
            manages_status=reads.manages_status,
            ready_condition=ready,
            client_ready=self.registry.get(ref) is not None,
            tasks_using=reads.tasks_using,
            tasks_active=reads.tasks_active,
            jobs_kept=reads.jobs_kept,
            retired_locations=reads.retired_locations,
            retired_locations_unused=len(reads.retired_unused),
            never_reached=self.registry.never_reached(mpe, jobs_recorded=reads.jobs_recorded),
            unbuildable=self.registry.unbuildable(key),
            unreachable_seconds=self.registry.unreachable_for(ref),
            cleanup_timeout=self.cleanup_timeout,
            resync_seconds=self.resync_seconds,
            conditions=conditions,
        )

    def _write_status(self, mpe: dict[str, Any], outcome: MpeReconcileOutcome) -> KubeError | None:
        """Patch ``status.conditions`` and ``status.message`` when the pass's verdict changed
        them (a pass without a verdict on the MPE writes nothing), at the resourceVersion the
        pass read (taskfsm/controllers/writes.py); returns the error of a write that did
        not land."""
        detail = outcome.last.detail
        if detail is None:
            return None
        status = mpe.get("status") or {}
        conditions = [cond.to_dict() for cond in outcome.last.conditions]
        message = bounded_message(detail.message)  # a remote cluster's error may be long
        if (
            conditions == (status.get("conditions") or [])
            and (status.get("message") or "") == message
        ):
            return None
        try:
            patch_status(
                self.rest,
                BY_KIND[mpe["kind"]],
                mpe["metadata"],
                {"conditions": conditions, "message": message},
                remember=self.remember,  # the next pass reads it, not a lagging cache
                # MPEs are listed and watched, never read one by one (the RBAC has no get).
                reread_on_conflict=False,
            )
        except KubeError as exc:
            log.warning("could not update MediaProcessingEntity status", extra={"error": str(exc)})
            return exc
        return None
