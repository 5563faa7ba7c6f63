"""``taskfsm ui`` in a real headless Chromium (Debian's) against the local control plane, with the
controller running in-process and a simulated kubelet: the overview's counts match the cluster
as Tasks move, the moves are emphasised, the state page lists and filters, a Task page shows its
path through the chart, its Job, pods and log tail, a Workflow page its Tasks by state, and a Task
whose free-text fields and Events hold HTML and script shows them as text. Screenshots of the
overview, a Task page and a Workflow page are written to test-artefacts/ui/."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from playwright.sync_api import Page, sync_playwright

from taskfsm.kube.resources import TASKS
from taskfsm.kube.rest import EVENTS, Rest
from taskfsm.tools.ui import charts
from taskfsm.tools.ui.server import CSP
from taskfsm_dev import objects
from taskfsm_dev.kubelet import SimulatedKubelet
from taskfsm_dev.podlogs import ANNOTATION_LOG
from taskfsm_dev.ui import UiProcess, artefact_dir, launch_chromium
from taskfsm_dev.waiting import wait_for

HOSTILE = '<img src=x onerror="alert(1)"><script>alert(2)</script>'


@pytest.fixture
def log_kubelet(api_client, namespace) -> Iterator[SimulatedKubelet]:
    with SimulatedKubelet(api_client, namespace=namespace, logs=True) as sim:
        yield sim


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium) -> Iterator[Page]:
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.dialogs = dialogs  # type: ignore[attr-defined]
    yield page
    context.close()


@pytest.fixture
def ui(control_plane, namespace, crds) -> Iterator[UiProcess]:
    with UiProcess(control_plane.kubeconfig, "-n", namespace) as proc:
        yield proc


def page_counts(page: Page, chart: str) -> dict[str, int]:
    counts = page.eval_on_selector_all(
        f"#chart-{chart} g.node[data-state]",
        "nodes => nodes.map(n => [n.dataset.state, n.querySelector('text.count').textContent])",
    )
    return {state: int(n) for state, n in counts if n and int(n)}


def cluster_counts(api_client, namespace: str, view: str) -> dict[str, int]:
    tasks = Rest(api_client).list(TASKS, namespace)["items"]
    return dict(Counter(charts.state_of("task", t, view=view) for t in tasks))


def test_overview_counts_follow_the_cluster(
    engine, controller, log_kubelet, api_client, namespace, ui, page
):
    """The overview opens with no Tasks counted; as Tasks are created, run and finish, each
    state's count on the user view equals the cluster's (and so on the full chart), the moves
    just taken are emphasised, and a deleted Task leaves the counts. A screenshot of each
    view is saved."""
    page.goto(ui.url + "/")
    page.wait_for_selector("body[data-synced=true]")
    assert page_counts(page, "task") == {}
    engine.create(objects.workflow("wf"))
    engine.create(objects.function("quick", run_seconds=1))
    engine.create(objects.never_starting(objects.function("stuck")))
    engine.create(objects.local_mpe("local"))
    for name in ("a", "b"):
        engine.create(
            objects.task(name, workflow_name="wf", function_name="quick", mpe_name="local")
        )
    engine.create(objects.task("c", workflow_name="wf", function_name="stuck", mpe_name="local"))

    def settled() -> bool:
        return (
            page_counts(page, "task")
            == cluster_counts(api_client, namespace, "phases")
            == {
                "succeeded": 2,
                "running": 1,
            }
        )

    wait_for(settled, timeout=90, what="the overview showing 2 Succeeded and 1 Running")
    recent = page.eval_on_selector_all(
        "#chart-task g.edge.recent", "edges => edges.map(e => e.dataset.edge)"
    )
    assert "running->succeeded" in recent
    assert page_counts(page, "workflow") == {"running": 1}
    moves = page.inner_text("#moves")
    assert "Running → Succeeded" in moves
    page.screenshot(path=str(artefact_dir("ui") / "overview.png"), full_page=True)

    page.click("#toggle-view")
    page.wait_for_selector("body[data-view=lifecycle]")
    wait_for(
        lambda: page_counts(page, "task") == cluster_counts(api_client, namespace, "lifecycle"),
        timeout=30,
        what="the full chart's counts",
    )
    page.screenshot(path=str(artefact_dir("ui") / "overview-full-chart.png"), full_page=True)

    client.CustomObjectsApi(api_client).delete_namespaced_custom_object(
        "engine.nagare.media", "v1alpha1", namespace, "tasks", "a"
    )
    wait_for(
        lambda: (
            page_counts(page, "task").get("succeeded") == 1
            and page_counts(page, "task") == cluster_counts(api_client, namespace, "lifecycle")
        ),
        timeout=60,
        what="the deleted Task gone from the counts",
    )
    assert page.dialogs == []  # type: ignore[attr-defined]


def test_state_task_and_workflow_pages(
    engine, controller, log_kubelet, api_client, namespace, ui, page
):
    """The state page lists the Tasks in a state and filters them; a Task page shows the path
    it took (New → Initializing → JobPending → Running → Succeeded) marked on the chart, its
    conditions, Events, Job, pod and log tail and explain's text; the Workflow page shows its
    Tasks on the Task chart. Screenshots of the Task and Workflow pages are saved."""
    engine.create(objects.workflow("wf", humanReadable={"name": "Nightly transcode"}))
    function = objects.function("fn", run_seconds=0)
    function["spec"]["template"]["spec"]["template"]["metadata"]["annotations"][ANNOTATION_LOG] = (
        "reading input.mp4\nwrote output.mp4"
    )
    engine.create(function)
    engine.create(objects.local_mpe("local"))
    for name in ("alpha", "beta"):
        engine.create(objects.task(name, workflow_name="wf", function_name="fn", mpe_name="local"))
    wait_for(
        lambda: {engine.phase("alpha"), engine.phase("beta")} == {"Succeeded"},
        timeout=60,
        what="both Tasks Succeeded",
    )
    # A Task succeeds on the Job's SuccessCriteriaMet; the Job controller counts the pod in
    # status.succeeded a moment later, and the page shows the Job as it is when rendered.
    batch = client.BatchV1Api(api_client)
    wait_for(
        lambda: [j.status.succeeded for j in batch.list_namespaced_job(namespace).items] == [1, 1],
        timeout=60,
        what="both Jobs counting their succeeded pod",
    )

    page.goto(f"{ui.url}/state/task/phases/succeeded")
    page.wait_for_selector("#rows tbody tr")
    wait_for(lambda: page.inner_text("#count") == "2 of 2", timeout=30, what="two rows")
    page.fill("#filter", "bet")
    assert page.inner_text("#count") == "1 of 2"
    assert page.inner_text("#rows tbody").split("\t")[0] == "beta"

    page.click("#rows tbody a >> text=beta")
    page.wait_for_selector("body[data-ready=true]")
    assert page.url == f"{ui.url}/task/{namespace}/beta"
    assert page.inner_text("#path") == "New → Initializing → JobPending → Running → Succeeded"
    visited = page.eval_on_selector_all(
        "#chart-task g.node.visited", "nodes => nodes.map(n => n.dataset.state)"
    )
    assert set(visited) == {"new", "initializing", "job_pending", "running", "succeeded"}
    taken = page.eval_on_selector_all(
        "#chart-task g.edge.taken", "edges => edges.map(e => e.dataset.edge)"
    )
    assert {"job_pending->running", "running->succeeded"} <= set(taken)
    assert page.eval_on_selector("g.node.current", "n => n.dataset.state") == "succeeded"
    assert "JobSucceeded" in page.inner_text("#conditions")
    assert "active 0, succeeded 1, failed 0" in page.inner_text("#job")
    assert page.inner_text(".log-text") == "reading input.mp4\nwrote output.mp4\n"
    assert "Phase:      Succeeded" in page.inner_text("#explain")
    page.screenshot(path=str(artefact_dir("ui") / "task.png"), full_page=True)

    page.click("#toggle-view")
    page.wait_for_selector("body[data-view=lifecycle]")
    assert "running->succeeded" in page.eval_on_selector_all(
        "#chart-task g.edge.taken", "edges => edges.map(e => e.dataset.edge)"
    )

    page.goto(f"{ui.url}/workflow/{namespace}/wf")
    page.wait_for_selector("body[data-ready=true]")
    assert page.inner_text("#human-name") == "Nightly transcode"
    assert page_counts(page, "task") == {"succeeded": 2}
    assert [r.split("\t")[0] for r in page.inner_text("#rows tbody").splitlines()] == [
        "alpha",
        "beta",
    ]
    page.screenshot(path=str(artefact_dir("ui") / "workflow.png"), full_page=True)


def test_hostile_strings_are_shown_as_text(engine, api_client, namespace, ui, page):
    """A Task and Workflow whose human-readable names, description, labels and an Event note hold
    HTML and script: every page shows them as the literal text, no script runs (no dialog), no
    element is injected, and every answer carries the Content-Security-Policy. (Object names and
    label values cannot hold markup: the API server refuses them, checked first; the free-text
    fields can.)"""
    from taskfsm.kube.errors import Invalid

    with pytest.raises(Invalid):
        Rest(api_client).create(
            TASKS, namespace, objects.task("<script>alert(1)</script>", workflow_name="wf")
        )
    labelled = objects.task("labelled", workflow_name="wf")
    labelled["metadata"]["labels"] = {"x": "<b>"}
    with pytest.raises(Invalid):
        Rest(api_client).create(TASKS, namespace, labelled)
    engine.create(objects.workflow("wf", humanReadable={"name": HOSTILE, "description": HOSTILE}))
    task = objects.task(
        "x-script-alert-1",
        workflow_name="wf",
        humanReadable={"name": HOSTILE, "description": HOSTILE},
    )
    task["metadata"]["labels"] = {"onerror": "alert.1_x-script"}
    created = engine.create(task)
    Rest(api_client).create(
        EVENTS,
        namespace,
        {
            "metadata": {"name": "hostile"},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "example.com/test",
            "reportingInstance": "test",
            "action": "Test",
            "reason": "Hostile",
            "type": "Normal",
            "note": HOSTILE,
            "regarding": {
                "apiVersion": "engine.nagare.media/v1alpha1",
                "kind": "Task",
                "name": "x-script-alert-1",
                "namespace": namespace,
                "uid": created["metadata"]["uid"],
            },
        },
    )
    page.goto(f"{ui.url}/task/{namespace}/x-script-alert-1")
    page.wait_for_selector("body[data-ready=true]")
    assert page.inner_text("#human-name") == HOSTILE
    assert HOSTILE in page.inner_text("#events")
    assert "alert.1_x-script" in page.inner_text("#labels")
    assert page.locator("main img").count() == 0
    assert page.locator("main script").count() == 0

    page.goto(f"{ui.url}/workflow/{namespace}/wf")
    page.wait_for_selector("body[data-ready=true]")
    assert page.inner_text("#human-name") == HOSTILE
    page.goto(f"{ui.url}/state/task/phases/new")
    page.wait_for_selector("#rows tbody tr")
    assert HOSTILE in page.inner_text("#rows")
    assert page.locator("main img").count() == 0
    assert page.dialogs == []  # type: ignore[attr-defined]

    for path in ("/", f"/api/task/{namespace}/x-script-alert-1", "/static/app.js"):
        with urllib.request.urlopen(ui.url + path) as answer:
            assert answer.headers["Content-Security-Policy"] == CSP
            assert answer.headers["X-Content-Type-Options"] == "nosniff"
    facts = get_json(f"{ui.url}/api/task/{namespace}/x-script-alert-1")
    assert facts["humanReadable"]["name"] == HOSTILE  # JSON carries it; the page escapes it


def test_ui_answers_only_its_own_host_and_only_reads(ui, namespace):
    """Requests naming another Host (DNS rebinding) get 421; anything but GET gets 405; the
    printed line names the namespace."""
    assert ui.first_line.endswith(f"(namespace {namespace}; read-only; Ctrl-C stops)")
    rebound = urllib.request.Request(ui.url + "/api/meta", headers={"Host": "evil.example:80"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(rebound)
    assert refused.value.code == 421
    refused.value.close()
    post = urllib.request.Request(ui.url + "/api/meta", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as written:
        urllib.request.urlopen(post)
    assert written.value.code == 405
    written.value.close()
    assert get_json(ui.url + "/api/meta")["namespace"] == namespace


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url) as answer:
        return json.loads(answer.read())
