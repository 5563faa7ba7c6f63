"""How many examples the suite's property tests draw (docs/testing.md, "Property tests").

The counts written in the tests are sized for ``make test`` on CI's two cores: the round trips
over the CRDs' generated documents and the strategic merge properties were two thirds of the
unit tier's time at the counts before. ``TASKFSM_EXAMPLES=N`` multiplies every count, for a run
that explores more (``TASKFSM_EXAMPLES=10 make test-fast``); a failure found that way is kept
in Hypothesis's example database and replayed first on the next run.
"""

from __future__ import annotations

import os

SCALE = float(os.environ.get("TASKFSM_EXAMPLES", "1"))


def examples(count: int) -> int:
    """``count`` as this run's scale makes it (at least 1)."""
    return max(1, round(count * SCALE))
