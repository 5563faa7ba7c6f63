"""The work queue between the watch loop and the reconcile workers.

Semantics follow client-go's rate-limited delaying queue, which every Go controller relies on:

* a key (``namespace/name``) is queued at most once however many events name it (de-duplication);
* a key being reconciled is never handed to a second worker; if it is added meanwhile it is queued
  again when the first worker calls :meth:`WorkQueue.done` (one reconcile per Task at a time);
* :meth:`WorkQueue.add_rate_limited` re-adds a failed key after a per-key exponential backoff with
  jitter (``base_delay`` · 2^failures, capped at ``max_delay``); :meth:`WorkQueue.forget` resets it;
* :meth:`WorkQueue.add_after` re-adds a key after a delay (a guard waiting on time); a key has one
  such time, the earliest asked for.

One departure, because every reconcile returns when it wants to look again (the chart's
``requeue_after``, or a backoff): a key's pending delayed add is dropped when a worker takes the
key, so a Task reconciled for an event is not reconciled again when the look-again time an
earlier reconcile asked for comes (that reconcile's answer replaces it). Without it, a burst
longer than the resync period reconciled every Task once more for nothing (docs/benchmarks.md).

Unlike client-go's single FIFO, keys ready to run are served **fairly across namespaces** (the
part of a key before its first ``/``; docs/operations.md, "Fair share across namespaces"): each
namespace with waiting keys has a FIFO of its own, and the namespaces take turns, round robin,
each serving up to its weight (default 1) of keys per turn. A tenant that queues 5,000 keys thus
delays another tenant's next key by at most one turn, not by 5,000 keys. An optional cap on the
keys of one namespace being reconciled at once (``max_in_flight_per_namespace``) keeps one
namespace from holding every worker; a namespace at its cap is skipped until one of its keys is
done. ``fair=False`` restores one FIFO for every key (client-go's order).

Its metrics are client-go's (:class:`QueueMetrics`): depth, adds, retries, how long a key waited
between its add and a worker taking it, how long the worker took until :meth:`WorkQueue.done`,
and the work still in progress (:meth:`WorkQueue.in_progress`, read at scrape time).

Time is injected (``clock``) so tests move it by hand instead of sleeping.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from taskfsm.kube.jitter import uniform


class ShutDown(Exception):
    """Raised by :meth:`WorkQueue.get` once the queue is shut down and drained."""


@dataclass
class QueueMetrics:
    """Hooks called by the queue; the runtime binds them to Prometheus (no-ops by default)."""

    on_add: Callable[[], None] = lambda: None
    on_retry: Callable[[], None] = lambda: None
    on_depth: Callable[[int], None] = lambda depth: None
    on_wait: Callable[[float], None] = lambda seconds: None
    """A worker took a key: seconds since it was added (client-go's queue duration)."""
    on_work: Callable[[float], None] = lambda seconds: None
    """A worker finished a key (:meth:`WorkQueue.done`): seconds since it took it."""
    on_queue: Callable[[Callable[[], list[float]]], None] = lambda in_progress: None
    """Called once with the queue's :meth:`WorkQueue.in_progress`, for scrape-time gauges."""
    on_namespaces: Callable[[Callable[[], dict[str, int]]], None] = lambda depths: None
    """Called once with the queue's :meth:`WorkQueue.depth_by_namespace`, for scrape-time
    gauges (the metrics keep only the deepest namespaces: bounded label cardinality)."""


@dataclass
class WorkQueue:
    """A de-duplicating, rate-limited, delaying queue of string keys.

    Args:
        base_delay: first retry delay in seconds (default 5 ms, like controller-runtime).
        max_delay: cap on the retry delay in seconds (default 1000 s ≈ 16.7 min).
        jitter: the retry delay is multiplied by a random factor in ``[1, 1 + jitter)``.
        clock: monotonic seconds; injected by tests.
        fair: serve namespaces round robin (False: one FIFO for every key).
        weights: keys a namespace is served per turn (default 1 for a namespace not named).
        max_in_flight_per_namespace: keys of one namespace being reconciled at once, at most
            (0: no cap).
    """

    base_delay: float = 0.005
    max_delay: float = 1000.0
    jitter: float = 0.1
    clock: Callable[[], float] = time.monotonic
    metrics: QueueMetrics = field(default_factory=QueueMetrics)
    fair: bool = True
    weights: Mapping[str, int] = field(default_factory=dict)
    max_in_flight_per_namespace: int = 0
    _queues: dict[str, deque[str]] = field(default_factory=dict, init=False)
    """Keys ready to run, by namespace (one FIFO each; ``""`` holds every key when not fair)."""
    _turns: deque[str] = field(default_factory=deque, init=False)
    """The namespaces with ready keys, in the order they take their turns (the head's turn now)."""
    _served: int = field(default=0, init=False)
    """Keys the head of ``_turns`` has been served in its current turn."""
    _ready: int = field(default=0, init=False)
    _running: dict[str, int] = field(default_factory=dict, init=False)
    """Keys being processed, by namespace (for the per-namespace cap)."""
    _dirty: set[str] = field(default_factory=set, init=False)
    _processing: set[str] = field(default_factory=set, init=False)
    _failures: dict[str, int] = field(default_factory=dict, init=False)
    _waiting: list[tuple[float, int, str]] = field(default_factory=list, init=False)
    _due: dict[str, float] = field(default_factory=dict, init=False)
    """The earliest time each waiting key is due (an add_after that is not earlier adds nothing)."""
    _added_at: dict[str, float] = field(default_factory=dict, init=False)
    """When each queued (dirty) key was added; a worker taking it reports the wait."""
    _started_at: dict[str, float] = field(default_factory=dict, init=False)
    """When a worker took each key being processed."""
    _seq: itertools.count[int] = field(default_factory=itertools.count, init=False)
    _cv: threading.Condition = field(default_factory=threading.Condition, init=False)
    _shutting_down: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        for namespace, weight in self.weights.items():
            if weight < 1:
                raise ValueError(f"namespace {namespace!r}: a weight must be at least 1")
        if self.max_in_flight_per_namespace < 0:
            raise ValueError("max_in_flight_per_namespace must not be negative")
        self.metrics.on_queue(self.in_progress)
        self.metrics.on_namespaces(self.depth_by_namespace)

    # -- producers -------------------------------------------------------------------------------

    def add(self, key: str) -> None:
        """Queue ``key`` now unless it is already queued (a running key is re-queued on done)."""
        with self._cv:
            self._add_locked(key)

    def add_after(self, key: str, delay: float) -> None:
        """Queue ``key`` after ``delay`` seconds (immediately when ``delay <= 0``)."""
        with self._cv:
            if self._shutting_down:
                return
            if delay <= 0:
                self._add_locked(key)
                return
            due = self.clock() + delay
            if self._due.get(key, float("inf")) <= due:
                return  # already coming back as soon: many delayed adds coalesce into one
            self._due[key] = due
            heapq.heappush(self._waiting, (due, next(self._seq), key))
            self._cv.notify_all()

    def add_rate_limited(
        self, key: str, max_delay: float | None = None, min_delay: float | None = None
    ) -> float:
        """Queue ``key`` after its backoff; each call doubles the next delay. Returns the delay.

        ``max_delay`` caps this retry lower than the queue's cap (failures of the API rather
        than of the object are retried within seconds once the API is back); ``min_delay`` is
        a floor, e.g. the API server's ``Retry-After`` (never retried sooner than it asks)."""
        with self._cv:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
        cap = self.max_delay if max_delay is None else min(max_delay, self.max_delay)
        delay = min(self.base_delay * (2.0 ** min(failures, 64)), cap)
        delay *= 1 + uniform(0.0, self.jitter)
        if min_delay is not None:
            delay = max(delay, min_delay)
        self.metrics.on_retry()
        self.add_after(key, delay)
        return delay

    def forget(self, key: str) -> None:
        """Reset ``key``'s backoff (call after a successful reconcile)."""
        with self._cv:
            self._failures.pop(key, None)

    def retry_failed_now(self) -> int:
        """Queue at once every key waiting out a backoff (its failure count is kept): the cause
        may have been an outage that just ended. Returns how many keys were moved."""
        with self._cv:
            due: list[tuple[float, int, str]] = []
            kept: list[tuple[float, int, str]] = []
            for entry in self._waiting:
                (due if entry[2] in self._failures else kept).append(entry)
            if not due:
                return 0
            self._waiting = kept
            heapq.heapify(self._waiting)
            for _, _, key in due:
                self._due.pop(key, None)
            keys = {key for _, _, key in due}
            for key in sorted(keys):
                self._add_locked(key)
            return len(keys)

    def failures(self, key: str) -> int:
        """How many times in a row ``key`` was re-added through :meth:`add_rate_limited`."""
        with self._cv:
            return self._failures.get(key, 0)

    # -- consumers -------------------------------------------------------------------------------

    def get(self, timeout: float | None = None) -> str | None:
        """Take the next key, blocking until one is ready; ``None`` after ``timeout`` seconds.

        The caller must call :meth:`done` with the key when it has finished with it.

        Raises:
            ShutDown: the queue was shut down and nothing is left to hand out.
        """
        deadline = None if timeout is None else self.clock() + timeout
        with self._cv:
            while True:
                self._promote_due_locked()
                key = self._next_locked()
                if key is not None:
                    self._processing.add(key)
                    self._dirty.discard(key)
                    # This reconcile's result replaces the look-again time asked for before.
                    self._due.pop(key, None)
                    namespace = self._namespace(key)
                    self._running[namespace] = self._running.get(namespace, 0) + 1
                    now = self.clock()
                    self._started_at[key] = now
                    self.metrics.on_depth(self._ready)
                    self.metrics.on_wait(now - self._added_at.pop(key, now))
                    return key
                if self._shutting_down and not self._ready:
                    raise ShutDown
                wait = None if deadline is None else deadline - self.clock()
                if self._waiting:
                    due = self._waiting[0][0] - self.clock()
                    wait = due if wait is None else min(wait, due)
                if wait is not None and wait <= 0:
                    if deadline is not None and self.clock() >= deadline:
                        return None
                    continue
                self._cv.wait(wait)

    def done(self, key: str) -> None:
        """Mark ``key`` finished; if it was added while running, queue it again."""
        with self._cv:
            if key in self._processing:
                self._processing.discard(key)
                namespace = self._namespace(key)
                left = self._running.get(namespace, 0) - 1
                if left > 0:
                    self._running[namespace] = left
                else:
                    self._running.pop(namespace, None)
                # A namespace at its cap may take a worker again.
                if self.max_in_flight_per_namespace and self._ready:
                    self._cv.notify()
            started = self._started_at.pop(key, None)
            if started is not None:
                self.metrics.on_work(self.clock() - started)
            if key in self._dirty:
                self._push_locked(key)
                self.metrics.on_depth(self._ready)
                self._cv.notify()

    def shutdown(self) -> None:
        """Stop handing out keys once the queue is empty; delayed keys are dropped."""
        with self._cv:
            self._shutting_down = True
            self._waiting.clear()
            self._due.clear()
            self._cv.notify_all()

    def in_progress(self) -> list[float]:
        """Seconds each key being processed has been with its worker (for client-go's
        ``unfinished_work_seconds``, their sum, and ``longest_running_processor_seconds``)."""
        with self._cv:
            now = self.clock()
            return [now - started for started in self._started_at.values()]

    def depth_by_namespace(self) -> dict[str, int]:
        """Keys ready to run, by namespace (namespaces with none are left out)."""
        with self._cv:
            if self.fair:
                return {ns: len(keys) for ns, keys in self._queues.items() if keys}
            depths: dict[str, int] = {}
            for key in self._queues.get("", ()):
                ns = self._namespace(key)
                depths[ns] = depths.get(ns, 0) + 1
            return depths

    def __len__(self) -> int:
        with self._cv:
            return self._ready

    def idle(self) -> bool:
        """No key is waiting to be handed out and none is being worked on (keys delayed by
        :meth:`add_after` or a backoff do not count)."""
        with self._cv:
            return not self._ready and not self._processing

    # -- internals -------------------------------------------------------------------------------

    def _add_locked(self, key: str) -> None:
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        self._added_at.setdefault(key, self.clock())
        self.metrics.on_add()
        if key in self._processing:
            return  # done() re-queues it, so one key never runs on two workers
        self._push_locked(key)
        self.metrics.on_depth(self._ready)
        self._cv.notify()

    @staticmethod
    def _namespace(key: str) -> str:
        """The namespace of ``key`` (``namespace/name``); a key without ``/`` has none."""
        head, sep, _ = key.partition("/")
        return head if sep else ""

    def _push_locked(self, key: str) -> None:
        """Append ``key`` to its namespace's FIFO; a namespace with no ready keys before takes
        its turn after every namespace already waiting."""
        lane = self._namespace(key) if self.fair else ""
        keys = self._queues.get(lane)
        if keys is None:
            keys = self._queues[lane] = deque()
        if not keys:
            self._turns.append(lane)
        keys.append(key)
        self._ready += 1

    def _next_locked(self) -> str | None:
        """The next key to hand out: the head namespace's oldest key, unless that namespace is
        at its cap (then the next namespace's); the head's turn ends after its weight of keys."""
        cap = self.max_in_flight_per_namespace
        for _ in range(len(self._turns)):
            lane = self._turns[0]
            keys = self._queues[lane]
            if not self.fair and cap:
                key = self._first_uncapped_locked(keys, cap)
                if key is None:
                    return None
                self._ready -= 1
                if not keys:
                    self._turns.popleft()
                    del self._queues[lane]
                return key
            if cap and self._running.get(lane, 0) >= cap:
                self._turns.rotate(-1)  # skipped: its turn comes again once it has room
                self._served = 0
                continue
            key = keys.popleft()
            self._ready -= 1
            self._served += 1
            if not keys:
                self._turns.popleft()
                del self._queues[lane]
                self._served = 0
            elif self._served >= self.weights.get(lane, 1):
                self._turns.rotate(-1)
                self._served = 0
            return key
        return None

    def _first_uncapped_locked(self, keys: deque[str], cap: int) -> str | None:
        """One FIFO with a cap: the oldest key whose namespace has room (taken out)."""
        for index, key in enumerate(keys):
            if self._running.get(self._namespace(key), 0) < cap:
                del keys[index]
                return key
        return None

    def _promote_due_locked(self) -> None:
        now = self.clock()
        while self._waiting and self._waiting[0][0] <= now:
            when, _, key = heapq.heappop(self._waiting)
            if self._due.get(key) != when:
                continue  # replaced by an earlier time, or dropped when a worker took the key
            del self._due[key]
            self._add_locked(key)
