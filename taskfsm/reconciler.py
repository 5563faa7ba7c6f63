"""One Task reconcile: key in, :class:`Result` out, level-triggered.

Flow of :meth:`TaskReconciler.reconcile` (task-controller.md §3.2–§3.4):

1. read the Task (cache, or our own newer write, or a fresh GET when neither is known);
2. read what its lifecycle depends on: the Workflow, the MediaProcessingEntity cluster, the Job
   under the Task's deterministic name, into a ``machines.observation.TaskObservation``;
3. run the statechart (``machines.driver.run_pass``) with
   :class:`~taskfsm.actions.effects.TaskEffects`;
   while a step moves the phase forward without error, observe again and take the next step, so a
   new Task usually reaches Running in one reconcile (fewer passes, fewer writes);
4. write metadata (at most one merge patch) and status (one merge patch on ``/status``, no
   resourceVersion: the controller owns status), record Events, decide the requeue.

One Task's exception never escapes (D23): it becomes ``status.message`` and a retry with backoff.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from machines.conditions import Condition
from machines.driver import PassOutcome, run_pass
from machines.job_status import interpret_job_conditions
from machines.observation import TERMINAL_PHASES, JobState, TaskObservation, WorkflowState
from taskfsm import constants as c
from taskfsm.actions import jobs, selection
from taskfsm.actions.effects import ANNOTATION_JOB_RECREATED, PassState, TaskEffects
from taskfsm.events import NORMAL, WARNING, EventRecorder
from taskfsm.kube.errors import KubeError, NotFound
from taskfsm.kube.resources import TASKS, WORKFLOWS
from taskfsm.kube.rest import JOBS, Rest

if TYPE_CHECKING:
    from taskfsm.api.config import NatsConfiguration
    from taskfsm.cache import Caches
    from taskfsm.metrics import Metrics
    from taskfsm.mpe import MpeCluster, MpeRegistry

log = logging.getLogger(__name__)

MAX_STEPS = 8
"""Steps per reconcile; the longest forward path (new → Running → terminal cleanup) needs 5."""


@dataclass(frozen=True)
class Result:
    """What the worker does with the key next.

    ``error`` set → re-add with per-key backoff; else ``requeue_after`` seconds (None: only on
    the next event) and the key's backoff is reset.
    """

    error: str | None = None
    requeue_after: float | None = None


class TaskReconciler:
    """Reconciles Tasks of the main cluster.

    Args:
        rest: the main cluster.
        caches: informer caches and read-your-writes (:class:`taskfsm.cache.Caches`).
        mpes: the MediaProcessingEntity registry.
        events: where Events go.
        nats: the process configuration's NATS settings, copied into every payload.
        metrics: Prometheus metrics (optional).
        resync_seconds: how often a Task whose Job may still change is looked at again without an
            event (bounds how long a missed Job event can go unnoticed, F4).
        cleanup_timeout: seconds after its deletionTimestamp during which a deleting Task waits
            for an unreachable MediaProcessingEntity to clean up its Job; afterwards the Job is
            abandoned (Warning Event) and the Task goes (§3.10, D22).
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
        metrics: Metrics | None = None,
        resync_seconds: float = 300.0,
        cleanup_timeout: float = 120.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.rest = rest
        self.caches = caches
        self.mpes = mpes
        self.events = events
        self.nats = nats
        self.metrics = metrics
        self.resync_seconds = resync_seconds
        self.cleanup_timeout = cleanup_timeout
        self.clock = clock
        self._cleanup_failed: set[str] = set()
        """UIDs of deleting Tasks whose last cleanup pass failed (the MPE may be unreachable)."""

    # -- read-your-writes ------------------------------------------------------------------------

    def remember_task(self, task: dict[str, Any]) -> None:
        meta = task["metadata"]
        self.caches.written.wrote(("main", TASKS.plural, meta["namespace"], meta["name"]), task)

    def remember_job(self, cluster: MpeCluster, job: dict[str, Any]) -> None:
        meta = job["metadata"]
        self.caches.written.wrote(
            (cluster.cluster_id, JOBS.plural, meta["namespace"], meta["name"]), job
        )

    def observe_job_created(self, task: dict[str, Any], job: dict[str, Any]) -> None:
        if self.metrics is None:
            return
        created = _parse_time(task["metadata"].get("creationTimestamp"))
        job_created = _parse_time(job["metadata"].get("creationTimestamp"))
        if created and job_created:
            self.metrics.job_creation_latency.observe(
                max(0.0, (job_created - created).total_seconds())
            )

    def read_task(self, namespace: str, name: str) -> dict[str, Any] | None:
        cached = self.caches.informers[c.KIND_TASK].get(namespace, name)
        picked = self.caches.written.pick(("main", TASKS.plural, namespace, name), cached)
        if picked is not None:
            return copy.deepcopy(picked)
        try:
            return self.rest.get(TASKS, namespace, name)  # not in the cache: ask the source
        except NotFound:
            return None

    # -- the reconcile ---------------------------------------------------------------------------

    def reconcile(self, key: str) -> Result:
        """Reconcile the Task ``namespace/name``; never raises (D23)."""
        started = time.monotonic()
        try:
            result = self._reconcile(key)
        except Exception as exc:  # a bug or an API failure outside the machine: retry later
            log.exception("reconcile failed", extra={"task": key})
            result = Result(error=f"internal error: {type(exc).__name__}: {exc}")
        if self.metrics is not None:
            from taskfsm.metrics import CONTROLLER

            self.metrics.reconcile_time.labels(CONTROLLER).observe(time.monotonic() - started)
            outcome = (
                "error"
                if result.error
                else ("requeue_after" if result.requeue_after else "success")
            )
            self.metrics.reconcile_total.labels(CONTROLLER, outcome).inc()
            if result.error:
                self.metrics.reconcile_errors.labels(CONTROLLER).inc()
        return result

    def _reconcile(self, key: str) -> Result:
        namespace, name = key.split("/", 1)
        task = self.read_task(namespace, name)
        if task is None:
            return Result()
        state = PassState(original=copy.deepcopy(task), task=task, now=self.clock())
        effects = TaskEffects(self, state)
        outcome: PassOutcome | None = None
        persisted = (task.get("status") or {}).get("phase") or ""
        state.path.append(persisted)
        for _ in range(MAX_STEPS):
            observation = self.observe(state)
            waiting = self._cleanup_must_wait(state, observation)
            if waiting:
                ref = state.status.get("mediaProcessingEntityRef")
                # An MPE not set up yet (a restart) has not failed: waiting for it must not
                # count towards abandoning the Job once it is ready.
                return self._finish_early(state, waiting, failed=not self.mpes.pending(ref))
            outcome = run_pass(observation, effects, now=state.now)
            self._apply(state, outcome)
            if outcome.phase and outcome.phase != state.path[-1]:
                state.path.append(outcome.phase)
            if outcome.error or outcome.finalized or not outcome.transitions:
                break
            if outcome.state == "deleting":
                break  # D9: the Task asked for its own deletion; the next pass finishes it
            if outcome.phase in TERMINAL_PHASES and persisted not in TERMINAL_PHASES:
                # D18: the outcome must be durable before the terminal housekeeping (releasing
                # the Job finalizer, deleting the Job) runs; our own status write triggers it.
                break
        assert outcome is not None
        self._note_cleanup(state, outcome)
        if outcome.finalized:
            self._event_once(
                state, NORMAL, "Deleted", "Task finalizer released; the Task is deleted"
            )
            return Result()
        message = outcome.message
        if state.metadata_dirty:
            # Metadata effects that succeeded before an error (finalizer, owner reference,
            # labels) are kept: a Task stuck on a selection error still belongs to its Workflow.
            try:
                effects.flush_metadata()
            except KubeError as exc:
                failure = f"failed to update Task metadata: {exc}"
                message = f"[{message}, {failure}]" if message else failure
        return self._finish(state, outcome, message)

    # -- deleting Tasks and unreachable MediaProcessingEntities ----------------------------------

    def _cleanup_expired(self, task: dict[str, Any]) -> bool:
        deleted = _parse_time(task["metadata"].get("deletionTimestamp"))
        if deleted is None:
            return False
        return (self.clock() - deleted).total_seconds() >= self.cleanup_timeout

    def _cleanup_must_wait(self, state: PassState, observation: TaskObservation) -> str:
        """Why a deleting Task must wait for its MediaProcessingEntity ("" when it need not).

        A deleting Task whose MPE cannot be reached (not registered or ready, or its API failing)
        retries with backoff for ``cleanup_timeout`` seconds after its deletionTimestamp, so a
        controller restart or a short outage does not leak the Job; afterwards the statechart
        abandons the Job with a Warning Event and the Task goes (bounded, §3.10).
        """
        if not observation.deletion_requested or not observation.mpe_selected:
            return ""
        unreachable = not observation.mpe_ready or state.cluster_error
        if not unreachable:
            return ""
        ref = state.status.get("mediaProcessingEntityRef") or {}
        kind = ref.get("kind") or ""
        if kind not in (c.KIND_MEDIA_PROCESSING_ENTITY, c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY):
            return ""  # a reference nothing can resolve: there is nothing to wait for (D22)
        if self.caches.get(kind, ref.get("namespace") or None, ref.get("name") or "") is None:
            return ""  # the MPE itself is gone: nobody can ever clean up through it
        if self._cleanup_expired(state.task) and not self.mpes.pending(ref):
            # Only an MPE tried and found unreachable is given up on: one whose client this
            # process has not set up yet (a restart long after the deletion) is waited for.
            return ""
        reason = state.cluster_error or self.mpes.error(
            state.status.get("mediaProcessingEntityRef")
        )
        text = "MediaProcessingEntity does not exist or is not ready"
        if reason:
            text += f": {reason}"
        return (
            f"{text}; the Task's deletion waits up to {self.cleanup_timeout:.0f}s for it to "
            "clean up the Job, then leaves the Job behind"
        )

    def _note_cleanup(self, state: PassState, outcome: PassOutcome) -> None:
        uid = state.meta.get("uid") or ""
        if outcome.finalized or not state.meta.get("deletionTimestamp"):
            self._cleanup_failed.discard(uid)
        elif outcome.error is not None:
            self._cleanup_failed.add(uid)

    def _finish_early(self, state: PassState, message: str, *, failed: bool = True) -> Result:
        """End a reconcile before the statechart ran: only ``status.message`` changes.

        ``failed`` records that the Task's cleanup found its MPE unreachable (see ``observe``).
        """
        if failed:
            self._cleanup_failed.add(state.meta.get("uid") or "")
        state.status["message"] = message
        try:
            self._write_status(state)
        except KubeError as exc:
            message = f"{message}; failed to update Task status: {exc}"
        self.events.record(state.task, WARNING, "ReconcileError", message)
        return Result(error=message)

    def _apply(self, state: PassState, outcome: PassOutcome) -> None:
        status = state.status
        generation = state.meta.get("generation")
        if generation is not None:
            status["observedGeneration"] = generation
        if outcome.phase:
            status["phase"] = outcome.phase
        status["conditions"] = [cond.to_dict() for cond in outcome.conditions] or None
        status["message"] = outcome.message

    def _finish(self, state: PassState, outcome: PassOutcome, message: str) -> Result:
        status = state.status
        if (
            message
            and outcome.error is not None
            and outcome.error.action == "report_mpe_unavailable"
        ):
            ref = status.get("mediaProcessingEntityRef")
            reason = self.mpes.error(ref) or state.cluster_error
            if reason:
                message = f"{message}: {reason}"
            elif self.mpes.pending(ref) and self.caches.get(ref.get("kind", ""), ref.get("namespace"), ref.get("name", "")):
                # The MPE exists and its client is being set up (a new MPE, a restart): not an
                # error worth an Event or backoff; its readiness re-queues this Task anyway.
                status["message"] = f"{message}: waiting for its client to be set up"
                try:
                    self._write_status(state)
                except KubeError as exc:
                    return Result(error=f"failed to update Task status: {exc}")
                self._record_events(state, outcome, "")
                return Result(requeue_after=1.0)
        status["message"] = message
        try:
            self._write_status(state)
        except KubeError as exc:
            # Nothing of this pass's status landed (F3): say so, retry with backoff; the effects
            # already done are idempotent and found done by the next pass.
            failure = f"failed to update Task status: {exc}"
            self.events.record(state.task, WARNING, "ReconcileError", failure)
            return Result(error=failure)
        self._record_events(state, outcome, message)
        if message:
            return Result(error=message)
        phase = status.get("phase") or ""
        if phase in (c.TaskPhase.RUNNING, c.TaskPhase.JOB_PENDING) or status.get("jobRef"):
            return Result(requeue_after=self.resync_seconds)
        return Result()

    def _write_status(self, state: PassState) -> None:
        before = state.original.get("status") or {}
        after = state.task.get("status") or {}
        patch = {
            k: v
            for k, v in after.items()
            if before.get(k) != v and not (v is None and k not in before)
        }
        if not patch:
            return
        meta = state.meta
        try:
            updated = self.rest.patch(
                TASKS, meta["namespace"], meta["name"], {"status": patch}, subresource="status"
            )
        except NotFound:
            return
        self.remember_task(updated)

    def _record_events(self, state: PassState, outcome: PassOutcome, message: str) -> None:
        before = (state.original.get("status") or {}).get("phase") or ""
        after = (state.task.get("status") or {}).get("phase") or ""
        for note in state.notes:
            self.events.record(state.task, WARNING, "JobRecreated", note)
        if after != before and after:
            text = " -> ".join(p or "(new)" for p in state.path)
            if outcome.reason is not None:
                text += f": {outcome.reason.value}"
            kind = WARNING if after == c.TaskPhase.FAILED else NORMAL
            self.events.record(state.task, kind, after, text)
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
        mpe_ref = status.get("mediaProcessingEntityRef")
        if not mpe_ref and deleting:
            mpe_ref = self._unrecorded_mpe(task)
            if mpe_ref:  # from now on the deletion knows (and records) where its Job would be
                state.status["mediaProcessingEntityRef"] = mpe_ref
                status = state.status
        cluster = self.mpes.get(mpe_ref)
        if (
            cluster is not None
            and deleting
            and meta.get("uid") in self._cleanup_failed
            and self._cleanup_expired(task)
        ):
            cluster = None  # unreachable for too long: the statechart abandons the Job
        state.cluster = cluster
        state.cluster_error = ""
        job_name = jobs.job_name(task)
        job_ref = status.get("jobRef") or {}
        job = None
        if cluster is not None:
            # A Job stays where it was made, even if its MPE now puts new Jobs elsewhere (D19).
            job_namespace = job_ref.get("namespace") or cluster.namespace
            try:
                job = self._job(state, cluster, job_name, job_namespace)
            except KubeError as exc:
                # The Job's cluster does not answer: nothing can be decided about the Job.
                state.cluster_error = f"reading Job {job_name}: {exc}"
                cluster = state.cluster = None
        state.job = job
        job_meta = (job or {}).get("metadata") or {}
        job_state = JobState.ABSENT
        if job is not None:
            job_state = interpret_job_conditions((job.get("status") or {}).get("conditions"))
        return TaskObservation(
            phase=status.get("phase") or "",
            deletion_requested=deleting,
            has_finalizer=c.FINALIZER_TASK_PROTECTION in (meta.get("finalizers") or []),
            workflow=workflow_state,
            workflow_name=workflow_name,
            owned_by_workflow=workflow is not None and _owned_by(task, workflow),
            mpe_selected=bool(mpe_ref),
            function_selected=bool(status.get("functionRef")),
            mpe_ready=cluster is not None,
            job_name=job_name,
            job=job_state,
            job_uid=job_meta.get("uid", "") if job is not None else "",
            job_terminating=bool(job_meta.get("deletionTimestamp")),
            job_protected=c.FINALIZER_JOB_PROTECTION in (job_meta.get("finalizers") or []),
            job_ref_uid=job_ref.get("uid") or "",
            job_recreated=ANNOTATION_JOB_RECREATED in (meta.get("annotations") or {}),
            conditions=tuple(Condition.from_dict(d) for d in status.get("conditions") or []),
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
        if c.FINALIZER_TASK_PROTECTION not in (task["metadata"].get("finalizers") or []):
            return None
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
        self, state: PassState, cluster: MpeCluster, name: str, namespace: str
    ) -> dict[str, Any] | None:
        if state.job is not None and state.job["metadata"]["name"] == name and state.created_job:
            return state.job  # created in this reconcile
        if namespace != cluster.namespace:
            # Made before the MPE's Job namespace changed: not in the watched namespace's cache.
            try:
                return cluster.rest.get(JOBS, namespace, name)
            except NotFound:
                return None
        key = (cluster.cluster_id, JOBS.plural, cluster.namespace, name)
        cached = cluster.jobs.get(cluster.namespace, name)
        if cached is not None:
            return self.caches.written.pick(key, cached)
        # The cache does not show the Job. Our own last write of it (if any) cannot tell a lagging
        # watch from a Job deleted since (F1/F4), and neither can a Task that believes in a Job:
        # ask the cluster, and forget our copy when the Job is gone.
        # A deleting Task always asks: "no Job" there removes the finalizer for good, and a Job
        # whose create reached the server while its answer was lost (F2) is in no record yet.
        written = self.caches.written.pick(key, None)
        status = state.task.get("status") or {}
        if (
            written is None
            and not status.get("jobRef")
            and status.get("phase") != c.TaskPhase.RUNNING
            and not state.meta.get("deletionTimestamp")
        ):
            return None  # no Job was ever recorded: creation finds an existing one (AlreadyExists)
        try:
            return cluster.rest.get(JOBS, cluster.namespace, name)
        except NotFound:
            self.caches.written.gone(key)
            return None


def _owned_by(task: dict[str, Any], workflow: dict[str, Any]) -> bool:
    meta = task["metadata"]
    uid = workflow["metadata"].get("uid")
    owners = meta.get("ownerReferences") or []
    if not any(o.get("uid") == uid and o.get("controller") for o in owners):
        return False
    labels = meta.get("labels") or {}
    return all(labels.get(k) == v for k, v in jobs.task_labels(task).items())


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None
