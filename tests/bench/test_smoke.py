"""The benchmark harnesses work: each ``benchmarks/bench_*.py`` in its quick mode starts its own
control plane (or API server), runs every scenario or variant it has and writes its section into a
report without touching the rest of it, plus its raw figures as JSON. Timings are not asserted
(they depend on the machine); the runs must complete and the figures must be measured.

One body runs every harness (:func:`test_benchmark_runs_and_writes_its_section`); what differs per
harness is its command line and what its report and raw figures must hold (the ``check_*``
functions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
KEPT = "# Benchmarks\n\n## Throughput and latency\n\nkept\n"
"""A report's earlier content that a harness writing only its own section must leave as it is."""
OTHERS = "# Benchmarks\n\n## HTTP client CPU per request\n\nkept\n"
"""A section another harness wrote, which the controller's harness (it writes the page's first
sections) must keep."""


def check_controller(text: str, data: dict[str, Any]) -> None:
    # Regression: a run of the controller's harness alone dropped the other harnesses' sections.
    assert text.count("## HTTP client CPU per request\n\nkept\n") == 1
    assert text.index("## HTTP client CPU per request") > text.index("## Fair share under a flood")
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
        # The API server's own write latency beside B's, measured in the same seconds.
        assert row["probe_flood"]["p50"] > 0, row
        assert row["probe_idle"]["p50"] > 0, row
    assert "probe p50 flood / idle" in text


def check_http(text: str, data: dict[str, Any]) -> None:
    assert text.startswith(KEPT)
    assert text.count("## HTTP client CPU per request") == 1
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


def check_admission(text: str, data: dict[str, Any]) -> None:
    assert "## Task admission: what the CRD's rules cost" in text
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


def check_memory(text: str, data: dict[str, Any]) -> None:
    assert "## Controller memory, lever by lever" in text
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
    # --profile: the traced process's live memory, by source line, reached the report.
    assert data["profile"]["total_bytes"] > 0
    # (With 30 finished Tasks, packed, the imported modules' lines may hold the most.)
    assert data["profile"]["lines"]
    assert all(size > 0 for _where, size, _count in data["profile"]["lines"])
    assert "Where the live memory is" in text


def check_memory_jobs_expired(text: str, data: dict[str, Any]) -> None:
    """``--jobs-expired``: the namespace holds copies of a finished Task, no Job."""
    assert "## Controller memory, finished Tasks whose Jobs expired" in text
    assert "whose Jobs expired (copies of a few run ones)" in text
    (run,) = data["results"]["as shipped"]
    assert run["tasks"] == 30
    assert run["rss_mib"] > 0
    assert data["meta"]["jobs"] is False
    assert data["sizes"]["Task"]["objects"] == 30
    assert data["sizes"]["Job"]["objects"] == 0


def check_ui(text: str, data: dict[str, Any]) -> None:
    assert text.startswith(KEPT)
    assert "## taskfsm ui" in text
    (run,) = data["runs"]
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


@dataclass(frozen=True)
class Harness:
    script: str
    args: tuple[str, ...]
    check: Callable[[str, dict[str, Any]], None]
    earlier: str = ""
    """What the report holds before the harness runs (another harness's sections to keep)."""
    rerendered_section: str | None = None
    """The heading of a section the harness can render again from its raw figures (``--from-json``)."""


HARNESSES = {
    "controller": Harness(
        "bench_controller.py",
        ("--quick", "--sizes", "5", "--workers", "1,4"),
        check_controller,
        earlier=OTHERS,
    ),
    "http": Harness("bench_http.py", ("--quick",), check_http, earlier=KEPT),
    "admission": Harness("bench_admission.py", ("--quick",), check_admission),
    "memory": Harness("bench_memory.py", ("--quick", "--profile"), check_memory),
    "memory, Jobs expired": Harness(
        "bench_memory.py",
        ("--quick", "--jobs-expired", "--variants", "as shipped"),
        check_memory_jobs_expired,
    ),
    "ui": Harness(
        "bench_ui.py",
        ("--tasks", "50"),
        check_ui,
        earlier=KEPT,
        rerendered_section="## taskfsm ui",
    ),
}


@pytest.mark.timeout(1200)  # its own control plane and every variant: minutes on a loaded machine
@pytest.mark.parametrize("name", list(HARNESSES))
def test_benchmark_runs_and_writes_its_section(name: str, tmp_path: Path) -> None:
    harness = HARNESSES[name]
    report, raw = tmp_path / "benchmarks.md", tmp_path / "raw.json"
    if harness.earlier:
        report.write_text(harness.earlier)
    proc = subprocess.run(
        [
            sys.executable,
            f"benchmarks/{harness.script}",
            *harness.args,
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
        env={**os.environ, "TASKFSM_BENCH_LOGS": str(tmp_path / "logs")},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    harness.check(report.read_text(), json.loads(raw.read_text()))
    # Rendering again from the raw figures replaces the section instead of adding a second one.
    if (heading := harness.rerendered_section) is not None:
        again = subprocess.run(
            [
                sys.executable,
                f"benchmarks/{harness.script}",
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
        assert again.stdout.count(heading) == 1
        assert report.read_text().count(heading) == 1
