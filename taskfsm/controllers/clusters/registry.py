"""The registry of the MPE clusters' clients: set up, rebuilt, kept, retired, judged reachable.

docs/behaviour.md §1.7 and §4.1, with D19 fixed (spec or kubeconfig changes rebuild the client).
For each MPE the registry keeps a :class:`~taskfsm.controllers.clusters.cluster.MpeCluster`: a
:class:`~taskfsm.kube.rest.Rest` for that cluster (:mod:`taskfsm.controllers.clusters.target`
says which) and the Job watch of its Job namespace (:mod:`taskfsm.controllers.clusters.watches`,
shared by MPEs that point at the same cluster, namespace and credentials).
:meth:`MpeRegistry.sync` is what the MediaProcessingEntity chart's ``connect`` effects call.

The registry also keeps, in process memory:

* why an MPE's client could not be built (:meth:`MpeRegistry.error`), and which MPEs are still
  being set up (:meth:`MpeRegistry.pending`): what a Task waits for;
* which deleting MPEs this process has let go of (:meth:`MpeRegistry.released`): their deletion
  is done, no client of them will be set up again, and their Tasks treat them as gone;
* the client an MPE had while Tasks use it, when a new one cannot be built (:meth:`kept`: a
  namespace deletion may delete the kubeconfig Secret first, docs/operations.md "Deleting a
  namespace");
* an MPE's earlier locations while Tasks have Jobs there (``retired``, docs/operations.md
  "Changing where an MPE runs Jobs");
* how long each MPE has been unreachable without a break (:meth:`unreachable_for`), fed by the
  Task reads and the MPE's own cleanup: what ``--cleanup-timeout`` counts;
* whether an MPE's cluster can hold anything of a Task at all (:meth:`never_reached`): not when
  its spec is refused by policy, nor when no client of it ever listed its Jobs since it was
  created (docs/operations.md, "Deleting what never reached a cluster").
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Final

from taskfsm.api import constants as c
from taskfsm.api.timestamps import parse_time
from taskfsm.controllers.clusters.cluster import (
    MpeCluster,
    MpeError,
    MpeKey,
    MpeSettingUp,
    Reason,
    SecretKey,
    WatchKey,
    among,
    key_of,
    key_of_ref,
)
from taskfsm.controllers.clusters.target import resolve
from taskfsm.controllers.clusters.watches import JobWatches, SecretWatches
from taskfsm.kube import client as kube_client
from taskfsm.kube import kubeconfig
from taskfsm.kube.informer import Informer
from taskfsm.kube.rest import Rest

log = logging.getLogger(__name__)

POLICY_REFUSALS: Final = frozenset(
    {Reason.NAMESPACE_NOT_ALLOWED, Reason.KUBECONFIG_REFUSED, Reason.INVALID_SPEC}
)
"""Reasons an MPE's spec can never give a client, whatever its cluster does: nothing of a Task
can have been made through it."""
CLOCK_MARGIN_SECONDS: Final = 5.0
"""An MPE counts as created while this process ran only if its creationTimestamp is this much
after the process started (the API server's clock may be ahead of ours)."""
REMOTE_MAX_RESPONSE_BYTES: Final = 64 * 1024 * 1024
"""Largest answer or watch event read from a remote MediaProcessingEntity's cluster (a page of
500 Jobs is a few MiB); a larger one fails that MPE's request, never the controller."""


class MpeRegistry:
    """The MPE clients and Job watches, keyed by normalised MPE reference.

    Args:
        main: the main cluster's Rest (local MPEs, kubeconfig Secrets).
        on_job_event: called with the Task key (``namespace/name``) of every Job event.
        rest_factory: builds a Rest for a remote cluster from an ``ApiClient``.
        informer_options: keyword arguments for every Job and Secret :class:`Informer` (timeouts).
        sync_timeout: seconds a new Job watch may take to list before its MPE is unusable
            (:meth:`sync` never waits for it).
        on_mpe_event: called (on an informer thread) with the key of an MPE whose reconcile is
            due: its kubeconfig Secret changed, or its Job watch failed or recovered.
        kubeconfig_policy: what the administrator allows in ClusterMediaProcessingEntities'
            kubeconfigs beyond the allow-list (:mod:`taskfsm.kube.kubeconfig`).
        watch_namespace: ``taskfsm run --namespace``: the one namespace the controller may use
            in the main cluster (its RBAC may be a Role there only); None: all.
    """

    def __init__(
        self,
        main: Rest,
        *,
        on_job_event: Callable[[str], None],
        rest_factory: Callable[[kube_client.ApiClient], Rest],
        informer_options: dict[str, Any] | None = None,
        sync_timeout: float = 30.0,
        on_mpe_event: Callable[[MpeKey], None] | None = None,
        kubeconfig_policy: kubeconfig.KubeconfigPolicy = kubeconfig.STRICT,
        watch_namespace: str | None = None,
    ) -> None:
        self.main = main
        self.kubeconfig_policy = kubeconfig_policy
        self.watch_namespace = watch_namespace
        self.on_mpe_event = on_mpe_event or (lambda _key: None)
        self.rest_factory = rest_factory
        self.sync_timeout = sync_timeout
        options = informer_options or {}
        self.jobs = JobWatches(
            on_job_event=on_job_event,
            on_mpe_event=self._mpe_event,
            retired_by=self._retired_by,
            informer_options=options,
        )
        self.secrets = SecretWatches(
            main,
            on_mpe_event=self._mpe_event,
            fingerprint_of=self._fingerprint_of,
            informer_options=options,
        )
        self._clusters: dict[MpeKey, MpeCluster] = {}
        self._retired: dict[MpeKey, list[MpeCluster]] = {}
        """Earlier clusters of an MPE whose Job location (cluster or namespace) changed, kept
        with their Job watch while Tasks still have Jobs there."""
        self._errors: dict[MpeKey, str] = {}
        self._kept: dict[MpeKey, MpeError] = {}
        """MPEs whose cluster is kept although a new one could not be built (see sync)."""
        self._unreachable_since: dict[MpeKey, float] = {}
        """Monotonic time since which each MPE has been found unreachable (cleared when it
        answers): what ``--cleanup-timeout`` counts, not queueing delay."""
        self._reasons: dict[MpeKey, str] = {}
        """The reason (:class:`Reason`) of each error in ``_errors``."""
        self._unbuildable: set[MpeKey] = set()
        """MPEs whose last failure came from their spec or kubeconfig Secret as they are (not
        a failed read, not their cluster): :meth:`unbuildable`."""
        self._released: set[MpeKey] = set()
        """Deleting MPEs whose deletion this process finished (their client dropped, their
        finalizer released) that are still in the cache (a finalizer of someone else, or the
        watch event of their removal not seen yet): :meth:`released`."""
        self._reached: set[MpeKey] = set()
        """MPEs a client of which has listed their Jobs in this process (their cluster may hold
        Jobs of Tasks)."""
        self._started = time.time()
        """Wall-clock start of this registry: what it knows of an MPE created before is not
        the MPE's whole history."""
        self._lock = threading.RLock()
        self._interrupted = threading.Event()

    def _mpe_event(self, key: MpeKey) -> None:
        self.on_mpe_event(key)

    # -- lookups (reconcile workers) -------------------------------------------------------------

    def get(self, ref: dict[str, Any] | None) -> MpeCluster | None:
        """The ready cluster for a ``status.mediaProcessingEntityRef``, or None."""
        if not ref:
            return None
        with self._lock:
            cluster = self._clusters.get(key_of_ref(ref))
        return cluster if cluster is not None and cluster.ready else None

    def error(self, ref: dict[str, Any] | None) -> str:
        """Why the MPE named by ``ref`` is not usable ("" when unknown or fine)."""
        if not ref:
            return ""
        with self._lock:
            return self._errors.get(key_of_ref(ref), "")

    def pending(self, ref: dict[str, Any] | None) -> bool:
        """The MPE named by ``ref`` has been neither set up nor failed yet (its reconcile is
        due)."""
        if not ref:
            return False
        key = key_of_ref(ref)
        with self._lock:
            cluster = self._clusters.get(key)
            if key in self._errors or key in self._released:
                return False
            return cluster is None or not cluster.ready

    def released(self, ref: dict[str, Any] | None) -> bool:
        """The MPE named by ``ref`` is being deleted and this process has let go of it
        (:meth:`release`): nothing cleans up through it any more, as if it were gone."""
        if not ref:
            return False
        with self._lock:
            return key_of_ref(ref) in self._released

    def clusters(self) -> list[MpeCluster]:
        with self._lock:
            return list(self._clusters.values())

    def clusters_with_retired(self) -> list[MpeCluster]:
        """The MPEs' clusters and their earlier locations still kept for Jobs made there (the
        places to search for children of gone Tasks)."""
        with self._lock:
            retired = [cl for kept in self._retired.values() for cl in kept]
            return [*self._clusters.values(), *retired]

    def retired(self, key: MpeKey) -> list[MpeCluster]:
        """The earlier clusters of ``key`` kept for the Jobs made there."""
        with self._lock:
            return list(self._retired.get(key, ()))

    def job_cluster(self, ref: dict[str, Any] | None, job_ref: dict[str, Any]) -> MpeCluster | None:
        """The cluster in which the Job ``job_ref`` (a Task's ``status.jobRef``) lives: the MPE's
        current cluster, unless an earlier location of the MPE kept for its Jobs holds a Job of
        that name and UID (the MPE was pointed elsewhere after the Job was made)."""
        current = self.get(ref)
        if not ref or not job_ref:
            return current
        for cluster in self.retired(key_of_ref(ref)):
            if cluster.ready and cluster.cached_job(job_ref) is not None:
                return cluster
        return current

    def release_retired(self, key: MpeKey, unused: list[MpeCluster]) -> int:
        """Stop keeping the earlier clusters of ``key`` among ``unused`` (no Task needs them any
        more); returns how many are still kept."""
        with self._lock:
            kept = list(self._retired.get(key, ()))
            keep = [cl for cl in kept if not among(cl, unused)]
            if keep:
                self._retired[key] = keep
            else:
                self._retired.pop(key, None)
        for cluster in kept:
            if not among(cluster, keep):
                self.jobs.release(cluster)
        return len(keep)

    def healthy(self) -> bool:
        """Every ClusterMediaProcessingEntity's Job watch is synced and connected (readiness).

        Only the administrator's MPEs count: a tenant's MPE pointing at a cluster that does not
        answer (on purpose or not) must not make the controller unready for everyone; its own
        ``Ready`` condition and the ``taskfsm_watch_healthy`` metric say so (docs/security.md)."""
        return all(
            cl.ready and cl.healthy
            for cl in self.clusters()
            if cl.key[0] == c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY
        )

    def secret_watches(self) -> dict[SecretKey, set[MpeKey]]:
        """The kubeconfig Secrets watched, each with the MPEs naming it."""
        return self.secrets.watched()

    def secret_cache(self, secret: SecretKey) -> list[dict[str, Any]]:
        """What the watch of ``secret`` caches (no data)."""
        return self.secrets.cache(secret)

    def note_own_job(self, cluster: MpeCluster, job: dict[str, Any]) -> None:
        """See :meth:`~taskfsm.controllers.clusters.watches.JobWatches.note_own_job`."""
        self.jobs.note_own_job(cluster, job)

    def refusal(self, cluster: MpeCluster) -> MpeError | None:
        """Why ``cluster`` cannot be used although it is set up (None when its Job watch is
        connected), from its Job watch's last failure: refused (401/403) or not answering. The
        message names the HTTP status and the API server's text, never a credential; no request
        is made (a cluster that does not answer must not hold the MPE worker)."""
        if cluster.jobs.healthy:
            return None
        return _failure(cluster.jobs, cluster.jobs.last_error or "not connected")

    # -- setting clients up (the MPE controller's connect effects) -------------------------------

    def sync(self, mpe: dict[str, Any], *, keep: bool = False) -> MpeCluster:
        """Build (or keep, or rebuild) the cluster of ``mpe``; raise :class:`MpeError` if unusable,
        :class:`MpeSettingUp` while its Job watch's first list is under way (see :meth:`_settled`).

        Spec or kubeconfig changes are detected through a fingerprint (generation and the
        Secret's resourceVersion) and rebuild the client (D19). With ``keep`` (Tasks still use
        the MPE) a cluster already set up is kept when no new one can be built -- its
        kubeconfig Secret went first in a namespace deletion, or was replaced by a broken one --
        so the last working client outlives every Job it is responsible for; :meth:`kept` then
        says why no new one could be built (docs/operations.md, "Deleting a namespace").
        """
        key = key_of(mpe)
        try:
            target = resolve(
                mpe,
                main=self.main,
                policy=self.kubeconfig_policy,
                watch_namespace=self.watch_namespace,
                watch_secret=lambda secret: self.secrets.watch(key, secret),
            )
        except MpeError as exc:
            with self._lock:
                current = self._clusters.get(key)
                if keep and current is not None:
                    self._kept[key] = exc
                    return current
            self.remove(key, error=str(exc), reason=exc.reason, lasting=not exc.transient)
            raise
        with self._lock:
            self._kept.pop(key, None)
            current = self._clusters.get(key)
        if current is not None and current.fingerprint == target.fingerprint:
            return self._settled(key, current)
        rest = self.main if target.api_client is None else self._remote_rest(target.api_client)
        # The watch is shared only by MPEs reaching the cluster with the same credentials, so a
        # rotated kubeconfig Secret also gives the Job watch the new client (D19).
        credentials = str(target.fingerprint[1]) if target.remote else ""
        watch_key = (target.cluster_id, target.namespace, credentials)
        informer = self.jobs.acquire(watch_key, rest, key)
        cluster = MpeCluster(
            key,
            rest,
            target.namespace,
            target.remote,
            informer,
            target.fingerprint,
            target.cluster_id,
            watch_key,
        )
        replaced: list[MpeCluster] = []
        with self._lock:
            old = self._clusters.get(key)
            # Retired in the same step as the new cluster is published, so no Task reconcile can
            # see the new cluster and not yet the old one its Job is in (D19).
            if old is not None and old.watch_key[:2] != watch_key[:2]:
                replaced = self._retire_locked(old)
            self._clusters[key] = cluster
            self._errors.pop(key, None)
            self._unbuildable.discard(key)
            self._released.discard(key)
        for earlier in replaced:
            self.jobs.release(earlier)
        if old is not None and old.watch_key != watch_key and old.watch_key[:2] == watch_key[:2]:
            self.jobs.release(old)  # the same Jobs, other credentials
        self._unretire(key, cluster)
        return self._settled(key, cluster)

    def _settled(self, key: MpeKey, cluster: MpeCluster) -> MpeCluster:
        """``cluster`` once its Job watch has synced; :class:`MpeSettingUp` while its first list
        is under way; :class:`MpeError` (and the cluster dropped) once that list failed or took
        longer than ``sync_timeout``.

        Nothing here waits on the network: one MPE whose cluster does not answer (a tenant's, on
        purpose or not) must not hold the MPE worker while every other MPE waits behind it
        (docs/security.md). The watch's first sync or failure re-queues the MPE at once."""
        informer = cluster.jobs
        if informer.has_synced:
            with self._lock:
                self._reached.add(key)
            return cluster
        timed_out = time.monotonic() - cluster.built_at > self.sync_timeout
        if not informer.failures and not timed_out:
            raise MpeSettingUp(key)
        error = _failure(
            informer,
            informer.last_error or f"Job watch did not sync within {self.sync_timeout:.0f}s",
        )
        self.remove(key, error=str(error), reason=error.reason)
        raise error

    def kept(self, key: MpeKey) -> MpeError | None:
        """Why ``key``'s cluster is kept although its spec or kubeconfig can no longer build
        one (None when it is current)."""
        with self._lock:
            return self._kept.get(key)

    def unbuildable(self, key: MpeKey) -> str:
        """Why no client of ``key`` can be built from its spec and kubeconfig Secret as they
        are now (its ``Ready=False`` reason) while this process holds none of it: the last
        try failed on the spec or the Secret (gone, without its key, not a usable or allowed
        kubeconfig), not on a read that may succeed next time or on the cluster. ``""``
        otherwise. A changed spec or Secret queues the MPE again and the next try decides
        anew."""
        with self._lock:
            if key in self._clusters or key not in self._unbuildable:
                return ""
            return self._reasons.get(key, "")

    def never_reached(self, mpe: dict[str, Any], *, jobs_recorded: bool) -> str:
        """Why nothing of a Task can be in the cluster of ``mpe`` (``""`` when something may):
        its spec is refused by policy (``NamespaceNotAllowed``, ``KubeconfigRefused``,
        ``InvalidSpec``: no client can be built from it), or it was created while this process
        ran and no client of it has ever listed its Jobs (``NotReachable``,
        ``ClusterRefused``, ...: it never connected). Never when this process holds a client
        or an earlier location of it, or ``jobs_recorded`` (a Task's status names a Job made
        through it: some process reached it)."""
        key = key_of(mpe)
        with self._lock:
            if jobs_recorded or key in self._reached or self._retired.get(key):
                return ""
            cluster = self._clusters.get(key)
            if cluster is not None and cluster.ready:
                return ""
            if cluster is None and key not in self._errors:
                return ""  # never tried yet: nothing known
            # Tried, and no client of it has listed its Jobs (a new one's first list may be
            # under way: until it lists, no Job can be made through it either).
            reason = self._reasons.get(key, "")
        if reason in POLICY_REFUSALS:
            return reason
        created = parse_time((mpe.get("metadata") or {}).get("creationTimestamp"))
        if created is not None and created.timestamp() >= self._started + CLOCK_MARGIN_SECONDS:
            return reason or Reason.NOT_REACHABLE
        return ""

    def remove(
        self, key: MpeKey, *, error: str = "", reason: str = "", lasting: bool = False
    ) -> None:
        """Drop ``key``'s cluster (broken, or gone), stopping its Job watch if no other MPE shares
        it. Its kubeconfig Secret stays watched (a fixed Secret re-queues it): :meth:`forget`
        drops that too. ``lasting``: the error comes from the spec or kubeconfig Secret as they
        are (:meth:`unbuildable`)."""
        with self._lock:
            cluster = self._clusters.pop(key, None)
            self._kept.pop(key, None)
            if error and lasting:
                self._unbuildable.add(key)
            else:
                self._unbuildable.discard(key)
            if error:
                self._errors[key] = error
                self._reasons[key] = reason
                self._unreachable_since.setdefault(key, time.monotonic())
            else:
                self._errors.pop(key, None)
                self._reasons.pop(key, None)
        if cluster is not None:
            self.jobs.release(cluster)

    def forget(self, key: MpeKey) -> None:
        """``key`` is gone (deleted): drop its cluster, its earlier locations, its error and its
        kubeconfig Secret watch."""
        self.remove(key)
        with self._lock:
            self._unreachable_since.pop(key, None)
            self._reached.discard(key)
            self._released.discard(key)
        self.release_retired(key, self.retired(key))
        self.secrets.watch(key, None)

    def release(self, key: MpeKey) -> None:
        """The deletion of ``key`` is done (its finalizer is being released): drop all of it, as
        :meth:`forget` does, and remember until it is gone that it was let go, so that a Task
        still naming it neither waits for a client nobody will set up again nor misses the
        wake-up of its last reconcile (:meth:`pending` is False, :meth:`released` True)."""
        self.forget(key)
        with self._lock:
            self._released.add(key)

    # -- reachability: what --cleanup-timeout counts ---------------------------------------------

    def mark_unreachable(self, ref: dict[str, Any] | None) -> None:
        """The MPE ``ref`` names could not be used (its cluster does not answer or refuses, or
        it could not be set up); the clock of :meth:`unreachable_for` starts if not running."""
        if ref:
            with self._lock:
                self._unreachable_since.setdefault(key_of_ref(ref), time.monotonic())

    def mark_reachable(self, ref: dict[str, Any] | None) -> None:
        """The MPE ``ref`` names answered."""
        if ref:
            with self._lock:
                self._unreachable_since.pop(key_of_ref(ref), None)

    def unreachable_for(self, ref: dict[str, Any] | None) -> float:
        """Seconds the MPE has been unreachable without a break (0 while it answers). In
        process memory: a restart starts the count again, so a bound on it waits longer after
        a restart, never shorter."""
        if not ref:
            return 0.0
        with self._lock:
            since = self._unreachable_since.get(key_of_ref(ref))
        return 0.0 if since is None else time.monotonic() - since

    # -- shutdown --------------------------------------------------------------------------------

    @property
    def interrupted(self) -> bool:
        """True once :meth:`interrupt` was called (the process is shutting down)."""
        return self._interrupted.is_set()

    def interrupt(self) -> None:
        """The process is stopping: a connect that fails from now on is not reported (the MPE
        reconciler publishes no verdict, docs/architecture.md), since the failure may be the
        stop's own (informers stopping, leadership lost)."""
        self._interrupted.set()

    def stop(self) -> None:
        with self._lock:
            self._clusters, self._retired = {}, {}
        self.jobs.stop()
        self.secrets.stop()

    # -- internals -------------------------------------------------------------------------------

    def _remote_rest(self, api_client: kube_client.ApiClient) -> Rest:
        """A remote cluster's Rest: its answers and watch events are bounded in size."""
        rest = self.rest_factory(api_client)
        rest.max_response_bytes = REMOTE_MAX_RESPONSE_BYTES
        return rest

    def _fingerprint_of(self, key: MpeKey) -> tuple[Any, ...] | None:
        with self._lock:
            cluster = self._clusters.get(key)
        return None if cluster is None else cluster.fingerprint

    def _retired_by(self, watch_key: WatchKey) -> list[MpeKey]:
        with self._lock:
            return [
                mpe
                for mpe, kept in self._retired.items()
                if any(cl.watch_key == watch_key for cl in kept)
            ]

    def _retire_locked(self, old: MpeCluster) -> list[MpeCluster]:
        """Keep ``old`` (its client and Job watch) for the Jobs made there; an earlier one of
        the same location is replaced by it. Called under the lock; returns the clusters whose
        watch the caller releases after it (stopping a watch waits for its thread)."""
        kept = self._retired.setdefault(old.key, [])
        replaced = [cl for cl in kept if cl.watch_key[:2] == old.watch_key[:2]]
        kept[:] = [cl for cl in kept if not among(cl, replaced)] + [old]
        return replaced

    def _unretire(self, key: MpeKey, current: MpeCluster) -> None:
        """The MPE points back at a location kept for its Jobs: the current cluster covers it."""
        with self._lock:
            kept = self._retired.get(key, [])
            back = [cl for cl in kept if cl.watch_key[:2] == current.watch_key[:2]]
            kept[:] = [cl for cl in kept if not among(cl, back)]
            if not kept:
                self._retired.pop(key, None)
        for cluster in back:
            if cluster.watch_key != current.watch_key:
                self.jobs.release(cluster)


def _failure(jobs: Informer, reason: str) -> MpeError:
    """Why a cluster whose Job watch failed cannot be used, from the watch's last failure: it
    refuses the controller (HTTP 401/403) or does not answer."""
    if jobs.last_status in (401, 403):
        return MpeError(
            f"MediaProcessingEntity cluster refuses the controller: HTTP {jobs.last_status}: "
            f"{reason}",
            Reason.CLUSTER_REFUSED,
        )
    return MpeError(f"MediaProcessingEntity cluster not reachable: {reason}")
