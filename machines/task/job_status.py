"""Reading a batch/v1 Job's outcome from its conditions, by type.

Where this sits in the flow: the reconciler reads the Job found under the Task's
deterministic name and calls `interpret_job_conditions(job.status.conditions)`; the resulting
`JobState` goes into the `TaskObservation` that the lifecycle guards read.

Kubernetes ≥ 1.31 adds `SuccessCriteriaMet` and `FailureTarget`, which appear before the
terminal `Complete`/`Failed` (the terminal one waits until the pods have finished), and the
list order is not a contract: code that read `conditions[0]` broke (docs/behaviour.md §7, F8).
So every condition is looked up by type and only `status: "True"` counts.

Spec: docs/behaviour.md §3.12 and F8 (§7).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from machines.task.observation import JobState

SUCCESS_TYPES: Final = frozenset({"Complete", "SuccessCriteriaMet"})
"""Job condition types that mean the Job succeeded when True."""

FAILURE_TYPES: Final = frozenset({"Failed", "FailureTarget"})
"""Job condition types that mean the Job failed when True."""

SUSPENDED_TYPE: Final = "Suspended"
"""The condition the Job controller sets while `spec.suspend` holds the Job (queueing systems
such as Kueue create Jobs suspended until they admit them)."""


def _field(condition: Any, name: str) -> Any:
    # Accept both the API's dict form and client objects (e.g. V1JobCondition).
    if isinstance(condition, Mapping):
        return condition.get(name)
    return getattr(condition, name, None)


def interpret_job_conditions(conditions: Iterable[Any] | None) -> JobState:
    """Return the `JobState` of an existing Job from its `status.conditions`.

    Args:
        conditions: the Job's conditions, dicts (`{"type": ..., "status": ...}`) or objects
            with `type`/`status` attributes, in any order; `None` for a Job without status.

    Returns:
        `JobState.FAILED` if a failure type is True, else `JobState.SUCCEEDED` if a success
        type is True, else `JobState.SUSPENDED` while `Suspended` is True, else
        `JobState.ACTIVE`. Failure wins over success because the API
        never sets both; if a buggy writer did, reporting success would hide a failure.
        Retry counts such as `status.failed > 0` are not read: a Job that failed some pods
        and then completed is Succeeded.
    """
    true_types = {_field(c, "type") for c in conditions or () if str(_field(c, "status")) == "True"}
    if true_types & FAILURE_TYPES:
        return JobState.FAILED
    if true_types & SUCCESS_TYPES:
        return JobState.SUCCEEDED
    if SUSPENDED_TYPE in true_types:
        return JobState.SUSPENDED
    return JobState.ACTIVE


def job_failure(conditions: Iterable[Any] | None) -> str:
    """``reason: message`` of a failed Job's failure condition (`Failed` first, then
    `FailureTarget`: the Job controller's words, e.g. ``BackoffLimitExceeded: Job has reached the
    specified backoff limit``); ``""`` when no failure type is True."""
    by_type = {_field(c, "type"): c for c in conditions or () if str(_field(c, "status")) == "True"}
    for type_ in ("Failed", "FailureTarget"):
        condition = by_type.get(type_)
        if condition is not None:
            reason = str(_field(condition, "reason") or "")
            message = str(_field(condition, "message") or "")
            return ": ".join(part for part in (reason, message) if part)
    return ""
