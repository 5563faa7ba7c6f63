"""A Task runs end to end against the real control plane: Job, Secret, phases, deletion."""

from __future__ import annotations

import base64
import json

from kubernetes import client

from taskfsm.api import constants as c
from taskfsm.manifests.jobs import job_name
from taskfsm_dev import objects
from taskfsm_dev.waiting import wait_for


def setup_basics(engine, *, exit_code: int = 0, run_seconds: float = 0.0):
    engine.create(objects.workflow("wf"))
    engine.create(objects.function("fn", exit_code=exit_code, run_seconds=run_seconds))
    engine.create(objects.local_mpe("local"))


def test_task_succeeds_with_job_and_secret(engine, controller, kubelet, api_client, namespace):
    """Happy path: Running then Succeeded; one Job with its Secret, owned by the Job."""
    setup_basics(engine)
    engine.create(objects.task("t1", workflow_name="wf", function_name="fn", mpe_name="local"))
    wait_for(lambda: engine.phase("t1") == "Succeeded", timeout=60, what="Task Succeeded")
    task = engine.task("t1")
    status = task["status"]
    assert status["jobRef"]["name"] == job_name(task)
    assert status["startTime"]
    assert status["endTime"]
    assert status["queuedTime"]
    conditions = {cond["type"]: cond["status"] for cond in status["conditions"]}
    assert conditions == {"Initialized": "True", "Ready": "False", "Complete": "True"}
    batch = client.BatchV1Api(api_client)
    jobs = batch.list_namespaced_job(namespace).items
    assert [j.metadata.name for j in jobs] == [job_name(task)]
    secret = client.CoreV1Api(api_client).read_namespaced_secret(job_name(task), namespace)
    assert secret.metadata.owner_references[0].uid == jobs[0].metadata.uid
    payload = json.loads(base64.b64decode(secret.data[c.TASK_DATA_FILE_NAME]))
    assert payload["task"]["id"] == "t1"
    assert payload["workflow"]["id"] == "wf"


def test_failing_job_fails_the_task(engine, controller, kubelet):
    """A pod exiting 1 makes the Job Failed and the Task Failed with Failed=True."""
    setup_basics(engine, exit_code=1)
    engine.create(objects.task("t2", workflow_name="wf", function_name="fn", mpe_name="local"))
    wait_for(lambda: engine.phase("t2") == "Failed", timeout=60, what="Task Failed")
    conditions = {
        cond["type"]: cond["status"] for cond in engine.task("t2")["status"]["conditions"]
    }
    assert conditions["Failed"] == "True"


def test_deleting_a_task_deletes_job_and_secret(engine, controller, kubelet, api_client, namespace):
    """Deleting a running Task removes its Job (and with it the Secret) and then the Task."""
    setup_basics(engine, run_seconds=600)
    engine.create(objects.task("t3", workflow_name="wf", function_name="fn", mpe_name="local"))
    wait_for(lambda: engine.phase("t3") == "Running", timeout=60, what="Task Running")
    name = job_name(engine.task("t3"))
    engine.api.delete_namespaced_custom_object(c.GROUP, c.VERSION, namespace, "tasks", "t3")
    batch = client.BatchV1Api(api_client)
    core = client.CoreV1Api(api_client)

    def all_gone() -> bool:
        tasks = engine.api.list_namespaced_custom_object(c.GROUP, c.VERSION, namespace, "tasks")[
            "items"
        ]
        jobs = batch.list_namespaced_job(namespace).items
        secrets = [
            s for s in core.list_namespaced_secret(namespace).items if s.metadata.name == name
        ]
        return not tasks and not jobs and not secrets

    wait_for(all_gone, timeout=90, what="Task, Job and Secret gone")
