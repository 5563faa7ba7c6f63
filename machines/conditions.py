"""Task status conditions, computed from where a reconcile pass ended.

Where this sits in the flow: after `machines.driver.run_pass` has driven the lifecycle to its
final state for the pass, `compute_conditions` turns that phase, the pass's error and (when the
pass entered a terminal phase) the outcome's reason into the `status.conditions` list the
reconciler patches. It is one pure function: same inputs, same list; `now` is injected.

Spec: task-controller.md §3.3 (condition table) and §1.10 (the mark-condition rule).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

INITIALIZED: Final = "Initialized"
READY: Final = "Ready"
COMPLETE: Final = "Complete"
FAILED: Final = "Failed"

TRUE: Final = "True"
FALSE: Final = "False"

_RFC3339: Final = "%Y-%m-%dT%H:%M:%SZ"


class TerminalReason(enum.Enum):
    """Why a pass moved the Task into Succeeded or Failed; written as the condition's reason."""

    JOB_SUCCEEDED = "JobSucceeded"
    JOB_FAILED = "JobFailed"
    WORKFLOW_TERMINATED = "WorkflowTerminated"
    JOB_LOST = "JobLost"


@dataclass(frozen=True, slots=True)
class Condition:
    """One entry of `status.conditions` (§1.10).

    `last_transition_time` is an aware UTC datetime; `to_dict`/`from_dict` convert to and from
    the RFC3339 second-precision wire form.
    """

    type: str
    status: str
    last_transition_time: datetime
    reason: str = ""
    message: str = ""

    def to_dict(self) -> dict[str, str]:
        """Return the API form (`reason`/`message` omitted when empty)."""
        out = {
            "type": self.type,
            "status": self.status,
            "lastTransitionTime": self.last_transition_time.astimezone(UTC).strftime(_RFC3339),
        }
        if self.reason:
            out["reason"] = self.reason
        if self.message:
            out["message"] = self.message
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Condition:
        """Parse the API form; a missing or unparsable time reads as the Unix epoch.

        Raises:
            KeyError: if `type` or `status` is missing.
        """
        stamp = raw.get("lastTransitionTime")
        try:
            when = datetime.strptime(str(stamp), _RFC3339).replace(tzinfo=UTC)
        except ValueError:
            # A hand-edited or foreign timestamp must not stop the pass; the next change
            # of this condition stamps a proper one.
            when = datetime.fromtimestamp(0, UTC)
        return cls(
            type=str(raw["type"]),
            status=str(raw["status"]),
            last_transition_time=when,
            reason=str(raw.get("reason") or ""),
            message=str(raw.get("message") or ""),
        )


def mark_condition(
    conditions: Sequence[Condition],
    type_: str,
    status: str,
    *,
    now: datetime,
    reason: str | None = None,
    message: str | None = None,
) -> tuple[Condition, ...]:
    """Return `conditions` with condition `type_` marked `status` (§1.10).

    An existing condition of that type keeps its place; it is replaced, with
    `lastTransitionTime = now`, only when its status differs or when a `reason`/`message` is
    given and differs. `reason=None` means "no opinion": the stored reason and message stay as
    long as the status does not change. A missing condition is appended.
    """
    out = list(conditions)
    for index, existing in enumerate(out):
        if existing.type != type_:
            continue
        same_status = existing.status == status
        same_text = reason is None or (
            existing.reason == reason and existing.message == (message or "")
        )
        if same_status and same_text:
            return tuple(out)
        out[index] = Condition(type_, status, now, reason or "", message or "")
        return tuple(out)
    out.append(Condition(type_, status, now, reason or "", message or ""))
    return tuple(out)


def compute_conditions(
    phase: str,
    *,
    failed_pass: bool,
    existing: Iterable[Condition],
    now: datetime,
    reason: TerminalReason | None = None,
    message: str = "",
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

    Returns:
        The new list; `()` for an empty or unknown phase (the field disappears).
    """
    current = tuple(existing)

    def mark(conds: tuple[Condition, ...], type_: str, true: bool, **text: Any) -> tuple:
        return mark_condition(conds, type_, TRUE if true else FALSE, now=now, **text)

    terminal_text: dict[str, Any] = {}
    if reason is not None:
        terminal_text = {"reason": reason.value, "message": message}

    if phase == "Initializing":
        return mark(current, INITIALIZED, False)
    if phase == "JobPending":
        return mark(current, INITIALIZED, not failed_pass)
    if phase == "Running":
        return mark(mark(current, INITIALIZED, True), READY, not failed_pass)
    if phase == "Succeeded":
        conds = mark(mark(current, INITIALIZED, True), READY, False)
        return mark(conds, COMPLETE, True, **terminal_text)
    if phase == "Failed":
        conds = mark(mark(current, INITIALIZED, True), READY, False)
        return mark(conds, FAILED, True, **terminal_text)
    return ()
