"""Polling helper for tests, the demo and benchmarks: wait until a condition holds."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    probe: Callable[[], T | None], *, timeout: float = 60.0, interval: float = 0.2, what: str = ""
) -> T:
    """Call ``probe`` until it returns something truthy; return that value.

    Raises ``TimeoutError`` after ``timeout`` seconds, naming ``what`` and the last value seen.
    Exceptions from ``probe`` propagate (a probe that may fail transiently should catch them).
    """
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what or probe!r}; last: {last!r}")
        time.sleep(interval)
