"""How ``pytest -n N`` (pytest-xdist) shares the suite between its workers, and in what order.

pytest-xdist's ``loadscope`` keeps a module's tests on one worker (module- and session-scoped
fixtures are set up once), but it orders work by the number of tests in a module, so a worker could
take a thousand quick unit tests first and leave a 4-minute benchmark for the end. This scheduler
keeps ``loadscope``'s guarantees and changes the unit of work and its order (docs/testing.md):

- the tiers with a control plane or a node of their own (``node``, ``faults``, ``security``) run
  whole on one worker: their session fixtures (a real node, a control plane, a controller process)
  are then started once, not once per worker;
- ``bench`` smoke tests are one unit each: each starts its own control plane and is the longest
  single piece of work;
- every other module is a unit, as with ``loadscope``;
- units go out longest tier first (:data:`TIER_ORDER`, measured per tier), so the end of the run is
  the many short modules that balance the workers, not one long test on one worker.

``loadgroup`` (``xdist_group`` marks) would group tiers too, but with pytest 9.2 its marks do not
reach the scheduler (pytest-xdist issue 1386), so the grouping is decided here from the path.
"""

from __future__ import annotations

from pathlib import PurePosixPath

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling

TIER_ORDER = ("bench", "node", "faults", "security", "e2e", "integration", "machines", "unit")
"""Tiers in the order their work goes out: the longest first (docs/testing.md has the figures)."""

WHOLE_TIERS = frozenset({"node", "faults", "security"})
SPLIT_TIERS = frozenset({"bench"})


def tier_of(path: str) -> str:
    """The tier of a test path or node id (``tests/<tier>/...``); ``unit`` for anything else."""
    parts = PurePosixPath(path.split("::", 1)[0]).parts
    if len(parts) >= 2 and parts[0] == "tests" and parts[1] in TIER_ORDER:
        return parts[1]
    return "unit"


def tier_rank(path: str) -> int:
    return TIER_ORDER.index(tier_of(path))


class TierScheduling(LoadScopeScheduling):
    """``loadscope`` with tiers as units where fixtures are shared tier-wide, in tier order."""

    def __init__(self, config: pytest.Config, log: Producer | None = None) -> None:
        super().__init__(config, log)
        # The collection is already in tier order (tests/conftest.py); keep it.
        config.option.loadscopereorder = False

    def _split_scope(self, nodeid: str) -> str:
        tier = tier_of(nodeid)
        if tier in WHOLE_TIERS:
            return f"tests/{tier}"
        if tier in SPLIT_TIERS:
            return nodeid
        return super()._split_scope(nodeid)
