"""The runtime contract between the lifecycle statechart and whoever drives it.

Where this sits in the flow: `machines.task.chart.TaskLifecycle` names guards and effects as
strings; `machines.task.driver.run_pass` resolves them on a model that satisfies
`TaskLifecycleModel`. The real reconciler implements the effects against the cluster; test
fakes record them. Both usually inherit the guards from `machines.task.guards.ObservationGuards`.

Every callback takes the pass's `TaskObservation` as its only argument.

- Guards answer from the observation, never do I/O and should not raise.
- Effects may do I/O and may raise; an exception ends the pass with that error (the driver
  reports it, the phase stays where the failed transition started).
- Effects that only change the Task's *status* (`record_*`, `select_*`, `adopt_job`,
  `clear_job_ref`, and the `status.jobRef` written by `create_job_and_secret`) and its
  metadata (finalizer, owner reference, labels) go into the one patch the runtime collects; it
  writes the metadata part before any effect that creates or deletes another object (the
  finalizer is durable before a Job exists) and the status part once at the end of the
  reconcile, together with the phase, conditions and message from the outcome.
- Effects on other objects (Job, Secret, Task deletion, the finalizer's removal) act on the API
  server when called.
- Every effect is idempotent: a pass may be repeated after a lost status write (F3), so an
  effect finding its work already done succeeds quietly.

Spec: docs/behaviour.md §3, with the defects of its §6 fixed (each effect cites its own).
"""

from __future__ import annotations

from typing import Final, Protocol

from machines.task.observation import TaskObservation

GUARD_NAMES: Final = (
    "task_terminating",
    "task_finalizer_present",
    "input_unusable",
    "refs_missing",
    "mpe_unavailable",
    "mpe_client_pending",
    "mpe_gone",
    "mpe_deleting",
    "mpe_unrecorded",
    "mpe_never_reached",
    "cleanup_expired",
    "job_ref_set",
    "job_unrecorded",
    "job_pods_refused",
    "job_pods_refused_for_good",
    "job_pods_waiting",
    "job_suspended",
    "job_resumed",
    "job_name_taken",
    "job_unmakeable",
    "job_inputs_unusable",
    "helper_data_too_large",
    "job_beyond_limits",
    "helper_secret_overdue",
    "job_succeeded",
    "job_failed",
    "job_vanished",
    "job_still_running",
    "job_deleted_early",
    "job_deletable",
    "job_protected",
    "job_ref_stale",
    "finished_ttl_set",
    "finished_ttl_passed",
)
"""Every guard of `TaskLifecycleModel`, in declaration order."""

EFFECT_NAMES: Final = (
    "add_task_finalizer",
    "set_workflow_ownership",
    "delete_task",
    "delete_expired_task",
    "record_queued_time",
    "select_media_processing_entity",
    "select_function",
    "create_job_and_secret",
    "record_start_time",
    "adopt_job",
    "clear_job_ref",
    "record_end_time",
    "delete_job",
    "release_job_finalizer",
    "record_reselected_mpe",
    "remove_task_finalizer",
)
"""Every effect of `TaskLifecycleModel`, in declaration order."""


class TaskLifecycleModel(Protocol):
    """What the lifecycle statechart needs from the reconciler, one method per name.

    Guards return bool; effects return None and raise to report failure. See the module
    docstring for the status-versus-I/O rule and idempotency.
    """

    # Guards (implemented by machines.task.guards.ObservationGuards).

    def task_terminating(self, observation: TaskObservation) -> bool:
        """The Task has a deletionTimestamp."""
        ...

    def task_finalizer_present(self, observation: TaskObservation) -> bool:
        """The Task carries the task-protection finalizer."""
        ...

    def input_unusable(self, observation: TaskObservation) -> bool:
        """The Task's spec exceeds what the controller processes."""
        ...

    def refs_missing(self, observation: TaskObservation) -> bool:
        """The MPE or Function reference is missing from status."""
        ...

    def mpe_unavailable(self, observation: TaskObservation) -> bool:
        """An MPE is selected but its cluster cannot be used (no ready client, or no answer)."""
        ...

    def mpe_client_pending(self, observation: TaskObservation) -> bool:
        """The selected MPE's client is still being set up."""
        ...

    def mpe_gone(self, observation: TaskObservation) -> bool:
        """The selected MPE does not exist any more."""
        ...

    def mpe_deleting(self, observation: TaskObservation) -> bool:
        """The selected MPE is being deleted."""
        ...

    def mpe_unrecorded(self, observation: TaskObservation) -> bool:
        """A deleting Task's status names no MPE, but selection finds the one its Job is in."""
        ...

    def mpe_never_reached(self, observation: TaskObservation) -> bool:
        """The selected MPE never reached a cluster: no Job of the Task can be there."""
        ...

    def cleanup_expired(self, observation: TaskObservation) -> bool:
        """A deleting Task has waited for its unreachable MPE as long as the cleanup bound."""
        ...

    def job_ref_set(self, observation: TaskObservation) -> bool:
        """`status.jobRef` is set."""
        ...

    def job_unrecorded(self, observation: TaskObservation) -> bool:
        """A Job exists under the Task's name but jobRef names no or another UID."""
        ...

    def job_pods_refused(self, observation: TaskObservation) -> bool:
        """The Job's pods are refused."""
        ...

    def job_pods_refused_for_good(self, observation: TaskObservation) -> bool:
        """The Job's pods have been refused for the whole timeout."""
        ...

    def job_pods_waiting(self, observation: TaskObservation) -> bool:
        """The Job runs but none of its pods is ready yet."""
        ...

    def job_suspended(self, observation: TaskObservation) -> bool:
        """The Job is held by `spec.suspend`."""
        ...

    def job_resumed(self, observation: TaskObservation) -> bool:
        """The Job was suspended (the stored Ready reason) and runs now."""
        ...

    def job_name_taken(self, observation: TaskObservation) -> bool:
        """Something that is not the Task's Job holds its Job's name."""
        ...

    def job_unmakeable(self, observation: TaskObservation) -> bool:
        """What the Job would be made from does not allow it (Function, its kind, local-only)."""
        ...

    def job_inputs_unusable(self, observation: TaskObservation) -> bool:
        """The Job and its helper data cannot be built from the Task's inputs now."""
        ...

    def helper_data_too_large(self, observation: TaskObservation) -> bool:
        """The helper data exceeds what a Secret holds."""
        ...

    def job_beyond_limits(self, observation: TaskObservation) -> bool:
        """The API server would refuse the Job for its size or metadata."""
        ...

    def helper_secret_overdue(self, observation: TaskObservation) -> bool:
        """The Job exists, its helper Secret has not been made for the whole timeout."""
        ...

    def job_succeeded(self, observation: TaskObservation) -> bool:
        """The Job succeeded."""
        ...

    def job_failed(self, observation: TaskObservation) -> bool:
        """The Job failed."""
        ...

    def job_vanished(self, observation: TaskObservation) -> bool:
        """No Job exists under the Task's name, though the Task had one (D18b)."""
        ...

    def job_still_running(self, observation: TaskObservation) -> bool:
        """The Job is active and not being deleted."""
        ...

    def job_deleted_early(self, observation: TaskObservation) -> bool:
        """Someone deleted the Job before it finished (active and terminating)."""
        ...

    def job_deletable(self, observation: TaskObservation) -> bool:
        """A Job exists and is not being deleted."""
        ...

    def job_protected(self, observation: TaskObservation) -> bool:
        """The Job carries the job-protection finalizer."""
        ...

    def job_ref_stale(self, observation: TaskObservation) -> bool:
        """jobRef names a Job that is gone or was replaced."""
        ...

    def finished_ttl_set(self, observation: TaskObservation) -> bool:
        """`--finished-ttl` is set."""
        ...

    def finished_ttl_passed(self, observation: TaskObservation) -> bool:
        """`--finished-ttl` has passed since endTime."""
        ...

    # Effects.

    def add_task_finalizer(self, observation: TaskObservation) -> None:
        """Add the task-protection finalizer (never called on a terminating Task, D22)."""
        ...

    def set_workflow_ownership(self, observation: TaskObservation) -> None:
        """Upsert the controller owner reference to the Workflow and the four labels (§3.5)."""
        ...

    def delete_task(self, observation: TaskObservation) -> None:
        """Delete the Task (UID precondition) because its Workflow is being deleted (D9)."""
        ...

    def delete_expired_task(self, observation: TaskObservation) -> None:
        """Delete the finished Task as read (UID, resourceVersion preconditions): TTL passed."""
        ...

    def record_queued_time(self, observation: TaskObservation) -> None:
        """Set `status.queuedTime = now` unless already set (§3.4)."""
        ...

    def select_media_processing_entity(self, observation: TaskObservation) -> None:
        """Choose the MPE (ref, selector, TaskTemplate, default) and store it (§3.6, D1)."""
        ...

    def select_function(self, observation: TaskObservation) -> None:
        """Choose the Function by ref, selector or TaskTemplate and store it (§3.6, D13)."""
        ...

    def create_job_and_secret(self, observation: TaskObservation) -> None:
        """Create or adopt the named Job, then its Secret owned by it; set jobRef (§3.7, D5)."""
        ...

    def record_start_time(self, observation: TaskObservation) -> None:
        """Set `status.startTime = now` unless already set: set once (D3)."""
        ...

    def adopt_job(self, observation: TaskObservation) -> None:
        """Point `status.jobRef` at the Job found under the Task's name (D6)."""
        ...

    def clear_job_ref(self, observation: TaskObservation) -> None:
        """Remove `status.jobRef`."""
        ...

    def record_end_time(self, observation: TaskObservation) -> None:
        """Set `status.endTime = now` unless already set (D10)."""
        ...

    def delete_job(self, observation: TaskObservation) -> None:
        """Delete the observed Job (precondition `job_uid`, Background); NotFound/Conflict: done."""
        ...

    def release_job_finalizer(self, observation: TaskObservation) -> None:
        """Remove the job-protection finalizer from the observed Job; NotFound: done (D18)."""
        ...

    def record_reselected_mpe(self, observation: TaskObservation) -> None:
        """Store the MPE selection finds for a deleting Task whose status names none (§3.10)."""
        ...

    def remove_task_finalizer(self, observation: TaskObservation) -> None:
        """Remove `engine.nagare.media/task-protection` so the Task can go (§3.10)."""
        ...
