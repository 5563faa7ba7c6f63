"""What a Task reads of its Job, once: the facts its observation holds and the Job watch compares.

The Task's observation (`taskfsm.controllers.task.observe`) takes its Job fields from
`job_facts`, and the Job-event predicate of the MPE clusters' Job watches
(`taskfsm.controllers.clusters.watches`) wakes a Task only when these facts change: a Job's
status changes many times while it runs (pods created, ready, counted), and none of that is
read (controller-runtime's predicates do the same job).

Spec: docs/behaviour.md §3.12 (the outcome by condition type) and §4.1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from machines.task.job_status import interpret_job_conditions, job_failure
from machines.task.observation import JobState
from taskfsm.api import constants as c


@dataclass(frozen=True, slots=True)
class JobFacts:
    """The Job under a Task's name as its lifecycle reads it (`TaskObservation`'s Job fields)."""

    state: JobState = JobState.ABSENT
    uid: str = ""
    terminating: bool = False
    protected: bool = False
    failure: str = ""
    """A failed Job's reason and message (:func:`machines.task.job_status.job_failure`)."""


ABSENT = JobFacts()
"""No Job under the Task's name."""


def job_facts(job: dict[str, Any] | None) -> JobFacts:
    """UID, deletion, job-protection and outcome (by condition type) of `job` (None: absent)."""
    if job is None:
        return ABSENT
    meta = job.get("metadata") or {}
    conditions = (job.get("status") or {}).get("conditions")
    state = interpret_job_conditions(conditions)
    return JobFacts(
        state=state,
        failure=job_failure(conditions) if state is JobState.FAILED else "",
        uid=meta.get("uid") or "",
        terminating=bool(meta.get("deletionTimestamp")),
        protected=c.FINALIZER_JOB_PROTECTION in (meta.get("finalizers") or []),
    )
