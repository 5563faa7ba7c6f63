"""The Task cache's indexes, and the questions the rest of the controller asks of them.

Every lookup goes through an index of the Task cache, so an event or a query costs the same
whatever else the cache holds. The Task watch asks which Tasks an event concerns; the manager
asks which Tasks use a MediaProcessingEntity (for the MPE's reconcile and its waking of them).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from taskfsm.api import constants as c
from taskfsm.kube.informer import Informer

BY_WORKFLOW: Final = "workflow-ref"
"""Task cache index: `namespace/spec.workflowRef.name`."""
BY_MPE: Final = "mpe-ref"
"""Task cache index: `kind/namespace/name` of `status.mediaProcessingEntityRef`."""
PRE_RUNNING_BY_NAMESPACE: Final = "pre-running"
"""Task cache index: the namespace of every Task still before Running."""
PRE_RUNNING_ALL: Final = "pre-running-all"
"""Task cache index: one value (`*`) for every Task still before Running."""
BY_PHASE: Final = "phase"
"""Task cache index: `status.phase` (`""`: none yet)."""
MPE_NEEDS: Final = "mpe-needs"
"""Task cache index: as `BY_MPE`, for the Tasks whose MPE has something to learn from them: not
finished yet, or still naming a Job (a finished Task whose Job expired only counts)."""


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


def _mpe_needs(task: dict[str, Any]) -> str | None:
    status = task.get("status") or {}
    if status.get("phase") in c.TASK_TERMINAL_PHASES and not status.get("jobRef"):
        return None
    return _mpe_of(task)


def _phase_of(task: dict[str, Any]) -> str:
    phase = (task.get("status") or {}).get("phase") or ""
    return phase if isinstance(phase, str) else ""


def _pre_running(task: dict[str, Any]) -> bool:
    return ((task.get("status") or {}).get("phase") or "") in c.TASK_PRE_RUNNING_PHASES


def _pre_running_namespace(task: dict[str, Any]) -> str | None:
    return (task.get("metadata") or {}).get("namespace") if _pre_running(task) else None


def _pre_running_all(task: dict[str, Any]) -> str | None:
    return "*" if _pre_running(task) else None


class TaskIndex:
    """The Task informer's indexes (registered at construction, before it starts)."""

    def __init__(self, tasks: Informer) -> None:
        self.tasks = tasks
        tasks.index(BY_WORKFLOW, _workflow_of)
        tasks.index(BY_MPE, _mpe_of)
        tasks.index(PRE_RUNNING_BY_NAMESPACE, _pre_running_namespace)
        tasks.index(PRE_RUNNING_ALL, _pre_running_all)
        tasks.index(BY_PHASE, _phase_of)
        tasks.index(MPE_NEEDS, _mpe_needs)

    def keys_of_workflow(self, key: str) -> list[str]:
        """The keys of the cached Tasks whose `spec.workflowRef` names the Workflow
        `namespace/name` (their objects are not read)."""
        return self.tasks.keys_by_index(BY_WORKFLOW, key)

    def by_phase(self) -> dict[str, int]:
        """How many cached Tasks are in each `status.phase` (`""`: none yet)."""
        return self.tasks.counts(BY_PHASE)

    def keys_using(self, mpe: tuple[str, str, str]) -> list[str]:
        """The keys of :meth:`using`'s Tasks (their objects are not read)."""
        return self.tasks.keys_by_index(BY_MPE, mpe_ref_key(*mpe))

    def using(self, mpe: tuple[str, str, str]) -> tuple[int, Iterator[dict[str, Any]]]:
        """How many cached Tasks' `status.mediaProcessingEntityRef` names the MPE `mpe`, and
        those of them that are not finished or still name a Job, read one at a time.

        A finished Task whose Job expired tells its MPE nothing but that it exists: with
        100,000 of them (most of a long-running cluster) reading each for every MPE pass cost
        seconds of CPU and, held in one list, several hundred MiB (docs/performance.md)."""
        key = mpe_ref_key(*mpe)
        return self.tasks.count(BY_MPE, key), self.tasks.iter_by_index(MPE_NEEDS, key)

    def pre_running(self, namespace: str | None) -> list[dict[str, Any]]:
        """The cached Tasks still before Running, of `namespace` (None: of every namespace)."""
        if namespace:
            return self.tasks.by_index(PRE_RUNNING_BY_NAMESPACE, namespace)
        return self.tasks.by_index(PRE_RUNNING_ALL, "*")
