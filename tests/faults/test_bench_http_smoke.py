"""The HTTP client benchmark harness works: ``benchmarks/bench_http.py --quick`` starts its own
API server, measures every verb of every transport and writes its section into a report without
touching the rest of it. Timings are not asserted (they depend on the machine)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(1200)  # its own API server, every client, then valgrind: minutes when loaded
def test_http_benchmark_runs_and_writes_its_section(tmp_path):
    report, raw = tmp_path / "benchmarks.md", tmp_path / "raw.json"
    report.write_text("# Benchmarks\n\n## Throughput and latency\n\nkept\n")
    proc = subprocess.run(
        [
            sys.executable,
            "benchmarks/bench_http.py",
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
    assert text.startswith("# Benchmarks\n\n## Throughput and latency\n\nkept\n")
    assert text.count("## HTTP client CPU per request") == 1
    data = json.loads(raw.read_text())
    assert set(data["results"]) == {
        "rest",
        "urllib3",
        "http.client",
        "pycurl",
        "pycurl-h2",
        "aiohttp",
        "aiohttp-thread",
        "httpx",
        "httpx-h2",
    }
    # Today's path and the standard library measure every verb; each figure is CPU µs > 0.
    for name in ("rest", "urllib3", "http.client"):
        for verb, runs in data["results"][name].items():
            assert runs, (name, verb)
            assert all(cpu > 0 for cpu, wall in runs), (name, verb, runs)
    assert "| rest |" in text
    assert "| pycurl |" in text
