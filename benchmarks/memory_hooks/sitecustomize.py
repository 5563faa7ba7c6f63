"""Benchmark-only start-up hook of the ``taskfsm run`` processes ``benchmarks/bench_memory.py``
starts: it switches memory levers on or off in that child process, so one controller build is
measured with and without each of them.

Python imports ``sitecustomize`` at start-up from ``sys.path``; the benchmark puts this directory
on the child's ``PYTHONPATH`` and names the levers in ``TASKFSM_BENCH_MEMORY`` (comma-separated):

``shipped``
    the controller as it is (the levers ``taskfsm.manager.memory`` applies stay on);
``none``
    every lever of ``taskfsm.manager.memory`` off (the controller before them);
``freeze``
    ``gc.freeze()`` once the caches have synced;
``trim``
    glibc's ``malloc_trim(0)`` once the start-up pass over every Task has drained;
``traced``
    the controller as shipped, its allocations traced from start-up (``tracemalloc``); once the
    start-up pass has drained, the live memory by source line goes to the JSON file
    ``TASKFSM_BENCH_TRACEMALLOC`` names (where the memory is, not how much: tracing adds its own).

Environment variables of glibc's allocator (``MALLOC_ARENA_MAX`` and friends) need no hook: the
benchmark sets them on the child directly.
"""

from __future__ import annotations

import os
from typing import Any

_LEVERS = frozenset(filter(None, os.environ.get("TASKFSM_BENCH_MEMORY", "").split(",")))


def _install(levers: frozenset[str]) -> None:
    import ctypes
    import gc

    if "traced" in levers:
        import tracemalloc

        tracemalloc.start()  # before the controller's modules are imported

    from taskfsm.manager import manager

    try:
        from taskfsm.manager import memory
    except ImportError:  # a build without the levers
        memory = None

    if "traced" in levers:
        _after_start(manager, lambda ctl: _in_thread(_dump_when_idle, ctl))
        return
    if "shipped" in levers:
        return
    if memory is not None:
        # Start from nothing: the variant's own levers below are the only ones.
        memory.settle_after_start = lambda queues, **kwargs: None  # type: ignore[assignment]
        memory.limit_arenas = lambda arenas=2: False  # type: ignore[assignment]

    def _trim_when_idle(ctl: Any) -> None:
        _wait_idle(ctl)
        ctypes.CDLL("libc.so.6").malloc_trim(0)

    def after(ctl: Any) -> None:
        if "freeze" in levers:
            gc.freeze()
        if "trim" in levers:
            _in_thread(_trim_when_idle, ctl)

    _after_start(manager, after)


def _in_thread(target: Any, ctl: Any) -> None:
    import threading

    threading.Thread(target=target, args=(ctl,), daemon=True).start()


def _after_start(manager: Any, then: Any) -> None:
    original = manager.Manager.start

    def start(self: Any) -> Any:
        result = original(self)
        then(self)
        return result

    manager.Manager.start = start


def _wait_idle(ctl: Any) -> None:
    """Until the manager's queues have been idle for a second (the start-up pass drained)."""
    import time

    quiet_since = None
    while True:
        time.sleep(0.5)
        queues = (ctl.queue, ctl.workflow_queue, ctl.mpe_queue)
        if not all(q.idle() for q in queues):
            quiet_since = None
            continue
        quiet_since = quiet_since or time.monotonic()
        if time.monotonic() - quiet_since >= 1.0:
            return


def _dump_when_idle(ctl: Any) -> None:
    import json
    import tracemalloc

    _wait_idle(ctl)
    snapshot = tracemalloc.take_snapshot()
    by_line = snapshot.statistics("lineno")
    by_file = snapshot.statistics("filename")
    out = {
        "total_bytes": sum(s.size for s in by_file),
        "lines": [[str(s.traceback[0]), s.size, s.count] for s in by_line[:40]],
        "files": [[s.traceback[0].filename, s.size, s.count] for s in by_file[:25]],
    }
    path = os.environ["TASKFSM_BENCH_TRACEMALLOC"]
    with open(f"{path}.part", "w") as f:
        json.dump(out, f)
    os.replace(f"{path}.part", path)  # whole or absent: the benchmark waits for it


if _LEVERS:
    _install(_LEVERS)
