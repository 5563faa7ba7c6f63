"""Which Workflow keys an event of the main cluster concerns (the Workflow controller's event
handlers, docs/behaviour.md §4.3).

* a Workflow event: that Workflow;
* a Task event: its Workflow (by the workflow labels, else by `spec.workflowRef`) when the Task
  appears, disappears, or changes its phase or its Workflow; a Task moved to another Workflow
  also wakes the one it left. Other Task changes cannot change a Workflow's counts.

The Task controller already queues a Workflow's Tasks on the Workflow events that matter to
them, so the two controllers drive each other through the watches: a Workflow turning Failed
fails its active Tasks, a Workflow being deleted makes its Tasks delete themselves, and each Task
going away wakes the Workflow, which removes its finalizer once no Task is active.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from taskfsm.api import constants as c
from taskfsm.controllers.workflow.member_tasks import task_workflow_key, workflow_key
from taskfsm.kube.resources import WORKFLOWS

if TYPE_CHECKING:
    from taskfsm.kube.cache import Caches


class WorkflowWatch:
    """The Workflow controller's event handlers.

    Args:
        caches: the main cluster's informers.
        enqueue: queues a Workflow key now (its own events).
        enqueue_soon: queues a Workflow key a moment later, coalescing (a Task's events): a
            burst of a thousand Task changes is one Workflow reconcile and one status write,
            not a thousand.
    """

    def __init__(
        self,
        caches: Caches,
        enqueue: Callable[[str], None],
        enqueue_soon: Callable[[str], None] | None = None,
    ) -> None:
        self.caches = caches
        self.enqueue = enqueue
        self.enqueue_soon = enqueue_soon or enqueue
        self._task_seen: dict[str, tuple[str | None, str]] = {}
        self._lock = threading.Lock()

    def register(self) -> None:
        """Add the handlers (before the informers start, to see their first lists)."""
        informers = self.caches.informers
        informers[c.KIND_WORKFLOW].add_handler(self.on_workflow)
        informers[c.KIND_TASK].add_handler(self.on_task)

    def cached_keys(self) -> list[str]:
        """Every cached Workflow's key (queued when the workers start)."""
        return [
            workflow_key(w["metadata"]["namespace"], w["metadata"]["name"])
            for w in self.caches.informers[c.KIND_WORKFLOW].list()
        ]

    def on_workflow(self, event: str, workflow: dict[str, Any]) -> None:
        meta = workflow["metadata"]
        written = ("main", WORKFLOWS.plural, meta["namespace"], meta["name"])
        if event == "DELETED":
            self.caches.written.gone(written, workflow)
        elif self.caches.written.seen(written, workflow):
            return  # our own write coming back: its reconcile knew it already
        self.enqueue(workflow_key(meta["namespace"], meta["name"]))

    def on_task(self, event: str, task: dict[str, Any]) -> None:
        meta = task.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        owner = task_workflow_key(task)
        seen = (owner, (task.get("status") or {}).get("phase") or "")
        with self._lock:
            if event == "DELETED":
                previous = self._task_seen.pop(key, None)
            else:
                previous = self._task_seen.get(key)
                self._task_seen[key] = seen
        if event != "DELETED" and previous == seen:
            return  # neither its phase nor its Workflow changed: the counts did not either
        for workflow in {owner, previous[0] if previous else None}:
            if workflow is not None:
                self.enqueue_soon(workflow)
