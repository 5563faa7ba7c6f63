"""``taskfsm run`` as a separate process against the real control plane: sample Tasks end in the
phases they should with real Jobs, deletion cleans up, and a remote MediaProcessingEntity runs
its Job in a second API server."""

from __future__ import annotations

import copy
import socket

import yaml

from taskfsm.api import constants as c
from taskfsm.kube.resources import MEDIA_PROCESSING_ENTITIES
from taskfsm.kube.rest import JOBS, SECRETS, Rest
from taskfsm_dev import objects
from taskfsm_dev.demo import EXPECTED, SAMPLES
from taskfsm_dev.objects import kubeconfig_secret, remote_mpe
from taskfsm_dev.process import ControllerProcess
from taskfsm_dev.waiting import wait_for
from tests.support.cluster import job_audit


def load_samples() -> list[dict]:
    return [doc for doc in yaml.safe_load_all(SAMPLES.read_text()) if doc]


def test_sample_tasks_reach_their_phases_with_real_jobs(cluster, kubelet, start_controller):
    """Every sample Task ends in its annotated phase with exactly one Job owning its Secret."""
    proc = start_controller()
    docs = load_samples()
    for doc in docs:
        cluster.create(copy.deepcopy(doc))
    expected = {
        d["metadata"]["name"]: d["metadata"]["annotations"][EXPECTED]
        for d in docs
        if d["kind"] == c.KIND_TASK
    }
    assert set(expected.values()) == {"Succeeded", "Failed"}

    def phases() -> dict[str, str]:
        return {name: cluster.phase(name) for name in expected}

    wait_for(lambda: phases() == expected, timeout=60, what=f"phases {expected}")
    problems = job_audit(cluster.tasks(), cluster.jobs(), cluster.secrets())
    assert problems == []
    for name, phase in expected.items():
        conditions = {x["type"]: x["status"] for x in cluster.task(name)["status"]["conditions"]}
        assert conditions["Complete" if phase == "Succeeded" else "Failed"] == "True"
    assert proc.running
    secret_values = [
        v for d in docs if d["kind"] == "Secret" for v in (d.get("stringData") or {}).values()
    ]
    assert secret_values
    log = proc.log_text()
    assert [v for v in secret_values if v in log] == []


def test_deleting_a_task_deletes_its_job_and_secret(cluster, kubelet, start_controller):
    """A running Task, deleted, takes its Job and Secret with it and then disappears."""
    start_controller()
    cluster.create(objects.workflow("wf"))
    cluster.create(objects.function("long", run_seconds=600))
    cluster.create(objects.local_mpe("local"))
    cluster.create(
        objects.task("doomed", workflow_name="wf", function_name="long", mpe_name="local")
    )
    wait_for(lambda: cluster.phase("doomed") == "Running", timeout=30, what="Running")
    job = cluster.task("doomed")["status"]["jobRef"]["name"]
    assert [j["metadata"]["name"] for j in cluster.jobs()] == [job]
    assert job in [s["metadata"]["name"] for s in cluster.secrets()]

    cluster.delete_task("doomed")

    def gone() -> bool:
        secrets = [s for s in cluster.secrets() if s["metadata"]["name"] == job]
        return cluster.task("doomed") is None and not cluster.jobs() and not secrets

    wait_for(gone, timeout=60, what="Task, Job and Secret gone")


def test_remote_mpe_runs_the_job_in_the_second_api_server(
    cluster, kubelet, start_controller, remote_namespace, namespace
):
    """A remote-MPE Task succeeds with its Job and Secret in the second cluster's context namespace."""
    remote, remote_ns = remote_namespace
    proc = start_controller()
    cluster.create(
        kubeconfig_secret("edge-kubeconfig", remote.kubeconfig_dict(namespace=remote_ns))
    )
    cluster.create(remote_mpe("edge", "edge-kubeconfig"))
    cluster.create(objects.workflow("wf"))
    cluster.create(objects.function("fn", run_seconds=1))
    cluster.create(objects.task("far", workflow_name="wf", function_name="fn", mpe_name="edge"))

    wait_for(lambda: cluster.phase("far") == "Succeeded", timeout=60, what="remote Task Succeeded")
    assert remote.token not in proc.log_text()  # the kubeconfig's credentials never reach the log
    with remote.api_client() as api:
        rest = Rest(api)
        jobs = rest.list(JOBS, remote_ns)["items"]
        secrets = rest.list(SECRETS, remote_ns)["items"]
    assert job_audit([cluster.task("far")], jobs, secrets) == []
    assert cluster.jobs() == []
    assert jobs[0]["metadata"]["labels"][c.LABEL_TASK_NAMESPACE] == namespace
    mpe_status = cluster.rest.get(MEDIA_PROCESSING_ENTITIES, namespace, "edge")["status"]
    assert {x["type"]: x["status"] for x in mpe_status["conditions"]}["Ready"] == "True"


def test_a_process_whose_port_was_taken_meanwhile_starts_on_fresh_ones(
    installed_kubeconfig, namespace, tmp_path
):
    """The test kit picks a process's ports free, and the process binds them a second or two
    later; another process taking one meanwhile made the start fail ("Address already in use",
    a crash-points case in a clean-clone run). The start is tried again on fresh ports."""
    proc = ControllerProcess(installed_kubeconfig(), namespace=namespace, log_dir=tmp_path)
    taken = proc.metrics_port
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        try:
            proc.start()
            assert proc.metrics_port != taken
            assert "Address already in use" in proc.log_path.read_text()
            assert proc.probe("/readyz")[0] == 200
        finally:
            proc.ensure_stopped()


def test_a_process_started_without_waiting_also_moves_off_a_taken_port(
    installed_kubeconfig, namespace, tmp_path
):
    """Replicas start without waiting and are waited for later (``start_replicas``); a port taken
    meanwhile made such a start fail, as only ``start`` tried again (a buckets case in CI).
    ``wait_ready`` itself now starts the process again on fresh ports, whoever started it."""
    proc = ControllerProcess(installed_kubeconfig(), namespace=namespace, log_dir=tmp_path)
    taken = proc.health_port
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        try:
            proc.start(wait_ready=False)
            proc.wait_ready(60)
            assert proc.health_port != taken
            assert "Address already in use" in proc.log_path.read_text()
            assert proc.probe("/readyz")[0] == 200
        finally:
            proc.ensure_stopped()
