"""The wire form of times: RFC 3339 in UTC, as Kubernetes writes them (one home in `taskfsm`).

`metav1.Time` fields (status times, condition times, Event first/last timestamps) have second
precision (`2024-05-01T12:00:00Z`); `metav1.MicroTime` fields (Lease renew times, an Event's
`eventTime`) have microseconds (`2024-05-01T12:00:00.250000Z`). `machines` has its own copy of
the second form (`machines.conditions`), since it imports nothing of `taskfsm`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

TIME_FORMAT: Final = "%Y-%m-%dT%H:%M:%SZ"
"""`metav1.Time`: RFC 3339, UTC, seconds."""
MICRO_TIME_FORMAT: Final = "%Y-%m-%dT%H:%M:%S.%fZ"
"""`metav1.MicroTime`: RFC 3339, UTC, microseconds."""


def format_time(when: datetime) -> str:
    """``when`` as a `metav1.Time` string."""
    return when.astimezone(UTC).strftime(TIME_FORMAT)


def format_micro_time(when: datetime) -> str:
    """``when`` as a `metav1.MicroTime` string."""
    return when.astimezone(UTC).strftime(MICRO_TIME_FORMAT)


def parse_time(value: Any) -> datetime | None:
    """A `metav1.Time` string as an aware UTC datetime; None when empty or malformed."""
    if not value:
        return None
    try:
        return datetime.strptime(str(value), TIME_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None
