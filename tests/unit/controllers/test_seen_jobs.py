"""What the process remembers of the Jobs it saw per Task (the evidence of a lost Job, D18b)."""

from __future__ import annotations

from taskfsm.controllers.task.seen_jobs import SeenJobs


def test_jobs_seen_are_remembered_per_task_until_the_task_is_forgotten():
    seen = SeenJobs()
    assert not seen.seen("u1", "j")
    seen.saw("u1", "j")
    seen.saw("u1", "j")
    assert seen.seen("u1", "j")
    assert not seen.seen("u1", "k")
    assert not seen.seen("u2", "j")
    seen.saw("u1", "k")  # another name for the same Task: both are remembered
    assert seen.seen("u1", "j")
    assert seen.seen("u1", "k")
    seen.forget("u1")
    assert not seen.seen("u1", "j")
    assert len(seen) == 0
