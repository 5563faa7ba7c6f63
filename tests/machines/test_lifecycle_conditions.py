"""Task conditions: the §3.3 table and the §1.10 mark-condition rule, with `now` injected."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from machines.conditions import Condition, mark_condition
from machines.task.conditions import TerminalReason, compute_conditions

T1 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
T2 = T1 + timedelta(minutes=5)


def statuses(conditions: tuple[Condition, ...]) -> dict[str, str]:
    return {c.type: c.status for c in conditions}


@pytest.mark.parametrize(
    ("phase", "failed", "expected"),
    [
        ("", False, {}),
        ("Bogus", True, {}),
        ("Initializing", False, {"Initialized": "False"}),
        ("Initializing", True, {"Initialized": "False"}),
        ("JobPending", False, {"Initialized": "True"}),
        ("JobPending", True, {"Initialized": "False"}),
        ("Running", False, {"Initialized": "True", "Ready": "True"}),
        ("Running", True, {"Initialized": "True", "Ready": "False"}),
        ("Succeeded", False, {"Initialized": "True", "Ready": "False", "Complete": "True"}),
        ("Succeeded", True, {"Initialized": "True", "Ready": "False", "Complete": "True"}),
        ("Failed", False, {"Initialized": "True", "Ready": "False", "Failed": "True"}),
    ],
)
def test_condition_table(phase: str, failed: bool, expected: dict[str, str]) -> None:
    """Each final phase writes the §3.3 row, from an empty list."""
    assert statuses(compute_conditions(phase, failed_pass=failed, existing=(), now=T1)) == expected


def test_types_the_phase_does_not_mention_are_kept() -> None:
    """Running → JobPending keeps the Ready condition (conditions never removed going back)."""
    running = compute_conditions("Running", failed_pass=False, existing=(), now=T1)
    pending = compute_conditions("JobPending", failed_pass=False, existing=running, now=T2)
    assert statuses(pending) == {"Initialized": "True", "Ready": "True"}
    assert [c.type for c in pending] == ["Initialized", "Ready"]


def test_unchanged_conditions_keep_their_time() -> None:
    """lastTransitionTime moves only when status, reason or message change (§1.10)."""
    first = compute_conditions("Running", failed_pass=False, existing=(), now=T1)
    again = compute_conditions("Running", failed_pass=False, existing=first, now=T2)
    assert again == first
    broken = compute_conditions("Running", failed_pass=True, existing=first, now=T2)
    by_type = {c.type: c for c in broken}
    assert by_type["Initialized"].last_transition_time == T1
    assert by_type["Ready"] == Condition("Ready", "False", T2)


def test_terminal_reason_is_written_once_and_kept() -> None:
    """The entering pass writes reason and message; later passes (no reason) keep them."""
    entered = compute_conditions(
        "Failed",
        failed_pass=False,
        existing=(),
        now=T1,
        reason=TerminalReason.JOB_LOST,
        message="Job x disappeared",
    )
    failed = next(c for c in entered if c.type == "Failed")
    assert (failed.reason, failed.message) == ("JobLost", "Job x disappeared")
    later = compute_conditions("Failed", failed_pass=False, existing=entered, now=T2)
    assert later == entered


def test_mark_condition_rules() -> None:
    """Append when missing, replace in place with a new stamp when different."""
    conds = mark_condition((), "A", "True", now=T1)
    conds = mark_condition(conds, "B", "False", now=T1)
    assert [c.type for c in conds] == ["A", "B"]
    same = mark_condition(conds, "A", "True", now=T2)
    assert same == conds
    new_reason = mark_condition(conds, "A", "True", now=T2, reason="Why", message="Because")
    assert new_reason[0] == Condition("A", "True", T2, "Why", "Because")
    assert new_reason[1] == conds[1]


def test_wire_form_round_trip() -> None:
    """Conditions convert to and from the API's RFC3339 second-precision form."""
    condition = Condition("Complete", "True", T1, "JobSucceeded", "Job x succeeded")
    raw = condition.to_dict()
    assert raw == {
        "type": "Complete",
        "status": "True",
        "lastTransitionTime": "2024-05-01T12:00:00Z",
        "reason": "JobSucceeded",
        "message": "Job x succeeded",
    }
    assert Condition.from_dict(raw) == condition
    assert Condition("Ready", "True", T1).to_dict().keys() == {
        "type",
        "status",
        "lastTransitionTime",
    }


def test_unparsable_time_does_not_stop_the_pass() -> None:
    parsed = Condition.from_dict({"type": "Ready", "status": "True", "lastTransitionTime": "x"})
    assert parsed.last_transition_time == datetime.fromtimestamp(0, UTC)
