"""The admission benchmark harness works: ``benchmarks/bench_admission.py --quick`` installs the
Task CRD in its variants (the project's, without rules, without each rule, without rules and
bounds) on its own API server, writes Tasks against each and reports kube-apiserver's CPU per
Task. Timings are not asserted (they depend on the machine)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(1200)  # its own control plane and every variant: minutes on a loaded machine
def test_admission_benchmark_runs_and_writes_its_section(tmp_path):
    report, raw = tmp_path / "benchmarks.md", tmp_path / "raw.json"
    proc = subprocess.run(
        [
            sys.executable,
            "benchmarks/bench_admission.py",
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
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    text = report.read_text()
    assert "## Task admission: what the CRD's rules cost" in text
    data = json.loads(raw.read_text())
    rules = [r["where"] for r in data["rules"]]
    assert ".status.phase" in rules
    assert len(rules) == 5
    labels = set(data["results"])
    assert {"project", "no rules", "no rules, no bounds"} <= labels
    assert {f"without `{where}`" for where in rules} <= labels
    for label, runs in data["results"].items():
        (run,) = runs
        assert set(run) == {"create", "metadata patch", "status Running", "status Succeeded"}, label
        assert all(phase["wall"] > 0 and phase["apiserver"] >= 0 for phase in run.values()), label
    assert sum(p["apiserver"] for runs in data["results"].values() for p in runs[0].values()) > 0
