"""Read: everything one pass of a Task needs, in one place (all the Task controller's reads).

:meth:`TaskReader.read` reads the Task's Workflow, the MediaProcessingEntity and its client,
the Job under the Task's deterministic name and, for a running Job without pods, why its pods
are refused, into a :class:`~taskfsm.controllers.task.working_copy.PassReads`;
:mod:`taskfsm.controllers.task.observe` condenses that into the chart's observation without any
I/O. The Job is read from its cluster's watch cache, or from the cluster where the chart would
decide something for good from it (:func:`machines.task.reads.job_read`, in the chart's own
terms), or where the cache cannot tell (a Job outside the watched namespace; a Job this process
wrote that the watch has not shown yet, which may be lagging or deleted).

What a read records (runtime mechanics, docs/architecture.md): the Jobs it saw go to
:class:`~taskfsm.controllers.task.seen_jobs.SeenJobs`, and whether the MPE's cluster answered
feeds the registry's reachability clock (what ``--cleanup-timeout`` counts).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any, Final

from machines.task.observation import TaskObservation
from machines.task.phases import TERMINAL_PHASES
from machines.task.reads import (
    JobRead,
    job_inputs_needed,
    job_read,
    pods_checked,
    reselect_mpe,
    wait_left,
)
from taskfsm import selection
from taskfsm.api import constants as c
from taskfsm.controllers.clusters.cluster import MpeCluster
from taskfsm.controllers.clusters.registry import MpeRegistry
from taskfsm.controllers.job_facts import job_facts
from taskfsm.controllers.task.inputs import (
    InputsUnusable,
    JobSettings,
    beyond_limits,
    build_inputs,
    too_large,
)
from taskfsm.controllers.task.jobsite import JobSite, PodTrouble
from taskfsm.controllers.task.observe import job_age, job_created, own_mpe_ref, workflow_state
from taskfsm.controllers.task.seen_jobs import SeenJobs
from taskfsm.controllers.task.store import TaskStore
from taskfsm.controllers.task.working_copy import PassReads, WorkingCopy
from taskfsm.kube.cache import Caches
from taskfsm.kube.errors import Forbidden, KubeError
from taskfsm.manifests import jobs

REFUSAL_MESSAGE_MAX: Final = 512
"""Longest refusal message copied from an Event into the Task's condition."""


class TaskReader:
    """Reads one pass's world for a Task.

    Args:
        store: the main cluster's Tasks and Workflows.
        caches: the cached catalog (MPEs, Functions, TaskTemplates) for re-selection and the
            Job inputs.
        clusters: the MPE clients (and the reachability clock they keep).
        jobs: the Jobs in the MPE clusters.
        seen: which Jobs this process saw per Task.
        clock: wall-clock ``now``.
        cleanup_timeout: seconds a deleting Task waits for its MPE to answer again (counted
            while it does not).
        job_pods_refused_timeout: seconds a Running Task waits while its Job's pods are refused
            or cannot start, and a JobPending Task whose Job exists waits for its helper Secret
            (0: for ever).
        job_settings: what every Job and its helper data carry (``taskfsm run``'s settings).
    """

    def __init__(
        self,
        *,
        store: TaskStore,
        caches: Caches,
        clusters: MpeRegistry,
        jobs: JobSite,
        seen: SeenJobs,
        clock: Callable[[], datetime],
        cleanup_timeout: float,
        job_pods_refused_timeout: float,
        job_settings: JobSettings | None = None,
    ) -> None:
        self.store = store
        self.caches = caches
        self.clusters = clusters
        self.jobs = jobs
        self.seen = seen
        self.clock = clock
        self.cleanup_timeout = cleanup_timeout
        self.job_pods_refused_timeout = job_pods_refused_timeout
        self.job_settings = job_settings or JobSettings()

    def read(self, work: WorkingCopy) -> PassReads:
        """What the next pass of ``work``'s Task needs (no write to any cluster)."""
        task = work.task
        meta = task["metadata"]
        status = task.get("status") or {}
        workflow_name = ((task.get("spec") or {}).get("workflowRef") or {}).get("name") or ""
        job_name = jobs.job_name(task)
        reads = PassReads(task=task, job_name=job_name)
        if workflow_name:
            reads.workflow = self.store.workflow(meta["namespace"], workflow_name)
        deleting = bool(meta.get("deletionTimestamp"))
        job_ref = status.get("jobRef") or {}
        task_uid = meta.get("uid") or ""
        mpe_ref = own_mpe_ref(task)
        before = TaskObservation(
            phase=status.get("phase") or "",
            deletion_requested=deleting,
            has_finalizer=c.FINALIZER_TASK_PROTECTION in (meta.get("finalizers") or []),
            mpe_selected=bool(mpe_ref),
            workflow=workflow_state(reads.workflow),
            job_ref_uid=job_ref.get("uid") or "",
            job_was_seen=self.seen.seen(task_uid, job_name),
        )
        finished = before.phase in TERMINAL_PHASES
        if finished:
            # The outcome is recorded: a Job missing now changes nothing (F9a), so what this
            # process saw of it is no longer evidence worth its memory.
            self.seen.forget(task_uid)
        if reselect_mpe(before):
            mpe_ref = self._reselect(task)
            reads.mpe_unrecorded = bool(mpe_ref)
        reads.mpe_ref = mpe_ref
        reads.mpe = self._mpe(mpe_ref)
        # The MPE's cluster, or the earlier one its Job was made in (the MPE was pointed elsewhere
        # since; its Jobs stay where they were made, D19).
        cluster = self.clusters.job_cluster(mpe_ref, job_ref)
        reads.client_built = cluster is not None
        if deleting:
            unreachable = self.clusters.unreachable_for(mpe_ref)
            reads.cleanup_wait_left = max(0.0, self.cleanup_timeout - unreachable)
            before = replace(before, cleanup_wait_left=reads.cleanup_wait_left)
        read = (
            job_read(before, job_watch_healthy=cluster.healthy)
            if cluster is not None
            else JobRead.NONE
        )
        if cluster is not None and read is not JobRead.NONE:
            # A Job stays where it was made, even if its MPE now puts new Jobs elsewhere (D19),
            # but never outside the namespaces its MPE may use (docs/security.md).
            job_namespace = job_ref.get("namespace") or cluster.namespace
            if not cluster.may_hold_jobs_in(job_namespace):
                job_namespace = cluster.namespace
            try:
                found = self._job(work, cluster, job_name, job_namespace, read)
            except KubeError as exc:
                # The Job's cluster does not answer: nothing can be decided about the Job.
                reads.job_unreadable = f"reading Job {job_name}: {exc}"
                reads.job_refused = isinstance(exc, Forbidden) and bool(mpe_ref)
            else:
                # The Task's Job carries its labels, or is the one its status recorded (a UID
                # only the API server assigns); anything else under that name is reported,
                # never adopted, deleted or read for an outcome.
                reads.job_name_taken = found is not None and not (
                    jobs.owns(found, task)
                    or (found["metadata"].get("uid") or None) == (job_ref.get("uid") or "")
                )
                reads.job = None if reads.job_name_taken else found
        if cluster is not None and not reads.job_unreadable:
            reads.cluster = cluster
            self.clusters.mark_reachable(mpe_ref)
        elif mpe_ref and (reads.job_unreadable or self.clusters.error(mpe_ref)):
            self.clusters.mark_unreachable(mpe_ref)
        if reads.cluster is None:
            reads.client_pending = cluster is None and self.clusters.pending(mpe_ref)
            reads.mpe_released = cluster is None and self.clusters.released(mpe_ref)
        reads.mpe_problem = self.clusters.error(mpe_ref)
        if reads.cluster is None and reads.mpe is not None:
            reads.mpe_never_reached = bool(
                self.clusters.never_reached(
                    {**reads.mpe, "kind": (mpe_ref or {}).get("kind") or reads.mpe.get("kind")},
                    jobs_recorded=bool(job_ref),
                )
            )
        if reads.job is not None:
            if not finished:
                self.seen.saw(task_uid, job_name)
            if reads.cluster is not None:
                self._pods(reads, reads.cluster, reads.job)
        reads.job_was_seen = self.seen.seen(task_uid, job_name)
        if reads.cluster is not None and job_inputs_needed(before):
            reads.job_unmakeable = selection.job_refusal(
                task, self.caches, remote=reads.cluster.remote
            )
            if not reads.job_unmakeable and reads.workflow is not None:
                self._inputs(reads, reads.cluster)
        return reads

    def _inputs(self, reads: PassReads, cluster: MpeCluster) -> None:
        """What the Job would be made from, built before anything is created; for a Job that
        exists already (made by an earlier pass whose Secret or status write failed), the
        seconds left of ``job_pods_refused_timeout`` since it was made."""
        assert reads.workflow is not None
        try:
            reads.job_inputs = build_inputs(
                reads.task,
                reads.workflow,
                catalog=self.caches,
                read_secret=self.store.secret,
                namespace=cluster.namespace,
                settings=self.job_settings,
            )
        except InputsUnusable as exc:
            reads.job_inputs_problem = str(exc)
        else:
            reads.helper_data_too_large = too_large(reads.job_inputs)
            reads.job_beyond_limits = beyond_limits(reads.job_inputs)
        if reads.job is not None and job_created(reads.job) is not None:
            waited = job_age(reads.job, self.clock())
            reads.job_pending_left = wait_left(self.job_pods_refused_timeout, waited)

    def _job(
        self, work: WorkingCopy, cluster: MpeCluster, name: str, namespace: str, read: JobRead
    ) -> dict[str, Any] | None:
        made = work.made_job
        if made is not None and made["metadata"]["name"] == name:
            return made  # created in this reconcile
        if namespace != cluster.namespace or read is JobRead.SOURCE:
            # Made before the MPE's Job namespace changed (not in the watched namespace's
            # cache), or a decision that must not rest on a cache: read it from the source.
            return self.jobs.fetch(cluster, namespace, name)
        cached = self.jobs.cached(cluster, name)
        if cached is not None:
            return cached
        # The cache does not show the Job. Our own last write of it (if any) cannot tell a
        # lagging watch from a Job deleted since (F1/F4): ask the cluster, and forget our copy
        # when the Job is gone; so does a pass that must not call it missing on a cache's word.
        if read is JobRead.CACHE and self.jobs.written(cluster, name) is None:
            return None  # no Job was ever recorded: creation finds an existing one (AlreadyExists)
        return self.jobs.fetch(cluster, cluster.namespace, name)

    def _pods(self, reads: PassReads, cluster: MpeCluster, job: dict[str, Any]) -> None:
        """For a running Job none of whose pods is ready: why they do not run, cut to
        :data:`REFUSAL_MESSAGE_MAX` characters, and the seconds left of
        ``job_pods_refused_timeout`` since that began.

        A refusal of a Job's pods (Pod Security, an admission policy, a quota) shows nowhere
        but in Events, and a pod that cannot start only in its own status and Events; no watch
        of the controller delivers either. So one LIST of the Job's ``FailedCreate`` Events
        while it has no pods, or of its pods (and of a pod's ``FailedMount`` Events) while none
        is ready (:func:`machines.task.reads.pods_checked`), at the chart's pod-check pace
        (`schedule_pod_check`)."""
        status = job.get("status") or {}
        now = self.clock()
        age = job_age(job, now)
        if not pods_checked(job_facts(job).state, ready=bool(status.get("ready")), age_seconds=age):
            return
        trouble: PodTrouble | None
        if status.get("active"):
            trouble = self.jobs.pods_not_starting(cluster, job, now=now)
        else:
            trouble = self.jobs.refusal(cluster, job, now=now)
        if trouble is None:
            return
        message = trouble.message
        if len(message) > REFUSAL_MESSAGE_MAX:
            message = message[: REFUSAL_MESSAGE_MAX - 1] + "…"
        reads.pods_refused = message
        waited = (now - trouble.since).total_seconds()
        reads.pods_refused_left = wait_left(self.job_pods_refused_timeout, waited)

    def _mpe(self, ref: dict[str, Any] | None) -> dict[str, Any] | None:
        """The MPE object ``ref`` names, if it names an MPE kind and the cache has it."""
        if not ref:
            return None
        kind = ref.get("kind") or ""
        if kind not in (c.KIND_MEDIA_PROCESSING_ENTITY, c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY):
            return None
        return self.caches.get(kind, ref.get("namespace") or None, ref.get("name") or "")

    def _reselect(self, task: dict[str, Any]) -> dict[str, Any] | None:
        """Where a deleting Task's Job would be when its status never named the MPE
        (:func:`machines.task.reads.reselect_mpe`); a Task that nothing can be selected for
        has no Job."""
        try:
            ref, _ = selection.select_media_processing_entity(task, self.caches)
        except selection.SelectionError:
            return None
        return ref
