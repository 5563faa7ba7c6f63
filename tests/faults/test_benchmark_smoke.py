"""The benchmark harness works: ``benchmarks/bench_controller.py --quick`` on a tiny N
starts its own control plane, runs every scenario, and writes a report with every section.
Timings are not asserted (they depend on the machine); the run must complete and the report
must carry figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks" / "bench_controller.py"


def test_quick_benchmark_runs_and_writes_its_report(tmp_path):
    report, raw = tmp_path / "benchmarks.md", tmp_path / "raw.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--quick",
            "--sizes",
            "5",
            "--workers",
            "1,4",
            "--output",
            str(report),
            "--json",
            str(raw),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        check=False,
        env={**__import__("os").environ, "TASKFSM_BENCH_LOGS": str(tmp_path / "logs")},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    text = report.read_text()
    for heading in (
        "## Throughput and latency",
        "## API cost per Task",
        "## Controller memory",
        "## Workflows of N Tasks",
        "## Against the API server's write ceiling",
        "## Against the targets",
        "## Start-up and a new MediaProcessingEntity",
        "## Fair share under a flood",
    ):
        assert heading in text
    data = json.loads(raw.read_text())
    assert {(r["scenario"], r["workers"]) for r in data["results"]} >= {("burst", 1), ("burst", 4)}
    assert all(r["complete"] for r in data["results"])
    burst = [r for r in data["results"] if r["scenario"] == "burst"]
    assert all(r["api_rows"].get("POST batch jobs ") == 5 for r in burst), [
        r["api_rows"] for r in burst
    ]
    assert [m["tasks"] for m in data["memory"]] == [0, 5]
    assert data["ceiling"]["writes"] > 0
    assert all(m["rss_mib"] > 0 for m in data["memory"])
    assert data["startup"]["boot"]["complete"], data["startup"]
    assert data["startup"]["new_mpe"]["complete"], data["startup"]
    assert [row["fairness"] for row in data["flood"]] == ["fifo", "namespace", "namespace, cap 3"]
    for row in data["flood"]:
        assert row["a_complete"], row
        assert row["b_flood"]["done"] == row["b_flood"]["tasks"] >= 1, row
        assert row["b_idle"]["done"] == row["b_idle"]["tasks"] >= 1, row
