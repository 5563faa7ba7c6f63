"""One Task reconcile: key in, :class:`Result` out, level-triggered.

Flow of :meth:`TaskReconciler.reconcile` (docs/behaviour.md §3.2-§3.4):

1. read the Task (cache, or our own newer write, or a fresh GET when neither is known);
2. read what its lifecycle depends on: the Workflow, the MediaProcessingEntity cluster, the Job
   under the Task's deterministic name, into a ``machines.task.observation.TaskObservation``;
3. run the statechart (``machines.task.driver.run_pass``) with
   :class:`~taskfsm.controllers.task.effects.TaskEffects`;
   while a step moves the phase forward without error, observe again and take the next step, so a
   new Task usually reaches Running in one reconcile (fewer passes, fewer writes);
4. write metadata (at most one merge patch) and status (one merge patch on ``/status``), both
   with the resourceVersion the pass read (a 409 means re-read, F7), record Events, decide the
   requeue.

One Task's exception never escapes (D23): it becomes ``status.message`` and a retry with backoff.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from machines.conditions import Condition
from machines.task.conditions import JOB_PODS_REFUSED, JOB_SUSPENDED
from machines.task.driver import TaskPassOutcome, run_pass
from machines.task.job_status import interpret_job_conditions
from machines.task.observation import JobState, TaskObservation, WorkflowState
from taskfsm.api import constants as c
from taskfsm.build import jobs, selection
from taskfsm.controllers.mpe.registry import key_of_ref
from taskfsm.controllers.result import (
    Result,
    is_conflict,
    is_transient,
    retry_after_of,
)
from taskfsm.controllers.status_write import patch_status
from taskfsm.controllers.task.effects import PassState, TaskEffects
from taskfsm.kube import wire
from taskfsm.kube.errors import Forbidden, KubeError, NotFound
from taskfsm.kube.events import NORMAL, WARNING, EventRecorder
from taskfsm.kube.resources import TASKS, WORKFLOWS
from taskfsm.kube.rest import CORE_EVENTS, JOBS, Rest
from taskfsm.kube.transforms import default_transform, job_transform

if TYPE_CHECKING:
    from taskfsm.api.config import NatsConfiguration
    from taskfsm.controllers.mpe.registry import MpeCluster, MpeRegistry
    from taskfsm.controllers.mpe.waiters import MpeWaiters
    from taskfsm.controllers.task.orphans import OrphanCollector
    from taskfsm.kube.cache import Caches

log = logging.getLogger(__name__)

MAX_STEPS = 8
"""Steps per reconcile; the longest forward path (new → Running → terminal cleanup) needs 5."""

POD_GRACE_SECONDS = 5.0
"""A Job younger than this without pods is not asked about (its pods are still being made)."""
REFUSAL_MESSAGE_MAX = 512
"""Longest refusal message copied from an Event into the Task's condition."""


class TaskReconciler:
    """Reconciles Tasks of the main cluster.

    Args:
        rest: the main cluster.
        caches: informer caches and read-your-writes (:class:`taskfsm.kube.cache.Caches`).
        mpes: the MediaProcessingEntity registry.
        events: where Events go.
        nats: the process configuration's NATS settings, copied into every payload.
        on_job_created: called with the seconds from a Task's creation to its Job's (a metric).
        resync_seconds: how often a Task whose Job may still change is looked at again without an
            event (bounds how long a missed Job event can go unnoticed, F4).
        cleanup_timeout: seconds a deleting Task waits for its MediaProcessingEntity to answer
            again, counted while it does not (not from the deletionTimestamp); afterwards the
            Job is abandoned (Warning Event) and the Task goes (§3.10, D22).
        job_ttl_seconds: the Jobs' ``ttlSecondsAfterFinished`` (§1.13).
        job_pods_refused_timeout: seconds a Running Task waits while its Job's pods are refused
            (Pod Security, an admission policy, a quota) before it fails with
            ``JobPodsRefused``; 0 waits for ever.
        orphans: deletes the Jobs and Secrets of Tasks that are gone
            (:mod:`taskfsm.controllers.task.orphans`).
        waiters: Tasks waiting for an MPE client being set up
            (:mod:`taskfsm.controllers.mpe.waiters`).
        clock: wall-clock ``now`` for timestamps (injected by tests).
    """

    def __init__(
        self,
        *,
        rest: Rest,
        caches: Caches,
        mpes: MpeRegistry,
        events: EventRecorder,
        nats: NatsConfiguration | None = None,
        on_job_created: Callable[[float], None] | None = None,
        resync_seconds: float = 300.0,
        cleanup_timeout: float = 120.0,
        job_ttl_seconds: int = c.JOB_TTL_SECONDS_AFTER_FINISHED,
        job_pods_refused_timeout: float = 600.0,
        orphans: OrphanCollector | None = None,
        waiters: MpeWaiters | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.rest = rest
        self.caches = caches
        self.mpes = mpes
        self.events = events
        self.nats = nats
        self.on_job_created = on_job_created
        self.resync_seconds = resync_seconds
        self.cleanup_timeout = cleanup_timeout
        self.job_ttl_seconds = job_ttl_seconds
        self.job_pods_refused_timeout = job_pods_refused_timeout
        self.orphans = orphans
        self.waiters = waiters
        self.clock = clock
        self._jobs_seen: dict[str, set[str]] = {}
        """Task UID -> names of the Jobs this process saw for it (created, or read): evidence
        that a Job now missing was lost rather than never made (D18b). Like a cache, it is what
        the process observed; it goes when the Task goes."""
        self._seen_lock = threading.Lock()
        self._pruned_status: set[str] = set()
        """Top-level status fields the API server dropped from our writes: the installed CRD
        has no such field (an upstream CRD without ``observedGeneration``), so they are neither
        written nor compared any more."""

    # -- read-your-writes ------------------------------------------------------------------------

    def remember_task(self, task: dict[str, Any]) -> None:
        meta = task["metadata"]
        # Kept as the cache would keep it (no managedFields, strings shared): what a reader gets
        # is the same either way, and a copy may live until the watch delivers that version.
        self.caches.written.wrote(
            ("main", TASKS.plural, meta["namespace"], meta["name"]), default_transform(task)
        )

    def forget_task(self, task: dict[str, Any]) -> None:
        """The Task is deleted (our write removed its last finalizer)."""
        meta = task["metadata"]
        self.caches.written.gone(("main", TASKS.plural, meta["namespace"], meta["name"]))

    def remember_job(
        self, cluster: MpeCluster, job: dict[str, Any], *, known: bool = False
    ) -> None:
        """Read-your-writes for a Job we wrote; ``known``: the reconcile that wrote it needs no
        watch event for this version (the Job event predicate drops it)."""
        meta = job["metadata"]
        self.caches.written.wrote(
            (cluster.cluster_id, JOBS.plural, meta["namespace"], meta["name"]), job_transform(job)
        )
        if known:
            self.mpes.note_own_job(cluster, job)

    def saw_job(self, task_uid: str, job_name: str) -> None:
        with self._seen_lock:
            self._jobs_seen.setdefault(task_uid, set()).add(job_name)

    def job_was_seen(self, task_uid: str, job_name: str) -> bool:
        with self._seen_lock:
            return job_name in self._jobs_seen.get(task_uid, ())

    def forget_jobs_of(self, task_uid: str) -> None:
        with self._seen_lock:
            self._jobs_seen.pop(task_uid, None)

    def observe_job_created(self, task: dict[str, Any], job: dict[str, Any]) -> None:
        self.saw_job(task["metadata"]["uid"], job["metadata"]["name"])
        if self.on_job_created is None:
            return
        created = _parse_time(task["metadata"].get("creationTimestamp"))
        job_created = _parse_time(job["metadata"].get("creationTimestamp"))
        if created and job_created:
            self.on_job_created(max(0.0, (job_created - created).total_seconds()))

    def read_task(self, namespace: str, name: str) -> dict[str, Any] | None:
        key = ("main", TASKS.plural, namespace, name)
        cached = self.caches.informers[c.KIND_TASK].get(namespace, name)
        picked = self.caches.written.pick(key, cached)
        if picked is not None:
            return copy.deepcopy(picked)
        if self.caches.written.deleted(key):
            return None  # seen deleted, nothing since: a new Task of that name is an event away
        try:  # not in the cache: ask the source (kept as the cache keeps it, cut if too deep)
            return default_transform(self.rest.get(TASKS, namespace, name))
        except NotFound:
            return None

    # -- the reconcile ---------------------------------------------------------------------------

    def reconcile(self, key: str) -> Result:
        """Reconcile the Task ``namespace/name``; never raises (D23)."""
        try:
            result = self._reconcile(key)
        except Exception as exc:  # a bug or an API failure outside the machine: retry later
            if is_transient(exc):
                log.warning("reconcile failed", extra={"task": key, "error": str(exc)})
            else:
                log.exception("reconcile failed", extra={"task": key})
            result = Result(
                error=f"internal error: {type(exc).__name__}: {exc}",
                transient=is_transient(exc),
                retry_after=retry_after_of(exc),
            )
        return result

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
        """Delete the children of earlier Tasks of this name; "" or why that failed."""
        if self.orphans is None:
            return ""
        try:
            self.orphans.collect(key, task)
        except KubeError as exc:
            return f"failed to delete orphaned Jobs or Secrets of Task {key}: {exc}"
        return ""

    def _reconcile_task(self, task: dict[str, Any]) -> Result:
        state = PassState(original=copy.deepcopy(task), task=task, now=self.clock())
        effects = TaskEffects(self, state)
        outcome: TaskPassOutcome | None = None
        persisted = (task.get("status") or {}).get("phase") or ""
        state.path.append(persisted)
        for _ in range(MAX_STEPS):
            before = state.path[-1]
            outcome = run_pass(self.observe(state), effects, now=state.now)
            self._apply(state, outcome)
            if outcome.phase and outcome.phase != before:
                state.path.append(outcome.phase)
            # Take every step the chart allows (a new Task usually reaches Running in one
            # reconcile); stop where it ends the reconcile (D9, D18), waits, fails, finishes,
            # or no longer moves the phase.
            if (
                outcome.error
                or outcome.waiting
                or outcome.finalized
                or outcome.end_reconcile
                or outcome.phase == before
            ):
                break
        assert outcome is not None
        if outcome.error is not None and is_conflict(outcome.error.exception):
            # A precondition found a newer version (another writer, a stale cache): nothing of
            # this pass's status may land; the retry starts from a fresh read. No Warning.
            return Result(error=f"conflict: {outcome.message}", transient=True)
        retry_after = retry_after_of(outcome.error.exception if outcome.error else None)
        if outcome.finalized:
            self.forget_jobs_of(state.meta.get("uid") or "")
            self._event_once(
                state, NORMAL, "Deleted", "Task finalizer released; the Task is deleted"
            )
            return Result()
        message = _message(state, outcome)
        error = outcome.error
        transient = error is not None and (error.outside or is_transient(error.exception))
        if state.metadata_dirty:
            # Metadata effects that succeeded before an error (finalizer, owner reference,
            # labels) are kept: a Task stuck on a selection error still belongs to its Workflow.
            try:
                effects.flush_metadata()
            except KubeError as exc:
                if is_conflict(exc):
                    return Result(error=f"conflict: {exc}", transient=True)
                failure = f"failed to update Task metadata: {exc}"
                message = f"[{message}, {failure}]" if message else failure
                transient = True
                retry_after = retry_after or retry_after_of(exc)
        return self._finish(state, outcome, message, transient=transient, retry_after=retry_after)

    # -- waiting for a MediaProcessingEntity -----------------------------------------------------

    def _wait_for_mpe(self, state: PassState) -> bool:
        """Register the Task as waiting for its MPE's client; False when it is no longer being
        set up (ready or failed meanwhile: reconcile again now)."""
        ref = state.status.get("mediaProcessingEntityRef") or {}
        if self.waiters is None:
            return False
        mpe = (ref.get("kind") or "", ref.get("namespace") or "", ref.get("name") or "")
        self.waiters.add(mpe, state.key)
        if self.mpes.pending(ref):
            return True
        self.waiters.discard(mpe, state.key)
        return False

    def _apply(self, state: PassState, outcome: TaskPassOutcome) -> None:
        status = state.status
        generation = state.meta.get("generation")
        if generation is not None:
            status["observedGeneration"] = generation
        if outcome.phase:
            status["phase"] = outcome.phase
        status["conditions"] = [cond.to_dict() for cond in outcome.conditions] or None
        status["message"] = _message(state, outcome)

    def _finish(
        self,
        state: PassState,
        outcome: TaskPassOutcome,
        message: str,
        *,
        transient: bool,
        retry_after: float | None = None,
    ) -> Result:
        state.status["message"] = message
        try:
            self._write_status(state)
        except KubeError as exc:
            if is_conflict(exc):
                return Result(error=f"conflict: {exc}", transient=True)
            # Nothing of this pass's status landed (F3): say so, retry with backoff; the effects
            # already done are idempotent and found done by the next pass.
            failure = f"failed to update Task status: {exc}"
            self.events.record(state.task, WARNING, "ReconcileError", failure)
            return Result(error=failure, transient=True, retry_after=retry_after_of(exc))
        if outcome.waiting and not outcome.error:
            # The chart waits for something that announces itself (an MPE client being set
            # up): no Event, no backoff; the MPE reconcile wakes this Task.
            self._record_events(state, outcome, "")
            if self._wait_for_mpe(state):
                return Result(requeue_after=outcome.requeue_after)
            return Result(requeue_after=0.01)
        self._record_events(state, outcome, message)
        if message:
            return Result(error=message, transient=transient, retry_after=retry_after)
        if outcome.end_reconcile and outcome.phase in c.TASK_TERMINAL_PHASES:
            # The outcome is written and durable; the housekeeping (D18) is the next reconcile,
            # at once (the watch event of our own write wakes nobody, see controllers/task/watch).
            return Result(requeue_after=0.001)
        return Result(requeue_after=outcome.requeue_after)

    def _write_status(self, state: PassState) -> None:
        """Patch ``/status`` with what changed, with the resourceVersion the pass read as a
        precondition: a write computed from a view that is no longer current (a stale cache, a
        paused process, another writer) fails with 409 instead of landing (the caller re-reads)."""
        before = state.original.get("status") or {}
        after = state.task.get("status") or {}
        patch = {
            k: v
            for k, v in after.items()
            if before.get(k) != v
            and not (v is None and k not in before)
            and not (k in self._pruned_status and k not in before)
        }
        if not patch:
            return
        updated = patch_status(self.rest, TASKS, state.meta, patch, self.remember_task)
        if updated is None:
            return
        stored = updated.get("status") or {}
        for k, v in patch.items():
            if v is not None and k not in stored:
                self._pruned_status.add(k)  # the installed CRD has no such field
        state.meta["resourceVersion"] = updated["metadata"].get("resourceVersion")

    def _record_events(self, state: PassState, outcome: TaskPassOutcome, message: str) -> None:
        before = (state.original.get("status") or {}).get("phase") or ""
        after = (state.task.get("status") or {}).get("phase") or ""
        if after != before and after:
            text = " -> ".join(p or "(new)" for p in state.path)
            if outcome.reason is not None:
                text += f": {outcome.reason.value}"
                if outcome.reason_message and outcome.reason.value == "JobLost":
                    text += f" ({outcome.reason_message})"
            kind = WARNING if after == c.TaskPhase.FAILED else NORMAL
            self.events.record(state.task, kind, after, text)
        was, now = _ready(state.original), _ready(state.task)
        if now.get("reason") == JOB_PODS_REFUSED and was.get("reason") != JOB_PODS_REFUSED:
            self.events.record(state.task, WARNING, JOB_PODS_REFUSED, now.get("message") or "")
        if now.get("reason") == JOB_SUSPENDED and was.get("reason") != JOB_SUSPENDED:
            self.events.record(state.task, NORMAL, JOB_SUSPENDED, now.get("message") or "")
        elif was.get("reason") == JOB_SUSPENDED and now.get("status") == "True":
            job = jobs.job_name(state.task)
            self.events.record(state.task, NORMAL, "JobResumed", f"Job {job} was resumed")
        if message:
            self.events.record(state.task, WARNING, "ReconcileError", message)

    def _event_once(self, state: PassState, type_: str, reason: str, note: str) -> None:
        self.events.record(state.task, type_, reason, note)

    # -- observation -----------------------------------------------------------------------------

    def observe(self, state: PassState) -> TaskObservation:
        """Condense the Task's world into a TaskObservation (no writes)."""
        task = state.task
        meta = task["metadata"]
        status = task.get("status") or {}
        spec = task.get("spec") or {}
        workflow_name = (spec.get("workflowRef") or {}).get("name") or ""
        workflow = self._workflow(meta["namespace"], workflow_name) if workflow_name else None
        state.workflow = workflow
        if workflow is None:
            workflow_state = WorkflowState.MISSING
        elif (workflow.get("metadata") or {}).get("deletionTimestamp"):
            workflow_state = WorkflowState.DELETING
        elif ((workflow.get("status") or {}).get("phase") or "") in ("Succeeded", "Failed"):
            workflow_state = WorkflowState.TERMINATED
        else:
            workflow_state = WorkflowState.ACTIVE
        deleting = bool(meta.get("deletionTimestamp"))
        has_finalizer = c.FINALIZER_TASK_PROTECTION in (meta.get("finalizers") or [])
        phase = status.get("phase") or ""
        mpe_ref = _own_mpe_ref(task)
        if not mpe_ref and deleting and has_finalizer:
            mpe_ref = self._unrecorded_mpe(task)
            if mpe_ref:  # from now on the deletion knows (and records) where its Job would be
                state.status["mediaProcessingEntityRef"] = mpe_ref
                status = state.status
        job_ref = status.get("jobRef") or {}
        # The MPE's cluster, or the earlier one its Job was made in (the MPE was pointed elsewhere
        # since; its Jobs stay where they were made, D19).
        cluster = self.mpes.job_cluster(mpe_ref, job_ref)
        cleanup_wait_left = self._cleanup_wait_left(mpe_ref) if deleting else 0.0
        state.cluster = cluster
        state.cluster_error = ""
        job_name = jobs.job_name(task)
        job = None
        # A deleting Task without our finalizer is going anyway: its Job is not looked at.
        if cluster is not None and not (deleting and not has_finalizer):
            # A Job stays where it was made, even if its MPE now puts new Jobs elsewhere (D19),
            # but never outside the namespaces its MPE may use (docs/security.md).
            job_namespace = job_ref.get("namespace") or cluster.namespace
            if not cluster.may_hold_jobs_in(job_namespace):
                job_namespace = cluster.namespace
            # An outcome the Job already shows must win over the Workflow's termination
            # (D18b): read it from the source, not from a cache that may lag behind it.
            # So must a deleting Task's past its cleanup bound: a cluster that no longer answers
            # shows as a failed read, so the chart can leave the Job behind (D22).
            # A deleting Task whose cluster's Job watch is failing asks the cluster too: a cache
            # that no longer follows it cannot tell, and a failed read is what counts the time
            # the cluster has not answered (``--cleanup-timeout``).
            fresh = (
                workflow_state is WorkflowState.TERMINATED
                and phase in (c.TaskPhase.RUNNING, c.TaskPhase.JOB_PENDING)
            ) or (deleting and (cleanup_wait_left <= 0 or not cluster.healthy))
            try:
                job = self._job(state, cluster, job_name, job_namespace, fresh=fresh)
            except KubeError as exc:
                # The Job's cluster does not answer: nothing can be decided about the Job.
                state.cluster_error = f"reading Job {job_name}: {exc}"
                cluster = state.cluster = None
                if isinstance(exc, Forbidden) and mpe_ref:
                    # Refused (a revoked token, lost RBAC): the MPE's reconcile says so on its
                    # Ready condition, now rather than at its next resync.
                    self.mpes.on_mpe_event(key_of_ref(mpe_ref))
        if cluster is not None:
            self.mpes.mark_reachable(mpe_ref)
        elif mpe_ref and (state.cluster_error or self.mpes.error(mpe_ref)):
            self.mpes.mark_unreachable(mpe_ref)
        state.job = job
        job_meta = (job or {}).get("metadata") or {}
        job_state = JobState.ABSENT
        without_pods, refused, refused_left = False, "", 0.0
        if job is not None:
            job_state = interpret_job_conditions((job.get("status") or {}).get("conditions"))
            self.saw_job(meta.get("uid") or "", job_name)
            if job_state is JobState.ACTIVE and cluster is not None:
                without_pods = not (job.get("status") or {}).get("active")
                if without_pods:
                    refused, refused_left = self._pods_refused(cluster, job)
        mpe_exists = self._mpe_exists(mpe_ref)
        return TaskObservation(
            phase=phase,
            deletion_requested=deleting,
            has_finalizer=has_finalizer,
            workflow=workflow_state,
            workflow_name=workflow_name,
            input_problem=wire.problem(task),
            owned_by_workflow=workflow is not None and _owned_by(task, workflow),
            mpe_selected=bool(mpe_ref),
            function_selected=bool(status.get("functionRef")),
            mpe_ready=cluster is not None,
            mpe_pending=cluster is None
            and mpe_exists
            and not state.cluster_error
            and self.mpes.pending(mpe_ref),
            mpe_gone=bool(mpe_ref) and not mpe_exists,
            mpe_problem=state.cluster_error or self.mpes.error(mpe_ref),
            job_name=job_name,
            job=job_state,
            job_uid=job_meta.get("uid", "") if job is not None else "",
            job_terminating=bool(job_meta.get("deletionTimestamp")),
            job_protected=c.FINALIZER_JOB_PROTECTION in (job_meta.get("finalizers") or []),
            job_pods_refused=refused,
            job_pods_refused_left=refused_left,
            job_without_pods=without_pods,
            job_ref_uid=job_ref.get("uid") or "",
            job_was_seen=self.job_was_seen(meta.get("uid") or "", job_name),
            cleanup_wait_left=cleanup_wait_left,
            resync_seconds=self.resync_seconds,
            conditions=tuple(Condition.from_dict(d) for d in status.get("conditions") or []),
        )

    def _pods_refused(self, cluster: MpeCluster, job: dict[str, Any]) -> tuple[str, float]:
        """Why a running Job has no pods (its latest ``FailedCreate`` Event, cut to
        :data:`REFUSAL_MESSAGE_MAX` characters; "" when there is none, or it cannot be read) and
        the seconds left of ``job_pods_refused_timeout`` since the first refusal.

        A refusal of a Job's pods (Pod Security, an admission policy, a quota) shows nowhere
        but in Events, which no watch of the controller delivers: one LIST of the Job's
        ``FailedCreate`` Events, only while it runs without pods and is older than
        :data:`POD_GRACE_SECONDS` (the Job controller makes pods within a second)."""
        meta = job.get("metadata") or {}
        created = _parse_time(meta.get("creationTimestamp"))
        if created is None or (self.clock() - created).total_seconds() < POD_GRACE_SECONDS:
            return "", 0.0
        try:
            events = (
                cluster.rest.list(
                    CORE_EVENTS,
                    meta.get("namespace") or cluster.namespace,
                    field_selector=f"involvedObject.uid={meta.get('uid')},reason=FailedCreate",
                ).get("items")
                or []
            )
        except KubeError as exc:  # e.g. a remote cluster whose credentials may not list Events
            log.debug("could not read the Job's Events", extra={"error": str(exc)})
            return "", 0.0
        if not events:
            return "", 0.0
        stamps = [_event_time(e, "first") for e in events]
        first = min((t for t in stamps if t is not None), default=self.clock())
        latest = max(events, key=lambda e: _event_time(e, "last") or first)
        message = str(latest.get("message") or "pod creation failed")
        if len(message) > REFUSAL_MESSAGE_MAX:
            message = message[: REFUSAL_MESSAGE_MAX - 1] + "…"
        if self.job_pods_refused_timeout <= 0:
            return message, float("inf")
        waited = (self.clock() - first).total_seconds()
        return message, max(0.0, self.job_pods_refused_timeout - waited)

    def _cleanup_wait_left(self, mpe_ref: dict[str, Any] | None) -> float:
        """Seconds a deleting Task may still wait for its MPE to answer (0 once over).

        The bound counts only the time the MPE has been unreachable without a break, as seen by
        this process (:meth:`~taskfsm.controllers.mpe.registry.MpeRegistry.unreachable_for`),
        not since the deletion: a deletion that waited in the queue behind other work (one
        worker, a slow API server) while its MPE answered has not waited for the MPE at all."""
        return max(0.0, self.cleanup_timeout - self.mpes.unreachable_for(mpe_ref))

    def _mpe_exists(self, ref: dict[str, Any] | None) -> bool:
        """Whether ``ref`` names an MPE kind and that object is in the cache."""
        if not ref:
            return False
        kind = ref.get("kind") or ""
        if kind not in (c.KIND_MEDIA_PROCESSING_ENTITY, c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY):
            return False
        return (
            self.caches.get(kind, ref.get("namespace") or None, ref.get("name") or "") is not None
        )

    def _unrecorded_mpe(self, task: dict[str, Any]) -> dict[str, Any] | None:
        """Where a deleting Task's Job would be when its status never named the MPE.

        One pass selects the MPE, creates the Job and writes status at the end; when the create's
        answer and the status write are both lost (a cut connection, a crash), the Job exists
        but no status names its cluster. Selection is deterministic, so ask it again; the Job is
        then looked up there (and waited for, if that MPE is not ready) before the finalizer goes.
        A Task this controller never touched (no finalizer) or that nothing can be selected for
        has no Job.
        """
        try:
            ref, _ = selection.select_media_processing_entity(task, self.caches)
        except selection.SelectionError:
            return None
        return ref

    def _workflow(self, namespace: str, name: str) -> dict[str, Any] | None:
        cached = self.caches.get(c.KIND_WORKFLOW, namespace, name)
        if cached is not None:
            return cached
        try:  # not cached (yet): a just-created Workflow must not fail its Tasks
            return self.rest.get(WORKFLOWS, namespace, name)
        except NotFound:
            return None

    def _job(
        self,
        state: PassState,
        cluster: MpeCluster,
        name: str,
        namespace: str,
        *,
        fresh: bool = False,
    ) -> dict[str, Any] | None:
        if state.job is not None and state.job["metadata"]["name"] == name and state.created_job:
            return state.job  # created in this reconcile
        key = (cluster.cluster_id, JOBS.plural, namespace, name)
        if namespace != cluster.namespace or fresh:
            # Made before the MPE's Job namespace changed (not in the watched namespace's
            # cache), or a decision that must not rest on a cache: read it from the source.
            try:
                return cluster.rest.get(JOBS, namespace, name)
            except NotFound:
                self.caches.written.gone(key)
                return None
        cached = cluster.jobs.get(cluster.namespace, name)
        if cached is not None:
            return self.caches.written.pick(key, cached)
        # The cache does not show the Job. Our own last write of it (if any) cannot tell a lagging
        # watch from a Job deleted since (F1/F4), and neither can a Task that believes in a Job:
        # ask the cluster, and forget our copy when the Job is gone.
        # A deleting Task always asks: "no Job" there removes the finalizer for good, and a Job
        # whose create reached the server while its answer was lost (F2) is in no record yet.
        # So does a Task whose Job this process saw before: a Job only called missing after a
        # fresh read fails the Task (JobLost, D18b).
        written = self.caches.written.pick(key, None)
        status = state.task.get("status") or {}
        if (
            written is None
            and not status.get("jobRef")
            and status.get("phase") != c.TaskPhase.RUNNING
            and not state.meta.get("deletionTimestamp")
            and not self.job_was_seen(state.meta.get("uid") or "", name)
        ):
            return None  # no Job was ever recorded: creation finds an existing one (AlreadyExists)
        try:
            return cluster.rest.get(JOBS, cluster.namespace, name)
        except NotFound:
            self.caches.written.gone(key)
            return None


def _message(state: PassState, outcome: TaskPassOutcome) -> str:
    """The `status.message` the outcome asks for: its own, or the stored one for a quiet wait."""
    if outcome.waiting_quietly:
        return str((state.original.get("status") or {}).get("message") or "")
    return outcome.message


def _own_mpe_ref(task: dict[str, Any]) -> dict[str, Any] | None:
    """``status.mediaProcessingEntityRef``, unless it names a namespaced MPE of another
    namespace: selection never writes one (a Task uses its own namespace's MPEs or cluster
    ones), so such a ref was not written by this controller and is not followed."""
    ref = (task.get("status") or {}).get("mediaProcessingEntityRef")
    if not ref:
        return None
    if ref.get("kind") == c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY:
        return dict(ref)
    if (ref.get("namespace") or "") != task["metadata"]["namespace"]:
        return None
    return dict(ref)


def _ready(task: dict[str, Any]) -> dict[str, Any]:
    """The Task's `Ready` condition as a dict (`{}` when it has none)."""
    for condition in (task.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return dict(condition)
    return {}


def _owned_by(task: dict[str, Any], workflow: dict[str, Any]) -> bool:
    meta = task["metadata"]
    uid = workflow["metadata"].get("uid")
    owners = meta.get("ownerReferences") or []
    if not any(o.get("uid") == uid and o.get("controller") for o in owners):
        return False
    labels = meta.get("labels") or {}
    return all(labels.get(k) == v for k, v in jobs.task_labels(task).items())


def _event_time(event: dict[str, Any], which: str) -> datetime | None:
    """A core Event's first (``firstTimestamp``, else ``eventTime``) or last (``lastTimestamp``,
    else the series' last observation, else ``eventTime``) occurrence."""
    if which == "first":
        value = event.get("firstTimestamp") or event.get("eventTime")
    else:
        series = event.get("series") or {}
        value = (
            event.get("lastTimestamp") or series.get("lastObservedTime") or event.get("eventTime")
        )
    return _parse_time(str(value)[:19] + "Z") if value else None


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None
