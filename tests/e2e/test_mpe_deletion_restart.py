"""A MediaProcessingEntity being deleted while a Task still runs a Job through it, with the
controller restarted in the middle: the new process builds the deleting MPE's
client, so the Task finishes (or, deleted, cleans up its Job) and then the MPE goes.

The controller runs as its own process (``taskfsm run``), stopped after the MPE's deletion
started and started again. The Job's pod never starts by itself; the test completes it by
writing the pod status a kubelet would write.
"""

from __future__ import annotations

from typing import Any

import pytest

from taskfsm.api import constants as c
from taskfsm.kube.errors import NotFound
from taskfsm.kube.resources import MEDIA_PROCESSING_ENTITIES, WORKFLOWS
from taskfsm.kube.rest import JOBS, PODS
from taskfsm.manifests.jobs import job_name
from taskfsm_dev import objects
from taskfsm_dev.kubelet import JOB_NAME_LABEL, terminated_status
from taskfsm_dev.waiting import wait_for

pytestmark = pytest.mark.timeout(300)


def mpe(cluster) -> dict[str, Any] | None:
    try:
        return cluster.rest.get(MEDIA_PROCESSING_ENTITIES, cluster.namespace, "local")
    except NotFound:
        return None


def workflow(cluster) -> dict[str, Any] | None:
    try:
        return cluster.rest.get(WORKFLOWS, cluster.namespace, "wf")
    except NotFound:
        return None


def job(cluster, name: str) -> dict[str, Any] | None:
    try:
        return cluster.rest.get(JOBS, cluster.namespace, name)
    except NotFound:
        return None


def running_task_on_deleting_mpe(cluster, start_controller) -> tuple[Any, str]:
    """A Task Running with its Job on MPE ``local``, whose deletion then waits for the Task;
    returns the first controller process and the Job's name."""
    first = start_controller(name="first")
    cluster.create(objects.local_mpe("local"))
    cluster.create(objects.workflow("wf"))
    cluster.create(objects.never_starting(objects.function("hold")))
    cluster.create(objects.task("t", workflow_name="wf", function_name="hold", mpe_name="local"))
    wait_for(lambda: cluster.phase("t") == "Running", timeout=60, what="Task Running")
    name = job_name(cluster.task("t"))
    assert c.FINALIZER_JOB_PROTECTION in job(cluster, name)["metadata"]["finalizers"]
    cluster.rest.delete(MEDIA_PROCESSING_ENTITIES, cluster.namespace, "local")

    def waiting() -> bool:
        message = ((mpe(cluster) or {}).get("status") or {}).get("message") or ""
        return "waiting for 1 Task(s)" in message

    wait_for(waiting, timeout=30, what="the MPE's deletion waiting for the Task")
    return first, name


def complete_pod(cluster, job_name_: str) -> None:
    selector = f"{JOB_NAME_LABEL}={job_name_}"
    pods = cluster.rest.list(PODS, cluster.namespace, label_selector=selector)
    assert len(pods["items"]) == 1, pods["items"]
    pod = pods["items"][0]
    cluster.rest.patch(
        PODS,
        cluster.namespace,
        pod["metadata"]["name"],
        {"status": terminated_status(pod, 0)},
        subresource="status",
    )


def wait_mpe_gone(cluster) -> None:
    try:
        wait_for(lambda: mpe(cluster) is None, timeout=90, what="the MPE gone")
    except TimeoutError:
        task = cluster.task("t")
        pytest.fail(f"MPE stays: {mpe(cluster)}; Task: {task and task.get('status')}")


def abandoned_events(cluster) -> list[dict[str, Any]]:
    from taskfsm.kube.rest import EVENTS

    events = cluster.rest.list(EVENTS, cluster.namespace)["items"]
    return [e for e in events if e.get("reason") == "JobAbandoned"]


def test_deleting_mpe_after_restart_lets_its_running_task_finish(cluster, start_controller):
    """A controller restarted (SIGTERM) while an MPE's deletion waits for a
    Running Task sets up that MPE's client: the Job completing makes the Task Succeeded and
    releases the Job's job-protection finalizer; deleting the Workflow then removes the Task and
    its Job, and the MPE and the Workflow go."""
    first, name = running_task_on_deleting_mpe(cluster, start_controller)
    assert first.terminate() == 0
    start_controller(name="second")
    complete_pod(cluster, name)

    wait_for(lambda: cluster.phase("t") == "Succeeded", timeout=90, what="Task Succeeded")
    wait_for(
        lambda: (
            c.FINALIZER_JOB_PROTECTION
            not in ((job(cluster, name) or {}).get("metadata") or {}).get("finalizers", [])
        ),
        timeout=60,
        what="job-protection released",
    )
    # A finished Task still owns its Job (jobRef): the MPE waits until the Task is gone.
    cluster.rest.delete(WORKFLOWS, cluster.namespace, "wf")
    wait_for(lambda: cluster.task("t") is None, timeout=90, what="Task gone")
    wait_mpe_gone(cluster)
    wait_for(lambda: workflow(cluster) is None, timeout=90, what="Workflow gone")
    assert abandoned_events(cluster) == []


def test_deleting_mpe_after_restart_lets_its_deleted_task_clean_up(cluster, start_controller):
    """After a crash (SIGKILL) while an MPE's deletion waits for a Running
    Task, deleting the Task completes: the new process deletes the Job through the MPE's client
    (nothing abandoned), the Task goes, then the MPE goes."""
    first, name = running_task_on_deleting_mpe(cluster, start_controller)
    first.kill()
    start_controller(name="second")
    cluster.delete_task("t")

    wait_for(lambda: cluster.task("t") is None, timeout=90, what="Task gone")
    wait_for(
        lambda: (j := job(cluster, name)) is None or j["metadata"].get("deletionTimestamp"),
        timeout=30,
        what="the Job deleted",
    )
    assert c.FINALIZER_JOB_PROTECTION not in ((job(cluster, name) or {}).get("metadata") or {}).get(
        "finalizers", []
    )
    wait_mpe_gone(cluster)
    assert abandoned_events(cluster) == []
