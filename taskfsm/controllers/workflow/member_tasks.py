"""A Workflow's Tasks: which Workflow a Task belongs to, and counting them through indexes.

A Workflow's Tasks are found through indexes of the Task cache (by the two workflow labels, by
outcome, by fatal failure): counting them costs the same whatever else the cache holds. Each
Task is read through read-your-writes, so a phase the Task reconciler has just written counts
at once. A cache that cannot answer is an error (`TaskListError`), never "no Tasks" (D20).

Spec: docs/behaviour.md §4.3; the namespace rule of the labels is docs/security.md's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from taskfsm.api import constants as c
from taskfsm.api import names
from taskfsm.kube.informer import Informer

TASKS_BY_WORKFLOW: Final = "workflow-labels"
"""Index of the Task cache by the Workflow the two workflow labels name (``namespace/name``)."""

TASKS_BY_OUTCOME: Final = "workflow-outcome"
"""Index of the Task cache: ``<workflow key>#Succeeded`` / ``#Failed`` for finished Tasks."""


def workflow_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def workflow_labels(namespace: str, name: str) -> dict[str, str]:
    """The two labels that tie Tasks (and the Workflow itself) to a Workflow (§2); a name too
    long for a label is cut with a hash (D24, :mod:`taskfsm.api.names`). The Workflow's full
    name is its own ``metadata.name``, and a Task's ``spec.workflowRef.name``."""
    return {
        c.LABEL_WORKFLOW_NAMESPACE: names.label_value(namespace),
        c.LABEL_WORKFLOW_NAME: names.label_value(name),
    }


def labelled_workflow(task: dict[str, Any]) -> str | None:
    """The Workflow the two workflow labels name, if it is in the Task's own namespace.

    Labels are the Task author's to write: a label naming another namespace's Workflow would
    count (and with FailWorkflow, fail) a Workflow its author may not touch, so it is ignored
    (docs/security.md, "References stay in their namespace"). A name label cut to fit (D24)
    names the Workflow its annotation, or else ``spec.workflowRef.name``, holds whole -- only
    when the label is that name's cut form."""
    meta = task.get("metadata") or {}
    ref = ((task.get("spec") or {}).get("workflowRef") or {}).get("name")
    namespace = names.full_value(meta, c.LABEL_WORKFLOW_NAMESPACE)
    known = ref if isinstance(ref, str) else None
    name = names.full_value(meta, c.LABEL_WORKFLOW_NAME, known=known)
    if not (namespace and name) or namespace != meta.get("namespace"):
        return None
    return workflow_key(namespace, name)


def task_workflow_key(task: dict[str, Any]) -> str | None:
    """The Workflow a Task belongs to: by its labels (in its own namespace only), else by
    ``spec.workflowRef.name``."""
    meta = task.get("metadata") or {}
    labelled = labelled_workflow(task)
    if labelled is not None:
        return labelled
    ref = ((task.get("spec") or {}).get("workflowRef") or {}).get("name")
    if ref and meta.get("namespace"):
        return workflow_key(meta["namespace"], ref)
    return None


def written_failure_action(task: dict[str, Any]) -> str:
    """``spec.jobFailurePolicy.defaultAction`` as written, ``""`` when unset: what it means for
    the Workflow is the chart's (``machines.workflow.guards.fatal_failures``)."""
    policy = (task.get("spec") or {}).get("jobFailurePolicy") or {}
    return str(policy.get("defaultAction") or "")


def _workflow_and_outcome(task: dict[str, Any]) -> str | None:
    workflow = labelled_workflow(task)
    phase = (task.get("status") or {}).get("phase") or ""
    if workflow is None or phase not in c.TASK_TERMINAL_PHASES:
        return None
    return f"{workflow}#{phase}"


class TaskListError(Exception):
    """The Tasks of a Workflow could not be listed (D20: the pass fails, nothing is assumed)."""


@dataclass(frozen=True)
class TaskCount:
    """A Workflow's Tasks, counted (§4.3)."""

    total: int = 0
    active: int = 0
    succeeded: int = 0
    failed: int = 0
    failed_tasks: tuple[tuple[str, str], ...] = ()
    """Each Failed Task's name and ``jobFailurePolicy.defaultAction`` as written ("" unset)."""


class WorkflowTasks:
    """Counts a Workflow's Tasks through indexes of the Task cache (registered here)."""

    def __init__(self, tasks: Informer) -> None:
        self.tasks = tasks
        tasks.index(TASKS_BY_WORKFLOW, labelled_workflow)
        tasks.index(TASKS_BY_OUTCOME, _workflow_and_outcome)

    def count(self, namespace: str, name: str) -> TaskCount:
        """The Workflow's Tasks (by the two workflow labels), counted.

        Raises:
            TaskListError: the Task cache cannot answer (not synced yet, or failing).
        """
        informer = self.tasks
        if not informer.has_synced:
            raise TaskListError("the Task cache has not synced yet")
        key = workflow_key(namespace, name)
        try:
            total = informer.count(TASKS_BY_WORKFLOW, key)
            succeeded = informer.count(TASKS_BY_OUTCOME, f"{key}#{c.TaskPhase.SUCCEEDED}")
            failed_tasks = [
                (t["metadata"]["name"], written_failure_action(t))
                for t in informer.by_index(TASKS_BY_OUTCOME, f"{key}#{c.TaskPhase.FAILED}")
            ]
        except Exception as exc:  # a cache that cannot answer must not read as "no Tasks"
            raise TaskListError(f"{type(exc).__name__}: {exc}") from exc
        return TaskCount(
            total=total,
            active=total - succeeded - len(failed_tasks),
            succeeded=succeeded,
            failed=len(failed_tasks),
            failed_tasks=tuple(sorted(failed_tasks)),
        )
