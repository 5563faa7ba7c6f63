"""Write: the end of a Task reconcile, its one status patch and its Events.

:meth:`TaskWriter.write` writes what the passes collected (:class:`~taskfsm.controllers.task.
work.WorkingCopy`): the metadata part if still pending, then the status part in one merge patch on
``/status``, both with the resourceVersion the reconcile read, so a write computed from a view
that is no longer current fails with 409 instead of landing (F7); and then the Events the
outcome names (the phase change, the chart's notes) plus a Warning ``ReconcileError`` for an
error. What it returns says what happened; :mod:`taskfsm.controllers.task.reconciler` turns
that into the requeue.

Runtime mechanics (docs/architecture.md): a conflict discards the whole reconcile (nothing of
it may land, no Event; the retry starts from a fresh read); a finalized Task gets no status
write (it is gone); a failed write is a Warning Event and an error of the reconcile.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from machines.conditions import bounded_message
from machines.engine import NORMAL, WARNING
from machines.task.driver import TaskReconcileOutcome
from taskfsm.controllers.result import is_conflict, is_transient, retry_after_of
from taskfsm.controllers.task.store import TaskStore
from taskfsm.controllers.task.working_copy import WorkingCopy
from taskfsm.kube.errors import KubeError
from taskfsm.kube.events import EventRecorder


@dataclass(frozen=True)
class Written:
    """What the write step did, for the requeue.

    Attributes:
        error: the reconcile's error as written to `status.message` ("" for none; a quiet or
            announced wait is no error).
        conflict: set when a precondition found a newer version: nothing landed, retry now.
        transient: the error is the API's (short backoff), not the object's.
        retry_after: the API server's ``Retry-After`` on the failure, if any.
    """

    error: str = ""
    conflict: str = ""
    transient: bool = False
    retry_after: float | None = None


class TaskWriter:
    """Writes a Task reconcile's patch and Events.

    Args:
        store: the main cluster's Tasks.
        events: where Events go.
        phase_events: write a Normal Event for each phase change (``--task-phase-events``);
            without it a phase change is in the status write only (phase, conditions with
            their ``lastTransitionTime``), and only the phase changes that are Warnings (Failed)
            get an Event: two Event writes per Task fewer (docs/operations.md, "Events").
    """

    def __init__(
        self, store: TaskStore, events: EventRecorder, *, phase_events: bool = False
    ) -> None:
        self.store = store
        self.events = events
        self.phase_events = phase_events
        self._pruned_status: set[str] = set()
        """Top-level status fields the API server dropped from our writes: the installed CRD
        has no such field (an upstream CRD without ``observedGeneration``), so they are neither
        written nor compared any more."""

    def apply(self, work: WorkingCopy, outcome: Any) -> None:
        """Put one pass's phase, conditions and message into the working copy."""
        status = work.status
        generation = work.meta.get("generation")
        if generation is not None:
            status["observedGeneration"] = generation
        if outcome.phase:
            status["phase"] = outcome.phase
        status["conditions"] = [cond.to_dict() for cond in outcome.conditions] or None
        status["message"] = _message(work, outcome)

    def write(self, work: WorkingCopy, outcome: TaskReconcileOutcome) -> Written:
        last = outcome.last
        error = last.error
        if error is not None and is_conflict(error.exception):
            # A precondition found a newer version (another writer, a stale cache): nothing of
            # this pass's status may land; the retry starts from a fresh read. No Warning.
            return Written(conflict=f"conflict: {last.message}")
        retry_after = retry_after_of(error.exception if error else None)
        if outcome.finalized:
            self._events(work, outcome)
            return Written()
        message = _message(work, last)
        failed = error is not None
        transient = error is not None and (error.outside or is_transient(error.exception))
        if work.metadata_dirty:
            # Metadata effects that succeeded before an error (finalizer, owner reference,
            # labels) are kept: a Task stuck on a selection error still belongs to its Workflow.
            try:
                self.store.write_metadata(work)
            except KubeError as exc:
                if is_conflict(exc):
                    return Written(conflict=f"conflict: {exc}")
                failure = f"failed to update Task metadata: {exc}"
                message = bounded_message(f"[{message}, {failure}]" if message else failure)
                failed = transient = True
                retry_after = retry_after or retry_after_of(exc)
        work.status["message"] = message
        try:
            self._write_status(work)
        except KubeError as exc:
            if is_conflict(exc):
                return Written(conflict=f"conflict: {exc}")
            # Nothing of this pass's status landed (F3): say so, retry with backoff; the effects
            # already done are idempotent and found done by the next pass.
            failure = f"failed to update Task status: {exc}"
            self.events.record(work.task, WARNING, "ReconcileError", failure)
            return Written(error=failure, transient=True, retry_after=retry_after_of(exc))
        self._events(work, outcome)
        if failed:
            self.events.record(work.task, WARNING, "ReconcileError", message)
            return Written(error=message, transient=transient, retry_after=retry_after)
        return Written()

    def _events(self, work: WorkingCopy, outcome: TaskReconcileOutcome) -> None:
        for note in outcome.events:
            if note.phase_change and note.type == NORMAL and not self.phase_events:
                continue
            self.events.record(work.task, note.type, note.reason, note.note)

    def _write_status(self, work: WorkingCopy) -> None:
        """Patch ``/status`` with what changed, at the resourceVersion the pass read."""
        before = work.original.get("status") or {}
        after = work.task.get("status") or {}
        patch = {
            k: v
            for k, v in after.items()
            if before.get(k) != v
            and not (v is None and k not in before)
            and not (k in self._pruned_status and k not in before)
        }
        if not patch:
            return
        updated = self.store.patch_status(work.meta, patch)
        if updated is None:
            return
        stored = updated.get("status") or {}
        for k, v in patch.items():
            if v is not None and k not in stored:
                self._pruned_status.add(k)  # the installed CRD has no such field
        work.meta["resourceVersion"] = updated["metadata"].get("resourceVersion")


def _message(work: WorkingCopy, outcome: Any) -> str:
    """The `status.message` the outcome asks for: its own, or the stored one for a quiet wait."""
    if outcome.waiting_quietly:
        return str((work.original.get("status") or {}).get("message") or "")
    return str(outcome.message)
