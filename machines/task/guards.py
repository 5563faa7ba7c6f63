"""The lifecycle's guards, implemented once over the observation.

Where this sits in the flow: the statechart (`machines.task.chart`) names its guards as strings; the
driver resolves them on the runtime model (`machines.task.model.TaskLifecycleModel`). Every guard
is a pure question about the pass's `TaskObservation`, so the real reconciler and the test
fakes both inherit these implementations from `ObservationGuards` instead of rewriting them.

Spec: docs/behaviour.md §3.4-§3.10, with the fixes D3, D6, D18 and D22 of its §6.
"""

from __future__ import annotations

from machines.task.conditions import JOB_SUSPENDED
from machines.task.observation import JobState, TaskObservation
from machines.task.phases import RUNNING


def job_expected(observation: TaskObservation) -> bool:
    """Whether the Task had a Job (whatever the pass found of it): it is Running, its
    `status.jobRef` is set, or the controller saw the Job before (D18b). A Job missing then is
    lost; the runtime confirms "missing" from the Job's cluster, never from a cache alone."""
    return observation.phase == RUNNING or observation.job_ref_set or observation.job_was_seen


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

    def input_unusable(self, observation: TaskObservation) -> bool:
        """The Task's spec exceeds what the controller processes (docs/security.md): it is
        reported, and nothing is selected or made from it."""
        return bool(observation.input_problem)

    def refs_missing(self, observation: TaskObservation) -> bool:
        """The MediaProcessingEntity or Function reference is missing from status (§3.4, D3)."""
        return not (observation.mpe_selected and observation.function_selected)

    def mpe_unavailable(self, observation: TaskObservation) -> bool:
        """An MPE is selected but its cluster cannot be used (§1.7): it has no ready client, or
        its cluster did not answer this pass's read of the Job. The Job cannot be reached."""
        return observation.mpe_selected and not (
            observation.mpe_ready and not observation.job_unreadable
        )

    def mpe_client_pending(self, observation: TaskObservation) -> bool:
        """The selected MPE's client is still being set up: wait for it, quietly."""
        return (
            observation.mpe_selected
            and not observation.mpe_ready
            and observation.mpe_client_pending
            and not observation.mpe_gone
        )

    def mpe_gone(self, observation: TaskObservation) -> bool:
        """The selected MPE does not exist any more: nobody can clean up through it (D22)."""
        return observation.mpe_gone

    def mpe_deleting(self, observation: TaskObservation) -> bool:
        """The selected MPE is being deleted: what the Task keeps in its cluster must go first."""
        return observation.mpe_deleting

    def mpe_unrecorded(self, observation: TaskObservation) -> bool:
        """A deleting Task's status names no MPE, but selection finds one (its Job, if the
        create's answer and the status write were both lost, is there): it is recorded."""
        return observation.mpe_unrecorded

    def mpe_never_reached(self, observation: TaskObservation) -> bool:
        """The selected MPE never reached a cluster (refused by policy, or never connected):
        no Job of the Task can be there, so a deletion has nothing to clean up there."""
        return observation.mpe_selected and observation.mpe_never_reached

    def cleanup_expired(self, observation: TaskObservation) -> bool:
        """A deleting Task has waited for its unreachable MPE as long as the cleanup bound."""
        return observation.deletion_requested and observation.cleanup_wait_left <= 0

    def job_ref_set(self, observation: TaskObservation) -> bool:
        """`status.jobRef` is set."""
        return observation.job_ref_set

    def job_unrecorded(self, observation: TaskObservation) -> bool:
        """A Job exists under the Task's name but `status.jobRef` names no or another UID (D6)."""
        return observation.job_present and observation.job_uid != observation.job_ref_uid

    def job_suspended(self, observation: TaskObservation) -> bool:
        """The Job is held by `spec.suspend` (its `Suspended` condition is True): nothing runs
        until something resumes it."""
        return observation.job is JobState.SUSPENDED and not observation.job_terminating

    def job_resumed(self, observation: TaskObservation) -> bool:
        """The Job was suspended (the stored Ready condition says `JobSuspended`) and runs now,
        its pods not refused: Ready turns True again."""
        return (
            observation.ready_reason == JOB_SUSPENDED
            and observation.job is JobState.ACTIVE
            and not observation.job_terminating
            and not observation.job_pods_refused
        )

    def job_name_taken(self, observation: TaskObservation) -> bool:
        """Something that is not the Task's Job holds its Job's name: no Job can be made until
        it is gone (docs/security.md, "References stay in their namespace")."""
        return observation.job_name_taken

    def job_unmakeable(self, observation: TaskObservation) -> bool:
        """What the Job would be made from does not allow it (its Function is missing or no
        Function, or it runs on local MPEs only and the MPE is remote): nothing is created."""
        return bool(observation.job_unmakeable)

    def job_pods_refused(self, observation: TaskObservation) -> bool:
        """The Job's pods are refused (Pod Security, an admission policy, a quota): nothing
        runs, and the Task says why until the ``--job-pods-refused-timeout`` runs out
        (docs/security.md, "What a Job may be")."""
        return (
            bool(observation.job_pods_refused)
            and observation.job is JobState.ACTIVE
            and observation.job_pods_refused_left > 0
        )

    def job_pods_refused_for_good(self, observation: TaskObservation) -> bool:
        """The Job's pods have been refused for the whole ``--job-pods-refused-timeout``."""
        return (
            bool(observation.job_pods_refused)
            and observation.job is JobState.ACTIVE
            and observation.job_pods_refused_left <= 0
        )

    def job_pods_waiting(self, observation: TaskObservation) -> bool:
        """The Job runs but none of its pods is ready yet (their creation may be refused, or
        they may be unable to start)."""
        return observation.job_pods_waiting and observation.job is JobState.ACTIVE

    def job_inputs_unusable(self, observation: TaskObservation) -> bool:
        """The Job and its helper data cannot be built from the Task's inputs now (a missing
        MediaLocation Secret may yet appear): nothing is created, the Task says why and
        retries."""
        return bool(observation.job_inputs_problem)

    def helper_data_too_large(self, observation: TaskObservation) -> bool:
        """The helper data exceeds what a Secret holds: no retry can make it, so nothing is
        created and the Task fails at once."""
        return bool(observation.helper_data_too_large)

    def job_beyond_limits(self, observation: TaskObservation) -> bool:
        """The API server would refuse the Job for its size or metadata: no retry can make
        it, so nothing is created and the Task fails at once."""
        return bool(observation.job_beyond_limits)

    def helper_secret_overdue(self, observation: TaskObservation) -> bool:
        """The Job was made but its helper Secret was not, for the whole
        ``--job-pods-refused-timeout``: its pods wait for a Secret that is not coming."""
        return observation.job_unfinished and observation.job_pending_left <= 0

    def job_succeeded(self, observation: TaskObservation) -> bool:
        """The Job succeeded (`Complete` or `SuccessCriteriaMet` True)."""
        return observation.job is JobState.SUCCEEDED

    def job_failed(self, observation: TaskObservation) -> bool:
        """The Job failed (`Failed` or `FailureTarget` True)."""
        return observation.job is JobState.FAILED

    def job_vanished(self, observation: TaskObservation) -> bool:
        """No Job exists under the Task's name, though the Task had one: it is Running, its
        `status.jobRef` is set, or the controller saw the Job before (D18b). Such a Job is lost,
        never made again: a Task UID gets at most one Job."""
        if observation.job is not JobState.ABSENT:
            return False
        return job_expected(observation)

    def job_still_running(self, observation: TaskObservation) -> bool:
        """The Job is active and nobody has asked to delete it yet (§3.9)."""
        return observation.job_unfinished and not observation.job_terminating

    def job_deleted_early(self, observation: TaskObservation) -> bool:
        """Someone deleted the Job before it finished: it is active and has a deletionTimestamp.

        Its pods are going, so its outcome is lost (D18b): the Task fails with JobLost, and its
        job-protection finalizer is released once that is recorded.
        """
        return observation.job_unfinished and observation.job_terminating

    def job_deletable(self, observation: TaskObservation) -> bool:
        """A Job exists and nobody has asked to delete it yet, finished or not (§3.10)."""
        return observation.job_present and not observation.job_terminating

    def job_protected(self, observation: TaskObservation) -> bool:
        """The Job still carries `engine.nagare.media/job-protection`."""
        return observation.job_protected

    def job_ref_stale(self, observation: TaskObservation) -> bool:
        """`status.jobRef` names a Job that is gone or was replaced by another UID (§3.9, D6)."""
        return observation.job_ref_set and observation.job_uid != observation.job_ref_uid

    def finished_ttl_set(self, observation: TaskObservation) -> bool:
        """`--finished-ttl` is set: a finished Task whose Workflow does not exist is deleted
        once it has passed."""
        return observation.finished_ttl is not None

    def finished_ttl_passed(self, observation: TaskObservation) -> bool:
        """`--finished-ttl` is set and has passed since `status.endTime`."""
        return (
            observation.finished_ttl is not None
            and observation.seconds_since_end is not None
            and observation.finished_ttl_left <= 0
        )
