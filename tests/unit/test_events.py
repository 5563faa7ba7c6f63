"""EventRecorder: identical Events within the window are written once, and only a write that
landed counts (a refused one is tried again with the next occurrence)."""

from __future__ import annotations

from taskfsm.kube.events import WARNING, EventRecorder
from tests.support.fakes import FakeRest

TASK = {
    "apiVersion": "engine.nagare.media/v1alpha1",
    "kind": "Task",
    "metadata": {"name": "t", "namespace": "ns", "uid": "u1"},
}


def test_repeats_within_the_window_are_written_once() -> None:
    rest = FakeRest()
    events = EventRecorder(rest, clock=lambda: 0.0)  # type: ignore[arg-type]  # a fake standing in for the real type: duck-typed
    for _ in range(3):
        events.record(TASK, WARNING, "ReconcileError", "boom")
    assert len(rest.created) == 1


def test_a_refused_event_is_tried_again() -> None:
    """Before: a failed POST was remembered as sent and the Event suppressed for the window."""
    rest = FakeRest()
    events = EventRecorder(rest, clock=lambda: 0.0)  # type: ignore[arg-type]  # a fake standing in for the real type: duck-typed
    rest.fail = True
    events.record(TASK, WARNING, "ReconcileError", "boom")
    rest.fail = False
    events.record(TASK, WARNING, "ReconcileError", "boom")
    assert [e["note"] for e in rest.created] == ["boom"]
    assert events.recorded == 1
