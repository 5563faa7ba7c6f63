"""``taskfsm demo``: the whole system on an embedded local control plane, with sample Tasks.

Steps: build (or reuse) and start etcd + kube-apiserver + kube-controller-manager; install the
CRDs; start the controller and a simulated kubelet; apply ``demo_samples.yaml`` in namespace
``demo``; print every Task phase transition as it happens; write, per Task, the lifecycle diagram
with the path it took (``<output>/<task>.mmd``, Mermaid) and with its final state highlighted
(``<output>/<task>.svg``). Exits 0 when every Task reached the phase its
``demo.taskfsm.dev/expected-phase`` annotation names, 1 otherwise.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import yaml

from taskfsm import constants as c

NAMESPACE = "demo"
EXPECTED = "demo.taskfsm.dev/expected-phase"
SAMPLES = Path(__file__).with_name("demo_samples.yaml")


def say(text: str) -> None:
    print(text, flush=True)


def load_samples() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(SAMPLES.read_text()) if doc]


def apply(api_client: Any, docs: list[dict[str, Any]]) -> None:
    from kubernetes import client

    from taskfsm.kube.resources import BY_KIND

    custom = client.CustomObjectsApi(api_client)
    core = client.CoreV1Api(api_client)
    for doc in docs:
        if doc["kind"] == "Secret":
            core.create_namespaced_secret(NAMESPACE, doc)
            continue
        res = BY_KIND[doc["kind"]]
        if res.namespaced:
            custom.create_namespaced_custom_object(c.GROUP, c.VERSION, NAMESPACE, res.plural, doc)
        else:
            custom.create_cluster_custom_object(c.GROUP, c.VERSION, res.plural, doc)


def path_diagram(path: list[str]) -> str:
    """The lifecycle in Mermaid with the states of ``path`` (phases) marked as visited."""
    from machines import diagram
    from machines.task import PHASE_STATES

    states = [PHASE_STATES.get(phase, "") for phase in path]
    text = diagram.render_mermaid(PHASE_STATES.get(path[-1]) if path else None)
    visited = ",".join(s for s in dict.fromkeys(states) if s)
    return text + f"    classDef visited fill:#d8f0d8,stroke:#2e7d32\n    class {visited} visited\n"


def main(*, output: Path, timeout: float = 180.0, keep: bool = False) -> int:
    from kubernetes import client

    from machines import render
    from taskfsm import logs
    from taskfsm.controller import Controller, Settings
    from taskfsm.crdgen import crd_documents
    from taskfsm.testing.controlplane import ControlPlane, binaries_dir
    from taskfsm.testing.crds import install_crds
    from taskfsm.testing.kubelet import SimulatedKubelet

    logs.configure(level="WARNING")
    say("demo: building or reusing the control-plane binaries (the first build takes minutes) ...")
    bins = binaries_dir()
    started = time.monotonic()
    with ControlPlane(bin_dir=bins, name="taskfsm-demo") as cp:
        say(f"demo: control plane up at {cp.server} in {time.monotonic() - started:.1f}s (kubeconfig {cp.kubeconfig})")
        api = cp.api_client()
        install_crds(api, crd_documents())
        say(f"demo: installed {len(crd_documents())} CRDs")
        client.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})
        controller = Controller(
            api, Settings(metrics_address=None, health_address=None, resync_seconds=30, watch_timeout=60)
        ).start()
        kubelet = SimulatedKubelet(api, namespace=NAMESPACE).start()
        try:
            docs = load_samples()
            apply(api, docs)
            tasks = {d["metadata"]["name"]: d["metadata"]["annotations"][EXPECTED] for d in docs if d["kind"] == "Task"}
            say(f"demo: applied {len(docs)} objects; Tasks and their expected phases: {tasks}")
            paths = follow(api, tasks, timeout)
        finally:
            kubelet.stop()
            controller.stop()
        output.mkdir(parents=True, exist_ok=True)
        for name, path in paths.items():
            (output / f"{name}.mmd").write_text(path_diagram(path))
            from machines.task import PHASE_STATES

            (output / f"{name}.svg").write_bytes(render.render("svg", PHASE_STATES.get(path[-1]) if path else None))
        say(f"demo: wrote the lifecycle path of each Task to {output}/<task>.mmd and .svg")
        failures = {n: (paths[n][-1] if paths[n] else "", want) for n, want in tasks.items() if (paths[n] or [""])[-1] != want}
        for name, (got, want) in sorted(failures.items()):
            say(f"demo: FAILED {name}: ended {got or '(no phase)'}, expected {want}")
        if keep:
            say(f"demo: control plane kept running; KUBECONFIG={cp.kubeconfig}; Ctrl-C to stop")
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                pass
        if failures:
            return 1
        say(f"demo: all {len(tasks)} Tasks reached their expected phase")
        return 0


def follow(api: Any, expected: dict[str, str], timeout: float) -> dict[str, list[str]]:
    """Print the controller's phase-change Events as they come, until every Task is in its
    expected phase; return each Task's path of phases."""
    from kubernetes import client

    from taskfsm.kube.rest import EVENTS, Rest

    rest = Rest(api)
    custom = client.CustomObjectsApi(api)
    paths: dict[str, list[str]] = {name: [] for name in expected}
    seen: set[str] = set()
    started = time.monotonic()
    phases = {p.value for p in c.TaskPhase}
    while time.monotonic() - started < timeout:
        events = rest.list(EVENTS, NAMESPACE).get("items") or []
        for event in sorted(events, key=lambda e: e.get("eventTime") or ""):
            uid = event["metadata"]["uid"]
            regarding = event.get("regarding") or {}
            if uid in seen or regarding.get("kind") != c.KIND_TASK:
                continue
            seen.add(uid)
            name = regarding.get("name", "")
            if event.get("reason") in phases and name in paths:
                steps = [p for p in event.get("note", "").split(" -> ") if p in phases]
                paths[name].extend(p for p in steps if not paths[name] or paths[name][-1] != p)
            say(f"  {time.monotonic() - started:6.1f}s  {name:<14} {event.get('type', ''):<7} {event.get('reason')}: {event.get('note')}")
        items = custom.list_namespaced_custom_object(c.GROUP, c.VERSION, NAMESPACE, c.PLURAL_TASKS)["items"]
        final = {t["metadata"]["name"]: (t.get("status") or {}).get("phase") or "" for t in items}
        if all(final.get(n) == want for n, want in expected.items()):
            for name, phase in final.items():  # the persisted phase is the truth
                if name in paths and (not paths[name] or paths[name][-1] != phase):
                    paths[name].append(phase)
            break
        time.sleep(0.2)
    return paths


if __name__ == "__main__":
    sys.exit(main(output=Path("demo-output")))
