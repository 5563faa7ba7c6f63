"""The MediaProcessingEntity reconcile: finalizer, cluster registration, Ready/Failed status.

task-controller.md §1.7 steps 1–4 with D18/D19 fixed: a spec or kubeconfig change rebuilds the
cluster client (:meth:`taskfsm.mpe.MpeRegistry.sync`), and deletion waits while Tasks still run
Jobs through this MPE (it would otherwise strand their Jobs behind the job-protection finalizer).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from taskfsm import constants as c
from taskfsm.events import WARNING, EventRecorder
from taskfsm.kube.errors import KubeError, NotFound
from taskfsm.kube.resources import BY_KIND
from taskfsm.kube import finalizers
from taskfsm.kube.rest import JSON_PATCH, Rest
from taskfsm.mpe import MpeError, MpeKey, MpeRegistry
from taskfsm.reconciler import Result

log = logging.getLogger(__name__)


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
    ) -> None:
        self.rest = rest
        self.registry = registry
        self.events = events
        self.get = get
        self.tasks_using = tasks_using
        self.on_ready = on_ready
        self.resync_seconds = resync_seconds

    def reconcile(self, text_key: str) -> Result:
        key = parse_mpe_key(text_key)
        kind, namespace, name = key
        mpe = self.get(kind, namespace or None, name)
        if mpe is None:
            self.registry.remove(key)
            return Result()
        mpe = {**mpe, "kind": kind}
        meta = mpe["metadata"]
        if meta.get("deletionTimestamp"):
            return self._delete(key, mpe)
        add = finalizers.addition(mpe, c.FINALIZER_MPE_PROTECTION)
        if add is not None:
            self._patch(mpe, add)
        was_ready = self.registry.get(_ref(key)) is not None
        try:
            self.registry.sync(mpe)
        except MpeError as exc:
            if self.registry.interrupted:
                return Result()  # shutting down: say nothing about the MPE
            self._set_status(mpe, ready=False, message=str(exc))
            self.events.record(mpe, WARNING, "NotReady", str(exc))
            return Result(error=str(exc))
        self._set_status(mpe, ready=True, message="")
        if not was_ready:
            self.on_ready(key)
        return Result(requeue_after=self.resync_seconds)  # re-reads the kubeconfig Secret (D19)

    def _delete(self, key: MpeKey, mpe: dict[str, Any]) -> Result:
        busy = [
            t
            for t in self.tasks_using(key)
            if (t.get("status") or {}).get("phase") not in (c.TaskPhase.SUCCEEDED, c.TaskPhase.FAILED)
            or (t.get("status") or {}).get("jobRef")
        ]
        if busy:
            message = f"waiting for {len(busy)} Task(s) still using this MediaProcessingEntity"
            self._set_status(mpe, ready=True, message=message)
            return Result(error=message)
        self.registry.remove(key)
        remove = finalizers.removal(mpe, c.FINALIZER_MPE_PROTECTION)
        if remove is not None:
            try:
                self._patch(mpe, remove)
            except NotFound:
                pass
        return Result()

    def _patch(self, mpe: dict[str, Any], patch: list[dict[str, Any]]) -> None:
        meta = mpe["metadata"]
        self.rest.patch(BY_KIND[mpe["kind"]], meta.get("namespace"), meta["name"], patch, content_type=JSON_PATCH)

    def _set_status(self, mpe: dict[str, Any], *, ready: bool, message: str) -> None:
        status = mpe.get("status") or {}
        conditions = [dict(cond) for cond in status.get("conditions") or []]
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        _mark(conditions, "Ready", "True" if ready else "False", now)
        if ready:
            conditions = [cond for cond in conditions if cond.get("type") != "Failed"]
        else:
            _mark(conditions, "Failed", "True", now)
        if conditions == (status.get("conditions") or []) and (status.get("message") or "") == message:
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


def _mark(conditions: list[dict[str, Any]], type_: str, status: str, now: str) -> None:
    """§1.10: replace (stamping the time) only when the status changes; append when missing."""
    for cond in conditions:
        if cond.get("type") == type_:
            if cond.get("status") != status:
                cond.update(status=status, lastTransitionTime=now)
            return
    conditions.append({"type": type_, "status": status, "lastTransitionTime": now})


def _ref(key: MpeKey) -> dict[str, str]:
    kind, namespace, name = key
    return {"kind": kind, "namespace": namespace, "name": name}
