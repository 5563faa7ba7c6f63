"""MediaProcessingEntity clusters: where Jobs run, and the registry of their clients and watches.

docs/behaviour.md §1.7 and §4.1, with D19 fixed (spec or kubeconfig changes rebuild the client):

* ``local: {namespace?}`` runs Jobs in the main cluster, in ``local.namespace`` or the MPE's own
  namespace (a ClusterMediaProcessingEntity must name one);
* ``remote: {kubeconfig: {secretRef}}`` runs Jobs in the cluster of a kubeconfig stored in a
  Secret of the main cluster (key ``kubeconfig`` by default), in the kubeconfig context's
  namespace or ``default``.

For each MPE the registry keeps a :class:`MpeCluster`: a :class:`~taskfsm.kube.rest.Rest` for that
cluster and an informer of the Jobs carrying the Task labels in the Job namespace (shared by MPEs
that point at the same cluster and namespace). :meth:`MpeRegistry.sync` is the MPE reconcile:
it builds, rebuilds or drops the entry and reports ``Ready``/``Failed`` conditions on the MPE.

Two kinds of event re-queue an MPE's reconcile through ``on_mpe_event`` (docs/operations.md,
"MediaProcessingEntity clusters and credentials"):

* its kubeconfig Secret changed: each Secret a remote MPE names has one small watch of the main
  cluster (``metadata.name`` field selector, shared by the MPEs naming that Secret, started and
  stopped with them) whose cache keeps only the Secret's metadata -- never its data -- so a
  rotated kubeconfig rebuilds the client at once instead of at the next resync;
* its Job watch failed or recovered (the informer's health handler), so ``Ready`` follows a
  cluster that refuses the controller (:meth:`MpeRegistry.refusal`).
"""

from __future__ import annotations

import base64
import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from machines.task.job_status import interpret_job_conditions
from taskfsm.api import constants as c
from taskfsm.kube import client as kube_client
from taskfsm.kube import kubeconfig
from taskfsm.kube.errors import KubeError
from taskfsm.kube.informer import DELETED, Informer
from taskfsm.kube.rest import JOBS, SECRETS, Resource, Rest, WatchStream
from taskfsm.kube.transforms import job_transform

log = logging.getLogger(__name__)

MpeKey = tuple[str, str, str]
"""(kind, namespace or "", name) of a MediaProcessingEntity or ClusterMediaProcessingEntity."""

SecretKey = tuple[str, str]
"""(namespace, name) of a kubeconfig Secret in the main cluster."""

JOB_LABEL_SELECTOR = f"{c.LABEL_TASK_NAMESPACE},{c.LABEL_TASK_NAME}"
DEFAULT_KUBECONFIG_KEY = "kubeconfig"
REMOTE_MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""Largest answer or watch event read from a remote MediaProcessingEntity's cluster (a page of
500 Jobs is a few MiB); a larger one fails that MPE's request, never the controller."""


class MpeSettingUp(Exception):
    """The MPE's client is built and its Job watch's first list is under way: nothing to say
    yet; the watch's first sync or failure re-queues the MPE."""


class MpeError(Exception):
    """The MPE cannot be used; the message goes to its status and to waiting Tasks, the reason
    to its ``Ready`` condition (docs/api.md, "MediaProcessingEntity conditions")."""

    def __init__(self, message: str, reason: str = "NotReachable") -> None:  # REASON_NOT_REACHABLE
        super().__init__(message)
        self.reason = reason


#: ``Ready=False`` reasons of an MPE (the ``reason`` of :class:`MpeError`).
REASON_INVALID_SPEC = "InvalidSpec"
REASON_NAMESPACE_NOT_ALLOWED = "NamespaceNotAllowed"
REASON_SECRET_UNAVAILABLE = "KubeconfigSecretUnavailable"
REASON_KUBECONFIG_INVALID = "KubeconfigInvalid"
REASON_KUBECONFIG_REFUSED = "KubeconfigRefused"
REASON_NOT_REACHABLE = "NotReachable"
REASON_CLUSTER_REFUSED = "ClusterRefused"


def key_of(obj: dict[str, Any]) -> MpeKey:
    meta = obj["metadata"]
    return (obj["kind"], meta.get("namespace") or "", meta["name"])


def key_of_ref(ref: dict[str, Any]) -> MpeKey:
    return (ref.get("kind") or "", ref.get("namespace") or "", ref.get("name") or "")


def trusts(mpe: MpeKey, task_namespace: str | None) -> bool:
    """Whether children in the Job namespace of MPE ``mpe`` may belong to Tasks of
    ``task_namespace`` (see :meth:`MpeCluster.trusts`)."""
    kind, namespace, _ = mpe
    if kind == c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY:
        return bool(task_namespace)
    return bool(task_namespace) and task_namespace == namespace


@dataclass
class MpeCluster:
    """A usable MediaProcessingEntity: API access and the Job watch of its Job namespace."""

    key: MpeKey
    rest: Rest
    namespace: str
    remote: bool
    jobs: Informer
    fingerprint: tuple[Any, ...]
    cluster_id: str
    watch_key: tuple[str, str, str] = ("", "", "")
    """(cluster, Job namespace, credentials): MPEs with the same key share one Job watch."""
    built_at: float = field(default_factory=time.monotonic)
    """When this client was set up (monotonic): its Job watch must sync within the registry's
    ``sync_timeout``."""

    def trusts(self, task_namespace: str | None) -> bool:
        """Whether a Job or Secret here may belong to a Task of ``task_namespace``: any for a
        ClusterMediaProcessingEntity (the administrator's), only its own namespace's for a
        namespaced one. The Task labels of a child are written by whoever can write there, so
        a child naming another namespace's Task is ignored (docs/security.md)."""
        return trusts(self.key, task_namespace)

    def may_hold_jobs_in(self, namespace: str) -> bool:
        """Whether a Job of this MPE's Tasks may be in ``namespace``: a namespaced MPE's Jobs in
        the main cluster are in its own namespace only, whatever a ``status.jobRef`` says."""
        kind, own, _ = self.key
        return self.remote or kind == c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY or namespace == own

    @property
    def ready(self) -> bool:
        return self.jobs.has_synced

    @property
    def healthy(self) -> bool:
        return self.jobs.healthy

    def cached_job(self, job_ref: dict[str, Any]) -> dict[str, Any] | None:
        """The cached Job a Task's ``status.jobRef`` names, if one of that name and UID is here."""
        if not job_ref.get("name") or not job_ref.get("uid"):
            return None
        job = self.jobs.get(job_ref.get("namespace") or self.namespace, job_ref["name"])
        return job if job is not None and job["metadata"].get("uid") == job_ref["uid"] else None


@dataclass
class _SharedWatch:
    informer: Informer
    users: set[MpeKey] = field(default_factory=set)


class _NamedObjectRest(Rest):
    """The main cluster's Rest for an :class:`Informer` of a single object: its lists and
    watches carry a ``metadata.name`` field selector (the Informer itself selects by label
    only), so a Secret watch never lists the namespace's other Secrets."""

    def __init__(self, rest: Rest, name: str) -> None:
        # Everything else (client, observer, timeouts, retry and write settings) as ``rest``'s.
        self.__dict__.update(vars(rest))
        self.field_selector = f"metadata.name={name}"

    def list(self, res: Resource, namespace: str | None = None, **options: Any) -> dict[str, Any]:
        options["field_selector"] = self.field_selector
        return super().list(res, namespace, **options)

    def watch(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        timeout_seconds: int,
        read_timeout: float,
        **query: Any,
    ) -> WatchStream:
        query["fieldSelector"] = self.field_selector
        return super().watch(
            res, namespace, timeout_seconds=timeout_seconds, read_timeout=read_timeout, **query
        )


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


class MpeRegistry:
    """The MPE clients and Job watches, keyed by normalised MPE reference.

    Args:
        main: the main cluster's Rest (local MPEs, kubeconfig Secrets, MPE status writes).
        on_job_event: called with the Task key (``namespace/name``) of every Job event.
        rest_factory: builds a Rest for a remote cluster from an ``ApiClient``.
        informer_options: keyword arguments for every Job and Secret :class:`Informer` (timeouts).
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
        self.on_job_event = on_job_event
        self._job_facts: dict[tuple[tuple[str, str, str], str], tuple[Any, ...]] = {}
        """Per Job watch and Job (``namespace/name``) what its Task reads of it, as last
        delivered by that watch. Per watch, because two MPEs may reach the same Jobs through
        two watches (say a local and a remote MPE for one cluster): a Task is woken by each
        watch once its cache shows the news, and the one its reconcile reads must not be
        silenced by the other having delivered the same facts first."""
        self.on_mpe_event = on_mpe_event or (lambda _key: None)
        self.rest_factory = rest_factory
        self.informer_options = informer_options or {}
        self.sync_timeout = sync_timeout
        self._clusters: dict[MpeKey, MpeCluster] = {}
        self._retired: dict[MpeKey, list[MpeCluster]] = {}
        """Earlier clusters of an MPE whose Job location (cluster or namespace) changed, kept
        with their Job watch while Tasks still have Jobs there (docs/operations.md, "Changing
        where an MPE runs Jobs")."""
        self._watches: dict[tuple[str, str, str], _SharedWatch] = {}
        self._secret_watches: dict[SecretKey, _SharedWatch] = {}
        self._secret_of: dict[MpeKey, SecretKey] = {}
        self._errors: dict[MpeKey, str] = {}
        self._kept: dict[MpeKey, MpeError] = {}
        self._unreachable_since: dict[MpeKey, float] = {}
        """Monotonic time since which each MPE has been found unreachable (cleared when it
        answers): what ``--cleanup-timeout`` counts, not queueing delay (see
        :meth:`unreachable_for`)."""
        """MPEs whose cluster is kept although a new one could not be built (see sync)."""
        self._lock = threading.RLock()
        self._interrupted = threading.Event()

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
            return key not in self._errors and (cluster is None or not cluster.ready)

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

    def release_retired(self, key: MpeKey, needed: Callable[[MpeCluster], bool]) -> int:
        """Stop keeping the earlier clusters of ``key`` that ``needed`` says no Task needs any
        more; returns how many are still kept."""
        with self._lock:
            kept = list(self._retired.get(key, ()))
        keep = [cl for cl in kept if needed(cl)]
        with self._lock:
            if keep:
                self._retired[key] = keep
            else:
                self._retired.pop(key, None)
        for cluster in kept:
            if not _among(cluster, keep):
                self._release_watch(cluster)
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
        with self._lock:
            return {k: set(w.users) for k, w in self._secret_watches.items()}

    def secret_cache(self, secret: SecretKey) -> list[dict[str, Any]]:
        """What the watch of ``secret`` caches (:func:`secret_metadata`: no data)."""
        with self._lock:
            watch = self._secret_watches.get(secret)
        return watch.informer.list() if watch is not None else []

    def refusal(self, cluster: MpeCluster) -> MpeError | None:
        """Why ``cluster`` cannot be used although it is set up (None when its Job watch is
        connected), from its Job watch's last failure: refused (401/403) or not answering. The
        message names the HTTP status and the API server's text, never a credential; no request
        is made (a cluster that does not answer must not hold the MPE worker)."""
        if cluster.jobs.healthy:
            return None
        watch_error = cluster.jobs.last_error or "not connected"
        status = cluster.jobs.last_status
        if status in (401, 403):
            return MpeError(
                f"MediaProcessingEntity cluster refuses the controller: HTTP {status}: "
                f"{watch_error}",
                REASON_CLUSTER_REFUSED,
            )
        return MpeError(f"MediaProcessingEntity cluster not reachable: {watch_error}")

    # -- the MPE reconcile ------------------------------------------------------------------------

    def sync(self, mpe: dict[str, Any], *, keep: bool = False) -> MpeCluster:
        """Build (or keep, or rebuild) the cluster of ``mpe``; raise :class:`MpeError` if unusable.

        Spec or kubeconfig changes are detected through a fingerprint (generation and the
        Secret's resourceVersion) and rebuild the client (D19). With ``keep`` (Tasks still use
        the MPE) a cluster already set up is kept when no new one can be built -- its
        kubeconfig Secret went first in a namespace deletion, or was replaced by a broken one --
        so the last working client outlives every Job it is responsible for; :meth:`kept` then
        says why no new one could be built (docs/operations.md, "Deleting a namespace").
        """
        key = key_of(mpe)
        try:
            target = self._target(mpe)
        except MpeError as exc:
            with self._lock:
                current = self._clusters.get(key)
                if keep and current is not None:
                    self._kept[key] = exc
                    return current
            self.remove(key, error=str(exc))
            raise
        with self._lock:
            self._kept.pop(key, None)
        fingerprint, api_client, namespace, remote, cluster_id = target
        with self._lock:
            current = self._clusters.get(key)
        if current is not None and current.fingerprint == fingerprint:
            return self._settled(key, current)
        rest = self.main if api_client is None else self._remote_rest(api_client)
        # The watch is shared only by MPEs reaching the cluster with the same credentials, so a
        # rotated kubeconfig Secret also gives the Job watch the new client (D19).
        watch_key = (cluster_id, namespace, str(fingerprint[1]) if remote else "")
        watch = self._watch(watch_key, rest, key)
        cluster = MpeCluster(
            key, rest, namespace, remote, watch.informer, fingerprint, cluster_id, watch_key
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
        for earlier in replaced:
            self._release_watch(earlier)
        if old is not None and old.watch_key != watch_key and old.watch_key[:2] == watch_key[:2]:
            self._release_watch(old)  # the same Jobs, other credentials
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
            return cluster
        timed_out = time.monotonic() - cluster.built_at > self.sync_timeout
        if not informer.failures and not timed_out:
            raise MpeSettingUp(key)
        reason = informer.last_error or f"Job watch did not sync within {self.sync_timeout:.0f}s"
        if informer.last_status in (401, 403):
            error = MpeError(
                f"MediaProcessingEntity cluster refuses the controller: HTTP "
                f"{informer.last_status}: {reason}",
                REASON_CLUSTER_REFUSED,
            )
        else:
            error = MpeError(f"MediaProcessingEntity cluster not reachable: {reason}")
        self.remove(key, error=str(error))
        raise error

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

    def kept(self, key: MpeKey) -> MpeError | None:
        """Why ``key``'s cluster is kept although its spec or kubeconfig can no longer build
        one (None when it is current)."""
        with self._lock:
            return self._kept.get(key)

    def forget(self, key: MpeKey) -> None:
        """``key`` is gone (deleted, or its finalizer released): drop its cluster, its earlier
        locations, its error and its kubeconfig Secret watch."""
        self.remove(key)
        with self._lock:
            self._unreachable_since.pop(key, None)
        self.release_retired(key, lambda _cluster: False)
        self._watch_secret(key, None)

    def _retire_locked(self, old: MpeCluster) -> list[MpeCluster]:
        """Keep ``old`` (its client and Job watch) for the Jobs made there; an earlier one of
        the same location is replaced by it. Called under the lock; returns the clusters whose
        watch the caller releases after it (stopping a watch waits for its thread)."""
        kept = self._retired.setdefault(old.key, [])
        replaced = [cl for cl in kept if cl.watch_key[:2] == old.watch_key[:2]]
        kept[:] = [cl for cl in kept if not _among(cl, replaced)] + [old]
        return replaced

    def _unretire(self, key: MpeKey, current: MpeCluster) -> None:
        """The MPE points back at a location kept for its Jobs: the current cluster covers it."""
        with self._lock:
            kept = self._retired.get(key, [])
            back = [cl for cl in kept if cl.watch_key[:2] == current.watch_key[:2]]
            kept[:] = [cl for cl in kept if not _among(cl, back)]
            if not kept:
                self._retired.pop(key, None)
        for cluster in back:
            if cluster.watch_key != current.watch_key:
                self._release_watch(cluster)

    def remove(self, key: MpeKey, *, error: str = "") -> None:
        """Drop ``key``'s cluster (broken, or gone), stopping its Job watch if no other MPE shares
        it. Its kubeconfig Secret stays watched (a fixed Secret re-queues it): :meth:`forget`
        drops that too."""
        with self._lock:
            cluster = self._clusters.pop(key, None)
            self._kept.pop(key, None)
            if error:
                self._errors[key] = error
                self._unreachable_since.setdefault(key, time.monotonic())
            else:
                self._errors.pop(key, None)
        if cluster is not None:
            self._release_watch(cluster)

    @property
    def interrupted(self) -> bool:
        """True once :meth:`interrupt` was called (the process is shutting down)."""
        return self._interrupted.is_set()

    def interrupt(self) -> None:
        """Cut short a :meth:`sync` waiting for a Job watch (graceful shutdown)."""
        self._interrupted.set()

    def stop(self) -> None:
        with self._lock:
            watches = [*self._watches.values(), *self._secret_watches.values()]
            self._watches, self._clusters, self._secret_watches, self._secret_of = {}, {}, {}, {}
            self._retired = {}
        for watch in watches:
            watch.informer.stop()

    # -- internals -------------------------------------------------------------------------------

    def _target(
        self, mpe: dict[str, Any]
    ) -> tuple[tuple[Any, ...], kube_client.ApiClient | None, str, bool, str]:
        """(fingerprint, the remote cluster's client or None, Job namespace, remote, cluster id)."""
        kind = mpe["kind"]
        meta = mpe["metadata"]
        spec = mpe.get("spec") or {}
        cluster_kind = kind == c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY
        generation = meta.get("generation")
        if "remote" not in spec or "local" in spec:
            self._watch_secret(key_of(mpe), None)
        if "local" in spec and "remote" not in spec:
            namespace = (spec.get("local") or {}).get("namespace") or ""
            if not namespace:
                if cluster_kind:
                    raise MpeError(
                        "local ClusterMediaProcessingEntity has no namespace defined",
                        REASON_INVALID_SPEC,
                    )
                namespace = meta["namespace"]
            elif not cluster_kind and namespace != meta["namespace"]:
                # A namespaced MPE is its namespace's tenant's: its Jobs, their Secrets and pods
                # stay in that namespace (docs/security.md, "Where Jobs run").
                raise MpeError(
                    f"spec.local.namespace {namespace!r} is not this MediaProcessingEntity's "
                    f"namespace: a MediaProcessingEntity runs Jobs in its own namespace only (a "
                    f"ClusterMediaProcessingEntity may name another)",
                    REASON_NAMESPACE_NOT_ALLOWED,
                )
            self._require_watched(namespace, "spec.local.namespace")
            return (generation, namespace), None, namespace, False, "main"
        if "remote" in spec and "local" not in spec:
            kubeconfig_ref = (spec.get("remote") or {}).get("kubeconfig") or {}
            secret_ref = kubeconfig_ref.get("secretRef") or {}
            secret_ns = secret_ref.get("namespace") or ""
            if cluster_kind and not secret_ns:
                raise MpeError(
                    "remote ClusterMediaProcessingEntity secretRef has no namespace defined",
                    REASON_INVALID_SPEC,
                )
            if not cluster_kind:
                if secret_ns and secret_ns != meta["namespace"]:
                    raise MpeError(
                        "remote MediaProcessingEntity references secretRef in different namespace",
                        REASON_NAMESPACE_NOT_ALLOWED,
                    )
                secret_ns = meta["namespace"]
            name = secret_ref.get("name") or ""
            if not name:
                raise MpeError("remote kubeconfig secretRef has no name", REASON_INVALID_SPEC)
            self._require_watched(secret_ns, "the kubeconfig secretRef's namespace")
            key = secret_ref.get("key") or DEFAULT_KUBECONFIG_KEY
            # Watched before it is read, so a Secret created or fixed after this read still
            # re-queues the MPE; an earlier Secret of another name is no longer watched for it.
            self._watch_secret(key_of(mpe), (secret_ns, name))
            try:
                secret = self.main.get(SECRETS, secret_ns, name)
            except KubeError as exc:
                raise MpeError(
                    f"failed to read kubeconfig Secret: {exc}", REASON_SECRET_UNAVAILABLE
                ) from None
            data = (secret.get("data") or {}).get(key)
            if data is None:
                raise MpeError(
                    f"Secret '{secret_ns}/{name}' has no key '{key}'", REASON_SECRET_UNAVAILABLE
                )
            where = f"Secret '{secret_ns}/{name}' key '{key}'"
            # A tenant's kubeconfig is held to the allow-list; the administrator's opt-ins
            # apply to ClusterMediaProcessingEntities only (docs/security.md).
            policy = self.kubeconfig_policy if cluster_kind else kubeconfig.STRICT
            try:
                document = kubeconfig.parse(base64.b64decode(data))
                api_client = kubeconfig.build_client(document, policy)
            except kubeconfig.KubeconfigRefused as exc:
                raise MpeError(
                    f'{where} is refused: {exc} (docs/security.md, "Remote kubeconfigs")',
                    REASON_KUBECONFIG_REFUSED,
                ) from None
            except Exception as exc:  # malformed: never echo its content
                detail = str(exc) if isinstance(exc, ValueError) else type(exc).__name__
                raise MpeError(
                    f"{where} is not a usable kubeconfig: {detail}", REASON_KUBECONFIG_INVALID
                ) from None
            namespace = kubeconfig.namespace_of(document)
            version = secret["metadata"].get("resourceVersion")
            fingerprint = (generation, f"{secret_ns}/{name}@{version}")
            return fingerprint, api_client, namespace, True, api_client.configuration.host
        raise MpeError(
            "MediaProcessingEntity spec must have exactly one of local or remote",
            REASON_INVALID_SPEC,
        )

    def _remote_rest(self, api_client: kube_client.ApiClient) -> Rest:
        """A remote cluster's Rest: its answers and watch events are bounded in size."""
        rest = self.rest_factory(api_client)
        rest.max_response_bytes = REMOTE_MAX_RESPONSE_BYTES
        return rest

    def _require_watched(self, namespace: str, what: str) -> None:
        """Refuse a namespace of the main cluster outside ``--namespace`` (when set)."""
        if self.watch_namespace and namespace != self.watch_namespace:
            raise MpeError(
                f"{what} {namespace!r} is outside the namespace this controller works in "
                f"({self.watch_namespace!r}, taskfsm run --namespace)",
                REASON_NAMESPACE_NOT_ALLOWED,
            )

    def _watch(self, watch_key: tuple[str, str, str], rest: Rest, user: MpeKey) -> _SharedWatch:
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
                    **self.informer_options,
                )
                informer.add_handler(functools.partial(self._job_event, watch_key))
                informer.add_health_handler(functools.partial(self._job_watch_health, watch_key))
                watch = _SharedWatch(informer)
                self._watches[watch_key] = watch
                informer.start()
            watch.users.add(user)
            return watch

    def _release_watch(self, cluster: MpeCluster) -> None:
        with self._lock:
            watch = self._watches.get(cluster.watch_key)
            if watch is None:
                return
            watch.users.discard(cluster.key)
            if watch.users:
                return
            del self._watches[cluster.watch_key]
            for fact_key in [k for k in self._job_facts if k[0] == cluster.watch_key]:
                del self._job_facts[fact_key]
        watch.informer.stop()

    def _job_watch_health(self, watch_key: tuple[str, str, str], _healthy: bool) -> None:
        """A Job watch failed or recovered: its MPEs' reconciles re-check ``Ready``."""
        with self._lock:
            watch = self._watches.get(watch_key)
            users = sorted(watch.users) if watch is not None else []
        for user in users:
            self.on_mpe_event(user)

    def _watch_secret(self, user: MpeKey, secret: SecretKey | None) -> None:
        """Make ``secret`` (None: none) the kubeconfig Secret watched for ``user``: start its
        watch if no other MPE watches it yet, stop the previous one once nobody uses it."""
        stop: Informer | None = None
        with self._lock:
            previous = self._secret_of.get(user)
            if previous == secret:
                return
            if previous is not None:
                self._secret_of.pop(user, None)
                old = self._secret_watches.get(previous)
                if old is not None:
                    old.users.discard(user)
                    if not old.users:
                        del self._secret_watches[previous]
                        stop = old.informer
            if secret is not None:
                self._secret_of[user] = secret
                watch = self._secret_watches.get(secret)
                if watch is None:
                    namespace, name = secret
                    informer = Informer(
                        _NamedObjectRest(self.main, name),
                        SECRETS,
                        namespace=namespace,
                        name=f"secret@{namespace}/{name}",
                        transform=secret_metadata,
                        **self.informer_options,
                    )
                    informer.add_handler(functools.partial(self._secret_event, secret))
                    watch = self._secret_watches[secret] = _SharedWatch(informer)
                    informer.start()
                watch.users.add(user)
        if stop is not None:
            stop.stop()

    def _secret_event(self, secret: SecretKey, kind: str, obj: dict[str, Any]) -> None:
        """A kubeconfig Secret was created, changed or deleted: re-queue each MPE naming it whose
        client was not built from exactly this version (the first list's ADDED of a Secret an
        MPE already uses re-queues nothing)."""
        namespace, name = secret
        version = f"{namespace}/{name}@{(obj.get('metadata') or {}).get('resourceVersion')}"
        with self._lock:
            watch = self._secret_watches.get(secret)
            users = sorted(watch.users) if watch is not None else []
            due = [
                user
                for user in users
                if kind == DELETED
                or (cluster := self._clusters.get(user)) is None
                or cluster.fingerprint[1:] != (version,)
            ]
        for user in due:
            self.on_mpe_event(user)

    def note_own_job(self, cluster: MpeCluster, job: dict[str, Any]) -> None:
        """A version of a Job this process has just written in ``cluster`` (created, or its
        finalizer released): the reconcile that wrote it knows its facts, so the event of
        ``cluster``'s Job watch that brings the same facts back wakes nobody (one reconcile per
        Task fewer, docs/benchmarks.md). A later version with other facts (the Job finishing,
        deleted) still wakes the Task."""
        meta = job.get("metadata") or {}
        key = (cluster.watch_key, f"{meta.get('namespace')}/{meta.get('name')}")
        with self._lock:
            self._job_facts[key] = _job_facts(job)

    def _job_event(self, watch_key: tuple[str, str, str], kind: str, job: dict[str, Any]) -> None:
        meta = job.get("metadata") or {}
        labels = meta.get("labels") or {}
        namespace, name = labels.get(c.LABEL_TASK_NAMESPACE), labels.get(c.LABEL_TASK_NAME)
        if not (namespace and name):
            return
        with self._lock:
            watch = self._watches.get(watch_key)
            users = list(watch.users) if watch is not None else []
        if not any(trusts(user, namespace) for user in users):
            return  # labelled for a Task its MPEs may not serve: never wakes or touches it
        # A Job's status changes many times while it runs (pods created, ready, counted);
        # its Task reads only whether it exists, which UID, whether it is being deleted or
        # protected, and its outcome. Other changes do not wake the Task (a predicate, as in
        # controller-runtime).
        key = (watch_key, f"{meta.get('namespace')}/{meta.get('name')}")
        facts = _job_facts(job)
        with self._lock:
            if kind == "DELETED":
                self._job_facts.pop(key, None)
                # A Job gone from an MPE's earlier location: that MPE's reconcile may let go of it.
                retired_by = [
                    mpe
                    for mpe, kept in self._retired.items()
                    if any(cl.watch_key == watch_key for cl in kept)
                ]
            elif self._job_facts.get(key) == facts:
                return
            else:
                self._job_facts[key] = facts
                retired_by = []
        self.on_job_event(f"{namespace}/{name}")
        for mpe in retired_by:
            self.on_mpe_event(mpe)


def _among(cluster: MpeCluster, clusters: list[MpeCluster]) -> bool:
    """``cluster`` is one of ``clusters`` (identity: two clusters may compare equal)."""
    return any(cluster is other for other in clusters)


def _job_facts(job: dict[str, Any]) -> tuple[Any, ...]:
    """What a Task reads of its Job: UID, deletion, job-protection, outcome (§3.12)."""
    meta = job.get("metadata") or {}
    conditions = (job.get("status") or {}).get("conditions")
    return (
        meta.get("uid"),
        bool(meta.get("deletionTimestamp")),
        c.FINALIZER_JOB_PROTECTION in (meta.get("finalizers") or []),
        interpret_job_conditions(conditions),
    )
