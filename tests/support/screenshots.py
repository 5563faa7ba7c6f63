"""Write the README's screenshots of ``taskfsm ui``: ``docs/images/ui-overview.png`` (the overview)
and ``docs/images/ui-task.png`` (a Task page).

    .venv/bin/python -m tests.support.screenshots [--out docs/images]

Starts its own local control plane, the controller (in this process) and a simulated kubelet
that serves logs, creates a Workflow whose Tasks end in different phases (one still running, one
failed, the rest succeeded) while ``taskfsm ui -n`` watches (so the moves are emphasised), and
photographs the two pages in Debian's headless Chromium (tests/support/ui.py). About a minute.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from kubernetes import client

from taskfsm.api.crdgen import crd_documents
from taskfsm.kube.resources import BY_KIND, TASKS
from taskfsm.kube.rest import Rest
from taskfsm.manager.manager import Manager, Settings
from taskfsm_dev import objects
from taskfsm_dev.controlplane import REPO_ROOT, ControlPlane
from taskfsm_dev.crds import install_crds
from taskfsm_dev.kubelet import SimulatedKubelet
from taskfsm_dev.podlogs import ANNOTATION_LOG
from taskfsm_dev.ui import UiProcess, launch_chromium
from taskfsm_dev.waiting import wait_for

NAMESPACE = "media"
LOG = "probing input.mp4: h264 1920x1080 25 fps\ntranscoding to 3 renditions\nwrote 3 renditions"


def populate(api: client.ApiClient) -> None:
    rest = Rest(api)

    def create(obj: dict) -> None:
        rest.create(BY_KIND[obj["kind"]], NAMESPACE, obj)

    create(objects.workflow("nightly", humanReadable={"name": "Nightly transcode"}))
    transcode = objects.function("transcode", run_seconds=1)
    transcode["spec"]["template"]["spec"]["template"]["metadata"]["annotations"][ANNOTATION_LOG] = (
        LOG
    )
    create(transcode)
    create(objects.never_starting(objects.function("package")))
    create(objects.function("thumbnail", exit_code=2))
    create(objects.local_mpe("local"))
    for name, function in (
        ("transcode-1080p", "transcode"),
        ("transcode-720p", "transcode"),
        ("transcode-480p", "transcode"),
        ("package-hls", "package"),
        ("thumbnails", "thumbnail"),
    ):
        task = objects.task(name, workflow_name="nightly", function_name=function, mpe_name="local")
        if name == "thumbnails":
            task["spec"]["jobFailurePolicy"] = {"defaultAction": "Ignore"}
        create(task)


def main(argv: list[str] | None = None) -> int:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs" / "images")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with ControlPlane(name="taskfsm-screenshots") as plane, plane.api_client() as api:
        install_crds(api, crd_documents())
        client.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})
        settings = Settings(namespace=NAMESPACE, metrics_address=None, health_address=None)
        controller = Manager(api, settings).start()
        try:
            with (
                SimulatedKubelet(api, namespace=NAMESPACE, logs=True),
                UiProcess(plane.kubeconfig, "-n", NAMESPACE) as ui,
                sync_playwright() as pw,
            ):
                browser = launch_chromium(pw)
                page = browser.new_page(viewport={"width": 1280, "height": 1000})
                page.goto(ui.url + "/")
                page.wait_for_selector("body[data-synced=true]")
                populate(api)  # while the page watches: the moves are emphasised
                rest = Rest(api)

                def phases() -> list[str]:
                    items = rest.list(TASKS, NAMESPACE)["items"]
                    return sorted((t.get("status") or {}).get("phase") or "" for t in items)

                wait_for(
                    lambda: (
                        phases() == ["Failed", "Running", "Succeeded", "Succeeded", "Succeeded"]
                    ),
                    timeout=120,
                    what="the sample Tasks in their phases",
                )
                time.sleep(2)  # the page's next event-stream message
                page.screenshot(path=str(args.out / "ui-overview.png"), full_page=False)
                page.goto(f"{ui.url}/task/{NAMESPACE}/transcode-1080p")
                page.wait_for_selector("body[data-ready=true]")
                page.screenshot(path=str(args.out / "ui-task.png"), full_page=False)
                browser.close()
        finally:
            controller.stop()
    for name in ("ui-overview.png", "ui-task.png"):
        print(f"wrote {args.out / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
