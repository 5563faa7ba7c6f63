"""Tasks waiting for a MediaProcessingEntity whose client is still being set up.

A Task whose MPE client is not ready yet (a new MPE, a controller that just started) cannot go
on; rather than polling, its reconcile registers the Task key here and ends quietly, and the
MPE reconcile wakes every waiter the moment that MPE is set up or found unusable, so the Task
is reconciled at once (an event, not a timeout). Registering first and checking the MPE second
leaves no gap in which a wake-up could be missed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

Key = tuple[str, str, str]
"""(kind, namespace or "", name) of a MediaProcessingEntity."""


class MpeWaiters:
    """Task keys waiting per MediaProcessingEntity key; ``wake`` hands them to ``enqueue``."""

    def __init__(self, enqueue: Callable[[str], None]) -> None:
        self._enqueue = enqueue
        self._waiting: dict[Key, set[str]] = {}
        self._lock = threading.Lock()

    def add(self, mpe: Key, task_key: str) -> None:
        with self._lock:
            self._waiting.setdefault(mpe, set()).add(task_key)

    def discard(self, mpe: Key, task_key: str) -> None:
        with self._lock:
            keys = self._waiting.get(mpe)
            if keys is not None:
                keys.discard(task_key)
                if not keys:
                    del self._waiting[mpe]

    def wake(self, mpe: Key) -> int:
        """Queue every Task waiting for ``mpe``; returns how many."""
        with self._lock:
            keys = self._waiting.pop(mpe, set())
        for key in sorted(keys):
            self._enqueue(key)
        return len(keys)

    def waiting(self) -> Iterable[Key]:
        with self._lock:
            return list(self._waiting)
