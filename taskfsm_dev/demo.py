"""``make demo`` (``python -m taskfsm_dev.demo``): the whole system on an embedded local control
plane, with sample Workflows.

Steps: build (or reuse) and start etcd + kube-apiserver + kube-controller-manager; install the
CRDs; start the controller (with a 2 s ``workflowTerminationWaitingDuration``, so Workflows
finish quickly) and a simulated kubelet; apply ``demo_samples.yaml`` in namespace ``demo``;
print every Task and Workflow phase transition as it happens; write, per Task and per Workflow,
its lifecycle diagram with the path it took (``<output>/<task>.mmd``,
``<output>/workflow-<name>.mmd``, Mermaid) and with its final state highlighted (``.svg``);
print each Workflow's phase, counters and Tasks. Exits 0 when every Task and every Workflow
reached the phase its ``demo.taskfsm.dev/expected-phase`` annotation names, 1 otherwise.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any, NoReturn

import yaml

from taskfsm.api import constants as c

NAMESPACE = "demo"
EXPECTED = "demo.taskfsm.dev/expected-phase"
SAMPLES = Path(__file__).with_name("demo_samples.yaml")
WORKFLOW_WAIT_SECONDS = 2.0
"""``workflowTerminationWaitingDuration`` in the demo (the default is 20 s)."""

TRACKED = (c.KIND_TASK, c.KIND_WORKFLOW)
PHASES = {
    c.KIND_TASK: {p.value for p in c.TaskPhase},
    c.KIND_WORKFLOW: {p.value for p in c.WorkflowPhase},
}

Key = tuple[str, str]
"""(kind, name) of a tracked object."""


def say(text: str) -> None:
    print(text, flush=True)


def load_samples() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(SAMPLES.read_text()) if doc]


def expected_phases(docs: list[dict[str, Any]]) -> dict[Key, str]:
    """(kind, name) → expected phase, for every Task and Workflow carrying the annotation."""
    return {
        (d["kind"], d["metadata"]["name"]): d["metadata"]["annotations"][EXPECTED]
        for d in docs
        if d["kind"] in TRACKED and EXPECTED in ((d["metadata"].get("annotations")) or {})
    }


def apply(api_client: Any, docs: list[dict[str, Any]]) -> None:
    from taskfsm.kube.resources import BY_KIND
    from taskfsm.kube.rest import SECRETS, Rest

    rest = Rest(api_client)
    for doc in docs:
        res = SECRETS if doc["kind"] == "Secret" else BY_KIND[doc["kind"]]
        rest.create(res, NAMESPACE if res.namespaced else None, doc)


def _chart(kind: str) -> Any:
    from machines.diagrams.charts import TASK, WORKFLOW

    return WORKFLOW if kind == c.KIND_WORKFLOW else TASK


def path_diagram(path: list[str], kind: str = c.KIND_TASK) -> str:
    """The lifecycle of ``kind`` in Mermaid with the states of ``path`` (phases) marked visited."""
    from machines.diagrams import graph as diagram

    chart = _chart(kind)
    states = [chart.phase_states.get(phase, "") for phase in path]
    text = diagram.render_mermaid(chart.phase_states.get(path[-1]) if path else None, chart)
    visited = ",".join(s for s in dict.fromkeys(states) if s)
    return text + f"    classDef visited fill:#d8f0d8,stroke:#2e7d32\n    class {visited} visited\n"


def write_diagrams(output: Path, paths: dict[Key, list[str]]) -> None:
    from machines.diagrams import render

    output.mkdir(parents=True, exist_ok=True)
    for (kind, name), path in paths.items():
        stem = name if kind == c.KIND_TASK else f"workflow-{name}"
        chart = _chart(kind)
        (output / f"{stem}.mmd").write_text(path_diagram(path, kind))
        highlight = chart.phase_states.get(path[-1]) if path else None
        (output / f"{stem}.svg").write_bytes(render.render("svg", highlight, chart))


def summarize_workflows(api: Any) -> None:
    """One line per Workflow (phase, counters) and one per Task under it."""
    from taskfsm.tools import explain

    for line in explain.workflow_summary(api, NAMESPACE):
        say(line)


def main(*, output: Path, timeout: float = 180.0, keep: bool = False) -> int:
    from taskfsm.api.crdgen import crd_documents
    from taskfsm.kube.rest import NAMESPACES, Rest
    from taskfsm.manager import structured_logs
    from taskfsm.manager.manager import Manager, Settings
    from taskfsm_dev.controlplane import ControlPlane, binaries_dir
    from taskfsm_dev.crds import install_crds
    from taskfsm_dev.kubelet import SimulatedKubelet

    structured_logs.configure(level="WARNING")
    say("demo: building or reusing the control-plane binaries (the first build takes minutes) ...")
    bins = binaries_dir()
    started = time.monotonic()
    with ControlPlane(bin_dir=bins, name="taskfsm-demo") as cp:
        say(
            f"demo: control plane up at {cp.server} in {time.monotonic() - started:.1f}s "
            f"(kubeconfig {cp.kubeconfig})"
        )
        api = cp.api_client()
        install_crds(api, crd_documents())
        say(f"demo: installed {len(crd_documents())} CRDs")
        Rest(api).create(NAMESPACES, None, {"metadata": {"name": NAMESPACE}})
        settings = Settings(
            metrics_address=None,
            health_address=None,
            resync_seconds=30,
            watch_timeout=60,
            workflow_termination_waiting=WORKFLOW_WAIT_SECONDS,
            task_phase_events=True,  # the demo prints every phase change from the Events
        )
        controller = Manager(api, settings).start()
        kubelet = SimulatedKubelet(api, namespace=NAMESPACE).start()
        try:
            docs = load_samples()
            apply(api, docs)
            expected = expected_phases(docs)
            for kind in TRACKED:
                wanted = {name: phase for (k, name), phase in expected.items() if k == kind}
                say(f"demo: {kind}s and their expected phases: {wanted}")
            say(
                f"demo: applied {len(docs)} objects; "
                f"workflowTerminationWaitingDuration is {WORKFLOW_WAIT_SECONDS:g}s"
            )
            paths = follow(api, expected, timeout)
            summarize_workflows(api)
        finally:
            kubelet.stop()
            controller.stop()
        write_diagrams(output, paths)
        say(
            "demo: wrote the lifecycle path of each Task and Workflow to "
            f"{output}/<task>.mmd, {output}/workflow-<name>.mmd and .svg"
        )
        failures = {
            key: (paths[key][-1] if paths[key] else "", want)
            for key, want in expected.items()
            if (paths[key] or [""])[-1] != want
        }
        for (kind, name), (got, want) in sorted(failures.items()):
            say(f"demo: FAILED {kind} {name}: ended {got or '(no phase)'}, expected {want}")
        if keep:
            say(f"demo: control plane kept running; KUBECONFIG={cp.kubeconfig}; Ctrl-C to stop")
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                pass
        if failures:
            return 1
        counts = {kind: sum(1 for k, _ in expected if k == kind) for kind in TRACKED}
        say(
            f"demo: all {counts[c.KIND_TASK]} Tasks and {counts[c.KIND_WORKFLOW]} Workflows "
            "reached their expected phase"
        )
        return 0


def _steps(note: str, phases: set[str]) -> list[str]:
    """The phases in an Event note such as ``Running -> Succeeded: JobSucceeded``."""
    return [p for p in note.split(": ")[0].split(" -> ") if p in phases]


def follow(api: Any, expected: dict[Key, str], timeout: float) -> dict[Key, list[str]]:
    """Print the controller's phase-change Events as they come, until every tracked Task and
    Workflow is in its expected phase; return each one's path of phases."""
    from taskfsm.kube.resources import BY_KIND
    from taskfsm.kube.rest import EVENTS, Rest

    rest = Rest(api)
    paths: dict[Key, list[str]] = {key: [] for key in expected}
    seen: set[str] = set()
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        events = rest.list(EVENTS, NAMESPACE).get("items") or []
        for event in sorted(events, key=lambda e: e.get("eventTime") or ""):
            uid = event["metadata"]["uid"]
            regarding = event.get("regarding") or {}
            kind = regarding.get("kind")
            if uid in seen or kind not in TRACKED:
                continue
            seen.add(uid)
            key = (kind, regarding.get("name", ""))
            if event.get("reason") in PHASES[kind] and key in paths:
                path = paths[key]
                path.extend(
                    p
                    for p in _steps(event.get("note", ""), PHASES[kind])
                    if not path or path[-1] != p
                )
            label = f"{'wf/' if kind == c.KIND_WORKFLOW else ''}{key[1]}"
            say(
                f"  {time.monotonic() - started:6.1f}s  {label:<16} {event.get('type', ''):<7} "
                f"{event.get('reason')}: {event.get('note')}"
            )
        final: dict[Key, str] = {}
        for kind in TRACKED:
            items = rest.list(BY_KIND[kind], NAMESPACE)["items"]
            final.update(
                {
                    (kind, o["metadata"]["name"]): (o.get("status") or {}).get("phase") or ""
                    for o in items
                }
            )
        if all(final.get(key) == want for key, want in expected.items()):
            for key, phase in final.items():  # the persisted phase is the truth
                if key in paths and (not paths[key] or paths[key][-1] != phase):
                    paths[key].append(phase)
            break
        time.sleep(0.2)
    return paths


def cli(argv: list[str] | None = None) -> NoReturn:
    """``python -m taskfsm_dev.demo [--output DIR] [--timeout S] [--keep]``; ends the process
    itself, like ``taskfsm run`` (library daemon threads may still run)."""
    from taskfsm.cli.run import exit_after_stop

    parser = argparse.ArgumentParser(
        prog="python -m taskfsm_dev.demo",
        description="run everything on an embedded local control plane with sample Tasks",
    )
    parser.add_argument(
        "--output", default="demo-output", help="directory for the diagrams of the paths taken"
    )
    parser.add_argument(
        "--timeout", type=float, default=180.0, help="seconds to wait for all Tasks"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the control plane running until Ctrl-C"
    )
    args = parser.parse_args(argv)
    exit_after_stop(main(output=Path(args.output), timeout=args.timeout, keep=args.keep))


if __name__ == "__main__":
    cli()
