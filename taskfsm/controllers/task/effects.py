"""The Task lifecycle's effects: the model the Task chart's engine calls, on the world's ports.

Guards come from ``machines.task.guards.ObservationGuards`` (pure, over the observation); this
class adds the effects. Each acts through the reconcile's ports, never through the reconciler:

* the reconcile's working copy
  (:class:`~taskfsm.controllers.task.working_copy.WorkingCopy`): metadata and status changes
  collect there, and the write step writes them; the metadata part is written
  first by the effects that create or delete another object (the finalizer is durable before
  the Job exists, and before the Task asks for its own deletion);
* the main cluster's Tasks (:class:`~taskfsm.controllers.task.store.TaskStore`): deleting the
  Task, removing its finalizer, the MediaLocations' Secrets;
* the Jobs in the MPE clusters (:class:`~taskfsm.controllers.task.jobsite.JobSite`);
* :class:`~taskfsm.controllers.task.seen_jobs.SeenJobs` (a Job made is a Job seen, D18b).

Each is idempotent (a repeated pass finds its work done and succeeds quietly) and raises a plain
exception whose text becomes ``status.message`` only for what its own I/O met. The decisions are
the chart's: an effect reads its observation for the facts and the pass's reads only for the
objects it builds from or writes; the observation was condensed from those same reads, so an
effect never checks one against the other (an ``assert`` states what the chart's guards
established).

Spec: docs/behaviour.md §3.5-§3.10, with the defects of its §6 fixed; every effect names its
section.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from machines.task.guards import ObservationGuards
from machines.task.observation import TaskObservation
from taskfsm import selection
from taskfsm.api import constants as c
from taskfsm.api.timestamps import format_time
from taskfsm.kube.rest import JOBS, SECRETS
from taskfsm.manifests import jobs

if TYPE_CHECKING:
    from taskfsm.controllers.clusters.cluster import MpeCluster
    from taskfsm.controllers.task.jobsite import JobSite
    from taskfsm.controllers.task.seen_jobs import SeenJobs
    from taskfsm.controllers.task.store import TaskStore
    from taskfsm.controllers.task.working_copy import WorkingCopy
    from taskfsm.kube.cache import Caches


class TaskEffects(ObservationGuards):
    """``machines.task.model.TaskLifecycleModel`` for one reconcile, on its ports."""

    def __init__(
        self,
        work: WorkingCopy,
        *,
        store: TaskStore,
        jobs: JobSite,
        catalog: Caches,
        seen: SeenJobs,
        job_made: Callable[[dict[str, Any], dict[str, Any]], None] = lambda _task, _job: None,
    ) -> None:
        self.work = work
        self.store = store
        self.jobs = jobs
        self.catalog = catalog
        self.seen = seen
        self.job_made = job_made

    # -- metadata --------------------------------------------------------------------------------

    def add_task_finalizer(self, observation: TaskObservation) -> None:
        """§3.5 (the Task's finalizer); never reached for a terminating Task (D22)."""
        finalizers = self.work.meta.setdefault("finalizers", [])
        if c.FINALIZER_TASK_PROTECTION not in finalizers:
            finalizers.append(c.FINALIZER_TASK_PROTECTION)
            self.work.metadata_dirty = True

    def set_workflow_ownership(self, observation: TaskObservation) -> None:
        """§3.5: the controller owner reference to the Workflow, and the four labels (§2)."""
        workflow = self.work.current_reads.workflow
        assert workflow is not None  # the chart asked `workflow_missing` of the same read
        work = self.work
        wmeta = workflow["metadata"]
        ref = {
            "apiVersion": c.API_VERSION,
            "kind": c.KIND_WORKFLOW,
            "name": wmeta["name"],
            "uid": wmeta["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        owners = work.meta.setdefault("ownerReferences", [])
        # Upsert rule of §2: same API group and kind and name is "the same" owner reference.
        for i, owner in enumerate(owners):
            if (
                owner.get("kind") == c.KIND_WORKFLOW
                and (owner.get("apiVersion") or "").split("/")[0] == c.GROUP
                and owner.get("name") == wmeta["name"]
            ):
                if owner != ref:
                    owners[i] = ref
                    work.metadata_dirty = True
                break
        else:
            owners.append(ref)
            work.metadata_dirty = True
        labels = work.meta.setdefault("labels", {})
        for key, value in jobs.task_labels(work.task).items():
            if labels.get(key) != value:
                labels[key] = value
                work.metadata_dirty = True

    def delete_task(self, observation: TaskObservation) -> None:
        """§3.5 (D9): the Workflow is being deleted, so the Task goes too."""
        self.store.write_metadata(self.work)
        self.store.delete(self.work.meta)

    def delete_expired_task(self, observation: TaskObservation) -> None:
        """Retention (``--finished-ttl``): the finished Task's Workflow does not exist and its
        TTL has passed; delete it as read (its finalizer then cleans up its Job and Secret).
        Metadata this pass collected is written first, so the version deleted is the current
        one."""
        self.store.write_metadata(self.work)
        self.store.delete_as_read(self.work.meta)

    def remove_task_finalizer(self, observation: TaskObservation) -> None:
        """§3.10: the last step; the Task then disappears."""
        self.store.remove_finalizer(self.work.task)

    # -- status ----------------------------------------------------------------------------------

    def record_queued_time(self, observation: TaskObservation) -> None:
        """§3.4: New -> Initializing stamps ``queuedTime``."""
        self.work.status.setdefault("queuedTime", format_time(self.work.now))

    def record_start_time(self, observation: TaskObservation) -> None:
        """Set once (D3)."""
        self.work.status.setdefault("startTime", format_time(self.work.now))

    def record_end_time(self, observation: TaskObservation) -> None:
        """D10: every terminal phase has an endTime."""
        self.work.status.setdefault("endTime", format_time(self.work.now))

    def select_media_processing_entity(self, observation: TaskObservation) -> None:
        """§3.6 (the MediaProcessingEntity) with D1, D11-D14; a chosen ref is sticky. A ref the
        observation does not follow (a namespaced MPE of another namespace, which selection
        never writes: docs/security.md) is replaced."""
        if observation.mpe_selected:
            return
        status = self.work.status
        ref, _ = selection.select_media_processing_entity(self.work.task, self.catalog)
        status["mediaProcessingEntityRef"] = ref

    def select_function(self, observation: TaskObservation) -> None:
        """§3.6 (the Function) with D11-D14; a chosen ref is sticky."""
        if observation.function_selected:
            return
        status = self.work.status
        ref, _ = selection.select_function(self.work.task, self.catalog)
        status["functionRef"] = ref

    def record_reselected_mpe(self, observation: TaskObservation) -> None:
        """§3.10: a deleting Task whose status named no MPE records the one selection found
        (the read looked for its Job there)."""
        self.work.status["mediaProcessingEntityRef"] = self.work.current_reads.mpe_ref

    def adopt_job(self, observation: TaskObservation) -> None:
        """D6: the Job under the Task's name is the Task's Job, whatever jobRef said."""
        job = self.work.current_reads.job
        assert job is not None  # `job_unrecorded` or an outcome was observed in the same read
        self.work.status["jobRef"] = jobs.exact_ref(job)

    def clear_job_ref(self, observation: TaskObservation) -> None:
        """§3.9: the Job is gone or replaced; ``None`` removes the field in the merge patch."""
        self.work.status["jobRef"] = None

    # -- the Job ---------------------------------------------------------------------------------

    def create_job_and_secret(self, observation: TaskObservation) -> None:
        """§3.7 with D5/D7: Job first (deterministic name), then its Secret owned by it.

        ``AlreadyExists`` adopts the object when it carries this Task's labels, so a retried
        pass (lost status write, stale read, crash) never makes a second Job or Secret. The
        chart has checked that a Job may be made (`job_unmakeable`) and that what it is made
        from was built and fits (`job_inputs_unusable`, `helper_data_too_large`,
        `job_beyond_limits`): the read built it before anything is created
        (:mod:`taskfsm.controllers.task.inputs`).
        """
        work = self.work
        self.store.write_metadata(work)
        reads = work.current_reads
        cluster = self._cluster()
        task = work.task
        inputs = reads.job_inputs
        assert inputs is not None  # `job_inputs_unusable` was asked of the same read
        job = reads.job  # the Task's own (`job_name_taken` kept anything else out)
        if job is None:
            job = self.jobs.create_or_adopt(cluster, JOBS, inputs.body, task)
            reads.job = work.made_job = job
            # This reconcile goes on with the Job it made: its ADDED event is no news.
            self.jobs.remember(cluster, job, known=True)
            self.seen.saw(task["metadata"].get("uid") or "", job["metadata"]["name"])
            self.job_made(task, job)
        secret = jobs.build_secret(task=task, job=job, payload=inputs.payload)
        existing = self.jobs.create_or_adopt(cluster, SECRETS, secret, task)
        owners = (existing.get("metadata") or {}).get("ownerReferences") or []
        if not any(o.get("uid") == job["metadata"]["uid"] for o in owners):
            # A Secret left from an earlier Job of that name (its GC not done yet): make it ours.
            self.jobs.own_secret(cluster, existing, secret)
        work.status["jobRef"] = jobs.exact_ref(job)

    def delete_job(self, observation: TaskObservation) -> None:
        """§3.9 / §3.10: delete the Job as observed (UID and resourceVersion preconditions,
        background propagation); gone or replaced is done."""
        reads = self.work.current_reads
        current = self.jobs.delete(
            self._cluster(), reads.job or {}, name=observation.job_name, uid=observation.job_uid
        )
        if current is not None:
            reads.job = current

    def release_job_finalizer(self, observation: TaskObservation) -> None:
        """D18: drop ``job-protection`` once the outcome is recorded (or the Task is going)."""
        job = self.work.current_reads.job
        if not job:
            return
        # The outcome is recorded and nothing follows for a live Task: the event of this write
        # wakes nobody. A deleting Task's next step waits on the Job's own events.
        self.jobs.release(self._cluster(), job, known=not observation.deletion_requested)

    def _cluster(self) -> MpeCluster:
        cluster = self.work.current_reads.cluster
        assert cluster is not None  # the chart asked `mpe_unavailable` of the same read
        return cluster
