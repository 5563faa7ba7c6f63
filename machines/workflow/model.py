"""The runtime contract between the Workflow lifecycle statechart and whoever drives it.

Where this sits in the flow: `machines.workflow.chart.WorkflowLifecycle` names guards and
effects as strings; `machines.workflow.driver.run_pass` resolves them on a model that satisfies
`WorkflowLifecycleModel`. The real reconciler (`taskfsm.controllers.workflow.reconciler`)
implements the effects against the cluster; test fakes record them. Both inherit the guards
from `machines.workflow.guards.WorkflowObservationGuards`.

Every callback takes the pass's `WorkflowObservation` as its only argument. The rules are the
Task lifecycle's (`machines.task.model`):

- Guards answer from the observation, never do I/O and should not raise.
- Effects may do I/O and may raise; an exception ends the pass with that error (the phase
  stays where the failed transition started).
- Status effects (`record_*`, `clear_end_time`, `ensure_end_time`) change the reconciler's
  in-memory copy; it patches `/status` once at the end of the pass, together with the phase,
  conditions and message from the outcome.
- Metadata effects (finalizer, labels) and the retention delete act on the API server when
  called.
- Every effect is idempotent: a pass may be repeated after a lost write.

Spec: docs/behaviour.md §4.3 with D20.
"""

from __future__ import annotations

from typing import Final, Protocol

from machines.workflow.observation import WorkflowObservation

GUARD_NAMES: Final = (
    "finalizer_present",
    "has_tasks",
    "tasks_active",
    "end_time_set",
    "waiting_elapsed",
    "failure_fails_workflow",
    "finished_ttl_set",
    "finished_ttl_passed",
)
"""Every guard of `WorkflowLifecycleModel`, in declaration order."""

EFFECT_NAMES: Final = (
    "add_workflow_finalizer",
    "set_workflow_labels",
    "record_task_counts",
    "record_queued_time",
    "record_start_time",
    "record_end_time",
    "clear_end_time",
    "ensure_end_time",
    "remove_workflow_finalizer",
    "delete_expired_workflow",
)
"""Every effect of `WorkflowLifecycleModel`, in declaration order."""


class WorkflowLifecycleModel(Protocol):
    """What the Workflow statechart needs from the reconciler, one method per name.

    Guards return bool; effects return None and raise to report failure.
    """

    # Guards (implemented by machines.workflow.guards.WorkflowObservationGuards).

    def finalizer_present(self, observation: WorkflowObservation) -> bool:
        """The Workflow carries the workflow-protection finalizer."""
        ...

    def has_tasks(self, observation: WorkflowObservation) -> bool:
        """At least one Task carries the Workflow's labels (total > 0)."""
        ...

    def tasks_active(self, observation: WorkflowObservation) -> bool:
        """At least one of its Tasks is neither Succeeded nor Failed (active > 0)."""
        ...

    def end_time_set(self, observation: WorkflowObservation) -> bool:
        """`status.endTime` is set."""
        ...

    def waiting_elapsed(self, observation: WorkflowObservation) -> bool:
        """The termination waiting duration has passed since endTime."""
        ...

    def failure_fails_workflow(self, observation: WorkflowObservation) -> bool:
        """A Failed Task's jobFailurePolicy is FailWorkflow (the default), not Ignore."""
        ...

    def finished_ttl_set(self, observation: WorkflowObservation) -> bool:
        """`--finished-ttl` is set."""
        ...

    def finished_ttl_passed(self, observation: WorkflowObservation) -> bool:
        """`--finished-ttl` has passed since endTime."""
        ...

    # Effects.

    def add_workflow_finalizer(self, observation: WorkflowObservation) -> None:
        """Add `engine.nagare.media/workflow-protection` (never on a terminating Workflow)."""
        ...

    def set_workflow_labels(self, observation: WorkflowObservation) -> None:
        """Set the workflow-namespace and workflow-name labels on the Workflow itself."""
        ...

    def record_task_counts(self, observation: WorkflowObservation) -> None:
        """Write `status.total/active/succeeded/failed` from the observation."""
        ...

    def record_queued_time(self, observation: WorkflowObservation) -> None:
        """Set `status.queuedTime = now` unless already set."""
        ...

    def record_start_time(self, observation: WorkflowObservation) -> None:
        """Set `status.startTime = now` unless already set (the first Task appeared)."""
        ...

    def record_end_time(self, observation: WorkflowObservation) -> None:
        """Set `status.endTime = now`: the moment the last active Task finished."""
        ...

    def clear_end_time(self, observation: WorkflowObservation) -> None:
        """Remove `status.endTime`: a new Task is active, the Workflow runs again."""
        ...

    def ensure_end_time(self, observation: WorkflowObservation) -> None:
        """Set `status.endTime = now` unless already set (every terminal phase has one)."""
        ...

    def remove_workflow_finalizer(self, observation: WorkflowObservation) -> None:
        """Remove `engine.nagare.media/workflow-protection` so the Workflow can go."""
        ...

    def delete_expired_workflow(self, observation: WorkflowObservation) -> None:
        """Delete the finished Workflow as read (UID, resourceVersion preconditions): TTL passed."""
        ...
