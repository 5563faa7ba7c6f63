"""Keeping the controller's heap small: fewer glibc heaps, and memory given back to the system once
the work has drained (docs/operations.md, "Memory"; docs/performance.md, "Memory levers", has the
measurements, including the levers measured and not adopted).

At start-up every Task is reconciled once; with 10,000 Tasks that pass allocates and frees
hundreds of MiB of short-lived objects (decoded answers, copies, observations) between the
objects that stay (the caches). glibc's allocator keeps freed memory in its heaps for reuse
instead of returning it, and by default gives threads that allocate at the same time heaps
(arenas) of their own, up to 8 per core, each with its own free memory.

* :func:`limit_arenas` caps the heaps at :data:`ARENAS` before any thread starts, so what one
  thread freed is reused by the others instead of sitting in a heap of its own; an operator's
  ``MALLOC_ARENA_MAX`` in the container's environment (which glibc applied at start) wins;
* :func:`settle_after_start` runs a daemon thread that calls ``malloc_trim(0)`` (the free pages
  of every heap go back to the kernel, ``madvise``; a page needed later comes back on demand)
  once the work queues have been empty and every worker idle for :data:`QUIET_SECONDS`: after
  the start-up pass, and again after each later burst of work, at most every
  :data:`MIN_INTERVAL` seconds. A trim walks the heaps and holds their locks meanwhile, so it
  never runs while workers are busy.

Where the C library has neither function (musl, macOS), nothing happens.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

log = logging.getLogger(__name__)

QUIET_SECONDS = 1.0
"""How long the queues must have been idle before a trim."""

MIN_INTERVAL = 60.0
"""Seconds between two trims at least (a steady trickle of work trims at most this often)."""

POLL_SECONDS = 0.5
"""How often the thread looks at the queues."""


class _Queue(Protocol):
    def idle(self) -> bool: ...


def malloc_trim() -> Callable[[], int] | None:
    """glibc's ``malloc_trim(0)`` as a callable (returns 1 when memory was released), or None
    where the C library has none."""
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        function = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_size_t]
    function.restype = ctypes.c_int
    return lambda: int(function(0))


M_ARENA_MAX = -8
"""glibc's ``mallopt`` parameter for the most heaps (arenas) threads may spread over."""

ARENAS = 2
"""The arenas the controller allows itself (glibc's default is 8 per core)."""

ARENA_ENV = "MALLOC_ARENA_MAX"
"""glibc's environment variable for the same cap: set, it is the operator's choice and wins."""


def limit_arenas(arenas: int = ARENAS, environ: Mapping[str, str] = os.environ) -> bool:
    """Cap glibc's heaps at ``arenas`` (call before threads start); False where the C library
    has no ``mallopt``, and False without touching the cap when ``environ`` sets
    ``MALLOC_ARENA_MAX`` (glibc read it at start: the operator's value stays). With glibc's
    default, every thread that allocates while another holds the main heap's lock gets a heap of
    its own, up to 8 per core; each keeps its own free memory, and a controller whose 16 workers
    and a dozen watch threads all allocate ends up with many half-empty heaps
    (docs/performance.md, "Memory levers")."""
    if environ.get(ARENA_ENV, "").strip():
        return False
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, arenas))


def settle_after_start(
    queues: Sequence[_Queue],
    *,
    stopped: threading.Event | None = None,
    trim: Callable[[], int] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> threading.Thread | None:
    """Start the trimming thread watching the controller's work ``queues`` (see the module
    docstring); None when the C library cannot trim. ``stopped`` ends the thread; ``trim`` and
    ``clock`` are for tests."""
    trim = trim or malloc_trim()
    if trim is None:
        return None
    thread = threading.Thread(
        target=_trim_when_idle,
        args=(tuple(queues), trim, stopped or threading.Event(), clock),
        name="memory-trim",
        daemon=True,
    )
    thread.start()
    return thread


def _trim_when_idle(
    queues: Sequence[_Queue],
    trim: Callable[[], int],
    stopped: threading.Event,
    clock: Callable[[], float],
) -> None:
    quiet_since: float | None = None
    last_trim: float | None = None
    busy_since_trim = True  # the start-up pass counts as work
    while not stopped.wait(POLL_SECONDS):
        if not all(queue.idle() for queue in queues):
            quiet_since = None
            busy_since_trim = True
            continue
        now = clock()
        quiet_since = quiet_since if quiet_since is not None else now
        due = last_trim is None or now - last_trim >= MIN_INTERVAL
        if busy_since_trim and due and now - quiet_since >= QUIET_SECONDS:
            started = clock()
            released = trim()
            last_trim = clock()
            busy_since_trim = False
            log.debug(
                "returned free heap memory to the system",
                extra={"released": bool(released), "seconds": round(last_trim - started, 4)},
            )


CGROUP_LIMIT_FILES = (
    Path("/sys/fs/cgroup/memory.max"),  # cgroup v2 (the container's own cgroup is the root)
    Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),  # cgroup v1
)
UNLIMITED_V1 = 1 << 62
"""cgroup v1 shows "no limit" as a page-rounded 2**63 - 1; anything at or above this is none."""


def memory_limit(files: Sequence[Path] = CGROUP_LIMIT_FILES) -> int | None:
    """The memory limit of the container the process runs in (bytes), or None without one.

    Read from the cgroup at each call (a scrape), so the gauge follows an in-place resize; the
    alert on ``process_resident_memory_bytes`` against it needs nothing but the controller's own
    metrics (no kube-state-metrics)."""
    for path in files:
        try:
            text = path.read_text(encoding="ascii").strip()
        except OSError:
            continue
        if text == "max":
            return None
        try:
            limit = int(text)
        except ValueError:
            return None
        return limit if 0 < limit < UNLIMITED_V1 else None
    return None
