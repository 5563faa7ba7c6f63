"""Polling helper for tests, the demo and benchmarks: wait until a condition holds."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    probe: Callable[[], T | None],
    *,
    timeout: float = 60.0,
    interval: float = 0.2,
    what: str | Callable[[], str] = "",
) -> T:
    """Call ``probe`` until it returns something truthy; return that value.

    Raises ``TimeoutError`` after ``timeout`` seconds, naming ``what`` and the last value seen;
    ``what`` may be a callable, called only then, to describe the state that was not reached.
    Exceptions from ``probe`` propagate (a probe that may fail transiently should catch them).
    """
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() >= deadline:
            described = what() if callable(what) else what
            raise TimeoutError(
                f"timed out after {timeout:.0f}s waiting for {described or probe!r}; last: {last!r}"
            )
        time.sleep(interval)
