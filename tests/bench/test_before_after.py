"""benchmarks/before_after.py renders issue 31's before/after rows from recorded runs: medians
per commit, every run listed, the ratio, and the after commit's profile."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import before_after  # noqa: E402 (the benchmarks folder is on sys.path)
from harness import RunResult  # noqa: E402 (the benchmarks folder is on sys.path)


def run(cpu: float, plane: float) -> RunResult:
    return RunResult(
        scenario="burst (profiled)",
        n=1000,
        workers=16,
        rate=None,
        job_latency={"p50": 1.0, "p95": 2.0, "p99": 3.0},
        done_latency={"p50": 2.0, "p95": 3.0, "p99": 4.0},
        throughput_job=30.0,
        throughput_done=25.0,
        wall_seconds=40.0,
        workflow_seconds=41.0,
        rss_end_mib=90.0,
        hwm_mib=95.0,
        api_rows={"POST batch jobs ": 1000, "PATCH engine.nagare.media tasks status": 2000},
        cpu_ms_per_task=cpu,
        plane_cpu_ms_per_task=plane,
        reconciles_per_task=3.1,
        profile={"statechart library (events, callbacks)": 30, "other": 70},
    )


def test_rows_are_medians_per_commit_with_every_run_and_the_ratio(tmp_path: Path) -> None:
    records = tmp_path / "runs.jsonl"
    lines = [
        asdict(run(12.0, 40.0)) | {"commit": "aaa", "date": "2026-12-07 18:00 UTC"},
        asdict(run(10.0, 41.0)) | {"commit": "bbb", "date": "2026-12-07 18:02 UTC"},
        asdict(run(14.0, 44.0)) | {"commit": "aaa", "date": "2026-12-07 18:04 UTC"},
        asdict(run(9.0, 39.0)) | {"commit": "bbb", "date": "2026-12-07 18:06 UTC"},
    ]
    records.write_text("".join(json.dumps(line) + "\n" for line in lines))
    report = tmp_path / "benchmarks.md"
    report.write_text("# taskfsm benchmarks\n\n## Other\n\nkept\n")
    assert (
        before_after.main(
            [str(records), "--before", "aaa", "--after", "bbb", "--output", str(report)]
        )
        == 0
    )
    text = report.read_text()
    assert "## Other\n\nkept" in text
    row = next(line for line in text.splitlines() if line.startswith("| controller CPU per Task"))
    assert "| 13.0 (12.0 / 14.0) | 9.5 (10.0 / 9.0) | x0.73 | ≤ 8 |" in row
    assert "statechart library" in text
