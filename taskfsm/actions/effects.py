"""The Task lifecycle's effects against Kubernetes: the model ``machines.driver.run_pass`` calls.

Guards come from ``machines.guards.ObservationGuards`` (pure, over the observation); this class
adds the effects, each idempotent (a repeated pass finds its work done and succeeds quietly) and
each raising a plain exception whose text becomes ``status.message``.

Status effects change the pass's working copy of the Task (:class:`PassState`); the reconciler
patches ``/status`` once at the end. Metadata effects (finalizer, owner reference, labels) also
change the working copy and are flushed in one metadata patch, at the latest before any effect
that touches another object, so the Task finalizer is durable before its Job exists.

Spec: task-controller.md §3.5–§3.10 with the decisions.md fixes; every effect names its section.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from machines.guards import ObservationGuards
from machines.observation import TaskObservation
from taskfsm import constants as c
from taskfsm.actions import helperdata, jobs, selection
from taskfsm.events import WARNING
from taskfsm.kube import finalizers
from taskfsm.kube.errors import AlreadyExists, Conflict, NotFound
from taskfsm.kube.resources import TASKS
from taskfsm.kube.rest import JOBS, JSON_PATCH, SECRETS

if TYPE_CHECKING:
    from taskfsm.mpe import MpeCluster
    from taskfsm.reconciler import TaskReconciler

log = logging.getLogger(__name__)

ANNOTATION_JOB_RECREATED = "taskfsm.engine.nagare.media/job-recreated"
"""Set on a Task whose Job vanished while Running and was re-created once (value: the lost UID)."""


def rfc3339(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class PassState:
    """What one reconcile works on: the Task as read, the working copy, and what it observed."""

    original: dict[str, Any]
    task: dict[str, Any]
    now: datetime
    workflow: dict[str, Any] | None = None
    cluster: MpeCluster | None = None
    cluster_error: str = ""
    """Why the MPE cluster could not be read in this pass ("" when it could)."""
    job: dict[str, Any] | None = None
    metadata_dirty: bool = False
    metadata_writes: int = 0
    created_job: bool = False
    notes: list[str] = field(default_factory=list)
    path: list[str] = field(default_factory=list)
    """Phases this reconcile went through, starting with the persisted one (for Events)."""

    @property
    def meta(self) -> dict[str, Any]:
        return self.task.setdefault("metadata", {})

    @property
    def status(self) -> dict[str, Any]:
        status = self.task.get("status")
        if status is None:
            status = self.task["status"] = {}
        return status

    @property
    def key(self) -> str:
        return f"{self.meta['namespace']}/{self.meta['name']}"


class TaskEffects(ObservationGuards):
    """``machines.model.TaskLifecycleModel`` bound to the cluster for one reconcile."""

    def __init__(self, reconciler: TaskReconciler, state: PassState) -> None:
        self.r = reconciler
        self.s = state

    # -- metadata --------------------------------------------------------------------------------

    def add_task_finalizer(self, observation: TaskObservation) -> None:
        """§3.2 step 3; never reached for a terminating Task (D22)."""
        finalizers = self.s.meta.setdefault("finalizers", [])
        if c.FINALIZER_TASK_PROTECTION not in finalizers:
            finalizers.append(c.FINALIZER_TASK_PROTECTION)
            self.s.metadata_dirty = True

    def set_workflow_ownership(self, observation: TaskObservation) -> None:
        """§3.5 steps 2 and 4: controller owner reference to the Workflow, and the four labels."""
        workflow = self.s.workflow
        if workflow is None:  # the observation said the Workflow exists; the cache disagrees
            raise RuntimeError(f"failed to fetch Workflow: {observation.workflow_name}")
        wmeta = workflow["metadata"]
        ref = {
            "apiVersion": c.API_VERSION,
            "kind": c.KIND_WORKFLOW,
            "name": wmeta["name"],
            "uid": wmeta["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        owners = self.s.meta.setdefault("ownerReferences", [])
        # Upsert rule of §2: same API group and kind and name is "the same" owner reference.
        for i, owner in enumerate(owners):
            if (
                owner.get("kind") == c.KIND_WORKFLOW
                and (owner.get("apiVersion") or "").split("/")[0] == c.GROUP
                and owner.get("name") == wmeta["name"]
            ):
                if owner != ref:
                    owners[i] = ref
                    self.s.metadata_dirty = True
                break
        else:
            owners.append(ref)
            self.s.metadata_dirty = True
        labels = self.s.meta.setdefault("labels", {})
        for key, value in jobs.task_labels(self.s.task).items():
            if labels.get(key) != value:
                labels[key] = value
                self.s.metadata_dirty = True

    def delete_task(self, observation: TaskObservation) -> None:
        """§3.5 step 3 (D9): the Workflow is being deleted, so the Task goes too."""
        self.flush_metadata()
        meta = self.s.meta
        try:
            self.r.rest.delete(TASKS, meta["namespace"], meta["name"], uid=meta["uid"])
        except NotFound:
            return
        except Conflict as exc:
            raise RuntimeError(f"failed to delete Task: {exc}") from None

    def record_job_recreation(self, observation: TaskObservation) -> None:
        """The Job vanished before its outcome was recorded: note it durably, re-create once."""
        annotations = self.s.meta.setdefault("annotations", {})
        annotations[ANNOTATION_JOB_RECREATED] = observation.job_ref_uid or "unknown"
        self.s.metadata_dirty = True
        self.s.notes.append(
            f"Job {observation.job_name} disappeared before its outcome was recorded; "
            "re-creating it once"
        )
        self.flush_metadata()  # durable before the new Job exists

    def flush_metadata(self) -> None:
        """Write pending metadata changes in one merge patch (with resourceVersion: lists are
        replaced wholesale, so a concurrent change must fail with 409 instead of being lost)."""
        if not self.s.metadata_dirty:
            return
        meta = self.s.meta
        patch = {
            "metadata": {
                "resourceVersion": meta.get("resourceVersion"),
                "finalizers": meta.get("finalizers") or None,
                "ownerReferences": meta.get("ownerReferences") or None,
                "labels": meta.get("labels") or None,
                "annotations": meta.get("annotations") or None,
            }
        }
        try:
            updated = self.r.rest.patch(TASKS, meta["namespace"], meta["name"], patch)
        except Conflict:
            # Someone else changed the Task (F7): remember its current version so the retry
            # starts from it instead of from a cache that may still lag behind, which would
            # only conflict again.
            self.r.remember_task(self.r.rest.get(TASKS, meta["namespace"], meta["name"]))
            raise
        self.r.remember_task(updated)
        # Keep the working status (the patch reply carries the stored one) and the new metadata.
        self.s.task["metadata"] = copy.deepcopy(updated["metadata"])
        self.s.metadata_dirty = False
        self.s.metadata_writes += 1

    def remove_task_finalizer(self, observation: TaskObservation) -> None:
        """§3.10: the last step; the Task then disappears."""
        meta = self.s.meta
        patch = finalizers.removal(self.s.task, c.FINALIZER_TASK_PROTECTION)
        if patch is None:
            return
        try:
            updated = self.r.rest.patch(
                TASKS, meta["namespace"], meta["name"], patch, content_type=JSON_PATCH
            )
        except NotFound:
            return
        self.r.remember_task(updated)

    # -- status ----------------------------------------------------------------------------------

    def record_queued_time(self, observation: TaskObservation) -> None:
        """§3.4 step 1."""
        self.s.status.setdefault("queuedTime", rfc3339(self.s.now))

    def record_start_time(self, observation: TaskObservation) -> None:
        """Set once (D3)."""
        self.s.status.setdefault("startTime", rfc3339(self.s.now))

    def record_end_time(self, observation: TaskObservation) -> None:
        """D10: every terminal phase has an endTime."""
        self.s.status.setdefault("endTime", rfc3339(self.s.now))

    def select_media_processing_entity(self, observation: TaskObservation) -> None:
        """§3.6.1 with D1, D11–D14; a chosen ref is sticky."""
        if self.s.status.get("mediaProcessingEntityRef"):
            return
        ref, _ = selection.select_media_processing_entity(self.s.task, self.r.caches)
        self.s.status["mediaProcessingEntityRef"] = ref

    def select_function(self, observation: TaskObservation) -> None:
        """§3.6.2 with D11–D14; a chosen ref is sticky."""
        if self.s.status.get("functionRef"):
            return
        ref, _ = selection.select_function(self.s.task, self.r.caches)
        self.s.status["functionRef"] = ref

    def adopt_job(self, observation: TaskObservation) -> None:
        """D6: the Job under the Task's name is the Task's Job, whatever jobRef said."""
        if self.s.job is None:
            raise RuntimeError(f"Job {observation.job_name} vanished while being adopted")
        self.s.status["jobRef"] = jobs.exact_ref(self.s.job)

    def clear_job_ref(self, observation: TaskObservation) -> None:
        """§3.9: the Job is gone or replaced; ``None`` removes the field in the merge patch."""
        self.s.status["jobRef"] = None

    # -- the Job ---------------------------------------------------------------------------------

    def create_job_and_secret(self, observation: TaskObservation) -> None:
        """§3.7 with D5/D7: Job first (deterministic name), then its Secret owned by it.

        ``AlreadyExists`` adopts the object when it carries this Task's labels, so a retried
        pass (lost status write, stale read, crash) never makes a second Job or Secret.
        """
        self.flush_metadata()
        cluster = self._cluster()
        task = self.s.task
        namespace = task["metadata"]["namespace"]
        workflow = self.s.workflow
        if workflow is None:
            raise RuntimeError(f"failed to fetch Workflow: {observation.workflow_name}")
        function_ref = self.s.status.get("functionRef") or {}
        function = self.r.caches.get(
            function_ref.get("kind") or c.KIND_FUNCTION,
            function_ref.get("namespace") or namespace,
            function_ref.get("name") or "",
        )
        if function is None:
            pair = selection.FUNCTION
            raise RuntimeError(
                pair.not_found(
                    function_ref.get("kind") or c.KIND_FUNCTION, function_ref.get("name", "")
                )
            )
        if function_ref.get("kind") not in (c.KIND_FUNCTION, c.KIND_CLUSTER_FUNCTION):
            raise RuntimeError("functionRef does not reference a Function or ClusterFunction")
        template = selection.task_template(task.get("spec") or {}, namespace, self.r.caches)
        if (function.get("spec") or {}).get("localMediaProcessingEntitiesOnly") and cluster.remote:
            raise RuntimeError(
                "localMediaProcessingEntitiesOnly is true, "
                "but selected MediaProcessingEntity is remote"
            )
        # Everything that can fail on the Task's own inputs (template patches, MediaLocations and
        # their Secrets) is built before anything is created: a Task that cannot run leaves no
        # Job behind, least of all one whose pods wait for a Secret that never comes (D5, F9).
        body = jobs.build_job(
            task=task, function=function, task_template=template, namespace=cluster.namespace
        )
        payload = helperdata.build_payload(
            task=task,
            workflow=workflow,
            function=function,
            task_template=template,
            catalog=self.r.caches,
            read_secret=lambda ns, name: self.r.rest.get(SECRETS, ns, name),
            nats=self.r.nats,
        )
        job = self.s.job
        if job is not None and not jobs.owns(job, task):
            raise RuntimeError(
                f"Job {cluster.namespace}/{job['metadata']['name']} already exists "
                "and does not belong to this Task"
            )
        if job is None:
            job = self._create_or_adopt(cluster, JOBS, body)
            self.s.job = job
            self.s.created_job = True
            self.r.remember_job(cluster, job)
            self.r.observe_job_created(task, job)
        secret = jobs.build_secret(task=task, job=job, payload=payload)
        existing = self._create_or_adopt(cluster, SECRETS, secret)
        owners = (existing.get("metadata") or {}).get("ownerReferences") or []
        if not any(o.get("uid") == job["metadata"]["uid"] for o in owners):
            # A Secret left from an earlier Job of that name (its GC not done yet): make it ours.
            cluster.rest.patch(
                SECRETS,
                cluster.namespace,
                secret["metadata"]["name"],
                {
                    "metadata": {"ownerReferences": secret["metadata"]["ownerReferences"]},
                    "data": secret["data"],
                },
            )
        self.s.status["jobRef"] = jobs.exact_ref(job)

    def _create_or_adopt(
        self, cluster: MpeCluster, res: Any, body: dict[str, Any]
    ) -> dict[str, Any]:
        name = body["metadata"]["name"]
        try:
            return cluster.rest.create(res, cluster.namespace, body)
        except AlreadyExists:
            current = cluster.rest.get(res, cluster.namespace, name)
        if not jobs.owns(current, self.s.task):
            raise RuntimeError(
                f"{res.kind} {cluster.namespace}/{name} already exists "
                "and does not belong to this Task"
            )
        return current

    def delete_job(self, observation: TaskObservation) -> None:
        """§3.9 step 3 / §3.10: UID precondition, background propagation; gone/replaced is done."""
        cluster = self._cluster()
        try:
            reply = cluster.rest.delete(
                JOBS,
                self._job_namespace(cluster),
                observation.job_name,
                uid=observation.job_uid,
                propagation="Background",
            )
        except (NotFound, Conflict):
            return
        if (
            reply.get("kind") == c.KIND_JOB
        ):  # still there (finalizers): remember its deletionTimestamp
            self.s.job = reply
            self.r.remember_job(cluster, reply)

    def release_job_finalizer(self, observation: TaskObservation) -> None:
        """D18: drop ``job-protection`` once the outcome is recorded (or the Task is going)."""
        cluster = self._cluster()
        patch = finalizers.removal(self.s.job or {}, c.FINALIZER_JOB_PROTECTION)
        if patch is None:
            return
        try:
            updated = cluster.rest.patch(
                JOBS,
                self._job_namespace(cluster),
                observation.job_name,
                patch,
                content_type=JSON_PATCH,
            )
        except NotFound:
            return
        self.r.remember_job(cluster, updated)

    def abandon_job(self, observation: TaskObservation) -> None:
        """§3.10: the MPE is unreachable; the Task goes and its Job (if any) is left behind."""
        self.r.events.record(
            self.s.task,
            WARNING,
            "JobAbandoned",
            f"MediaProcessingEntity is not reachable; Job {observation.job_name} "
            "(if it exists) is left behind",
        )

    def _job_namespace(self, cluster: MpeCluster) -> str:
        """Where the observed Job is (it may predate a change of the MPE's Job namespace, D19)."""
        return ((self.s.job or {}).get("metadata") or {}).get("namespace") or cluster.namespace

    def _cluster(self) -> MpeCluster:
        if self.s.cluster is None:
            raise RuntimeError("MediaProcessingEntity does not exist or is not ready")
        return self.s.cluster
