"""Workflow status conditions, computed from where a reconcile pass ended.

Where this sits in the flow: after `machines.workflow.driver.run_pass` has driven the Workflow
lifecycle to its final state for the pass, `compute_workflow_conditions` turns that phase,
the pass's error and (when the pass entered a terminal phase) the reason into the
`status.conditions` list the reconciler patches. One pure function; `now` is injected. The
condition entries and the mark rule are the Task's (`machines.conditions`).

Spec: docs/behaviour.md §4.3 (conditions) and §1.10 (the mark-condition rule).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Final

from machines.conditions import FALSE, TRUE, Condition, mark_condition

READY: Final = "Ready"
COMPLETE: Final = "Complete"
FAILED: Final = "Failed"


class WorkflowReason(enum.Enum):
    """Why a pass moved the Workflow into Succeeded or Failed; the condition's reason."""

    TASKS_COMPLETED = "TasksCompleted"
    """No Task was active for the whole termination waiting duration."""
    TASK_FAILED = "TaskFailed"
    """A Task failed and its jobFailurePolicy is FailWorkflow."""


def compute_workflow_conditions(
    phase: str,
    *,
    failed_pass: bool,
    existing: Iterable[Condition],
    now: datetime,
    reason: WorkflowReason | None = None,
    message: str = "",
    detail: Any = None,
) -> tuple[Condition, ...]:
    """Return the `status.conditions` to persist after a pass (§4.3).

    | Phase | Conditions written (others kept) |
    | --- | --- |
    | empty / unknown | none: the list is cleared |
    | Initializing | Ready=False |
    | Running, AwaitingCompletion | Ready = False if the pass failed, else True |
    | Succeeded | Ready=False, Complete=True |
    | Failed | Ready=False, Failed=True |

    Args:
        phase: the phase the pass ends in (the persisted one when the pass did not move it).
        failed_pass: whether the pass ends with an error (`status.message` set).
        existing: the conditions as persisted.
        now: the stamp for changed conditions.
        reason: set only by the pass that entered Succeeded/Failed; becomes the reason of
            `Complete`/`Failed`, with `message`.
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
        return mark(current, READY, False)
    if phase in ("Running", "AwaitingCompletion"):
        return mark(current, READY, not failed_pass)
    if phase == "Succeeded":
        return mark(mark(current, READY, False), COMPLETE, True, **terminal_text)
    if phase == "Failed":
        return mark(mark(current, READY, False), FAILED, True, **terminal_text)
    return ()
