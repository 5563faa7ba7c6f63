"""Scenario tests: the Task lifecycle stepped pass by pass through `scenarios/*.yaml`.

Each scenario is a story of reconcile passes (see `lifecycle_harness`); together they must
take every transition of the chart at least once. The coverage figure is printed in the
terminal summary, and `test_transition_coverage_is_complete` fails below 100 %.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import lifecycle_harness
import pytest

from machines import chart_data
from machines.task.chart import TaskLifecycle

SCENARIOS = lifecycle_harness.load_scenarios()


@pytest.mark.parametrize("scenario", [s for _, s in SCENARIOS], ids=[i for i, _ in SCENARIOS])
def test_scenario(scenario: dict[str, Any]) -> None:
    """The scenario's passes decide exactly the phases, effects and errors it expects."""
    lifecycle_harness.run_scenario(scenario)


def test_transition_coverage_is_complete(record_property: Callable[[str, object], None]) -> None:
    """Every transition of the chart is taken by at least one scenario pass."""
    taken: set[str] = set()
    for _, scenario in SCENARIOS:
        for outcome in lifecycle_harness.run_scenario(scenario):
            taken.update(outcome.transitions)
    every = [t.key for t in chart_data.transitions(TaskLifecycle)]
    unknown = taken - set(every)
    assert not unknown, f"scenarios took transitions the catalogue does not know: {unknown}"
    covered = [key for key in every if key in taken]
    figure = f"{len(covered)}/{len(every)} transitions ({100 * len(covered) / len(every):.1f} %)"
    record_property("summary", f"Task lifecycle transition coverage: {figure}")
    print(f"transition coverage: {figure}")
    missing = [key for key in every if key not in taken]
    assert not missing, "transitions no scenario takes:\n  " + "\n  ".join(missing)
