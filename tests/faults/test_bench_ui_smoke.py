"""The UI benchmark harness works: ``benchmarks/bench_ui.py`` on a small N starts its own control
plane, ``taskfsm ui`` and Chromium, measures every figure and writes its section into a report
without touching the rest of it. Timings are not asserted (they depend on the machine)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_ui_benchmark_runs_and_writes_its_section(tmp_path):
    report, raw = tmp_path / "benchmarks.md", tmp_path / "raw.json"
    report.write_text("# Benchmarks\n\n## Throughput and latency\n\nkept\n")
    proc = subprocess.run(
        [
            sys.executable,
            "benchmarks/bench_ui.py",
            "--tasks",
            "50",
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
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    text = report.read_text()
    assert text.startswith("# Benchmarks\n\n## Throughput and latency\n\nkept\n")
    assert "## taskfsm ui" in text
    (run,) = json.loads(raw.read_text())["runs"]
    assert run["tasks"] == 50
    for key in (
        "first_render_seconds",
        "live_update_seconds",
        "server_rss_mib",
        "browser_rss_mib",
        "js_heap_mib",
    ):
        assert run[key] > 0, key
    assert run["moves_emphasised"] == run["changed"] == 10
    # Rendering again from the raw results replaces the section instead of adding one.
    again = subprocess.run(
        [
            sys.executable,
            "benchmarks/bench_ui.py",
            "--from-json",
            str(raw),
            "--output",
            str(report),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    )
    assert again.stdout.count("## taskfsm ui") == 1
    assert report.read_text().count("## taskfsm ui") == 1
