"""taskfsm.manager.memory: free heap goes back to the system once the work queues have drained
(the start-up pass), again after later work, never while a worker is busy, at most every
MIN_INTERVAL seconds; nothing runs where the C library cannot trim."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from taskfsm.manager import memory
from taskfsm.manager.queue import WorkQueue


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch):
    monkeypatch.setattr(memory, "POLL_SECONDS", 0.01)


def wait_for(predicate, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_trims_after_the_work_drained_and_again_after_later_work():
    clock, queue, stopped, trims = Clock(), WorkQueue(), threading.Event(), []
    queue.add("ns/a")  # the start-up pass
    memory.settle_after_start(
        [queue], stopped=stopped, trim=lambda: trims.append(clock()) or 1, clock=clock
    )
    try:
        time.sleep(0.1)
        clock.now += 10
        time.sleep(0.1)
        assert trims == []  # work is waiting
        key = queue.get()
        clock.now += 10
        time.sleep(0.1)
        assert trims == []  # a worker is busy
        queue.done(key)
        time.sleep(0.05)  # idle from now on...
        clock.now += memory.QUIET_SECONDS
        wait_for(lambda: len(trims) == 1)  # ...long enough
        clock.now += 5
        time.sleep(0.1)
        assert len(trims) == 1  # nothing happened since: no second trim
        queue.add("ns/b")  # later work, done within MIN_INTERVAL of the trim
        key = queue.get()
        time.sleep(0.05)
        queue.done(key)
        time.sleep(0.05)
        clock.now += memory.QUIET_SECONDS
        time.sleep(0.1)
        assert len(trims) == 1
        clock.now += memory.MIN_INTERVAL
        wait_for(lambda: len(trims) == 2)
    finally:
        stopped.set()


def test_no_thread_without_malloc_trim(monkeypatch):
    monkeypatch.setattr(memory, "malloc_trim", lambda: None)
    assert memory.settle_after_start([WorkQueue()]) is None


def test_glibc_trim_is_found_and_runs():
    trim = memory.malloc_trim()
    assert trim is not None  # this project runs on glibc (Debian)
    assert trim() in (0, 1)


def test_glibc_heaps_can_be_capped():
    assert memory.limit_arenas(memory.ARENAS, environ={})  # mallopt accepted M_ARENA_MAX (glibc)


def test_an_operators_malloc_arena_max_wins(monkeypatch):
    """MALLOC_ARENA_MAX in the environment (the Pod's env, chart value extraEnv) is the
    operator's choice: the controller's own cap is not applied over it (mallopt is not called);
    an empty value counts as unset."""
    calls = []
    monkeypatch.setattr(memory.ctypes, "CDLL", lambda name: calls.append(name))
    assert memory.limit_arenas(environ={"MALLOC_ARENA_MAX": "4"}) is False
    assert calls == []
    memory.limit_arenas(environ={"MALLOC_ARENA_MAX": ""})
    assert len(calls) == 1  # unset: the default cap is applied


@pytest.mark.parametrize(
    ("content", "limit"),
    [
        ("536870912\n", 536870912),  # cgroup v2 memory.max, or v1 limit_in_bytes
        ("max\n", None),  # cgroup v2 without a limit
        ("9223372036854771712\n", None),  # cgroup v1 without a limit (page-rounded 2**63 - 1)
        ("garbage\n", None),
    ],
)
def test_the_memory_limit_is_read_from_the_cgroup(
    tmp_path: Path, content: str, limit: int | None
) -> None:
    path = tmp_path / "memory.max"
    path.write_text(content)
    assert memory.memory_limit([tmp_path / "absent", path]) == limit


def test_without_a_cgroup_file_there_is_no_limit(tmp_path: Path) -> None:
    assert memory.memory_limit([tmp_path / "absent"]) is None


def test_the_limit_gauge_has_a_sample_only_with_a_limit() -> None:
    from taskfsm.manager.metrics import _MemoryLimit

    (with_limit,) = _MemoryLimit(lambda: 1024).collect()
    assert [s.value for s in with_limit.samples] == [1024.0]
    (without,) = _MemoryLimit(lambda: None).collect()
    assert without.samples == []
