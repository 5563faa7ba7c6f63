"""The MediaProcessingEntity reconcile: finalizer, cluster registration, Ready/Failed status.

docs/behaviour.md §1.7 and §4.2, with D18 and D19 fixed: a spec or kubeconfig change rebuilds
the cluster client (:meth:`taskfsm.controllers.mpe.registry.MpeRegistry.sync`), and deletion
waits while Tasks still run Jobs through this MPE (it would otherwise strand their Jobs behind
the job-protection finalizer).

``Ready`` means usable: it turns False (``Failed`` True, the reason in ``status.message``) while
the MPE's cluster refuses the controller or does not answer, as its Job watch shows
(:meth:`taskfsm.controllers.mpe.registry.MpeRegistry.refusal`), and True again once it answers.
A deleting MPE keeps -- or, after a restart, builds -- its client until its Tasks are done, so
they can finish or clean up their Jobs (docs/operations.md, "MediaProcessingEntity clusters and
credentials").
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from taskfsm.api import constants as c
from taskfsm.controllers.mpe.registry import (
    MpeCluster,
    MpeError,
    MpeKey,
    MpeRegistry,
    MpeSettingUp,
)
from taskfsm.controllers.result import Result
from taskfsm.kube import finalizers
from taskfsm.kube.errors import KubeError, NotFound
from taskfsm.kube.events import WARNING, EventRecorder
from taskfsm.kube.resources import BY_KIND
from taskfsm.kube.rest import JSON_PATCH, Rest

log = logging.getLogger(__name__)

DELETION_POLL_SECONDS = 5.0
"""How often a deleting MPE whose cluster works looks again whether its Tasks are done."""

SETTING_UP_SECONDS = 5.0
"""How soon an MPE whose client is being set up is looked at again without a notification."""

READY_REASON = "Connected"
"""``Ready=True``'s reason: the cluster answers and its Job watch is connected."""


class _ShuttingDown(Exception):
    """The process is stopping while the MPE's cluster was being set up: nothing is reported."""


def mpe_key_string(key: MpeKey) -> str:
    return "/".join(key)


def parse_mpe_key(text: str) -> MpeKey:
    kind, namespace, name = text.split("/", 2)
    return (kind, namespace, name)


class MpeReconciler:
    """Reconciles MediaProcessingEntities and ClusterMediaProcessingEntities.

    Args:
        get: cached lookup ``(kind, namespace, name) -> object | None``.
        tasks_using: the Tasks (dicts) whose ``status.mediaProcessingEntityRef`` names the MPE.
        on_ready: called with the MPE key whenever it (re)becomes usable, to requeue waiting Tasks.
        manages_status: asked at the start of every reconcile; False while another replica (the
            holder of bucket 0 with ``--buckets``) or nobody (``--controllers`` without ``mpe``)
            writes the MPE's finalizer and status: this replica then only keeps the MPE's
            cluster client for its own Tasks (docs/operations.md, "Running several replicas").
    """

    def __init__(
        self,
        *,
        rest: Rest,
        registry: MpeRegistry,
        events: EventRecorder,
        get: Callable[[str, str | None, str], dict[str, Any] | None],
        tasks_using: Callable[[MpeKey], list[dict[str, Any]]],
        on_ready: Callable[[MpeKey], None],
        resync_seconds: float = 60.0,
        collect_orphans: Callable[[MpeCluster, list[dict[str, Any]]], None] | None = None,
        cleanup_timeout: float = 120.0,
        manages_status: Callable[[], bool] = lambda: True,
    ) -> None:
        self.rest = rest
        self.manages_status = manages_status
        self.registry = registry
        self.events = events
        self.get = get
        self.tasks_using = tasks_using
        self.on_ready = on_ready
        self.resync_seconds = resync_seconds
        self.collect_orphans = collect_orphans
        self.cleanup_timeout = cleanup_timeout

    def reconcile(self, text_key: str) -> Result:
        try:
            return self._reconcile(text_key)
        except MpeSettingUp:
            # The client's Job watch is listing: its first sync or failure re-queues this MPE;
            # the look after SETTING_UP_SECONDS only guards against a lost notification.
            return Result(requeue_after=SETTING_UP_SECONDS)

    def _reconcile(self, text_key: str) -> Result:
        key = parse_mpe_key(text_key)
        kind, namespace, name = key
        mpe = self.get(kind, namespace or None, name)
        if mpe is None:
            self.registry.forget(key)
            return Result()
        mpe = {**mpe, "kind": kind}
        meta = mpe["metadata"]
        if not self.manages_status():
            return self._follow(key, mpe)
        if meta.get("deletionTimestamp"):
            return self._delete(key, mpe)
        add = finalizers.addition(mpe, c.FINALIZER_MPE_PROTECTION)
        if add is not None:
            self._patch(mpe, add)
        try:
            # While Tasks use the MPE its working client is kept, whatever happens to its spec or
            # Secret (a namespace deletion may delete the Secret first).
            problem = self._connect(key, mpe, keep=bool(self.tasks_using(key)))
        except _ShuttingDown:
            return Result()  # say nothing about the MPE
        if problem is not None:
            self._set_status(mpe, ready=False, message=str(problem), reason=problem.reason)
            self.events.record(mpe, WARNING, problem.reason, str(problem))
            return Result(error=str(problem))
        self._set_status(mpe, ready=True, message="")
        self._release_retired(key)
        # The resync re-reads the kubeconfig Secret (D19) should a Secret event have been missed,
        # and lets go of earlier locations whose Jobs no Task needs any more.
        return Result(requeue_after=self.resync_seconds)

    def _follow(self, key: MpeKey, mpe: dict[str, Any]) -> Result:
        """The cluster client without any write: another replica, or nobody, manages the MPE.
        A deleting MPE keeps its client until it is gone, for the Tasks still using it."""
        deleting = bool(mpe["metadata"].get("deletionTimestamp"))
        try:
            problem = self._connect(key, mpe, keep=deleting or bool(self.tasks_using(key)))
        except _ShuttingDown:
            return Result()
        if problem is not None:
            return Result(error=str(problem))
        if not deleting:
            self._release_retired(key)
        return Result(requeue_after=DELETION_POLL_SECONDS if deleting else self.resync_seconds)

    def _release_retired(self, key: MpeKey) -> None:
        """Let go of the MPE's earlier locations (it was pointed elsewhere) in which no Task
        using it has its Job any more (docs/operations.md, "Changing where an MPE runs Jobs")."""
        if not self.registry.retired(key):
            return
        tasks = self.tasks_using(key)

        def needed(cluster: MpeCluster) -> bool:
            return any(
                cluster.cached_job((task.get("status") or {}).get("jobRef") or {}) is not None
                for task in tasks
            )

        self.registry.release_retired(key, needed)

    def _connect(self, key: MpeKey, mpe: dict[str, Any], *, keep: bool = False) -> MpeError | None:
        """Set up (or keep, or rebuild) the MPE's cluster: why it is unusable, None when it is
        usable; raises :class:`_ShuttingDown` when the process is stopping. Re-queues the Tasks
        using the MPE when it becomes usable (new, rebuilt after a restart, or answering again).
        ``keep``: see :meth:`taskfsm.controllers.mpe.registry.MpeRegistry.sync`."""
        was_ready = self.registry.get(_ref(key)) is not None and _condition(mpe, "Ready") == "True"
        try:
            cluster = self.registry.sync(mpe, keep=keep)
        except MpeError as exc:
            if self.registry.interrupted:
                raise _ShuttingDown from None
            return exc
        # MpeSettingUp propagates: the reconcile looks again once the Job watch has listed.
        problem = self.registry.refusal(cluster)
        if problem is None and not was_ready:
            self.on_ready(key)
        if problem is None:
            self.registry.mark_reachable(_ref(key))
        else:
            self.registry.mark_unreachable(_ref(key))
        kept = self.registry.kept(key)
        if problem is None and kept is not None:
            return MpeError(
                f"{kept}; the client set up before is kept while Tasks use this "
                "MediaProcessingEntity",
                kept.reason,
            )
        return problem

    def _needs_cluster(self, key: MpeKey, task: dict[str, Any]) -> bool:
        """Whether ``task`` still needs this MPE's cluster: not finished, or its Job there still
        holds job-protection (a finished Task's released Job goes with the MPE, see
        :meth:`taskfsm.controllers.task.orphans.OrphanCollector.collect_cluster`)."""
        status = task.get("status") or {}
        if status.get("phase") not in (c.TaskPhase.SUCCEEDED, c.TaskPhase.FAILED):
            return True
        ref = status.get("jobRef") or {}
        if not ref:
            return False
        cluster = self.registry.job_cluster(_ref(key), ref)
        if cluster is None:
            return True  # cannot tell before the client is set up
        job = cluster.jobs.get(ref.get("namespace") or cluster.namespace, ref.get("name") or "")
        finalizers_of_job = ((job or {}).get("metadata") or {}).get("finalizers") or []
        return c.FINALIZER_JOB_PROTECTION in finalizers_of_job

    def _delete(self, key: MpeKey, mpe: dict[str, Any]) -> Result:
        tasks = self.tasks_using(key)
        busy = [t for t in tasks if self._needs_cluster(key, t)]
        if busy:
            # The Tasks need the MPE's client to follow or clean up their Jobs: keep it, or build
            # it when this process has none (a restart after the deletion began; issue 12 item 5).
            message = f"waiting for {len(busy)} Task(s) still using this MediaProcessingEntity"
            try:
                problem = self._connect(key, mpe, keep=True)
            except _ShuttingDown:
                return Result()
            if problem is not None:
                message = f"{message}; {problem}"
                self._set_status(mpe, ready=False, message=message, reason=problem.reason)
                return Result(error=message)
            self._set_status(mpe, ready=True, message=message)
            return Result(requeue_after=DELETION_POLL_SECONDS)
        if self.collect_orphans is not None:
            # Nothing of a Task may stay behind where no client reaches any more: not the
            # children of Tasks that are gone, nor the Jobs finished Tasks keep (docs/operations.md,
            # "Lost Jobs and orphaned children").
            try:
                problem = self._connect(key, mpe, keep=True)
            except _ShuttingDown:
                return Result()
            cluster = self.registry.get(_ref(key))
            if problem is not None and self.registry.kept(key) is not None:
                problem = None  # the kept client still reaches the cluster: use it
            try:
                if problem is not None or cluster is None:
                    raise KubeError(str(problem or "the cluster's client is not ready"))
                for each in [cluster, *self.registry.retired(key)]:
                    self.collect_orphans(each, tasks)
            except KubeError as exc:
                self.registry.mark_unreachable(_ref(key))
                # --cleanup-timeout counts the time the cluster has not answered, not since the
                # deletion (a queue may have held the reconcile back while it answered).
                if self.registry.unreachable_for(_ref(key)) < self.cleanup_timeout:
                    return Result(error=f"deleting orphaned Jobs and Secrets before going: {exc}")
                self.events.record(
                    mpe,
                    WARNING,
                    "OrphansNotChecked",
                    f"the cluster could not be searched for Jobs and Secrets of gone Tasks: {exc}",
                )
        self.registry.forget(key)
        remove = finalizers.removal(mpe, c.FINALIZER_MPE_PROTECTION)
        if remove is not None:
            with contextlib.suppress(NotFound):
                self._patch(mpe, remove)
        return Result()

    def _patch(self, mpe: dict[str, Any], patch: list[dict[str, Any]]) -> None:
        meta = mpe["metadata"]
        res = BY_KIND[mpe["kind"]]
        self.rest.patch(res, meta.get("namespace"), meta["name"], patch, content_type=JSON_PATCH)

    def _set_status(
        self, mpe: dict[str, Any], *, ready: bool, message: str, reason: str = READY_REASON
    ) -> None:
        status = mpe.get("status") or {}
        conditions = [dict(cond) for cond in status.get("conditions") or []]
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        _mark(conditions, "Ready", "True" if ready else "False", now, reason)
        if ready:
            conditions = [cond for cond in conditions if cond.get("type") != "Failed"]
        else:
            _mark(conditions, "Failed", "True", now, reason)
        unchanged = conditions == (status.get("conditions") or [])
        if unchanged and (status.get("message") or "") == message:
            return
        meta = mpe["metadata"]
        try:
            self.rest.patch(
                BY_KIND[mpe["kind"]],
                meta.get("namespace"),
                meta["name"],
                {"status": {"conditions": conditions, "message": message}},
                subresource="status",
            )
        except KubeError as exc:
            log.warning("could not update MediaProcessingEntity status", extra={"error": str(exc)})


def _mark(conditions: list[dict[str, Any]], type_: str, status: str, now: str, reason: str) -> None:
    """§1.10: replace (stamping the time) only when the status changes; append when missing.
    The reason follows the latest verdict."""
    for cond in conditions:
        if cond.get("type") == type_:
            if cond.get("status") != status:
                cond.update(status=status, lastTransitionTime=now)
            cond["reason"] = reason
            return
    conditions.append(
        {"type": type_, "status": status, "lastTransitionTime": now, "reason": reason}
    )


def _condition(obj: dict[str, Any], type_: str) -> str:
    """The ``status`` of condition ``type_`` of ``obj`` ("" when it has none)."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return str(cond.get("status") or "")
    return ""


def _ref(key: MpeKey) -> dict[str, str]:
    kind, namespace, name = key
    return {"kind": kind, "namespace": namespace, "name": name}
