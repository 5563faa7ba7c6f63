"""An MPE's cluster as the controllers use it, its key, and why one cannot be used.

docs/behaviour.md §1.7 and §4.1; the namespace rules are docs/security.md's ("References stay
in their namespace", "Where Jobs run").
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from taskfsm.api import constants as c
from taskfsm.kube.informer import Informer
from taskfsm.kube.rest import Rest

MpeKey = tuple[str, str, str]
"""(kind, namespace or "", name) of a MediaProcessingEntity or ClusterMediaProcessingEntity."""

SecretKey = tuple[str, str]
"""(namespace, name) of a kubeconfig Secret in the main cluster."""

WatchKey = tuple[str, str, str]
"""(cluster, Job namespace, credentials): MPEs with the same key share one Job watch."""

JOB_LABEL_SELECTOR: Final = f"{c.LABEL_TASK_NAMESPACE},{c.LABEL_TASK_NAME}"
"""The Jobs a Job watch lists: those carrying the Task labels."""


class Reason(StrEnum):
    """Why an MPE cannot be used: its ``Ready=False`` reason (the ``reason`` of
    :class:`MpeError`; docs/mpe-lifecycle.md)."""

    INVALID_SPEC = "InvalidSpec"
    NAMESPACE_NOT_ALLOWED = "NamespaceNotAllowed"
    SECRET_UNAVAILABLE = "KubeconfigSecretUnavailable"
    KUBECONFIG_INVALID = "KubeconfigInvalid"
    KUBECONFIG_REFUSED = "KubeconfigRefused"
    NOT_REACHABLE = "NotReachable"
    CLUSTER_REFUSED = "ClusterRefused"


class MpeError(Exception):
    """The MPE cannot be used; the message goes to its status and to waiting Tasks, the reason
    to its ``Ready`` condition (docs/mpe-lifecycle.md)."""

    def __init__(
        self, message: str, reason: str = Reason.NOT_REACHABLE, *, transient: bool = False
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.transient = transient
        """The spec and kubeconfig Secret may well build a client on the next try (the Secret
        could not be read for a reason other than its absence); False when they cannot as
        they are (the registry's ``unbuildable``)."""


class MpeSettingUp(Exception):
    """The MPE's client is built and its Job watch's first list is under way: nothing to say
    yet; the watch's first sync or failure re-queues the MPE. The MPE chart waits for it
    (``setting_up``: ``machines.mpe.driver``), with no error and no change of ``Ready``."""

    setting_up = True


def key_of(obj: dict[str, Any]) -> MpeKey:
    meta = obj["metadata"]
    return (obj["kind"], meta.get("namespace") or "", meta["name"])


def key_of_ref(ref: dict[str, Any]) -> MpeKey:
    return (ref.get("kind") or "", ref.get("namespace") or "", ref.get("name") or "")


def ref_of_key(key: MpeKey) -> dict[str, str]:
    kind, namespace, name = key
    return {"kind": kind, "namespace": namespace, "name": name}


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
    watch_key: WatchKey = ("", "", "")
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


def among(cluster: MpeCluster, clusters: list[MpeCluster]) -> bool:
    """``cluster`` is one of ``clusters`` (identity: two clusters may compare equal)."""
    return any(cluster is other for other in clusters)
