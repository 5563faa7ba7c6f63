"""The Workflow lifecycle's effects: the model the Workflow chart's engine calls.

Guards come from ``machines.workflow.guards.WorkflowObservationGuards``; this class adds the
effects, on the reconcile's working copy (metadata and status changes, each written once by the
write step with the resourceVersion read, as the Task's) and the Workflow store (the finalizer's
release and the delete, which end the Workflow's life). None calls back into the reconciler.

Spec: docs/behaviour.md §4.3.
"""

from __future__ import annotations

from machines.workflow.guards import WorkflowObservationGuards
from machines.workflow.observation import WorkflowObservation
from taskfsm.api import constants as c
from taskfsm.api.timestamps import format_time
from taskfsm.controllers.workflow.member_tasks import workflow_labels
from taskfsm.controllers.workflow.store import WorkflowStore, WorkflowWork

COUNTERS = ("total", "active", "succeeded", "failed")
"""The status counters a Workflow carries (§4.3)."""


class WorkflowEffects(WorkflowObservationGuards):
    """``machines.workflow.model.WorkflowLifecycleModel`` for one reconcile."""

    def __init__(self, work: WorkflowWork, store: WorkflowStore) -> None:
        self.work = work
        self.store = store

    # -- metadata --------------------------------------------------------------------------------

    def add_workflow_finalizer(self, observation: WorkflowObservation) -> None:
        """§4.3: added on the first pass; never on a terminating Workflow (the chart's order)."""
        meta = self.work.meta
        present = meta.get("finalizers") or []
        if c.FINALIZER_WORKFLOW_PROTECTION not in present:
            meta["finalizers"] = [*present, c.FINALIZER_WORKFLOW_PROTECTION]
            self.work.metadata_dirty = True

    def set_workflow_labels(self, observation: WorkflowObservation) -> None:
        """§4.3: the Workflow carries the labels its Tasks carry (other labels stay)."""
        meta = self.work.meta
        wanted = workflow_labels(meta["namespace"], meta["name"])
        have = meta.get("labels") or {}
        if any(have.get(k) != v for k, v in wanted.items()):
            meta["labels"] = {**have, **wanted}
            self.work.metadata_dirty = True

    def remove_workflow_finalizer(self, observation: WorkflowObservation) -> None:
        """Deletion: no Task is active any more; the Workflow may go."""
        metadata = self.store.remove_finalizer(self.work.workflow)
        if metadata is not None:
            self.work.workflow["metadata"] = metadata

    def delete_expired_workflow(self, observation: WorkflowObservation) -> None:
        """Retention (``--finished-ttl``): delete the finished Workflow as read; its finalizer
        and its Tasks' (through their owner references) then clean up as on any deletion."""
        self.store.delete_as_read(self.work.meta)

    # -- status ----------------------------------------------------------------------------------

    def record_task_counts(self, observation: WorkflowObservation) -> None:
        status = self.work.status
        for name in COUNTERS:
            status[name] = getattr(observation, name)

    def record_queued_time(self, observation: WorkflowObservation) -> None:
        self.work.status.setdefault("queuedTime", format_time(self.work.now))

    def record_start_time(self, observation: WorkflowObservation) -> None:
        self.work.status.setdefault("startTime", format_time(self.work.now))

    def record_end_time(self, observation: WorkflowObservation) -> None:
        self.work.status["endTime"] = format_time(self.work.now)

    def clear_end_time(self, observation: WorkflowObservation) -> None:
        self.work.status.pop("endTime", None)

    def ensure_end_time(self, observation: WorkflowObservation) -> None:
        self.work.status.setdefault("endTime", format_time(self.work.now))
