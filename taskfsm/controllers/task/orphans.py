"""Task-labelled Jobs and Secrets whose Task no longer exists: found, released and deleted.

A Task normally takes its Job and helper-data Secret with it: its finalizer holds the Task until
the Job is deleted and the Job's ``job-protection`` finalizer released. When the Task goes some
other way (its finalizers stripped while the controller was down or cut off, a namespace wiped
by hand, a Task deleted and re-created under the same name), the Job stays, held for ever by
``job-protection``, and so does its Secret, which holds credentials. This module is the
controller's garbage collector for them (D5b in docs/behaviour.md §6; the rules in §3.15):

* a child belongs to the Task named by its ``engine.nagare.media/task-namespace`` and
  ``task-name`` labels (a name cut to fit a label only with the annotation that holds it whole,
  so two Tasks whose long names share a prefix are never confused: D24), and to that Task's
  *incarnation* by name: the Job and Secret of a Task are named ``<task>-<hash of its UID>``
  (``taskfsm.manifests.jobs.job_name``), so a child whose name is not the current Task's (nor its
  ``status.jobRef``, for Jobs made by the Go controller) belongs to a Task that is gone;
* :meth:`OrphanCollector.collect` is called by every Task reconcile for its key, so the events
  that queue a key find its orphans at once: the Job watches' first lists at start-up (every
  Job is an event), every relist (the Task informer synthesises a delete for each Task that
  went during an outage), and every Job event;
* :meth:`OrphanCollector.sweep` runs periodically and after a MediaProcessingEntity's Job watch
  (re)synced: it queues the key of every cached Job whose Task the cache does not show, and
  lists the labelled Secrets of each Job namespace (metadata only) to delete those whose Task is
  gone and whose Job no longer exists.

Nothing is deleted on the word of a cache: before a child goes, the Task is read fresh from the
API server (NotFound, or another UID), and every delete carries the child's UID as a
precondition. Each deletion is logged and recorded as a Warning Event ``OrphanDeleted`` in the
Task's namespace (the Event names the Task and the child, never Secret data).

With several active replicas (``--buckets``, docs/operations.md "Running several replicas") each
replica acts only on the keys of the buckets it holds: the sweep queues and deletes for those
keys only (``owns``), and each deletion is made in the key's bucket (``scope``), so its write
gate is that bucket's Lease and two replicas never race to delete the same child. The one
exception is :meth:`OrphanCollector.collect_cluster` for a MediaProcessingEntity about to go:
its single manager (the holder of bucket 0) clears every key there, since no client will reach
that cluster afterwards; a concurrent collection by a key's holder is harmless (UID
preconditions, NotFound and Conflict are quiet). (The Jobs that finished Tasks keep there are
not orphans: each Task deletes its own once its MPE is being deleted, a transition of the Task
chart, and the MPE waits for that.)
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from taskfsm.api import constants as c
from taskfsm.kube import finalizers
from taskfsm.kube.errors import Conflict, KubeError, NotFound
from taskfsm.kube.events import WARNING, EventRecorder
from taskfsm.kube.resources import TASKS
from taskfsm.kube.rest import JOBS, SECRETS, Rest
from taskfsm.manifests import jobs

if TYPE_CHECKING:
    from taskfsm.controllers.clusters.cluster import MpeCluster
    from taskfsm.controllers.clusters.registry import MpeRegistry

log = logging.getLogger(__name__)

TASK_INDEX = "task"
"""Index of a Job cache by the ``namespace/name`` of the Task its labels name."""

ORPHAN_EVENT_REASON = "OrphanDeleted"


def task_key_of(obj: dict[str, Any]) -> str | None:
    """``namespace/name`` of the Task a child's labels name (a cut name confirmed by its
    annotation, D24), or None for an unlabelled one."""
    return jobs.task_key_of(obj)


def belongs_to(child: dict[str, Any], task: dict[str, Any] | None) -> bool:
    """Whether ``child`` (labelled for ``task``'s key) is the Job or Secret of this incarnation."""
    if task is None:
        return False
    meta = child.get("metadata") or {}
    if meta.get("name") == jobs.job_name(task):
        return True
    job_ref = (task.get("status") or {}).get("jobRef") or {}
    return bool(job_ref.get("uid")) and job_ref.get("uid") == meta.get("uid")


class OrphanCollector:
    """Finds and deletes the Jobs and Secrets of Tasks that no longer exist.

    Args:
        rest: the main cluster (fresh Task reads, Events).
        registry: the MediaProcessingEntity clusters whose Job caches are searched.
        events: where ``OrphanDeleted`` Events go.
        cached_task: the Task cache's lookup ``(namespace, name) -> Task | None``.
        enqueue: queues a Task key for reconcile (the sweep's way to hand over work).
        owns: whether this replica works on a Task key (its bucket is held); default: all.
        scope: the context a write for a Task key is made in (its bucket's write gate).
    """

    def __init__(
        self,
        *,
        rest: Rest,
        registry: MpeRegistry,
        events: EventRecorder,
        cached_task: Callable[[str, str], dict[str, Any] | None],
        enqueue: Callable[[str], None],
        owns: Callable[[str], bool] = lambda _key: True,
        scope: Callable[[str], AbstractContextManager[None]] | None = None,
    ) -> None:
        self.rest = rest
        self.owns = owns
        self.scope = scope or (lambda _key: contextlib.nullcontext())
        self.registry = registry
        self.events = events
        self.cached_task = cached_task
        self.enqueue = enqueue
        self.deleted = 0
        """Children deleted so far (for tests and logs)."""

    # -- per Task key (reconcile workers) ---------------------------------------------------------

    def candidates(
        self, key: str, task: dict[str, Any] | None, clusters: list[MpeCluster] | None = None
    ) -> list[tuple[MpeCluster, dict[str, Any]]]:
        """Cached Jobs labelled for ``key`` that are not ``task``'s (cheap: an index lookup)."""
        found = []
        for cluster in self.registry.clusters_with_retired() if clusters is None else clusters:
            if not cluster.trusts(key.split("/", 1)[0]):
                continue  # children here never belong to that namespace's Tasks
            informer = cluster.jobs
            informer.index(TASK_INDEX, task_key_of)
            for job in informer.by_index(TASK_INDEX, key):
                if not belongs_to(job, task):
                    found.append((cluster, job))
        return found

    def collect(
        self, key: str, task: dict[str, Any] | None, clusters: list[MpeCluster] | None = None
    ) -> None:
        """Delete the Jobs (and their Secrets) labelled for Task ``key`` that are not ``task``'s.

        Raises:
            KubeError: an API request failed (the caller retries with backoff).
        """
        suspects = self.candidates(key, task, clusters)
        if not suspects:
            return
        namespace, name = key.split("/", 1)
        current = self._fresh_task(namespace, name)
        for cluster, job in suspects:
            if belongs_to(job, current):
                continue  # the cache was behind: this Job is the current Task's
            self._delete_job(cluster, key, job)

    def collect_cluster(self, cluster: MpeCluster) -> None:
        """Delete every orphaned Job and Secret in ``cluster`` now: the MPE is about to go, and
        nothing may be left behind where no client will reach it any more.

        Raises:
            KubeError: an API request failed.
        """
        keys = {_trusted_key(cluster, job) for job in cluster.jobs.each()}
        for key in sorted(k for k in keys if k is not None):
            namespace, name = key.split("/", 1)
            self.collect(key, self.cached_task(namespace, name), [cluster])
        self._sweep_secrets(cluster, every_key=True)

    # -- periodic sweep ---------------------------------------------------------------------------

    def sweep(self, clusters: list[MpeCluster] | None = None) -> None:
        """Queue the keys of cached Jobs whose Task is gone, and delete orphaned Secrets, in
        ``clusters`` (default: every registered one).

        Never raises for one cluster: one that cannot be listed is logged and swept next time.
        """
        for cluster in self.registry.clusters_with_retired() if clusters is None else clusters:
            if not cluster.ready:
                continue
            # One Job read at a time: a list of every cached Job was the sweep's peak.
            keys = {_trusted_key(cluster, job) for job in cluster.jobs.each()} - {None}
            for key in sorted(k for k in keys if k is not None and self.owns(k)):
                namespace, name = key.split("/", 1)
                task = self.cached_task(namespace, name)
                jobs_of_key = cluster.jobs.by_index(TASK_INDEX, key) if task else []
                if task is None or any(not belongs_to(j, task) for j in jobs_of_key):
                    self.enqueue(key)
            try:
                self._sweep_secrets(cluster)
            except KubeError as exc:
                log.warning(
                    "orphan sweep could not list Secrets",
                    extra={"namespace": cluster.namespace, "error": str(exc)},
                )

    def _sweep_secrets(self, cluster: MpeCluster, *, every_key: bool = False) -> None:
        """Delete the labelled Secrets of ``cluster`` whose Task and Job are gone: of the keys
        this replica owns, each in its key's scope; ``every_key``: all, in the caller's."""
        listed = cluster.rest.list(
            SECRETS, cluster.namespace, label_selector=c.LABEL_TASK_NAME, metadata_only=True
        )
        for secret in listed.get("items") or []:
            key = _trusted_key(cluster, secret)
            if key is None or not (every_key or self.owns(key)):
                continue
            meta = secret.get("metadata") or {}
            if cluster.jobs.get(cluster.namespace, meta.get("name") or "") is not None:
                continue  # its Job exists: the Job's own collection takes both
            namespace, name = key.split("/", 1)
            if belongs_to(secret, self.cached_task(namespace, name)):
                continue
            with contextlib.nullcontext() if every_key else self.scope(key):
                if belongs_to(secret, self._fresh_task(namespace, name)):
                    continue
                self._delete(cluster, SECRETS, key, secret)

    # -- deleting ---------------------------------------------------------------------------------

    def _fresh_task(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self.rest.get(TASKS, namespace, name)
        except NotFound:
            return None

    def _delete_job(self, cluster: MpeCluster, key: str, job: dict[str, Any]) -> None:
        """Release and delete ``job``, then its Secret."""
        released = finalizers.remove(cluster.rest, JOBS, job, c.FINALIZER_JOB_PROTECTION)
        self._delete(cluster, JOBS, key, released or job)
        meta = job["metadata"]
        try:  # the Secret is owned by the Job, so the garbage collector takes it too; be sure
            secret = cluster.rest.get(SECRETS, meta["namespace"], meta["name"])
        except NotFound:
            return
        if task_key_of(secret) == key:
            self._delete(cluster, SECRETS, key, secret)

    def _delete(self, cluster: MpeCluster, res: Any, key: str, obj: dict[str, Any]) -> None:
        """Delete ``obj`` (UID precondition), log it and record ``OrphanDeleted`` on its Task."""
        meta = obj["metadata"]
        try:
            cluster.rest.delete(
                res, meta["namespace"], meta["name"], uid=meta.get("uid"), propagation="Background"
            )
        except (NotFound, Conflict):
            return  # gone already, or another object of that name now
        self.deleted += 1
        namespace, name = key.split("/", 1)
        where = _where(cluster, obj)
        log.warning(
            "deleted an orphaned child", extra={"task": key, "child": f"{res.kind} {where}"}
        )
        self.events.record(
            {
                "apiVersion": c.API_VERSION,
                "kind": c.KIND_TASK,
                "metadata": {"namespace": namespace, "name": name},
            },
            WARNING,
            ORPHAN_EVENT_REASON,
            f"Task {key} no longer exists; deleted its orphaned {res.kind} {where}",
        )


def _trusted_key(cluster: MpeCluster, obj: dict[str, Any]) -> str | None:
    """The Task key ``obj``'s labels name, if a child in ``cluster`` may belong to it."""
    key = task_key_of(obj)
    return key if key is not None and cluster.trusts(key.split("/", 1)[0]) else None


def _where(cluster: MpeCluster, obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    remote = f" in cluster {cluster.cluster_id}" if cluster.remote else ""
    return f"{meta['namespace']}/{meta['name']}{remote}"
