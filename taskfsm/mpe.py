"""MediaProcessingEntity clusters: where Jobs run, and the registry of their clients and Job watches.

task-controller.md §1.7 and §4.1, with D19 fixed (spec or kubeconfig changes rebuild the client):

* ``local: {namespace?}`` runs Jobs in the main cluster, in ``local.namespace`` or the MPE's own
  namespace (a ClusterMediaProcessingEntity must name one);
* ``remote: {kubeconfig: {secretRef}}`` runs Jobs in the cluster of a kubeconfig stored in a
  Secret of the main cluster (key ``kubeconfig`` by default), in the kubeconfig context's
  namespace or ``default``.

For each MPE the registry keeps a :class:`MpeCluster`: a :class:`~taskfsm.kube.rest.Rest` for that
cluster and an informer of the Jobs carrying the Task labels in the Job namespace (shared by MPEs
that point at the same cluster and namespace). :meth:`MpeRegistry.sync` is the MPE reconcile:
it builds, rebuilds or drops the entry and reports ``Ready``/``Failed`` conditions on the MPE.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from taskfsm import constants as c
from taskfsm.kube import client as kube_client
from taskfsm.kube.errors import KubeError
from taskfsm.kube.informer import Informer
from taskfsm.kube.rest import JOBS, SECRETS, Rest
from taskfsm.kube.transforms import job_transform

log = logging.getLogger(__name__)

MpeKey = tuple[str, str, str]
"""(kind, namespace or "", name) of a MediaProcessingEntity or ClusterMediaProcessingEntity."""

JOB_LABEL_SELECTOR = f"{c.LABEL_TASK_NAMESPACE},{c.LABEL_TASK_NAME}"
DEFAULT_KUBECONFIG_KEY = "kubeconfig"


class MpeError(Exception):
    """The MPE cannot be used; the message goes to its status and to waiting Tasks."""


def key_of(obj: dict[str, Any]) -> MpeKey:
    meta = obj["metadata"]
    return (obj["kind"], meta.get("namespace") or "", meta["name"])


def key_of_ref(ref: dict[str, Any]) -> MpeKey:
    return (ref.get("kind") or "", ref.get("namespace") or "", ref.get("name") or "")


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

    @property
    def ready(self) -> bool:
        return self.jobs.has_synced

    @property
    def healthy(self) -> bool:
        return self.jobs.healthy


@dataclass
class _SharedWatch:
    informer: Informer
    users: set[MpeKey] = field(default_factory=set)


class MpeRegistry:
    """The MPE clients and Job watches, keyed by normalised MPE reference.

    Args:
        main: the main cluster's Rest (local MPEs, kubeconfig Secrets, MPE status writes).
        on_job_event: called with the Task key (``namespace/name``) of every Job event.
        rest_factory: builds a Rest for a remote cluster from an ``ApiClient``.
        informer_options: keyword arguments for every Job :class:`Informer` (timeouts).
    """

    def __init__(
        self,
        main: Rest,
        *,
        on_job_event: Callable[[str], None],
        rest_factory: Callable[[Any], Rest],
        informer_options: dict[str, Any] | None = None,
        sync_timeout: float = 30.0,
    ) -> None:
        self.main = main
        self.on_job_event = on_job_event
        self.rest_factory = rest_factory
        self.informer_options = informer_options or {}
        self.sync_timeout = sync_timeout
        self._clusters: dict[MpeKey, MpeCluster] = {}
        self._watches: dict[tuple[str, str, str], _SharedWatch] = {}
        self._errors: dict[MpeKey, str] = {}
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
        """The MPE named by ``ref`` has been neither set up nor failed yet (its reconcile is due)."""
        if not ref:
            return False
        key = key_of_ref(ref)
        with self._lock:
            return key not in self._errors and (key not in self._clusters or not self._clusters[key].ready)

    def clusters(self) -> list[MpeCluster]:
        with self._lock:
            return list(self._clusters.values())

    def healthy(self) -> bool:
        """Every registered MPE's Job watch is synced and connected (readiness)."""
        return all(cl.ready and cl.healthy for cl in self.clusters())

    # -- the MPE reconcile ------------------------------------------------------------------------

    def sync(self, mpe: dict[str, Any]) -> MpeCluster:
        """Build (or keep, or rebuild) the cluster of ``mpe``; raise :class:`MpeError` if unusable.

        Spec or kubeconfig changes are detected through a fingerprint (generation and the
        Secret's resourceVersion) and rebuild the client (D19).
        """
        key = key_of(mpe)
        try:
            target = self._target(mpe)
        except MpeError as exc:
            self.remove(key, error=str(exc))
            raise
        fingerprint, api_client, namespace, remote, cluster_id = target
        with self._lock:
            current = self._clusters.get(key)
            if current is not None and current.fingerprint == fingerprint:
                return current
        rest = self.main if not remote else self.rest_factory(api_client)
        # The watch is shared only by MPEs reaching the cluster with the same credentials, so a
        # rotated kubeconfig Secret also gives the Job watch the new client (D19).
        watch_key = (cluster_id, namespace, str(fingerprint[1]) if remote else "")
        watch = self._watch(watch_key, rest, key)
        cluster = MpeCluster(key, rest, namespace, remote, watch.informer, fingerprint, cluster_id, watch_key)
        with self._lock:
            old = self._clusters.get(key)
            self._clusters[key] = cluster
            self._errors.pop(key, None)
        if old is not None and old.watch_key != watch_key:
            self._release_watch(old)
        if not self._wait_synced(watch.informer):
            if self.interrupted:
                raise MpeError("shutting down")
            error = f"MediaProcessingEntity cluster not reachable: {watch.informer.last_error or 'Job watch did not sync'}"
            self.remove(key, error=error)
            raise MpeError(error)
        return cluster

    def remove(self, key: MpeKey, *, error: str = "") -> None:
        """Forget ``key`` (deleted or broken), stopping its Job watch if no other MPE shares it."""
        with self._lock:
            cluster = self._clusters.pop(key, None)
            if error:
                self._errors[key] = error
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

    def _wait_synced(self, informer: Informer) -> bool:
        deadline = time.monotonic() + self.sync_timeout
        while not informer.wait_synced(0.2):
            if self._interrupted.is_set() or time.monotonic() >= deadline:
                return False
        return True

    def stop(self) -> None:
        with self._lock:
            watches, self._watches, self._clusters = list(self._watches.values()), {}, {}
        for watch in watches:
            watch.informer.stop()

    # -- internals -------------------------------------------------------------------------------

    def _target(self, mpe: dict[str, Any]) -> tuple[tuple[Any, ...], Any, str, bool, str]:
        kind = mpe["kind"]
        meta = mpe["metadata"]
        spec = mpe.get("spec") or {}
        cluster_kind = kind == c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY
        generation = meta.get("generation")
        if "local" in spec and "remote" not in spec:
            namespace = (spec.get("local") or {}).get("namespace") or ""
            if not namespace:
                if cluster_kind:
                    raise MpeError("local ClusterMediaProcessingEntity has no namespace defined")
                namespace = meta["namespace"]
            return (generation, namespace), None, namespace, False, "main"
        if "remote" in spec and "local" not in spec:
            secret_ref = (((spec.get("remote") or {}).get("kubeconfig") or {}).get("secretRef")) or {}
            secret_ns = secret_ref.get("namespace") or ""
            if cluster_kind and not secret_ns:
                raise MpeError("remote ClusterMediaProcessingEntity secretRef has no namespace defined")
            if not cluster_kind:
                if secret_ns and secret_ns != meta["namespace"]:
                    raise MpeError("remote MediaProcessingEntity references secretRef in different namespace")
                secret_ns = meta["namespace"]
            name = secret_ref.get("name") or ""
            if not name:
                raise MpeError("remote kubeconfig secretRef has no name")
            key = secret_ref.get("key") or DEFAULT_KUBECONFIG_KEY
            try:
                secret = self.main.get(SECRETS, secret_ns, name)
            except KubeError as exc:
                raise MpeError(f"failed to read kubeconfig Secret: {exc}") from None
            data = (secret.get("data") or {}).get(key)
            if data is None:
                raise MpeError(f"Secret '{secret_ns}/{name}' has no key '{key}'")
            import base64

            try:
                kubeconfig = yaml.safe_load(base64.b64decode(data))
                api_client = kube_client.from_kubeconfig_dict(kubeconfig)
            except Exception as exc:  # malformed YAML or kubeconfig: never echo its content
                raise MpeError(
                    f"Secret '{secret_ns}/{name}' key '{key}' is not a usable kubeconfig ({type(exc).__name__})"
                ) from None
            namespace = kube_client.kubeconfig_namespace(kubeconfig)
            fingerprint = (generation, f"{secret_ns}/{name}@{secret['metadata'].get('resourceVersion')}")
            return fingerprint, api_client, namespace, True, api_client.configuration.host
        raise MpeError("MediaProcessingEntity spec must have exactly one of local or remote")

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
                informer.add_handler(self._job_event)
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
        watch.informer.stop()

    def _job_event(self, _kind: str, job: dict[str, Any]) -> None:
        labels = (job.get("metadata") or {}).get("labels") or {}
        namespace, name = labels.get(c.LABEL_TASK_NAMESPACE), labels.get(c.LABEL_TASK_NAME)
        if namespace and name:
            self.on_job_event(f"{namespace}/{name}")
