"""A Task's Job and Secret in its MediaProcessingEntity's cluster: reads and writes.

Reads come from the cluster's Job watch (with read-your-writes) or, where a cache cannot be
trusted, from the cluster itself; writes carry preconditions (deterministic names and
``AlreadyExists`` adoption for creates, UID and resourceVersion for deletes, UID and index
tests for finalizer edits) and are remembered, so their watch events wake nobody when the
reconcile that made them knew them (:meth:`JobSite.remember`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from machines.task.reads import cannot_start, mount_failures_count
from taskfsm.api import constants as c
from taskfsm.api.timestamps import parse_time
from taskfsm.controllers.clusters.cluster import MpeCluster
from taskfsm.controllers.clusters.registry import MpeRegistry
from taskfsm.kube import finalizers
from taskfsm.kube.cache import Caches
from taskfsm.kube.errors import AlreadyExists, Conflict, KubeError, NotFound
from taskfsm.kube.rest import CORE_EVENTS, JOBS, PODS, SECRETS, Resource
from taskfsm.kube.transforms import job_transform
from taskfsm.manifests import jobs

log = logging.getLogger(__name__)

JOB_UID_LABEL: Final = "batch.kubernetes.io/controller-uid"
"""The label the Job controller puts on a Job's pods: the Job's UID."""
PODS_LOOKED_AT: Final = 5
"""At most this many of a Job's pods are read per look (a Job's pods fail alike)."""


@dataclass(frozen=True)
class PodTrouble:
    """Why a Job's pods do not run, and since when."""

    message: str
    since: datetime


class JobSite:
    """Jobs and Secrets of Tasks in the MPE clusters, through the clusters' own clients."""

    def __init__(self, caches: Caches, registry: MpeRegistry) -> None:
        self.caches = caches
        self.registry = registry

    def _key(self, cluster: MpeCluster, namespace: str, name: str) -> tuple[str, ...]:
        return (cluster.cluster_id, JOBS.plural, namespace, name)

    # -- reads -----------------------------------------------------------------------------------

    def cached(self, cluster: MpeCluster, name: str) -> dict[str, Any] | None:
        """The Job ``name`` in the cluster's watched Job namespace, as this process knows it
        best (its Job watch, or its own newer write)."""
        cached = cluster.jobs.get(cluster.namespace, name)
        key = self._key(cluster, cluster.namespace, name)
        if cached is not None:
            return self.caches.written.pick(key, cached)
        return None

    def written(self, cluster: MpeCluster, name: str) -> dict[str, Any] | None:
        """This process's last write of the Job ``name`` not yet seen by the Job watch."""
        return self.caches.written.pick(self._key(cluster, cluster.namespace, name), None)

    def fetch(self, cluster: MpeCluster, namespace: str, name: str) -> dict[str, Any] | None:
        """The Job read from its cluster (None: it does not exist; our copy is forgotten).

        Raises:
            KubeError: the cluster did not answer, or refused.
        """
        try:
            return cluster.rest.get(JOBS, namespace, name)
        except NotFound:
            self.caches.written.gone(self._key(cluster, namespace, name))
            return None

    def refusal(
        self, cluster: MpeCluster, job: dict[str, Any], *, now: datetime
    ) -> PodTrouble | None:
        """Why ``job``'s pods are refused: its latest ``FailedCreate`` Event, since the first
        (one LIST); None when there is none or Events cannot be read (a remote cluster's
        credentials may not list Events)."""
        meta = job.get("metadata") or {}
        events = self._events(
            cluster,
            meta.get("namespace") or cluster.namespace,
            f"involvedObject.uid={meta.get('uid')},reason=FailedCreate",
        )
        return _latest(events, now, "pod creation failed")

    def pods_not_starting(
        self, cluster: MpeCluster, job: dict[str, Any], *, now: datetime
    ) -> PodTrouble | None:
        """Why ``job``'s pods cannot start: a container waiting for a reason that does not pass
        by itself (:func:`machines.task.reads.cannot_start`: an image that cannot be pulled, a
        ConfigMap or Secret it needs missing), since the pod was made; or, for a pod still
        creating its containers past the mount grace
        (:func:`machines.task.reads.mount_failures_count`), its latest ``FailedMount`` Event (a
        volume, such as a Secret, that is not there), since the first. One LIST of
        the Job's pods (its UID label), and one of a waiting pod's Events; None when nothing
        says so, or when they cannot be read."""
        meta = job.get("metadata") or {}
        namespace = meta.get("namespace") or cluster.namespace
        try:
            listed = cluster.rest.list(
                PODS,
                namespace,
                label_selector=f"{JOB_UID_LABEL}={meta.get('uid')}",
                limit=PODS_LOOKED_AT,
            )
        except KubeError as exc:
            log.debug("could not read the Job's pods", extra={"error": str(exc)})
            return None
        for pod in listed.get("items") or []:
            pod_meta = pod.get("metadata") or {}
            made = parse_time(pod_meta.get("creationTimestamp")) or now
            status = pod.get("status") or {}
            containers = [
                *(status.get("initContainerStatuses") or []),
                *(status.get("containerStatuses") or []),
            ]
            for container in containers:
                waiting = (container.get("state") or {}).get("waiting") or {}
                if cannot_start(waiting.get("reason") or ""):
                    message = (
                        f"pod {pod_meta.get('name')}: container {container.get('name')}: "
                        f"{waiting['reason']}: {waiting.get('message') or 'cannot start'}"
                    )
                    return PodTrouble(message, made)
            started = any(
                (c.get("state") or {}).get("running") or (c.get("state") or {}).get("terminated")
                for c in containers
            )
            if mount_failures_count((now - made).total_seconds(), started=started):
                events = self._events(
                    cluster,
                    namespace,
                    f"involvedObject.uid={pod_meta.get('uid')},reason=FailedMount",
                )
                trouble = _latest(events, now, "a volume cannot be mounted")
                if trouble is not None:
                    message = f"pod {pod_meta.get('name')}: {trouble.message}"
                    return PodTrouble(message, trouble.since)
        return None

    def _events(self, cluster: MpeCluster, namespace: str, selector: str) -> list[dict[str, Any]]:
        try:
            listed = cluster.rest.list(CORE_EVENTS, namespace, field_selector=selector)
        except KubeError as exc:
            log.debug("could not read Events", extra={"error": str(exc)})
            return []
        return list(listed.get("items") or [])

    # -- writes ----------------------------------------------------------------------------------

    def remember(self, cluster: MpeCluster, job: dict[str, Any], *, known: bool = False) -> None:
        """Read-your-writes for a Job this process wrote; ``known``: the reconcile that wrote it
        needs no watch event for this version (the Job event predicate drops it)."""
        meta = job["metadata"]
        self.caches.written.wrote(
            self._key(cluster, meta["namespace"], meta["name"]), job_transform(job)
        )
        if known:
            self.registry.note_own_job(cluster, job)

    def create_or_adopt(
        self, cluster: MpeCluster, res: Resource, body: dict[str, Any], task: dict[str, Any]
    ) -> dict[str, Any]:
        """Create ``body`` in the cluster's Job namespace; ``AlreadyExists`` adopts the object
        when it carries ``task``'s labels (a retried pass never makes a second one).

        Raises:
            RuntimeError: an object of that name exists and is not the Task's.
            KubeError: the cluster failed.
        """
        name = body["metadata"]["name"]
        try:
            return cluster.rest.create(res, cluster.namespace, body)
        except AlreadyExists:
            current = cluster.rest.get(res, cluster.namespace, name)
        if not jobs.owns(current, task):
            raise RuntimeError(
                f"{res.kind} {cluster.namespace}/{name} already exists "
                "and does not belong to this Task"
            )
        return current

    def own_secret(
        self, cluster: MpeCluster, existing: dict[str, Any], secret: dict[str, Any]
    ) -> None:
        """Make a Secret left from an earlier Job of that name (its GC not done yet) the new
        Job's: its owner reference and data (resourceVersion precondition)."""
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

    def delete(
        self, cluster: MpeCluster, job: dict[str, Any], *, name: str, uid: str
    ) -> dict[str, Any] | None:
        """Delete the Job as observed (UID and resourceVersion preconditions, background
        propagation); returns it when it is still there (finalizers), None when it is gone or
        another Job has its name now.

        The resourceVersion precondition keeps a delete computed from a stale view from landing
        (D18b); a Job that merely changed since (its status moves while it runs) is read again
        and deleted in its new version.
        """
        namespace = (job.get("metadata") or {}).get("namespace") or cluster.namespace
        version = (job.get("metadata") or {}).get("resourceVersion")
        for attempt in range(2):
            try:
                reply = cluster.rest.delete(
                    JOBS,
                    namespace,
                    name,
                    uid=uid,
                    resource_version=version,
                    propagation="Background",
                )
                break
            except NotFound:
                return None
            except Conflict:
                if attempt:
                    raise
                try:
                    fresh = cluster.rest.get(JOBS, namespace, name)
                except NotFound:
                    return None
                if fresh["metadata"].get("uid") != uid:
                    return None  # another Job under that name now: not the one observed
                if fresh["metadata"].get("deletionTimestamp"):
                    self.remember(cluster, fresh)
                    return fresh
                version = fresh["metadata"].get("resourceVersion")
        if reply.get("kind") == c.KIND_JOB:  # still there (finalizers): note its deletion
            self.remember(cluster, reply)
            return reply
        return None

    def release(self, cluster: MpeCluster, job: dict[str, Any], *, known: bool) -> None:
        """Remove the job-protection finalizer (gone or moved on: done); ``known``: nothing
        follows for the Task from this write's event (see :meth:`remember`)."""
        updated = finalizers.remove(cluster.rest, JOBS, job, c.FINALIZER_JOB_PROTECTION)
        if updated is not None:
            self.remember(cluster, updated, known=known)


def _latest(events: list[dict[str, Any]], now: datetime, fallback: str) -> PodTrouble | None:
    """The latest of ``events``' messages, since the first of them (None: no Event)."""
    if not events:
        return None
    stamps = [_event_time(e, "first") for e in events]
    first = min((t for t in stamps if t is not None), default=now)
    latest = max(events, key=lambda e: _event_time(e, "last") or first)
    return PodTrouble(str(latest.get("message") or fallback), first)


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
    return parse_time(str(value)[:19] + "Z") if value else None
