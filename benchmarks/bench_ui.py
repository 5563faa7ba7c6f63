"""Benchmark: ``taskfsm ui`` with 10,000 Tasks, in Debian's headless Chromium (``make bench``).

Run: ``make bench`` (after the controller benchmark) or ``.venv/bin/python benchmarks/bench_ui.py``
(``--tasks N``; ``--help``). Nothing is asserted: the figures go to stdout, to the
``## taskfsm ui`` section of ``docs/benchmarks.md`` (replaced in place, the rest of the file
kept) and to ``benchmarks/last-ui-run.json`` (``--from-json`` renders the section again).

What it measures, on a local control plane of its own:

1. N Tasks in one namespace (created by 8 client threads), their status spread over the five
   phases as a controller would have left them (no controller runs: the page's load is what is
   measured, not the controller's);
2. ``taskfsm ui -n <namespace>`` started as a user starts it: seconds until it prints its URL,
   and until its watches have listed every Task (the first event-stream message saying so);
3. Chromium opens the overview: seconds from the navigation until every Task is counted on the
   chart (the time to first render a user waits for);
4. staying live: 200 Tasks change phase at once (status patches); seconds until the page's counts
   show all of them (one server-sent events message, no reload);
5. the state page of the largest state: seconds until its table lists every Task in it;
6. memory: the ``taskfsm ui`` process's resident set (VmRSS) and its peak (VmHWM), the browser's
   (the proportional set size of every Chromium process started for the run, summed: RSS would
   count the pages they share once per process) and the page's JavaScript heap (Chrome DevTools
   Protocol ``Performance.getMetrics``), after the render and after the changes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from report import publish  # noqa: E402 (this script's folder is on sys.path)

from taskfsm.kube.resources import TASKS  # noqa: E402 (after the sys.path entry above)
from taskfsm.kube.rest import NAMESPACES, Rest  # noqa: E402 (after the sys.path entry above)
from taskfsm_dev import objects  # noqa: E402 (after the sys.path entry above)
from taskfsm_dev.ui import UiProcess, launch_chromium  # noqa: E402 (after the sys.path entry above)

PHASES = ["Initializing", "JobPending", "Running", "Succeeded", "Failed"]
STATE_OF = {"Initializing": "initializing", "JobPending": "job_pending", "Running": "running",
            "Succeeded": "succeeded", "Failed": "failed"}  # fmt: skip
SECTION = "## taskfsm ui"
CHANGED = 200


def log(text: str) -> None:
    print(f"[bench-ui {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (from /proc's parent links)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            out.append(child)
            todo.append(child)
    return out


def pss_kib(pid: int) -> int:
    """The proportional set size: resident memory with each shared page divided among the
    processes sharing it (so a multi-process browser's sum counts shared pages once)."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return 0


def chromium_pss_mib() -> float:
    """The browser's memory: PSS summed over every Chromium process this run started."""
    total = 0
    for pid in descendants(os.getpid()):
        with contextlib.suppress(OSError):
            if "chrom" in Path(f"/proc/{pid}/comm").read_text():
                total += pss_kib(pid)
    return total / 1024


def create_tasks(rest: Rest, namespace: str, n: int) -> None:
    def one(i: int) -> None:
        name = f"t{i:05d}"
        rest.create(TASKS, namespace, objects.task(name, workflow_name="wf"))
        rest.patch(
            TASKS, namespace, name, {"status": {"phase": PHASES[i % 5]}}, subresource="status"
        )

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(n)))


def page_total(page: Any) -> int:
    return int(
        page.evaluate(
            "() => [...document.querySelectorAll('#chart-task g.node[data-state] text.count')]"
            ".reduce((s, t) => s + (parseInt(t.textContent) || 0), 0)"
        )
    )


def page_count(page: Any, state: str) -> int:
    text = page.evaluate(
        f"() => (document.querySelector('#chart-task g.node[data-state={state}] text.count')"
        " || {textContent: '0'}).textContent"
    )
    return int(text or 0)


def wait(predicate: Any, timeout: float, what: str) -> float:
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"{what}: not within {timeout:.0f}s")
        time.sleep(0.05)
    return time.monotonic() - start


def measure(n: int) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    from taskfsm.api.crdgen import crd_documents
    from taskfsm_dev.controlplane import ControlPlane
    from taskfsm_dev.crds import install_crds

    result: dict[str, Any] = {"tasks": n}
    with ControlPlane(name="taskfsm-bench-ui") as plane, plane.api_client() as api:
        install_crds(api, crd_documents())
        rest = Rest(api)
        namespace = "bench-ui"
        rest.create(NAMESPACES, None, {"metadata": {"name": namespace}})
        log(f"creating {n} Tasks")
        started = time.monotonic()
        create_tasks(rest, namespace, n)
        result["create_seconds"] = time.monotonic() - started
        started = time.monotonic()
        with UiProcess(plane.kubeconfig, "-n", namespace, timeout=120) as ui:
            result["listen_seconds"] = time.monotonic() - started
            with sync_playwright() as playwright:
                browser = launch_chromium(playwright)
                result["chromium"] = browser.version
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                cdp = page.context.new_cdp_session(page)
                cdp.send("Performance.enable")
                log("opening the overview")
                nav = time.monotonic()
                page.goto(ui.url + "/")
                wait(lambda: page_total(page) == n, 300, "every Task counted")
                result["first_render_seconds"] = time.monotonic() - nav
                result["synced_seconds_after_start"] = time.monotonic() - started
                time.sleep(2)
                result["server_rss_mib"] = rss_kib(ui.proc.pid) / 1024
                result["browser_rss_mib"] = chromium_pss_mib()
                result["js_heap_mib"] = js_heap(cdp)

                log(f"changing the phase of {CHANGED} Tasks")
                before = page_count(page, "failed")
                changed = [i for i in range(n) if PHASES[i % 5] == "Running"][:CHANGED]
                t0 = time.monotonic()
                with ThreadPoolExecutor(8) as pool:
                    list(
                        pool.map(
                            lambda i: rest.patch(
                                TASKS,
                                namespace,
                                f"t{i:05d}",
                                {"status": {"phase": "Failed"}},
                                subresource="status",
                            ),
                            changed,
                        )
                    )
                result["patch_seconds"] = time.monotonic() - t0
                result["changed"] = len(changed)
                wait(
                    lambda: page_count(page, "failed") == before + len(changed),
                    120,
                    "the changes shown",
                )
                result["live_update_seconds"] = time.monotonic() - t0
                recent = page.evaluate(
                    "() => document.querySelector('#chart-task g.edge[data-edge=\"running->failed\"]')"
                    ".dataset.moves"
                )
                result["moves_emphasised"] = int(recent or 0)

                biggest = max(PHASES, key=lambda p: sum(1 for i in range(n) if PHASES[i % 5] == p))
                state = STATE_OF[biggest]
                expected = page_count(page, state)
                t0 = time.monotonic()
                page.goto(f"{ui.url}/state/task/phases/{state}")
                wait(
                    lambda: (
                        page.evaluate("() => (document.getElementById('count') || {}).textContent")
                        == f"{expected} of {expected}"
                    ),
                    120,
                    "the state page's table",
                )
                result["state_page_seconds"] = time.monotonic() - t0
                result["state_page_rows"] = expected
                result["server_rss_after_mib"] = rss_kib(ui.proc.pid) / 1024
                result["server_peak_mib"] = rss_kib(ui.proc.pid, "VmHWM") / 1024
                result["browser_rss_after_mib"] = chromium_pss_mib()
                result["js_heap_after_mib"] = js_heap(cdp)
                browser.close()
    return result


def js_heap(cdp: Any) -> float:
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    return float(metrics.get("JSHeapUsedSize", 0)) / 1024 / 1024


def render(runs: list[dict[str, Any]], meta: dict[str, str]) -> str:
    def med(key: str) -> str:
        values = [r[key] for r in runs if key in r]
        if not values:
            return "-"
        middle = statistics.median(values)
        if all(isinstance(v, int) for v in values):
            return f"{middle:,.0f}"
        spread = f" ({min(values):.1f}-{max(values):.1f})" if len(values) > 1 else ""
        return f"{middle:.1f}{spread}"

    n = runs[0]["tasks"]
    rows = [
        ("`taskfsm ui` start → URL printed (s)", med("listen_seconds")),
        ("overview: navigation → every Task counted on the chart (s)", med("first_render_seconds")),
        ("start → overview rendered (s)", med("synced_seconds_after_start")),
        (f"{runs[0].get('changed', CHANGED)} Tasks change phase: first PATCH → page shows all (s)", med("live_update_seconds")),
        ("state page of the largest state: navigation → table complete (s)", med("state_page_seconds")),
        ("rows on that state page", med("state_page_rows")),
        ("server RSS after the first render (MiB)", med("server_rss_mib")),
        ("server RSS at the end / peak (MiB)", f"{med('server_rss_after_mib')} / {med('server_peak_mib')}"),
        ("browser memory after the first render: PSS of all Chromium processes (MiB)", med("browser_rss_mib")),
        ("browser memory at the end, PSS (MiB)", med("browser_rss_after_mib")),
        ("page JavaScript heap after the first render / at the end (MiB)", f"{med('js_heap_mib')} / {med('js_heap_after_mib')}"),
    ]  # fmt: skip
    lines = [
        SECTION,
        "",
        f"`benchmarks/bench_ui.py`: {n:,} Tasks in one namespace (phases spread evenly, no controller "
        f"running), `taskfsm ui -n` as a process, Debian's Chromium {runs[0].get('chromium', '?')} "
        f"headless through Playwright; {len(runs)} run(s), median (min-max). Measured, not asserted; "
        f"{meta.get('date', '?')}, commit {meta.get('commit', '?')}, {os.cpu_count()} cores shared "
        "with the control plane.",
        "",
        "| what | value |",
        "| --- | --- |",
        *[f"| {what} | {value} |" for what, value in rows],
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=10_000, help="Tasks (default 10000)")
    parser.add_argument("--repeats", type=int, default=1, help="runs (default 1)")
    parser.add_argument(
        "--output",
        default=str(REPO / "docs" / "benchmarks.md"),
        help="report whose '## taskfsm ui' section is replaced ('' = none)",
    )
    parser.add_argument(
        "--json", default=str(REPO / "benchmarks" / "last-ui-run.json"), help="raw results"
    )
    parser.add_argument("--from-json", help="render from a --json file instead of running")
    args = parser.parse_args(argv)
    if args.from_json:
        data = json.loads(Path(args.from_json).read_text())
        runs, meta = data["runs"], data["meta"]
    else:
        runs = []
        for repeat in range(args.repeats):
            log(f"run {repeat + 1} of {args.repeats}")
            runs.append(measure(args.tasks))
            log(json.dumps(runs[-1]))
        meta = {
            "date": datetime.now(UTC).strftime("%Y-%m-%d"),
            "commit": os.popen(f"git -C {REPO} rev-parse --short HEAD").read().strip() or "?",
        }
        if args.json:
            Path(args.json).write_text(json.dumps({"runs": runs, "meta": meta}, indent=1))
    section = render(runs, meta)
    publish(section, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
