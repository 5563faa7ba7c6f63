"""MediaProcessingEntity status: `Ready`/`Failed` conditions and `status.message`.

Where this sits in the flow: a pass's verdicts say whether the MPE is usable (`MpeStatus`: the
reason and the message); `compute_mpe_conditions` turns that into the conditions to persist.
A pass without such a verdict (an error that says nothing about the MPE's cluster, or a
replica that only follows) leaves them as they are.

The reason follows the latest verdict; `lastTransitionTime` changes only with the status
(docs/mpe-lifecycle.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from machines.conditions import FALSE, TRUE, Condition

READY: Final = "Ready"
FAILED: Final = "Failed"
CONNECTED: Final = "Connected"
"""`Ready=True`'s reason: the cluster answers and its Job watch is connected."""


@dataclass(frozen=True, slots=True)
class MpeStatus:
    """A pass's verdict on the MPE: usable or not, why, and its `status.message`."""

    ready: bool
    reason: str
    message: str = ""


def _mark(conditions: list[Condition], type_: str, status: str, reason: str, now: datetime) -> None:
    for index, cond in enumerate(conditions):
        if cond.type == type_:
            when = now if cond.status != status else cond.last_transition_time
            conditions[index] = Condition(type_, status, when, reason, cond.message)
            return
    conditions.append(Condition(type_, status, now, reason))


def compute_mpe_conditions(
    phase: str,
    *,
    failed_pass: bool,
    existing: Iterable[Condition],
    now: datetime,
    reason: Any = None,
    message: str = "",
    detail: MpeStatus | None = None,
) -> tuple[Condition, ...]:
    """The conditions to persist: `Ready` (and `Failed` while not ready) from the pass's
    `detail`; the persisted ones unchanged when the pass had no verdict on the MPE."""
    conditions = list(existing)
    if detail is None:
        return tuple(conditions)
    _mark(conditions, READY, TRUE if detail.ready else FALSE, detail.reason, now)
    if detail.ready:
        conditions = [cond for cond in conditions if cond.type != FAILED]
    else:
        _mark(conditions, FAILED, TRUE, detail.reason, now)
    return tuple(conditions)
