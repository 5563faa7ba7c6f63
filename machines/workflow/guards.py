"""The Workflow lifecycle's guards, implemented once over the observation.

Where this sits in the flow: the statechart (`machines.workflow.chart`) names its guards as strings;
the driver resolves them on the runtime model (`machines.workflow.model`). Every guard is a
pure question about the pass's `WorkflowObservation`, so the real reconciler and the test
fakes both inherit these implementations from `WorkflowObservationGuards`.

Spec: docs/behaviour.md §4.3.
"""

from __future__ import annotations

from machines.workflow.observation import FAIL_WORKFLOW, WorkflowObservation


def fatal_failures(observation: WorkflowObservation) -> tuple[str, ...]:
    """The Failed Tasks that fail their Workflow: `jobFailurePolicy.defaultAction` FailWorkflow,
    or unset (FailWorkflow is the default, §4.3); `Ignore` does not. The Workflow's failure
    policy, in one place."""
    return tuple(name for name, action in observation.failed_tasks if action in ("", FAIL_WORKFLOW))


class WorkflowObservationGuards:
    """Mixin: every guard of `WorkflowLifecycleModel`, answered from the observation alone.

    Each method takes the pass's `WorkflowObservation` and returns a bool; none does I/O or
    raises. The counts are trusted only when the Tasks were listed: the statechart never
    reaches a count guard after `tasks_unlisted`.
    """

    def finalizer_present(self, observation: WorkflowObservation) -> bool:
        """The Workflow still carries `engine.nagare.media/workflow-protection`."""
        return observation.has_finalizer

    def has_tasks(self, observation: WorkflowObservation) -> bool:
        """At least one Task carries the Workflow's labels (§4.3: total > 0 → Running)."""
        return observation.total > 0

    def tasks_active(self, observation: WorkflowObservation) -> bool:
        """At least one of its Tasks is neither Succeeded nor Failed (empty phase included)."""
        return observation.active > 0

    def end_time_set(self, observation: WorkflowObservation) -> bool:
        """`status.endTime` is set, so there is a moment to measure the wait from."""
        return observation.end_time_set

    def waiting_elapsed(self, observation: WorkflowObservation) -> bool:
        """`workflowTerminationWaitingDuration` has passed since `status.endTime`."""
        since = observation.seconds_since_end
        return since is not None and since >= observation.waiting_seconds

    def failure_fails_workflow(self, observation: WorkflowObservation) -> bool:
        """A Failed Task's `jobFailurePolicy.defaultAction` is FailWorkflow (or unset)."""
        return bool(fatal_failures(observation))

    def finished_ttl_set(self, observation: WorkflowObservation) -> bool:
        """`--finished-ttl` is set: a finished Workflow is deleted once it has passed."""
        return observation.finished_ttl is not None

    def finished_ttl_passed(self, observation: WorkflowObservation) -> bool:
        """`--finished-ttl` is set and has passed since `status.endTime`."""
        return (
            observation.finished_ttl is not None
            and observation.seconds_since_end is not None
            and observation.finished_ttl_left <= 0
        )
