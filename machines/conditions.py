"""Status conditions: the `Condition` type and the mark rule both lifecycles use.

Each chart computes its own list from where a pass ended (`machines.task.conditions`,
`machines.workflow.conditions`); both build it with `mark_condition`, which stamps a new
`lastTransitionTime` only on a real change.

Spec: docs/behaviour.md §1.10 (the mark rule).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

TRUE: Final = "True"
FALSE: Final = "False"

_RFC3339: Final = "%Y-%m-%dT%H:%M:%SZ"

MAX_MESSAGE_BYTES: Final = 32768
"""The longest condition message and `status.message` a chart writes, in bytes of UTF-8 (the
API server's limit for a `metav1.Condition` message): an error text that quotes a tenant's
input at length still leaves the status well within the size of one object."""


def bounded_message(text: str) -> str:
    """`text` cut to `MAX_MESSAGE_BYTES` bytes of UTF-8 (never inside a character)."""
    data = text.encode()
    if len(data) <= MAX_MESSAGE_BYTES:
        return text
    return data[:MAX_MESSAGE_BYTES].decode(errors="ignore")


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
    long as the status does not change. A missing condition is appended. A message is cut to
    `MAX_MESSAGE_BYTES`.
    """
    out = list(conditions)
    if message is not None:
        message = bounded_message(message)
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


def seconds_left(period: float | None, seconds_since_end: float | None) -> float:
    """Seconds until ``period`` has passed since endTime: the whole period when endTime is unset,
    0 once it has passed, infinite without a period (a TTL that is off)."""
    if period is None:
        return float("inf")
    if seconds_since_end is None:
        return period
    return max(0.0, period - seconds_since_end)
