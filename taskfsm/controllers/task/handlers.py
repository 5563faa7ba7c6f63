"""Which Task keys an event of the main cluster concerns (controller-runtime's event handlers).

The manager registers these handlers on the informers before they start; each turns an event
into the keys of the Tasks it may concern and queues them (docs/behaviour.md §3.1):

* a Task event: that Task, unless it is the version this process wrote itself
  (controller-runtime's predicates do the same job: a reconcile that needs to go on after its
  own write asks for it, docs/behaviour.md §3.2);
* a Workflow event that changes whether it exists, is being deleted or has terminated: the Tasks
  whose `spec.workflowRef` names it (counter and condition updates of the Workflow controller
  change none of that, and re-queuing every Task on each of them made reconciles grow with the
  square of a Workflow's size);
* a Function, TaskTemplate, MediaLocation or MediaProcessingEntity event: the Tasks of that
  namespace (all namespaces for a cluster kind) still before Running, which may be waiting for
  it; and an MPE that starts being deleted: the Tasks whose status names it (a finished one
  deletes the Job it keeps there, the Task chart's `mpe_deleting`).

Every lookup goes through an index of the Task cache (:mod:`taskfsm.controllers.task.index`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from taskfsm.api import constants as c
from taskfsm.controllers.task.index import TaskIndex, task_key
from taskfsm.kube.informer import DELETED
from taskfsm.kube.resources import TASKS

if TYPE_CHECKING:
    from taskfsm.kube.cache import Caches

MPE_KINDS: Final = (c.KIND_MEDIA_PROCESSING_ENTITY, c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY)
DEPENDENCY_KINDS: Final = (
    *MPE_KINDS,
    c.KIND_FUNCTION,
    c.KIND_CLUSTER_FUNCTION,
    c.KIND_TASK_TEMPLATE,
    c.KIND_CLUSTER_TASK_TEMPLATE,
    c.KIND_MEDIA_LOCATION,
    c.KIND_CLUSTER_MEDIA_LOCATION,
)


class TaskWatch:
    """The Task controller's event handlers.

    Args:
        caches: the main cluster's informers.
        index: the Task cache's indexes.
        enqueue: queues a Task key.
    """

    def __init__(self, caches: Caches, index: TaskIndex, enqueue: Callable[[str], None]) -> None:
        self.caches = caches
        self.index = index
        self.enqueue = enqueue
        self._workflow_facts: dict[str, tuple[Any, ...]] = {}
        self._deleting_mpes: set[tuple[str, str, str]] = set()
        self._lock = threading.Lock()

    def register(self) -> None:
        """Add the handlers (before the informers start, to see their first lists)."""
        informers = self.caches.informers
        informers[c.KIND_TASK].add_handler(self.on_task)
        informers[c.KIND_WORKFLOW].add_handler(self.on_workflow)
        for kind in DEPENDENCY_KINDS:
            informers[kind].add_handler(self.on_dependency)
        for kind in MPE_KINDS:
            informers[kind].add_handler(self._mpe_handler(kind))

    def on_task(self, event: str, task: dict[str, Any]) -> None:
        meta = task["metadata"]
        written = ("main", TASKS.plural, meta["namespace"], meta["name"])
        if event == DELETED:
            self.caches.written.gone(written, task)
        elif self.caches.written.seen(written, task):
            return  # our own write coming back: the reconcile that wrote it knew it already
        self.enqueue(task_key(task))

    def on_workflow(self, event: str, workflow: dict[str, Any]) -> None:
        meta = workflow["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        facts = (
            meta.get("uid"),
            bool(meta.get("deletionTimestamp")),
            ((workflow.get("status") or {}).get("phase") or "") in c.WORKFLOW_TERMINAL_PHASES,
        )
        with self._lock:
            if event == DELETED:
                self._workflow_facts.pop(key, None)
            elif self._workflow_facts.get(key) == facts:
                return
            else:
                self._workflow_facts[key] = facts
        for each in self.index.keys_of_workflow(key):
            self.enqueue(each)

    def on_dependency(self, _event: str, obj: dict[str, Any]) -> None:
        namespace = (obj.get("metadata") or {}).get("namespace")  # None for cluster kinds: all
        for task in self.index.pre_running(namespace):
            self.enqueue(task_key(task))

    def _mpe_handler(self, kind: str) -> Callable[[str, dict[str, Any]], None]:
        def handler(event: str, mpe: dict[str, Any]) -> None:
            meta = mpe.get("metadata") or {}
            key = (kind, meta.get("namespace") or "", meta.get("name") or "")
            deleting = event != DELETED and bool(meta.get("deletionTimestamp"))
            with self._lock:
                news = deleting and key not in self._deleting_mpes
                if deleting:
                    self._deleting_mpes.add(key)
                else:
                    self._deleting_mpes.discard(key)
            if news:
                self.requeue_tasks_of(key)

        return handler

    def requeue_tasks_of(self, mpe: tuple[str, str, str]) -> None:
        """Queue the Tasks whose status names the MPE `mpe`."""
        for each in self.index.keys_using(mpe):
            self.enqueue(each)
