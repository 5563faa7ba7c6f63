"""The watches of the MPE clusters: Jobs (with their event predicate) and kubeconfig Secrets.

Two kinds of event come from here (docs/operations.md, "MediaProcessingEntity clusters and
credentials"):

* **Job events** wake the Task a Job's labels name. One watch per Job namespace, cluster and
  credentials, shared by the MPEs that reach the same Jobs (:class:`JobWatches`); a Job whose
  labels name a Task of a namespace none of its MPEs may serve wakes nobody (docs/security.md).
  The predicate drops what changes nothing the Task reads (:mod:`taskfsm.controllers.job_facts`)
  and the versions this process wrote itself (:meth:`JobWatches.note_own_job`), judged per Job
  watch: two MPEs reaching the same namespace have two watches, and each wakes the Task once its
  own cache shows the news. A Job watch failing or recovering re-queues its MPEs' reconciles,
  so ``Ready`` follows a cluster that refuses the controller.
* **kubeconfig Secret events** re-queue the MPEs naming the Secret: each Secret a remote MPE
  names has one small watch of the main cluster (``metadata.name`` field selector, shared by the
  MPEs naming that Secret, started and stopped with them) whose cache keeps only the Secret's
  metadata -- never its data -- so a rotated kubeconfig rebuilds the client at once instead of
  at the next resync (:class:`SecretWatches`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from taskfsm.controllers.clusters.cluster import (
    JOB_LABEL_SELECTOR,
    MpeCluster,
    MpeKey,
    SecretKey,
    WatchKey,
    trusts,
)
from taskfsm.controllers.job_facts import JobFacts, job_facts
from taskfsm.kube.informer import DELETED, Informer
from taskfsm.kube.packing import finished_job
from taskfsm.kube.rest import JOBS, SECRETS, Rest
from taskfsm.kube.transforms import job_transform
from taskfsm.manifests.jobs import task_key_of


@dataclass
class SharedWatch:
    """One informer and the MPEs using it."""

    informer: Informer
    users: set[MpeKey] = field(default_factory=set)


class JobWatches:
    """The Job watches of the MPE clusters, shared by the MPEs that reach the same Jobs.

    Args:
        on_job_event: called with the Task key (``namespace/name``) an event concerns.
        on_mpe_event: called with the key of an MPE whose reconcile is due (its watch failed or
            recovered; a Job gone from a location it keeps for its Jobs).
        retired_by: the MPEs that keep a retired cluster with this watch key.
        informer_options: keyword arguments for every :class:`Informer` (timeouts).
    """

    def __init__(
        self,
        *,
        on_job_event: Callable[[str], None],
        on_mpe_event: Callable[[MpeKey], None],
        retired_by: Callable[[WatchKey], list[MpeKey]],
        informer_options: dict[str, Any],
    ) -> None:
        self.on_job_event = on_job_event
        self.on_mpe_event = on_mpe_event
        self.retired_by = retired_by
        self.informer_options = informer_options
        self._watches: dict[WatchKey, SharedWatch] = {}
        self._facts: dict[tuple[WatchKey, str], JobFacts] = {}
        """Per Job watch and Job (``namespace/name``) what its Task reads of it, as last
        delivered by that watch. Per watch, because two MPEs may reach the same Jobs through
        two watches (say a local and a remote MPE for one cluster): a Task is woken by each
        watch once its cache shows the news, and the one its reconcile reads must not be
        silenced by the other having delivered the same facts first."""
        self._lock = threading.Lock()

    def acquire(self, watch_key: WatchKey, rest: Rest, user: MpeKey) -> Informer:
        """The Job watch of ``watch_key`` for MPE ``user``, started if nobody uses it yet."""
        cluster_id, namespace, _ = watch_key
        with self._lock:
            watch = self._watches.get(watch_key)
            if watch is None:
                informer = Informer(
                    rest,
                    JOBS,
                    namespace=namespace,
                    label_selector=JOB_LABEL_SELECTOR,
                    name=f"jobs@{cluster_id}/{namespace}",
                    transform=job_transform,  # the pod template is never read from the cache
                    pack_when=finished_job,  # a finished Job is read again rarely
                    **self.informer_options,
                )
                informer.add_handler(functools.partial(self._job_event, watch_key))
                informer.add_health_handler(functools.partial(self._health, watch_key))
                watch = SharedWatch(informer)
                self._watches[watch_key] = watch
                informer.start()
            watch.users.add(user)
            return watch.informer

    def release(self, cluster: MpeCluster) -> None:
        """``cluster``'s MPE no longer uses its Job watch: stop it once nobody does."""
        with self._lock:
            watch = self._watches.get(cluster.watch_key)
            if watch is None:
                return
            watch.users.discard(cluster.key)
            if watch.users:
                return
            del self._watches[cluster.watch_key]
            for fact_key in [k for k in self._facts if k[0] == cluster.watch_key]:
                del self._facts[fact_key]
        watch.informer.stop()

    def stop(self) -> None:
        with self._lock:
            watches, self._watches = list(self._watches.values()), {}
        for watch in watches:
            watch.informer.stop()

    def note_own_job(self, cluster: MpeCluster, job: dict[str, Any]) -> None:
        """A version of a Job this process has just written in ``cluster`` (created, or its
        finalizer released): the reconcile that wrote it knows its facts, so the event of
        ``cluster``'s Job watch that brings the same facts back wakes nobody (one reconcile per
        Task fewer, docs/benchmarks.md). A later version with other facts (the Job finishing,
        deleted) still wakes the Task."""
        meta = job.get("metadata") or {}
        key = (cluster.watch_key, f"{meta.get('namespace')}/{meta.get('name')}")
        with self._lock:
            self._facts[key] = job_facts(job)

    def _health(self, watch_key: WatchKey, _healthy: bool) -> None:
        """A Job watch failed or recovered: its MPEs' reconciles re-check ``Ready``."""
        with self._lock:
            watch = self._watches.get(watch_key)
            users = sorted(watch.users) if watch is not None else []
        for user in users:
            self.on_mpe_event(user)

    def _job_event(self, watch_key: WatchKey, kind: str, job: dict[str, Any]) -> None:
        meta = job.get("metadata") or {}
        task_key = task_key_of(job)  # a cut name read through its annotation (D24)
        if task_key is None:
            return
        namespace = task_key.split("/", 1)[0]
        with self._lock:
            watch = self._watches.get(watch_key)
            users = list(watch.users) if watch is not None else []
        if not any(trusts(user, namespace) for user in users):
            return  # labelled for a Task its MPEs may not serve: never wakes or touches it
        key = (watch_key, f"{meta.get('namespace')}/{meta.get('name')}")
        facts = job_facts(job)
        with self._lock:
            if kind == DELETED:
                self._facts.pop(key, None)
            elif self._facts.get(key) == facts:
                return
            else:
                self._facts[key] = facts
        self.on_job_event(task_key)
        if kind == DELETED:
            # A Job gone from an MPE's earlier location: that MPE's reconcile may let go of it.
            for mpe in self.retired_by(watch_key):
                self.on_mpe_event(mpe)


def secret_metadata(secret: dict[str, Any]) -> dict[str, Any]:
    """What a kubeconfig Secret watch caches: identity and resourceVersion, never ``data``."""
    meta = secret.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in meta
        },
    }


class SecretWatches:
    """The kubeconfig Secret watches, shared by the MPEs naming the same Secret.

    Args:
        main: the main cluster's Rest.
        on_mpe_event: called with the key of an MPE whose reconcile is due.
        fingerprint_of: the fingerprint of the client the registry holds for an MPE (None:
            none), to tell a Secret version the client was built from from a new one.
        informer_options: keyword arguments for every :class:`Informer` (timeouts).
    """

    def __init__(
        self,
        main: Rest,
        *,
        on_mpe_event: Callable[[MpeKey], None],
        fingerprint_of: Callable[[MpeKey], tuple[Any, ...] | None],
        informer_options: dict[str, Any],
    ) -> None:
        self.main = main
        self.on_mpe_event = on_mpe_event
        self.fingerprint_of = fingerprint_of
        self.informer_options = informer_options
        self._watches: dict[SecretKey, SharedWatch] = {}
        self._secret_of: dict[MpeKey, SecretKey] = {}
        self._lock = threading.Lock()

    def watch(self, user: MpeKey, secret: SecretKey | None) -> None:
        """Make ``secret`` (None: none) the kubeconfig Secret watched for ``user``: start its
        watch if no other MPE watches it yet, stop the previous one once nobody uses it."""
        stop: Informer | None = None
        with self._lock:
            previous = self._secret_of.get(user)
            if previous == secret:
                return
            if previous is not None:
                self._secret_of.pop(user, None)
                old = self._watches.get(previous)
                if old is not None:
                    old.users.discard(user)
                    if not old.users:
                        del self._watches[previous]
                        stop = old.informer
            if secret is not None:
                self._secret_of[user] = secret
                watch = self._watches.get(secret)
                if watch is None:
                    namespace, name = secret
                    informer = Informer(
                        self.main,
                        SECRETS,
                        namespace=namespace,
                        # One Secret: the namespace's others are never listed.
                        field_selector=f"metadata.name={name}",
                        name=f"secret@{namespace}/{name}",
                        transform=secret_metadata,
                        **self.informer_options,
                    )
                    informer.add_handler(functools.partial(self._secret_event, secret))
                    watch = self._watches[secret] = SharedWatch(informer)
                    informer.start()
                watch.users.add(user)
        if stop is not None:
            stop.stop()

    def watched(self) -> dict[SecretKey, set[MpeKey]]:
        """The kubeconfig Secrets watched, each with the MPEs naming it."""
        with self._lock:
            return {k: set(w.users) for k, w in self._watches.items()}

    def cache(self, secret: SecretKey) -> list[dict[str, Any]]:
        """What the watch of ``secret`` caches (:func:`secret_metadata`: no data)."""
        with self._lock:
            watch = self._watches.get(secret)
        return watch.informer.list() if watch is not None else []

    def stop(self) -> None:
        with self._lock:
            watches, self._watches, self._secret_of = list(self._watches.values()), {}, {}
        for watch in watches:
            watch.informer.stop()

    def _secret_event(self, secret: SecretKey, kind: str, obj: dict[str, Any]) -> None:
        """A kubeconfig Secret was created, changed or deleted: re-queue each MPE naming it whose
        client was not built from exactly this version (the first list's ADDED of a Secret an
        MPE already uses re-queues nothing)."""
        namespace, name = secret
        version = f"{namespace}/{name}@{(obj.get('metadata') or {}).get('resourceVersion')}"
        with self._lock:
            watch = self._watches.get(secret)
            users = sorted(watch.users) if watch is not None else []
        due = []
        for user in users:
            fingerprint = self.fingerprint_of(user)
            if kind == DELETED or fingerprint is None or fingerprint[1:] != (version,):
                due.append(user)
        for user in due:
            self.on_mpe_event(user)
