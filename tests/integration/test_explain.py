"""``taskfsm explain`` of a failed Task shows what ``kubectl describe`` users look for next: the
Task's recent Events, and for the failed pod of its Job each container's exit code, reason and
termination message (never the logs; the command that shows them). A user who may not read pods
or Events still gets the rest, with a line saying what could not be read."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from taskfsm.api import constants as c
from taskfsm.kube.resources import TASKS
from taskfsm.kube.rest import Rest
from taskfsm.tools import explain, rbac
from taskfsm_dev import objects
from taskfsm_dev.kubelet import (
    ANNOTATION_TERMINATION_MESSAGE,
    ANNOTATION_TERMINATION_REASON,
    JOB_NAME_LABEL,
)
from taskfsm_dev.waiting import wait_for
from tests.integration.test_rbac import token_client

MESSAGE = "cannot open input.mp4: no such file\nconverter exiting"


def failing_function() -> dict[str, Any]:
    """A Function whose pods exit 3 with reason ``Error`` and a two-line termination message."""
    function = objects.function("fn", exit_code=3)
    pod_meta = function["spec"]["template"]["spec"]["template"]["metadata"]
    pod_meta["annotations"][ANNOTATION_TERMINATION_MESSAGE] = MESSAGE
    pod_meta["annotations"][ANNOTATION_TERMINATION_REASON] = "Error"
    return function


def explained(api_client: client.ApiClient, namespace: str, name: str) -> list[str]:
    task = Rest(api_client).get(TASKS, namespace, name)
    return explain.task_lines(Rest(api_client), task, "none")


def test_explain_shows_events_and_the_failed_containers_exit(
    engine, controller, kubelet, api_client, control_plane, namespace, capsys
):
    """A Task whose Job failed: explain shows its path and lists its Events (the Failed
    Warning) and, under the Job, the failed pod with `exit code 3, reason Error`, both lines of
    the termination message and the `kubectl logs` command; with credentials that may read the
    Task and Job but not pods or Events, those two parts say so and everything else is shown."""
    engine.create(objects.workflow("wf"))
    engine.create(failing_function())
    engine.create(objects.local_mpe("local"))
    engine.create(objects.task("t", workflow_name="wf", function_name="fn", mpe_name="local"))
    wait_for(lambda: engine.phase("t") == "Failed", timeout=60, what="Task Failed")
    # The Job controller counts the failed pod (status.failed) a moment after the Failed
    # condition the Task records; wait for both, as a user reading explain twice would.
    wait_for(
        lambda: (
            {"the Failed Event", "the failed pod counted"}
            <= {
                what
                for line in explained(api_client, namespace, "t")
                for what, needle in (
                    ("the Failed Event", " Warning  Failed "),
                    ("the failed pod counted", "pods: active 0, succeeded 0, failed 1"),
                )
                if needle in line
            }
        ),
        timeout=30,
        what="the Failed Event and the failed pod counted",
    )

    assert explain.main(api_client, namespace, "t", "none") == 0
    lines = capsys.readouterr().out.splitlines()
    events = lines[lines.index("  Events:") + 1 :]
    # The Warning of the failure, last (a ReconcileError may come first while the Function is
    # not yet in the controller's cache); a Normal phase change is an Event only with
    # --task-phase-events, and the path is rebuilt from the status.
    kinds = [line.split()[1:3] for line in events]
    assert kinds[-1] == ["Warning", "Failed"], events
    assert ["Normal", "Running"] not in kinds, events
    assert events[-1].endswith("Running -> Failed: JobFailed")
    assert "  Path:       (new) -> Initializing -> JobPending -> Running -> Failed" in lines

    (pod,) = (
        client.CoreV1Api(api_client)
        .list_namespaced_pod(namespace, label_selector=JOB_NAME_LABEL)
        .items
    )
    start = lines.index("              failed pods: 1")
    assert lines[start + 1 : start + 6] == [
        f"                {pod.metadata.name}",
        "                  container function: exit code 3, reason Error",
        "                    message: cannot open input.mp4: no such file",
        "                    message: converter exiting",
        f"                  logs: kubectl logs -n {namespace} {pod.metadata.name} --all-containers",
    ]

    # Credentials for Tasks and Jobs only (the CLI user's own, not the controller's RBAC).
    reader = [
        rbac.Rule((c.GROUP,), ("tasks", "workflows"), ("get", "list"), "explain"),
        rbac.Rule(("batch",), ("jobs",), ("get",), "explain"),
    ]
    restricted = token_client(api_client, control_plane, namespace, reader, [])
    assert explain.main(restricted, namespace, "t", "none") == 0
    text = capsys.readouterr().out
    assert "Phase:      Failed" in text
    assert "              pods: active 0, succeeded 0, failed 1" in text
    assert "              failed pods: could not read them: " in text
    assert "  Events:     could not read them: " in text
    assert "exit code" not in text


def test_explain_of_a_task_without_events_or_job(engine, api_client, namespace, capsys):
    """A Task no controller has seen: no Job, and `Events: (none)`."""
    engine.create(objects.task("quiet", workflow_name="wf"))
    assert explain.main(api_client, namespace, "quiet", "none") == 0
    text = capsys.readouterr().out
    assert "  Job:        (none recorded)" in text
    assert "  Events:     (none)" in text
