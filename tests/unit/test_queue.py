"""WorkQueue: de-duplication, one worker per key, backoff, delays (fake clock, no sleeps)."""

from __future__ import annotations

import threading

import pytest

from taskfsm.manager.queue import ShutDown, WorkQueue


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def queue(clock: FakeClock) -> WorkQueue:
    return WorkQueue(clock=clock, jitter=0.0)


def test_duplicate_adds_are_queued_once(queue):
    """Three adds of one key before a worker takes it yield one item."""
    for _ in range(3):
        queue.add("ns/a")
    queue.add("ns/b")
    assert [queue.get(timeout=0), queue.get(timeout=0), queue.get(timeout=0)] == [
        "ns/a",
        "ns/b",
        None,
    ]


def test_key_added_while_processing_is_requeued_after_done(queue):
    """A key is never handed out twice at once; an add during processing runs again after done."""
    queue.add("ns/a")
    assert queue.get(timeout=0) == "ns/a"
    queue.add("ns/a")
    assert queue.get(timeout=0) is None  # still processing: not handed to a second worker
    queue.done("ns/a")
    assert queue.get(timeout=0) == "ns/a"
    queue.done("ns/a")
    assert queue.get(timeout=0) is None


def test_rate_limited_delay_doubles_and_forget_resets(queue, clock):
    """Backoff is 5 ms, 10 ms, 20 ms...; forget starts over."""
    delays = [queue.add_rate_limited("ns/a") for _ in range(4)]
    assert delays == pytest.approx([0.005, 0.010, 0.020, 0.040])
    queue.forget("ns/a")
    assert queue.add_rate_limited("ns/a") == pytest.approx(0.005)


def test_backoff_is_capped(clock):
    """The delay never exceeds max_delay (about 16 minutes by default)."""
    queue = WorkQueue(clock=clock, jitter=0.0)
    for _ in range(40):
        delay = queue.add_rate_limited("ns/a")
    assert delay == pytest.approx(1000.0)


def test_jitter_stays_within_bounds(clock):
    """Jittered delays lie in [d, d * (1 + jitter))."""
    queue = WorkQueue(clock=clock, jitter=0.5)
    delay = queue.add_rate_limited("ns/a")
    assert 0.005 <= delay < 0.0075


def test_add_after_waits_for_the_clock(queue, clock):
    """A delayed key is not handed out before its time, and is after."""
    queue.add_after("ns/a", 30)
    assert queue.get(timeout=0) is None
    clock.now += 29.9
    assert queue.get(timeout=0) is None
    clock.now += 0.2
    assert queue.get(timeout=0) == "ns/a"


def test_delayed_key_merges_with_queued_key(queue, clock):
    """A key both queued and delayed is handed out once when the delay ends before it is taken."""
    queue.add("ns/a")
    queue.add_after("ns/a", 1)
    clock.now += 2
    assert queue.get(timeout=0) == "ns/a"
    assert queue.get(timeout=0) is None


def test_shutdown_drains_then_raises(queue):
    """After shutdown, queued keys are still handed out, then get raises ShutDown."""
    queue.add("ns/a")
    queue.add_after("ns/b", 10)
    queue.shutdown()
    queue.add("ns/c")  # ignored after shutdown
    assert queue.get() == "ns/a"
    with pytest.raises(ShutDown):
        queue.get()


def test_blocking_get_wakes_on_add():
    """A worker blocked in get() is woken by an add from another thread."""
    queue = WorkQueue()
    got: list[str | None] = []
    worker = threading.Thread(target=lambda: got.append(queue.get(timeout=10)))
    worker.start()
    queue.add("ns/a")
    worker.join(timeout=10)
    assert got == ["ns/a"]


def test_metrics_hooks_count_adds_and_retries(clock):
    """Adds, retries and depth are reported through the metrics hooks."""
    from taskfsm.manager.queue import QueueMetrics

    counts = {"add": 0, "retry": 0, "depth": []}
    metrics = QueueMetrics(
        on_add=lambda: counts.__setitem__("add", counts["add"] + 1),
        on_retry=lambda: counts.__setitem__("retry", counts["retry"] + 1),
        on_depth=lambda d: counts["depth"].append(d),
    )
    queue = WorkQueue(clock=clock, metrics=metrics)
    queue.add("ns/a")
    queue.add("ns/a")
    queue.add_rate_limited("ns/b")
    assert counts["add"] == 1
    assert counts["retry"] == 1
    assert counts["depth"][-1] == 1


def test_api_failures_back_off_no_longer_than_their_cap(queue):
    """With ``max_delay`` a key's retries stop growing at the cap, while the
    failure count (and so the uncapped delay) keeps growing."""
    delays = [queue.add_rate_limited("ns/a", max_delay=2.0) for _ in range(20)]
    assert delays[:3] == [0.005, 0.01, 0.02]
    assert max(delays) == 2.0
    assert queue.failures("ns/a") == 20
    assert queue.add_rate_limited("ns/a") > 2.0  # without the cap it is far beyond


def test_retry_after_is_a_floor_for_the_backoff(queue):
    """A retry is never sooner than the API server's Retry-After."""
    assert queue.add_rate_limited("ns/a", min_delay=3.0) == 3.0
    assert queue.add_rate_limited("ns/b") == 0.005


def test_keys_in_backoff_are_retried_at_once_after_an_outage(queue, clock):
    """A watch open again after a failure retries every key waiting out a
    backoff at once; keys merely delayed (no failure) keep their time."""
    for _ in range(12):
        queue.add_rate_limited("ns/failed")
    queue.add_after("ns/later", 60.0)
    assert queue.get(timeout=0) is None
    assert queue.retry_failed_now() == 1
    assert queue.get(timeout=0) == "ns/failed"
    assert queue.get(timeout=0) is None
    assert queue.failures("ns/failed") == 12  # the next failure still backs off further


def test_delayed_adds_of_one_key_coalesce(queue, clock):
    """Many delayed adds of one key within the delay make one item, and an earlier
    one is never postponed by a later one."""
    for _ in range(100):
        queue.add_after("ns/wf", 0.5)
    queue.add_after("ns/wf", 10.0)  # later: adds nothing
    clock.now += 0.5
    assert queue.get(timeout=0) == "ns/wf"
    queue.done("ns/wf")
    assert queue.get(timeout=0) is None
    queue.add_after("ns/wf", 10.0)
    queue.add_after("ns/wf", 1.0)  # earlier: comes first
    clock.now += 1.0
    assert queue.get(timeout=0) == "ns/wf"


def test_wait_and_work_durations_and_work_in_progress(clock):
    """client-go's latency hooks: a key's wait from its add to a worker taking it (a key added
    while it runs waits from that add), the worker's time until done, and the age of every key
    being processed, read when asked."""
    from taskfsm.manager.queue import QueueMetrics

    waits: list[float] = []
    works: list[float] = []
    readers = []
    queue = WorkQueue(
        clock=clock,
        metrics=QueueMetrics(on_wait=waits.append, on_work=works.append, on_queue=readers.append),
    )
    assert readers == [queue.in_progress]
    queue.add("ns/a")
    clock.now += 2.0
    queue.add("ns/b")
    clock.now += 1.0
    assert queue.get() == "ns/a"
    assert waits == [3.0]
    clock.now += 4.0
    assert sorted(queue.in_progress()) == [4.0]
    assert queue.get() == "ns/b"
    assert waits == [3.0, 5.0]
    queue.add("ns/a")  # while it runs: queued again on done, waiting from now
    clock.now += 1.0
    assert sorted(queue.in_progress()) == [1.0, 5.0]
    queue.done("ns/a")
    assert works == [5.0]
    assert queue.get() == "ns/a"
    assert waits == [3.0, 5.0, 1.0]
    queue.done("ns/b")
    queue.done("ns/a")
    assert works == [5.0, 1.0, 0.0]
    assert queue.in_progress() == []


def test_queue_series_in_the_controllers_registry(clock):
    """Metrics.queue binds a queue to client-go's workqueue_* series with controller-runtime's
    `name` and `controller` labels; the work-in-progress gauges are read at scrape time, and the
    registry has prometheus-client's process and garbage-collector series too."""
    from prometheus_client import generate_latest

    from taskfsm.manager.metrics import Metrics

    metrics = Metrics()
    queue = WorkQueue(clock=clock, metrics=metrics.queue("workflow"))
    queue.add("ns/a")
    clock.now += 0.5
    queue.get()
    clock.now += 30.0
    text = generate_latest(metrics.registry).decode()
    labels = '{controller="workflow",name="workflow"}'
    assert f"workqueue_adds_total{labels} 1.0" in text
    assert f"workqueue_queue_duration_seconds_count{labels} 1.0" in text
    assert f"workqueue_queue_duration_seconds_sum{labels} 0.5" in text
    assert f"workqueue_unfinished_work_seconds{labels} 30.0" in text
    assert f"workqueue_longest_running_processor_seconds{labels} 30.0" in text
    queue.done("ns/a")
    text = generate_latest(metrics.registry).decode()
    assert f"workqueue_work_duration_seconds_sum{labels} 30.0" in text
    assert f"workqueue_longest_running_processor_seconds{labels} 0.0" in text
    for family in ("process_resident_memory_bytes", "process_cpu_seconds_total"):
        assert f"\n{family} " in text
    assert 'python_gc_collections_total{generation="0"}' in text


def test_idle_means_nothing_queued_and_nothing_in_work(queue):
    assert queue.idle()
    queue.add("ns/a")
    assert not queue.idle()
    key = queue.get()
    assert not queue.idle()  # a worker holds it
    queue.done(key)
    assert queue.idle()
    queue.add_after("ns/b", 30.0)
    assert queue.idle()  # a delayed key is not work yet


def test_an_earlier_time_replaces_a_later_one_which_then_adds_nothing(queue, clock):
    """A key has one look-again time: asked for 300 s and then 50 s, it comes back at 50 s and
    not again at 300 s (the later entry fired too, a second reconcile for nothing)."""
    queue.add_after("ns/a", 300)
    queue.add_after("ns/a", 50)
    clock.now += 50
    assert queue.get(timeout=0) == "ns/a"
    queue.done("ns/a")
    clock.now += 300
    assert queue.get(timeout=0) is None


def test_a_key_taken_for_an_event_drops_the_look_again_asked_for_before(queue, clock):
    """Its reconcile answers when to look again (the chart's requeue_after), replacing the time
    an earlier reconcile asked for: a burst longer than the resync period no longer reconciles
    every Task once more at the old time."""
    queue.add_after("ns/a", 300)
    queue.add("ns/a")  # an event
    assert queue.get(timeout=0) == "ns/a"
    queue.done("ns/a")  # this reconcile asked for nothing more
    clock.now += 300
    assert queue.get(timeout=0) is None


def test_a_look_again_asked_for_while_the_key_runs_is_kept(queue, clock):
    queue.add("ns/a")
    assert queue.get(timeout=0) == "ns/a"
    queue.add_after("ns/a", 10)  # the reconcile's own answer
    queue.done("ns/a")
    assert queue.get(timeout=0) is None
    clock.now += 10
    assert queue.get(timeout=0) == "ns/a"
