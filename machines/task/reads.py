"""What a pass reads, and where from: the Task controller's read policy, in the chart's terms.

Where this sits in the flow: the runtime reads everything a pass needs before the chart runs
(`taskfsm/controllers/task/read.py` does the I/O and nothing else). What it reads is decided
here, from what is known before the Job is read (`before`: the pass's observation without its
Job fields), in the terms of the chart's own guards, so the policy and the decisions cannot
drift apart:

* whether selection is asked again for a deleting Task's MPE (`reselect_mpe`);
* whether the Job is read at all, and from the watch cache or its cluster (`job_read`); the
  cache may lag behind the cluster, so where the chart would decide something for good from
  what the cache shows, the Job is read from its cluster instead;
* whether the Job's inputs are built (`job_inputs_needed`);
* whether a running Job's pods are asked about (`pods_checked`), what counts as a pod that
  cannot start (`cannot_start`, `mount_failures_count`), and how long a wait has left
  (`wait_left`).

Spec: docs/behaviour.md §3.2 step 3, D18b and §3.11.
"""

from __future__ import annotations

import enum
from typing import Final

from machines.task.guards import job_expected
from machines.task.observation import JobState, TaskObservation, WorkflowState
from machines.task.phases import JOB_PENDING, RUNNING

START_FAILURES: Final = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "ErrImageNeverPull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
    }
)
"""Waiting reasons of a container that will not start by waiting (the kubelet retries, but
what is missing stays missing until someone adds it)."""
MOUNT_GRACE_SECONDS: Final = 30.0
"""A pod younger than this is not judged by its ``FailedMount`` Events: the helper Secret is
made just after the Job, and the kubelet's first mount may come before it."""
POD_GRACE_SECONDS: Final = 5.0
"""A Job younger than this without ready pods is not asked about (the Job controller makes its
pods within a second; asking sooner would only find them being made)."""


class JobRead(enum.Enum):
    """Where the pass reads the Job from."""

    NONE = "none"
    """Not at all: a deleting Task without taskfsm's finalizer is going whatever its Job shows."""

    CACHE = "cache"
    """The Job watch's cache (with this process's own newer writes)."""
    SOURCE = "source"
    """The Job's cluster: the decision must not rest on a cache."""
    SOURCE_IF_MISSING = "source-if-missing"
    """The cache; a Job it does not show is looked for in the cluster before the pass calls it
    missing."""


def job_read(before: TaskObservation, *, job_watch_healthy: bool = True) -> JobRead:
    """The read the pass needs, given what it knows before reading the Job and whether the Job
    watch of its cluster is connected (`job_watch_healthy`).

    * A deleting Task without taskfsm's finalizer: nothing the Job shows changes what happens
      to the Task (it goes), and the Job's cleanup is the orphan sweep's (docs/behaviour.md
      §3.15, D5b).
    * The Workflow terminated while the Task is JobPending or Running: an outcome the Job
      already shows wins over the termination (`workflow_terminated [job_succeeded]`, D18b),
      so the Job's cluster is asked.
    * A deleting Task whose MPE has been unreachable for the cleanup bound: a cluster that no
      longer answers must show as a failed read, so the chart can leave the Job behind (D22).
    * A deleting Task (`task_terminating`: "no Job" removes the finalizer for good, and a Job
      whose create reached the server while its answer was lost is in no record yet), and a
      Task that had a Job (`job_expected`: "no Job" fails it with JobLost, D18b), call a Job
      missing only after its cluster confirmed it.
    """
    if before.deletion_requested and not before.has_finalizer:
        return JobRead.NONE
    if before.workflow is WorkflowState.TERMINATED and before.phase in (RUNNING, JOB_PENDING):
        return JobRead.SOURCE
    if before.deletion_requested and (before.cleanup_wait_left <= 0 or not job_watch_healthy):
        return JobRead.SOURCE
    if before.deletion_requested or job_expected(before):
        return JobRead.SOURCE_IF_MISSING
    return JobRead.CACHE


def reselect_mpe(before: TaskObservation) -> bool:
    """A deleting Task that still holds taskfsm's finalizer but whose status names no MPE asks
    selection again where its Job would be (the `mpe_unrecorded` guard's fact).

    One pass selects the MPE, creates the Job and writes status at the end; when the create's
    answer and the status write are both lost (a cut connection, a crash), the Job exists but no
    status names its cluster. Selection is deterministic, so it names that cluster again."""
    return before.deletion_requested and before.has_finalizer and not before.mpe_selected


def job_inputs_needed(before: TaskObservation) -> bool:
    """Whether the pass builds what the Job would be made from (and asks whether it can be
    made at all): only a JobPending Task that is not being deleted creates a Job (D1)."""
    return before.phase == JOB_PENDING and not before.deletion_requested


def pods_checked(job: JobState, *, ready: bool, age_seconds: float) -> bool:
    """Whether the pass asks why a Job's pods do not run: an active Job none of whose pods is
    ready, older than :data:`POD_GRACE_SECONDS` (the `job_pods_waiting` fact the chart's
    `schedule_pod_check` paces)."""
    return job is JobState.ACTIVE and not ready and age_seconds >= POD_GRACE_SECONDS


def wait_left(timeout: float, waited: float) -> float:
    """Seconds left of a bounded wait (``--job-pods-refused-timeout``) after ``waited`` seconds:
    never negative, and infinite when the bound is 0 (wait for ever)."""
    if timeout <= 0:
        return float("inf")
    return max(0.0, timeout - waited)


def cannot_start(waiting_reason: str) -> bool:
    """A container waiting for this reason will not start by waiting (:data:`START_FAILURES`):
    its pods count as refused (`job_pods_refused`)."""
    return waiting_reason in START_FAILURES


def mount_failures_count(pod_age_seconds: float, *, started: bool) -> bool:
    """Whether a pod's ``FailedMount`` Events count as a refusal of its Job's pods: only for a
    pod none of whose containers has run yet, older than :data:`MOUNT_GRACE_SECONDS`."""
    return not started and pod_age_seconds >= MOUNT_GRACE_SECONDS
