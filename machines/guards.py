"""The lifecycle's guards, implemented once over the observation.

Where this sits in the flow: the statechart (`machines.task`) names its guards as strings; the
driver resolves them on the runtime model (`machines.model.TaskLifecycleModel`). Every guard
is a pure question about the pass's `TaskObservation`, so the real reconciler and the test
fakes both inherit these implementations from `ObservationGuards` instead of rewriting them.

Spec: task-controller.md §3.4-§3.10 with the decisions.md fixes (D3, D6, D18, D22).
"""

from __future__ import annotations

from machines.observation import JobState, TaskObservation


class ObservationGuards:
    """Mixin: every guard of `TaskLifecycleModel`, answered from the observation alone.

    Each method takes the pass's `TaskObservation` and returns a bool; none does I/O or
    raises. The Job fields are trusted only when the MediaProcessingEntity is ready: the
    statechart asks `mpe_unavailable` before any Job guard.
    """

    def task_terminating(self, observation: TaskObservation) -> bool:
        """The Task has a deletionTimestamp (§3.10): the deletion flow may finish."""
        return observation.deletion_requested

    def task_finalizer_present(self, observation: TaskObservation) -> bool:
        """The Task still carries `engine.nagare.media/task-protection`."""
        return observation.has_finalizer

    def refs_missing(self, observation: TaskObservation) -> bool:
        """The MediaProcessingEntity or Function reference is missing from status (§3.7.1, D3)."""
        return not (observation.mpe_selected and observation.function_selected)

    def mpe_unavailable(self, observation: TaskObservation) -> bool:
        """An MPE is selected but has no ready client (§1.7): the Job cannot be reached."""
        return observation.mpe_selected and not observation.mpe_ready

    def job_ref_set(self, observation: TaskObservation) -> bool:
        """`status.jobRef` is set."""
        return observation.job_ref_set

    def job_unrecorded(self, observation: TaskObservation) -> bool:
        """A Job exists under the Task's name but `status.jobRef` names no or another UID (D6)."""
        return observation.job_present and observation.job_uid != observation.job_ref_uid

    def job_succeeded(self, observation: TaskObservation) -> bool:
        """The Job succeeded (`Complete` or `SuccessCriteriaMet` True)."""
        return observation.job is JobState.SUCCEEDED

    def job_failed(self, observation: TaskObservation) -> bool:
        """The Job failed (`Failed` or `FailureTarget` True)."""
        return observation.job is JobState.FAILED

    def job_gone(self, observation: TaskObservation) -> bool:
        """No Job exists under the Task's name."""
        return observation.job is JobState.ABSENT

    def job_recreated(self, observation: TaskObservation) -> bool:
        """The Job was already re-created once after disappearing while Running."""
        return observation.job_recreated

    def job_still_running(self, observation: TaskObservation) -> bool:
        """The Job is active and nobody has asked to delete it yet (§3.9 step 3)."""
        return observation.job is JobState.ACTIVE and not observation.job_terminating

    def job_deleted_early(self, observation: TaskObservation) -> bool:
        """Someone deleted the Job before it finished: it is active and has a deletionTimestamp.

        Its job-protection finalizer keeps it Terminating until the controller lets it go; then
        it is gone and re-created once, like a Job that vanished.
        """
        return observation.job is JobState.ACTIVE and observation.job_terminating

    def job_deletable(self, observation: TaskObservation) -> bool:
        """A Job exists and nobody has asked to delete it yet, finished or not (§3.10)."""
        return observation.job_present and not observation.job_terminating

    def job_protected(self, observation: TaskObservation) -> bool:
        """The Job still carries `engine.nagare.media/job-protection`."""
        return observation.job_protected

    def outcome_recorded(self, observation: TaskObservation) -> bool:
        """The persisted phase is Succeeded or Failed, so the outcome is durable (D18)."""
        return observation.outcome_recorded

    def job_ref_stale(self, observation: TaskObservation) -> bool:
        """`status.jobRef` names a Job that is gone or was replaced by another UID (§3.9, D6)."""
        return observation.job_ref_set and observation.job_uid != observation.job_ref_uid
