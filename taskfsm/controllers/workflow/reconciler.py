"""One Workflow reconcile: key in, :class:`~taskfsm.controllers.result.Result` out,
level-triggered. The pipeline is the Task controller's (docs/architecture.md):

1. **read** the Workflow (:class:`~taskfsm.controllers.workflow.store.WorkflowStore`: cache, or
   our own newer write, or a fresh GET when neither is known) and count its Tasks in the Task
   informer cache (:mod:`taskfsm.controllers.workflow.member_tasks`); a cache that cannot answer
   is a list error the pass returns (D20), never "zero Tasks";
2. **observe**: both into a ``machines.workflow.observation.WorkflowObservation`` (the clock
   enters here once: how long ago ``status.endTime`` was);
3. **pass**: the Workflow chart decides (``machines.workflow.driver.reconcile``): passes while
   they move the phase, so a Workflow whose Tasks all finished goes Initializing → Running →
   AwaitingCompletion in one reconcile;
4. **effects** through :class:`~taskfsm.controllers.workflow.effects.WorkflowEffects`;
5. **write** status in one merge patch on ``/status`` (phase, conditions, message, times,
   counters), and the Events the outcome names;
6. **requeue** as the chart said: an error backs off; AwaitingCompletion comes back when the
   termination wait is due; a Workflow that may still change after the resync period
   (``settled``); a terminated one when its ``--finished-ttl`` is due (deleted then), else
   only on events, like a deleting one.

Triggers (:mod:`taskfsm.controllers.workflow.handlers`): every Workflow event queues that Workflow;
a Task event queues its Workflow when the Task appears, disappears, or changes phase or workflow
labels. The Task controller queues a Workflow's Tasks on every Workflow event that matters to
them, so the two reconcilers drive each other through the watch loop.

One Workflow's exception never escapes (D23): it becomes ``status.message`` and a retry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final

from machines.conditions import Condition
from machines.engine import WARNING
from machines.workflow.driver import WorkflowPassOutcome, WorkflowReconcileOutcome, reconcile
from machines.workflow.observation import WorkflowObservation
from taskfsm.api import constants as c
from taskfsm.api.timestamps import parse_time
from taskfsm.controllers.result import Result, internal_error, is_conflict
from taskfsm.controllers.workflow.effects import COUNTERS, WorkflowEffects
from taskfsm.controllers.workflow.member_tasks import (
    TaskCount,
    TaskListError,
    WorkflowTasks,
    workflow_labels,
)
from taskfsm.controllers.workflow.store import WorkflowStore, WorkflowWork
from taskfsm.controllers.writes import write_failed
from taskfsm.kube.cache import Caches
from taskfsm.kube.errors import KubeError
from taskfsm.kube.events import EventRecorder
from taskfsm.kube.rest import Rest

log = logging.getLogger(__name__)

CONTROLLER_LABEL: Final = "workflow"
"""The ``controller`` label of this reconciler's metrics and work queue."""


class WorkflowReconciler:
    """Reconciles Workflows of the main cluster.

    Args:
        rest: the main cluster.
        caches: informer caches (the Task and Workflow informers) and read-your-writes.
        events: where Events go.
        waiting_seconds: ``workflowTerminationWaitingDuration`` in seconds.
        resync_seconds: a Workflow that is neither terminated nor waiting is looked at again
            at least this often without events (None: only on events).
        finished_ttl: ``--finished-ttl`` in seconds: a Succeeded or Failed Workflow is deleted
            (with its Tasks) that long after its endTime (None: kept forever).
        clock: wall-clock ``now`` (injected by tests).
    """

    def __init__(
        self,
        *,
        rest: Rest,
        caches: Caches,
        events: EventRecorder,
        waiting_seconds: float,
        resync_seconds: float | None,
        finished_ttl: float | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.store = WorkflowStore(rest, caches)
        self.tasks = WorkflowTasks(caches.informers[c.KIND_TASK])
        self.events = events
        self.waiting_seconds = waiting_seconds
        self.resync_seconds = resync_seconds
        self.finished_ttl = finished_ttl
        self.clock = clock

    @property
    def rest(self) -> Rest:
        return self.store.rest

    def read_workflow(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.store.read(namespace, name)

    # -- the reconcile ---------------------------------------------------------------------------

    def reconcile(self, key: str) -> Result:
        """Reconcile the Workflow ``namespace/name``; never raises (D23)."""
        try:
            return self._reconcile(key)
        except Exception as exc:  # a bug or an API failure outside the machine: retry later
            log.exception("workflow reconcile failed", extra={"workflow": key})
            return internal_error(exc)

    def _reconcile(self, key: str) -> Result:
        namespace, name = key.split("/", 1)
        workflow = self.read_workflow(namespace, name)
        if workflow is None:
            return Result()
        work = WorkflowWork.of(workflow, self.clock())
        outcome = reconcile(
            lambda: self.observe(work),
            WorkflowEffects(work, self.store),
            now=work.now,
            apply=lambda o: _apply(work, o),
        )
        if outcome.finalized:
            self._record_events(work, outcome)
            return Result()
        try:
            self.store.write_metadata(work)
            self._write_status(work)
        except KubeError as exc:  # e.g. the API server is restarting: retry with backoff
            if not is_conflict(exc):
                log.warning("workflow write failed", extra={"workflow": key, "error": str(exc)})
            return write_failed(
                exc, "failed to update Workflow", events=self.events, obj=work.workflow
            )
        self._record_events(work, outcome)
        if outcome.message:
            self.events.record(work.workflow, WARNING, "ReconcileError", outcome.message)
            return Result(error=outcome.message)
        return Result.after(outcome.last.requeue_after)

    def _record_events(self, work: WorkflowWork, outcome: WorkflowReconcileOutcome) -> None:
        for note in outcome.events:
            self.events.record(work.workflow, note.type, note.reason, note.note)

    def _write_status(self, work: WorkflowWork) -> None:
        before = work.original.get("status") or {}
        after = work.workflow.get("status") or {}
        patch: dict[str, Any] = {k: v for k, v in after.items() if before.get(k) != v}
        patch.update({k: None for k in before if k not in after})  # merge patch: null removes
        if patch:
            self.store.patch_status(work.meta, patch)

    # -- read and observe ------------------------------------------------------------------------

    def observe(self, work: WorkflowWork) -> WorkflowObservation:
        """Count the Workflow's Tasks (the read) and condense both into a WorkflowObservation."""
        meta = work.meta
        status = work.workflow.get("status") or {}
        namespace, name = meta["namespace"], meta["name"]
        list_error = ""
        try:
            count = self.tasks.count(namespace, name)
        except TaskListError as exc:
            list_error, count = str(exc), TaskCount()
        labels = meta.get("labels") or {}
        end = parse_time(status.get("endTime"))
        if end is not None and status.get("endTime") != (work.original.get("status") or {}).get(
            "endTime"
        ):
            end = work.now  # stamped by this reconcile: exact, not truncated to the second
        return WorkflowObservation(
            name=name,
            phase=status.get("phase") or "",
            deletion_requested=bool(meta.get("deletionTimestamp")),
            has_finalizer=c.FINALIZER_WORKFLOW_PROTECTION in (meta.get("finalizers") or []),
            labels_set=all(labels.get(k) == v for k, v in workflow_labels(namespace, name).items()),
            list_error=list_error,
            total=count.total,
            active=count.active,
            succeeded=count.succeeded,
            failed=count.failed,
            failed_tasks=count.failed_tasks,
            counts_recorded=all(status.get(k) == getattr(count, k) for k in COUNTERS),
            seconds_since_end=None if end is None else max(0.0, (work.now - end).total_seconds()),
            waiting_seconds=self.waiting_seconds,
            resync_seconds=self.resync_seconds,
            finished_ttl=self.finished_ttl,
            conditions=tuple(Condition.from_dict(d) for d in status.get("conditions") or []),
        )


def _apply(work: WorkflowWork, outcome: WorkflowPassOutcome) -> None:
    """Put one pass's phase, conditions and message into the working copy."""
    status = work.status
    if outcome.phase:
        status["phase"] = outcome.phase
    conditions = [cond.to_dict() for cond in outcome.conditions]
    if conditions:
        status["conditions"] = conditions
    else:
        status.pop("conditions", None)
    if outcome.message:
        status["message"] = outcome.message
    else:
        status.pop("message", None)
