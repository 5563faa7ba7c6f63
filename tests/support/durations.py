"""Per-tier time and run-to-run spread of ``make test`` runs, from their JUnit XML files.

``make test`` keeps every test's duration in ``test-artefacts/junit.xml``; keep one file per run
and compare them (docs/testing.md)::

    python -m tests.support.durations run1.xml run2.xml run3.xml

prints, per tier, the tests and the summed test time of each run, then the tests whose duration
varies more than x3 between runs (each needs a reason in docs/testing.md). Test time summed over
xdist workers is more than the run's wall-clock time; the run's own time is pytest's last line.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

from tests.support.scheduling import TIER_ORDER, tier_of

SPREAD = 3.0
FLOOR = 1.0
"""Tests shorter than this (seconds) in every run are not compared: their spread is noise."""


def durations(path: Path) -> dict[str, float]:
    """Test id → seconds (setup, call and teardown) of one JUnit XML file."""
    times: dict[str, float] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        module = case.get("classname", "").replace(".", "/")
        times[f"{module}::{case.get('name')}"] = float(case.get("time", "0"))
    return times


def tier(test_id: str) -> str:
    return tier_of(test_id.split("::", 1)[0] + ".py")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="JUnit XML files, one per run")
    args = parser.parse_args(argv)
    runs = [durations(path) for path in args.runs]
    print("| tier | tests | " + " | ".join(f"run {i + 1} (s)" for i in range(len(runs))) + " |")
    print("|---|---|" + "---|" * len(runs))
    for name in TIER_ORDER:
        per_run = [{t: s for t, s in run.items() if tier(t) == name} for run in runs]
        count = len(per_run[0])
        sums = " | ".join(f"{sum(r.values()):.0f}" for r in per_run)
        print(f"| {name} | {count} | {sums} |")
    spread: dict[str, list[float]] = defaultdict(list)
    for run in runs:
        for test, seconds in run.items():
            spread[test].append(seconds)
    varying = [
        (max(s) / max(min(s), 0.01), test, s)
        for test, s in spread.items()
        if len(s) == len(runs) and max(s) >= FLOOR and max(s) > SPREAD * min(s)
    ]
    print(f"\ntests whose duration varies more than x{SPREAD:g} between runs: {len(varying)}")
    for ratio, test, s in sorted(varying, reverse=True):
        print(f"  x{ratio:.1f} {test}: " + ", ".join(f"{x:.1f}" for x in s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
