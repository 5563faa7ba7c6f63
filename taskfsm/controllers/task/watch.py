"""Which Task keys an event of the main cluster concerns (controller-runtime's event handlers).

The manager registers these handlers on the informers before they start; each turns an event
into the keys of the Tasks it may concern and queues them (docs/behaviour.md §3.1):

* a Task event: that Task (a delete also forgets what this process remembered of it), unless it
  is the version this process wrote itself (controller-runtime's predicates do the same job: a
  reconcile that needs to go on after its own write asks for it, docs/behaviour.md §3.2);
* a Workflow event that changes whether it exists, is being deleted or has terminated: the Tasks
  whose `spec.workflowRef` names it (counter and condition updates of the Workflow controller
  change none of that, and re-queuing every Task on each of them made reconciles grow with the
  square of a Workflow's size);
* a Function, TaskTemplate, MediaLocation or MediaProcessingEntity event: the Tasks of that
  namespace (all namespaces for a cluster kind) still before Running, which may be waiting for it;
* an MPE whose client became ready: the Tasks whose status names it.

Every lookup goes through an index of the Task cache, so an event costs the same whatever else
the cache holds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from taskfsm.api import constants as c
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
PRE_RUNNING: Final = ("", c.TaskPhase.INITIALIZING, c.TaskPhase.JOB_PENDING)

BY_WORKFLOW: Final = "workflow-ref"
"""Task cache index: `namespace/spec.workflowRef.name`."""
BY_MPE: Final = "mpe-ref"
"""Task cache index: `kind/namespace/name` of `status.mediaProcessingEntityRef`."""
PRE_RUNNING_BY_NAMESPACE: Final = "pre-running"
"""Task cache index: the namespace of every Task still before Running."""
PRE_RUNNING_ALL: Final = "pre-running-all"
"""Task cache index: one value (`*`) for every Task still before Running."""


def task_key(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}"


def mpe_ref_key(kind: str, namespace: str, name: str) -> str:
    return f"{kind}/{namespace}/{name}"


def _workflow_of(task: dict[str, Any]) -> str | None:
    name = ((task.get("spec") or {}).get("workflowRef") or {}).get("name")
    namespace = (task.get("metadata") or {}).get("namespace")
    return f"{namespace}/{name}" if name and namespace else None


def _mpe_of(task: dict[str, Any]) -> str | None:
    ref = (task.get("status") or {}).get("mediaProcessingEntityRef") or {}
    if not ref.get("name"):
        return None
    if ref.get("kind") != c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY and ref.get("namespace") != (
        task.get("metadata") or {}
    ).get("namespace"):
        return None  # not one selection writes: it holds no other namespace's MPE back
    return mpe_ref_key(ref.get("kind") or "", ref.get("namespace") or "", ref["name"])


def _pre_running(task: dict[str, Any]) -> bool:
    return ((task.get("status") or {}).get("phase") or "") in PRE_RUNNING


def _pre_running_namespace(task: dict[str, Any]) -> str | None:
    return (task.get("metadata") or {}).get("namespace") if _pre_running(task) else None


def _pre_running_all(task: dict[str, Any]) -> str | None:
    return "*" if _pre_running(task) else None


class TaskWatch:
    """The Task controller's event handlers.

    Args:
        caches: the main cluster's informers (the Task informer gets the indexes above).
        enqueue: queues a Task key.
        forget: called with the UID of a Task seen deleted (what the reconciler remembered of it).
    """

    def __init__(
        self, caches: Caches, enqueue: Callable[[str], None], forget: Callable[[str], None]
    ) -> None:
        self.caches = caches
        self.enqueue = enqueue
        self.forget = forget
        self._workflow_facts: dict[str, tuple[Any, ...]] = {}
        tasks = caches.informers[c.KIND_TASK]
        tasks.index(BY_WORKFLOW, _workflow_of)
        tasks.index(BY_MPE, _mpe_of)
        tasks.index(PRE_RUNNING_BY_NAMESPACE, _pre_running_namespace)
        tasks.index(PRE_RUNNING_ALL, _pre_running_all)

    def register(self) -> None:
        """Add the handlers (before the informers start, to see their first lists)."""
        informers = self.caches.informers
        informers[c.KIND_TASK].add_handler(self.on_task)
        informers[c.KIND_WORKFLOW].add_handler(self.on_workflow)
        for kind in DEPENDENCY_KINDS:
            informers[kind].add_handler(self.on_dependency)

    def on_task(self, event: str, task: dict[str, Any]) -> None:
        meta = task["metadata"]
        written = ("main", TASKS.plural, meta["namespace"], meta["name"])
        if event == "DELETED":
            self.caches.written.gone(written)
            self.forget(meta.get("uid") or "")
        elif self.caches.written.seen(written, task):
            return  # our own write coming back: the reconcile that wrote it knew it already
        self.enqueue(task_key(task))

    def on_workflow(self, event: str, workflow: dict[str, Any]) -> None:
        meta = workflow["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        facts = (
            meta.get("uid"),
            bool(meta.get("deletionTimestamp")),
            ((workflow.get("status") or {}).get("phase") or "") in ("Succeeded", "Failed"),
        )
        if event == "DELETED":
            self._workflow_facts.pop(key, None)
        elif self._workflow_facts.get(key) == facts:
            return
        else:
            self._workflow_facts[key] = facts
        for task in self.caches.informers[c.KIND_TASK].by_index(BY_WORKFLOW, key):
            self.enqueue(task_key(task))

    def on_dependency(self, _event: str, obj: dict[str, Any]) -> None:
        namespace = (obj.get("metadata") or {}).get("namespace")  # None for cluster kinds: all
        tasks = self.caches.informers[c.KIND_TASK]
        found = (
            tasks.by_index(PRE_RUNNING_BY_NAMESPACE, namespace)
            if namespace
            else tasks.by_index(PRE_RUNNING_ALL, "*")
        )
        for task in found:
            self.enqueue(task_key(task))

    def tasks_using(self, mpe: tuple[str, str, str]) -> list[dict[str, Any]]:
        """The cached Tasks whose `status.mediaProcessingEntityRef` names the MPE `mpe`."""
        return self.caches.informers[c.KIND_TASK].by_index(BY_MPE, mpe_ref_key(*mpe))

    def requeue_tasks_of(self, mpe: tuple[str, str, str]) -> None:
        for task in self.tasks_using(mpe):
            self.enqueue(task_key(task))
