"""benchmarks/bench_controller.py states each target against its figure; a steady row whose
cluster fell behind the arrival rate is not held against the controller's latency target."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_controller import _verdicts  # noqa: E402 (the benchmarks folder is on sys.path)


def steady(tput: float, p99: float) -> dict[tuple[str, int, int], dict[str, Any]]:
    return {("steady 50/s", 1000, 16): {"tput_job": tput, "job_p99": p99, "api_write_p99": 0.2}}


def test_a_steady_row_that_kept_up_is_met_or_not_by_its_p99() -> None:
    assert _verdicts(steady(49.0, 0.3), [])[-1].endswith("**met**.")
    assert _verdicts(steady(49.0, 2.0), [])[-1].endswith("**NOT met**.")


def test_a_steady_row_whose_cluster_fell_behind_is_not_testable() -> None:
    line = _verdicts(steady(38.3, 5.6), [])[-1]
    assert "**not testable here** (the cluster fell behind the 50/s arriving)" in line
    assert "NOT met" not in line
