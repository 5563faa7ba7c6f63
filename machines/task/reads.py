"""How a pass reads the Task's Job: the read policy, decided from what the chart will ask.

Where this sits in the flow: the runtime reads everything a pass needs before the chart runs.
The Job is read from its cluster's watch cache, which may lag behind the cluster; where the
chart would decide something for good from what the cache shows, the runtime reads the Job
from its cluster instead. This module says where, from what is known before the Job is read
(`before`: the pass's observation without its Job fields), in the terms of the chart's own
guards, so the policy and the decisions cannot drift apart.

Spec: docs/behaviour.md §3.2 step 3, D18b and §3.11.
"""

from __future__ import annotations

import enum

from machines.task.guards import job_expected
from machines.task.observation import TaskObservation, WorkflowState
from machines.task.phases import JOB_PENDING, RUNNING


class JobRead(enum.Enum):
    """Where the pass reads the Job from."""

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
    if before.workflow is WorkflowState.TERMINATED and before.phase in (RUNNING, JOB_PENDING):
        return JobRead.SOURCE
    if before.deletion_requested and (before.cleanup_wait_left <= 0 or not job_watch_healthy):
        return JobRead.SOURCE
    if before.deletion_requested or job_expected(before):
        return JobRead.SOURCE_IF_MISSING
    return JobRead.CACHE
