"""Task status conditions, computed from where a reconcile pass ended.

Where this sits in the flow: after `machines.task.driver.run_pass` has driven the lifecycle to its
final state for the pass, `compute_conditions` turns that phase, the pass's error and (when the
pass entered a terminal phase) the outcome's reason into the `status.conditions` list the
reconciler patches. It is one pure function: same inputs, same list; `now` is injected.

Spec: docs/behaviour.md §3.3 (condition table) and §1.10 (the mark rule).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from machines.conditions import FALSE, TRUE, Condition, mark_condition

INITIALIZED: Final = "Initialized"
READY: Final = "Ready"
COMPLETE: Final = "Complete"
FAILED: Final = "Failed"


JOB_SUSPENDED: Final = "JobSuspended"
"""The reason of `Ready=False` while the Job is held by `spec.suspend`."""

JOB_PODS_REFUSED: Final = "JobPodsRefused"
"""The reason of `Ready=False` while the Job's pods are refused or cannot start; of `Failed` once
that lasted the whole `--job-pods-refused-timeout`."""


@dataclass(frozen=True, slots=True)
class ReadyReason:
    """Why a Running Task is not Ready although its pass succeeded (its Job is suspended, or its
    pods are refused)."""

    reason: str
    message: str


class TerminalReason(enum.Enum):
    """Why a pass moved the Task into Succeeded or Failed; written as the condition's reason."""

    JOB_SUCCEEDED = "JobSucceeded"
    JOB_FAILED = "JobFailed"
    WORKFLOW_TERMINATED = "WorkflowTerminated"
    JOB_LOST = "JobLost"
    JOB_PODS_REFUSED = "JobPodsRefused"
    HELPER_DATA_TOO_LARGE = "HelperDataTooLarge"
    JOB_BEYOND_LIMITS = "JobBeyondLimits"
    HELPER_DATA_NOT_CREATED = "HelperDataNotCreated"


def compute_conditions(
    phase: str,
    *,
    failed_pass: bool,
    existing: Iterable[Condition],
    now: datetime,
    reason: TerminalReason | None = None,
    message: str = "",
    detail: ReadyReason | None = None,
) -> tuple[Condition, ...]:
    """Return the `status.conditions` to persist after a pass (§3.3 table).

    Args:
        phase: the phase the pass ends in (the persisted one when the pass did not move it).
        failed_pass: whether the pass ends with an error (`status.message` set).
        existing: the conditions as persisted; types this phase does not mention are kept,
            also when the phase moved backwards (a Running → JobPending Task keeps `Ready`).
        now: the stamp for changed conditions.
        reason: set only by the pass that entered Succeeded/Failed; becomes the reason of
            `Complete`/`Failed`, with `message`.
        detail: set when a Running Task's Job is suspended: `Ready=False` with its reason and
            message.

    Returns:
        The new list; `()` for an empty or unknown phase (the field disappears).
    """
    current = tuple(existing)

    def mark(
        conds: tuple[Condition, ...], type_: str, true: bool, **text: str
    ) -> tuple[Condition, ...]:
        return mark_condition(conds, type_, TRUE if true else FALSE, now=now, **text)

    terminal_text: dict[str, str] = {}
    if reason is not None:
        terminal_text = {"reason": reason.value, "message": message}

    if phase == "Initializing":
        return mark(current, INITIALIZED, False)
    if phase == "JobPending":
        return mark(current, INITIALIZED, not failed_pass)
    if phase == "Running":
        running = mark(current, INITIALIZED, True)
        if detail is not None and not failed_pass:
            return mark(running, READY, False, reason=detail.reason, message=detail.message)
        return mark(running, READY, not failed_pass)
    if phase == "Succeeded":
        conds = mark(mark(current, INITIALIZED, True), READY, False)
        return mark(conds, COMPLETE, True, **terminal_text)
    if phase == "Failed":
        conds = mark(mark(current, INITIALIZED, True), READY, False)
        return mark(conds, FAILED, True, **terminal_text)
    return ()
