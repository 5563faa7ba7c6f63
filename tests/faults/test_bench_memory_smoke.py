"""The memory benchmark harness works: ``benchmarks/bench_memory.py --quick`` runs a small burst
to Succeeded on its own control plane, starts a fresh controller per memory variant on the
namespace it left (each lever switched in the child by ``benchmarks/memory_hooks``) and reports
RSS per variant and the size of a cached Task and Job. Figures are not asserted beyond being
measured (they depend on the machine)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(1200)  # its own control plane and every variant: minutes on a loaded machine
def test_memory_benchmark_runs_and_writes_its_section(tmp_path):
    report, raw = tmp_path / "benchmarks.md", tmp_path / "raw.json"
    proc = subprocess.run(
        [
            sys.executable,
            "benchmarks/bench_memory.py",
            "--quick",
            "--output",
            str(report),
            "--json",
            str(raw),
        ],
        capture_output=True,
        text=True,
        timeout=1100,
        cwd=REPO,
        check=False,
        env={**__import__("os").environ, "TASKFSM_BENCH_LOGS": str(tmp_path / "logs")},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "## Controller memory, lever by lever" in report.read_text()
    data = json.loads(raw.read_text())
    assert set(data["results"]) >= {
        "none of the levers",
        "malloc_trim(0) after the start-up pass",
        "as shipped",
    }
    for label, runs in data["results"].items():
        (run,) = runs
        assert run["tasks"] == 30, label
        assert run["rss_mib"] > 0, label
    assert data["sizes"]["Task"]["objects"] == 30
    assert data["sizes"]["Job"]["objects"] == 30
    assert data["sizes"]["Task"]["spec"] > 0
    assert "spec" not in data["sizes"]["Job"]
