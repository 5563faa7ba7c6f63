"""A Task that fails the same way on every retry writes a bounded number of Events and log lines
(docs/operations.md, "Events and logs under bad input"): 1,000 retries, the clock moved by the
work queue's own backoff (5 ms doubling, capped at ~16 min), counted.

Regression: a metadata write the API server refused (issue 30: labels beyond 63 characters)
wrote a ReconcileError Event every time the 5-minute de-duplication window had passed, and a
reconcile failing with an unexpected error logged its traceback on every retry.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from taskfsm.kube.errors import Invalid
from taskfsm.kube.events import COMBINED_PREFIX, EventRecorder
from taskfsm.manager.queue import WorkQueue
from taskfsm.manager.structured_logs import RepeatFilter
from tests.unit.controllers.test_task_reconciler import NS, FakeStore, World

RETRIES = 1000
KEY = f"{NS}/t"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class EventApi:
    """The events.k8s.io API: Events created and series patches, counted."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.patches: list[tuple[str, dict[str, Any]]] = []

    def create(self, res: Any, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self.created.append(body)
        return body

    def patch(self, res: Any, namespace: str, name: str, patch: Any, **_: Any) -> dict[str, Any]:
        self.patches.append((name, patch))
        return {}


class RefusingStore(FakeStore):
    """Every metadata write is refused, as the API server refused labels beyond 63 bytes."""

    def write_metadata(self, work: Any) -> None:
        if work.metadata_dirty:
            raise Invalid(
                'Task "t" is invalid: metadata.labels: Invalid value: "x": must be no more '
                "than 63 bytes"
            )


def retries(clock: Clock, each: Any) -> float:
    """Call ``each()`` RETRIES times, moving the clock by the queue's backoff in between;
    return the seconds that took."""
    queue = WorkQueue(clock=clock, jitter=0.0)
    started = clock.now
    for _ in range(RETRIES):
        each()
        clock.now += queue.add_rate_limited(KEY)
    return clock.now - started


def test_a_task_refused_the_same_way_on_every_retry_writes_a_bounded_number_of_events():
    clock = Clock()
    api = EventApi()
    events = EventRecorder(api, clock=clock)  # type: ignore[arg-type]  # a fake port
    w = World()
    w.store = RefusingStore(w.catalog)
    w.reconciler.reader.store = w.store  # type: ignore[assignment]  # a fake port
    w.reconciler.writer.store = w.store  # type: ignore[assignment]  # a fake port
    w.reconciler.writer.events = events
    w.task()
    errors: list[str] = []

    def retry() -> None:
        errors.append(w.reconcile().error or "")

    elapsed = retries(clock, retry)
    assert all("must be no more than 63 bytes" in e for e in errors)
    reconcile_errors = [e for e in api.created if e["reason"] == "ReconcileError"]
    assert len(reconcile_errors) == 1  # one Event: the repeats are its series
    heartbeats = math.ceil(elapsed / events.series_seconds)
    assert 1 <= len(api.patches) <= heartbeats, (len(api.patches), heartbeats)
    counts = [patch["series"]["count"] for _, patch in api.patches]
    assert counts == sorted(counts)
    assert counts[-1] > RETRIES - 5  # the last patch carries (almost) every occurrence
    print(
        f"{RETRIES} retries over {elapsed / 86400:.1f} days: {len(api.created)} Events created, "
        f"{len(api.patches)} series patches"
    )


def test_a_note_that_differs_on_every_retry_is_combined_after_ten():
    clock = Clock()
    api = EventApi()
    events = EventRecorder(api, clock=clock)  # type: ignore[arg-type]  # a fake port
    task = {"apiVersion": "v1", "kind": "Task", "metadata": {"name": "t", "namespace": NS}}
    counter = iter(range(RETRIES))

    def retry() -> None:
        events.record(task, "Warning", "ReconcileError", f"conflict at version {next(counter)}")

    elapsed = retries(clock, retry)
    notes = [e["note"] for e in api.created]
    combined = [n for n in notes if n.startswith(COMBINED_PREFIX)]
    # Ten distinct notes within ten minutes (the fast first retries), then one combined series
    # for every further note while the failure keeps repeating.
    assert len(api.created) == events.similar_limit + 1
    assert len(combined) == 1
    writes = len(api.created) + len(api.patches)
    assert writes <= events.burst + elapsed / events.refill_seconds
    assert len(api.patches) <= math.ceil(elapsed / events.series_seconds)
    print(f"{RETRIES} different notes: {len(api.created)} Events, {len(api.patches)} patches")


def test_events_of_one_object_stay_within_its_budget_when_every_note_differs():
    clock = Clock()
    api = EventApi()
    events = EventRecorder(api, clock=clock, similar_limit=RETRIES)  # type: ignore[arg-type]
    task = {"apiVersion": "v1", "kind": "Task", "metadata": {"name": "t", "namespace": NS}}
    for i in range(RETRIES):  # all at once: nothing refills the budget
        events.record(task, "Warning", "ReconcileError", f"note {i}")
    assert len(api.created) == events.burst
    assert events.dropped == RETRIES - events.burst


def test_a_reconcile_failing_the_same_way_on_every_retry_logs_a_bounded_number_of_lines():
    clock = Clock()
    lines: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record)

    handler = Collect()
    handler.addFilter(RepeatFilter(clock=clock))
    logger = logging.getLogger("taskfsm.controllers.task.reconciler")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    w = World()

    def broken(namespace: str, name: str) -> None:
        raise RuntimeError("a bug in reading the Task")

    w.store.read = broken  # type: ignore[method-assign]  # the fault under test
    try:
        elapsed = retries(clock, w.reconcile)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    failed = [r for r in lines if r.getMessage() == "reconcile failed"]
    hours = elapsed / 3600
    bound = 3 + math.log2(RETRIES) + hours + 1
    assert len(failed) <= bound, (len(failed), bound)
    assert failed[0].exc_info is not None  # the first line has the traceback ...
    assert all(r.exc_info is None for r in failed[1:])  # ... its repeats do not
    assert sum(getattr(r, "repeated", 0) for r in failed) + len(failed) == RETRIES
    print(f"{RETRIES} retries over {hours:.0f} hours: {len(failed)} log lines")


def test_different_failures_and_different_tasks_are_logged_apart():
    clock = Clock()
    passed: list[str] = []
    repeat = RepeatFilter(clock=clock, burst=1)
    for task in ("ns/a", "ns/b"):
        for error in ("e1", "e2"):
            record = logging.LogRecord("x", logging.WARNING, "", 0, "failed", None, None)
            record.task = task
            record.error = error
            if repeat.filter(record):
                passed.append(f"{task} {error}")
    assert passed == ["ns/a e1", "ns/a e2", "ns/b e1", "ns/b e2"]


def test_lines_about_different_things_are_not_one_run_of_repeats():
    """Regression: "bucket acquired" for twelve buckets is twelve lines, not three (the repeat
    filter keyed lines by message and error only, and the bucket tests lost the holdings)."""
    import logging

    from taskfsm.manager.structured_logs import RepeatFilter

    repeats = RepeatFilter(burst=3)

    def line(**fields: object) -> logging.LogRecord:
        record = logging.LogRecord(
            "taskfsm.kube.buckets", logging.INFO, "", 0, "bucket acquired", None, None
        )
        record.__dict__.update(fields)
        return record

    assert all(repeats.filter(line(bucket=i)) for i in range(12))
    assert sum(repeats.filter(line(bucket=0)) for _ in range(20)) < 20  # the same line repeats
