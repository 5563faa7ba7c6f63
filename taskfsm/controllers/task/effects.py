"""The Task lifecycle's effects against Kubernetes: the model ``machines.task.driver.run_pass``
calls.

Guards come from ``machines.task.guards.ObservationGuards`` (pure, over the observation); this
class adds the effects, each idempotent (a repeated pass finds its work done and succeeds
quietly) and each raising a plain exception whose text becomes ``status.message``.

Status effects change the pass's working copy of the Task (:class:`PassState`); the reconciler
patches ``/status`` once at the end. Metadata effects (finalizer, owner reference, labels) also
change the working copy and are flushed in one metadata patch, at the latest before any effect
that touches another object, so the Task finalizer is durable before its Job exists.

Spec: docs/behaviour.md §3.5-§3.10, with the defects of its §6 fixed; every effect names its
section.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from machines.task.guards import ObservationGuards
from machines.task.observation import TaskObservation
from taskfsm.api import constants as c
from taskfsm.build import helperdata, jobs, selection
from taskfsm.kube import finalizers
from taskfsm.kube.errors import AlreadyExists, Conflict, NotFound
from taskfsm.kube.events import WARNING
from taskfsm.kube.resources import TASKS
from taskfsm.kube.rest import JOBS, SECRETS
from taskfsm.kube.transforms import default_transform

if TYPE_CHECKING:
    from taskfsm.api.config import NatsConfiguration
    from taskfsm.controllers.mpe.registry import MpeCluster
    from taskfsm.kube.cache import Caches
    from taskfsm.kube.events import EventRecorder
    from taskfsm.kube.rest import Rest

log = logging.getLogger(__name__)


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
    path: list[str] = field(default_factory=list)
    """Phases this reconcile went through, starting with the persisted one (for Events)."""

    @property
    def meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = self.task.setdefault("metadata", {})
        return meta

    @property
    def status(self) -> dict[str, Any]:
        status = self.task.get("status")
        if status is None:
            status = self.task["status"] = {}
        return status

    @property
    def key(self) -> str:
        return f"{self.meta['namespace']}/{self.meta['name']}"


class Services(Protocol):
    """What the effects use of the runtime (the Task reconciler provides it): the main
    cluster, the caches with read-your-writes, Events and the process settings."""

    rest: Rest
    caches: Caches
    events: EventRecorder
    nats: NatsConfiguration | None
    job_ttl_seconds: int

    def remember_task(self, task: dict[str, Any]) -> None: ...

    def forget_task(self, task: dict[str, Any]) -> None: ...

    def remember_job(
        self, cluster: MpeCluster, job: dict[str, Any], *, known: bool = False
    ) -> None: ...

    def observe_job_created(self, task: dict[str, Any], job: dict[str, Any]) -> None: ...


class TaskEffects(ObservationGuards):
    """``machines.task.model.TaskLifecycleModel`` bound to the cluster for one reconcile."""

    def __init__(self, reconciler: Services, state: PassState) -> None:
        self.r = reconciler
        self.s = state

    # -- metadata --------------------------------------------------------------------------------

    def add_task_finalizer(self, observation: TaskObservation) -> None:
        """§3.5 (the Task's finalizer); never reached for a terminating Task (D22)."""
        finalizers = self.s.meta.setdefault("finalizers", [])
        if c.FINALIZER_TASK_PROTECTION not in finalizers:
            finalizers.append(c.FINALIZER_TASK_PROTECTION)
            self.s.metadata_dirty = True

    def set_workflow_ownership(self, observation: TaskObservation) -> None:
        """§3.5: the controller owner reference to the Workflow, and the four labels (§2)."""
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
        """§3.5 (D9): the Workflow is being deleted, so the Task goes too."""
        self.flush_metadata()
        meta = self.s.meta
        try:
            self.r.rest.delete(TASKS, meta["namespace"], meta["name"], uid=meta["uid"])
        except NotFound:
            return
        except Conflict as exc:
            raise RuntimeError(f"failed to delete Task: {exc}") from None

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
        # Keep the working status (the patch reply carries the stored one) and the new metadata
        # (as the cache keeps it: managedFields mirror the spec and may nest as deep).
        self.s.task["metadata"] = copy.deepcopy(default_transform(updated)["metadata"])
        self.s.metadata_dirty = False
        self.s.metadata_writes += 1

    def remove_task_finalizer(self, observation: TaskObservation) -> None:
        """§3.10: the last step; the Task then disappears (a moved finalizer list is re-read)."""
        updated = finalizers.remove(self.r.rest, TASKS, self.s.task, c.FINALIZER_TASK_PROTECTION)
        if updated is None:
            return
        if updated["metadata"].get("deletionTimestamp") and not updated["metadata"].get(
            "finalizers"
        ):
            self.r.forget_task(updated)  # deleted by this write: nothing left to remember
            return
        self.r.remember_task(updated)

    # -- status ----------------------------------------------------------------------------------

    def record_queued_time(self, observation: TaskObservation) -> None:
        """§3.4: New -> Initializing stamps ``queuedTime``."""
        self.s.status.setdefault("queuedTime", rfc3339(self.s.now))

    def record_start_time(self, observation: TaskObservation) -> None:
        """Set once (D3)."""
        self.s.status.setdefault("startTime", rfc3339(self.s.now))

    def record_end_time(self, observation: TaskObservation) -> None:
        """D10: every terminal phase has an endTime."""
        self.s.status.setdefault("endTime", rfc3339(self.s.now))

    def select_media_processing_entity(self, observation: TaskObservation) -> None:
        """§3.6 (the MediaProcessingEntity) with D1, D11-D14; a chosen ref is sticky."""
        if self.s.status.get("mediaProcessingEntityRef"):
            return
        ref, _ = selection.select_media_processing_entity(self.s.task, self.r.caches)
        self.s.status["mediaProcessingEntityRef"] = ref

    def select_function(self, observation: TaskObservation) -> None:
        """§3.6 (the Function) with D11-D14; a chosen ref is sticky."""
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
            ttl_seconds=self.r.job_ttl_seconds,
            task=task,
            function=function,
            task_template=template,
            namespace=cluster.namespace,
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
            # This reconcile goes on with the Job it made: its ADDED event is no news.
            self.r.remember_job(cluster, job, known=True)
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
                    "metadata": {
                        "resourceVersion": existing["metadata"].get("resourceVersion"),
                        "ownerReferences": secret["metadata"]["ownerReferences"],
                    },
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
        """§3.9 / §3.10: delete the Job as observed (UID and resourceVersion
        preconditions, background propagation); gone or replaced is done.

        The resourceVersion precondition keeps a delete computed from a stale view from landing
        (D18b); a Job that merely changed since (its status moves while it runs) is
        read again and deleted in its new version.
        """
        cluster = self._cluster()
        namespace = self._job_namespace(cluster)
        job = self.s.job or {}
        version = (job.get("metadata") or {}).get("resourceVersion")
        for attempt in range(2):
            try:
                reply = cluster.rest.delete(
                    JOBS,
                    namespace,
                    observation.job_name,
                    uid=observation.job_uid,
                    resource_version=version,
                    propagation="Background",
                )
                break
            except NotFound:
                return
            except Conflict:
                if attempt:
                    raise
                try:
                    fresh = cluster.rest.get(JOBS, namespace, observation.job_name)
                except NotFound:
                    return
                if fresh["metadata"].get("uid") != observation.job_uid:
                    return  # another Job under that name now: not the one observed
                if fresh["metadata"].get("deletionTimestamp"):
                    self.s.job = fresh
                    self.r.remember_job(cluster, fresh)
                    return
                version = fresh["metadata"].get("resourceVersion")
        if reply.get("kind") == c.KIND_JOB:  # still there (finalizers): note its deletion
            self.s.job = reply
            self.r.remember_job(cluster, reply)

    def release_job_finalizer(self, observation: TaskObservation) -> None:
        """D18: drop ``job-protection`` once the outcome is recorded (or the Task is going)."""
        cluster = self._cluster()
        job = self.s.job or {}
        if not job:
            return
        updated = finalizers.remove(cluster.rest, JOBS, job, c.FINALIZER_JOB_PROTECTION)
        if updated is not None:
            # The outcome is recorded and nothing follows for a live Task: the event of this
            # write wakes nobody. A deleting Task's next step waits on the Job's own events.
            self.r.remember_job(cluster, updated, known=not self.s.meta.get("deletionTimestamp"))

    def abandon_job(self, observation: TaskObservation) -> None:
        """§3.10: the MPE is unreachable; the Task goes and its Job (if any) is left behind."""
        if observation.mpe_gone and observation.outcome_recorded:
            # A deleting MPE takes its finished Tasks' Jobs with it, unless its cluster could not
            # be searched (then the MPE has a Warning Event OrphansNotChecked).
            note = (
                f"MediaProcessingEntity no longer exists; Job {observation.job_name} went with "
                "it or, if its cluster could not be reached, is left behind"
            )
        elif observation.mpe_gone:
            note = (
                f"MediaProcessingEntity no longer exists; Job {observation.job_name} "
                "(if it exists) is left behind"
            )
        else:
            note = (
                f"MediaProcessingEntity is not reachable; Job {observation.job_name} "
                "(if it exists) is left behind"
            )
        self.r.events.record(self.s.task, WARNING, "JobAbandoned", note)

    def _job_namespace(self, cluster: MpeCluster) -> str:
        """Where the observed Job is (it may predate a change of the MPE's Job namespace, D19)."""
        return ((self.s.job or {}).get("metadata") or {}).get("namespace") or cluster.namespace

    def _cluster(self) -> MpeCluster:
        if self.s.cluster is None:
            raise RuntimeError("MediaProcessingEntity does not exist or is not ready")
        return self.s.cluster
