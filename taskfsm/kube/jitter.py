"""Random jitter for retries, watch timeouts and election rounds.

The controller draws from its own generator, never from the process-wide `random` state: that
state belongs to whatever program embeds the controller (the demo, a test run), and moving it from
background threads makes such a program's own random draws depend on our timing.
"""

from __future__ import annotations

import random

_SOURCE = random.Random()


def uniform(low: float, high: float) -> float:
    """A random float in ``[low, high]`` from the controller's own generator."""
    return _SOURCE.uniform(low, high)
