"""A real kubectl (v1.35.4, built with the control plane) on taskfsm's objects: the print columns
of `kubectl get tasks`, `kubectl describe task`, and `kubectl taskfsm ...`, the kubectl plugin
the `kubectl-taskfsm` console script makes."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

from taskfsm import __version__
from taskfsm.api import constants as c
from taskfsm.api.crdgen import crd_documents
from taskfsm_dev import objects
from taskfsm_dev.waiting import wait_for
from tests.support import kubetools

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def succeeded_task(engine, controller_factory, kubelet, namespace) -> str:
    """A Task run to Succeeded by the in-process controller (with --task-phase-events, so that
    its phase changes are Events too); returns its Job's name."""
    controller_factory(task_phase_events=True)
    engine.create(objects.workflow("wf"))
    engine.create(objects.function("fn", run_seconds=0))
    engine.create(objects.local_mpe("local"))
    engine.create(objects.task("t", workflow_name="wf", function_name="fn", mpe_name="local"))
    wait_for(lambda: engine.phase("t") == "Succeeded", timeout=60, what="Task Succeeded")
    return engine.task("t")["status"]["jobRef"]["name"]


def test_kubectl_is_the_control_plane_version(control_plane):
    """The kubectl the tests use is v1.35.4, like the API server, and is the one first on PATH."""
    proc = kubetools.run("kubectl version --client", control_plane.kubeconfig)
    assert "Client Version: v1.35.4" in proc.stdout
    which = kubetools.run("command -v kubectl", control_plane.kubeconfig).stdout.strip()
    assert which == str(kubetools.kubectl())


def _json_path(obj: dict, path: str) -> str:
    """The value at a simple `.a.b.c` JSONPath of a print column ('' when absent); the one
    filter the CRDs use, `.status.conditions[?(@.status=="True")].reason`, gives the reason of
    the first True condition that has one (kubectl shows the first result)."""
    if path == '.status.conditions[?(@.status=="True")].reason':
        conditions = (obj.get("status") or {}).get("conditions") or []
        reasons = [c["reason"] for c in conditions if c["status"] == "True" and c.get("reason")]
        return reasons[0] if reasons else ""
    value: object = obj
    for part in path.strip(".").split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def test_get_tasks_prints_the_crd_columns(control_plane, engine, namespace, succeeded_task):
    """`kubectl get tasks` shows the Task CRD's print columns, each cell the value at the
    column's JSONPath (the MPE, Workflow, Function, Job and phase of the Task)."""
    crd = next(d for d in crd_documents() if d["spec"]["names"]["kind"] == c.KIND_TASK)
    columns = next(v for v in crd["spec"]["versions"] if v["served"])["additionalPrinterColumns"]
    out = kubetools.run(f"kubectl get tasks -n {namespace}", control_plane.kubeconfig).stdout
    header, row = out.splitlines()
    names = ["NAME", *(col["name"].upper() for col in columns)]
    assert re.split(r"\s{2,}", header.strip()) == names
    starts = [header.index(name) for name in names]
    cells = [row[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
    task = engine.task("t")
    expected = ["t"] + [
        _json_path(task, col["jsonPath"]) if col["type"] != "date" else cells[i + 1]
        for i, col in enumerate(columns)
    ]
    assert cells == expected
    assert {"local", "wf", "fn", succeeded_task, "Succeeded", "JobSucceeded"} <= set(cells)


def test_short_names(control_plane, engine, namespace, succeeded_task):
    """`kubectl get nt` is `kubectl get tasks`; `nwf` Workflows, `mpe` MediaProcessingEntities."""
    for short, name in (("nt", "t"), ("ntask", "t"), ("nwf", "wf"), ("mpe", "local")):
        out = kubetools.run(
            f"kubectl get {short} -n {namespace} -o name", control_plane.kubeconfig
        ).stdout
        assert out.strip().endswith(f".{c.GROUP}/{name}"), (short, out)


def test_describe_task_shows_status_and_events(control_plane, namespace, succeeded_task):
    """`kubectl describe task` shows the phase, the Job reference and the controller's Events
    (the phase change to Succeeded, from taskfsm, written with --task-phase-events)."""
    out = kubetools.run(f"kubectl describe task t -n {namespace}", control_plane.kubeconfig).stdout
    assert re.search(r"^\s+Phase:\s+Succeeded$", out, re.M), out
    assert re.search(rf"^\s+Name:\s+{succeeded_task}$", out, re.M), out
    events = out.split("\nEvents:", 1)[1]
    assert re.search(r"Normal\s+Succeeded\s+\S+\s+engine\.nagare\.media/taskfsm\s", events), out


def test_kubectl_taskfsm_plugin(control_plane, namespace, succeeded_task):
    """`kubectl taskfsm` runs the kubectl-taskfsm console script: kubectl lists it as a plugin,
    `explain` reads the Task through the kubeconfig kubectl was given, `--version` is taskfsm's."""
    kubeconfig = control_plane.kubeconfig
    plugin = Path(sys.executable).parent / "kubectl-taskfsm"
    assert plugin.is_file()
    assert shutil.which("kubectl-taskfsm", path=str(plugin.parent)) == str(plugin)
    listed = kubetools.run("kubectl plugin list", kubeconfig).stdout
    assert str(plugin) in listed
    version = kubetools.run("kubectl taskfsm --version", kubeconfig).stdout
    assert version.strip() == f"taskfsm {__version__}"
    out = kubetools.run(f"kubectl taskfsm explain t -n {namespace}", kubeconfig).stdout
    assert "Succeeded" in out
    assert succeeded_task in out


def test_kubectl_taskfsm_render_job_needs_no_cluster():
    """`kubectl taskfsm render-job` prints the Job and Secret a sample Task would produce, with no
    cluster to talk to."""
    out = kubetools.run(
        "kubectl taskfsm render-job taskfsm_dev/demo_samples.yaml --task patched", "/dev/null"
    ).stdout
    docs = kubetools.documents(out)
    assert [d["kind"] for d in docs] == ["Job", "Secret"]
    assert docs[0]["metadata"]["labels"]
