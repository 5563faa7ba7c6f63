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
    glibc's ``malloc_trim(0)`` once the start-up pass over every Task has drained.

Environment variables of glibc's allocator (``MALLOC_ARENA_MAX`` and friends) need no hook: the
benchmark sets them on the child directly.
"""

from __future__ import annotations

import os

_LEVERS = frozenset(filter(None, os.environ.get("TASKFSM_BENCH_MEMORY", "").split(",")))


def _install(levers: frozenset[str]) -> None:
    import ctypes
    import gc
    import threading
    import time

    from taskfsm.manager import manager

    try:
        from taskfsm.manager import memory
    except ImportError:  # a build without the levers
        memory = None

    if "shipped" in levers:
        return
    if memory is not None:
        # Start from nothing: the variant's own levers below are the only ones.
        memory.settle_after_start = lambda queues, **kwargs: None  # type: ignore[assignment]
        memory.limit_arenas = lambda arenas=2: False  # type: ignore[assignment]

    original = manager.Manager.start

    def start(self: manager.Manager) -> manager.Manager:
        result = original(self)
        if "freeze" in levers:
            gc.freeze()
        if "trim" in levers:
            threading.Thread(target=_trim_when_idle, args=(self,), daemon=True).start()
        return result

    def _trim_when_idle(ctl: manager.Manager) -> None:
        quiet_since = None
        while True:
            time.sleep(0.5)
            queues = (ctl.queue, ctl.workflow_queue, ctl.mpe_queue)
            busy = not all(q.idle() for q in queues)
            if busy:
                quiet_since = None
                continue
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since >= 1.0:
                ctypes.CDLL("libc.so.6").malloc_trim(0)
                return

    manager.Manager.start = start  # type: ignore[method-assign]


if _LEVERS:
    _install(_LEVERS)
