"""Where a Task's Job runs: local and remote MediaProcessingEntities (§1.7, §3.7 steps 6-7).

A remote MPE's kubeconfig (in a Secret) points at the test's API server, with the test's
namespace as context namespace: the Job lands there, through a separate client and Job watch.
``localMediaProcessingEntitiesOnly`` refuses a remote MPE; an MPE that is not ready says why in
the Task's message and the Task proceeds once the MPE becomes ready.
"""

from __future__ import annotations

from kubernetes import client

from taskfsm import constants as c
from taskfsm.actions.jobs import job_name
from taskfsm.testing import builders as b
from taskfsm.testing import objects
from taskfsm.testing.waiting import wait_for


def kubeconfig_in(api_client, control_plane, namespace: str, name: str = "kubeconfig") -> None:
    secret = b.kubeconfig_secret(name, control_plane.kubeconfig_dict(namespace=namespace))
    client.CoreV1Api(api_client).create_namespaced_secret(namespace, secret)


def test_task_runs_on_a_remote_mpe(
    engine, controller, kubelet, probe, namespace, api_client, control_plane
):
    """A Task on a remote MPE gets its Job and Secret in the kubeconfig context's namespace and
    succeeds, observed through the remote client's Job watch."""
    kubeconfig_in(api_client, control_plane, namespace)
    engine.create(b.remote_mpe("remote", secret_name="kubeconfig"))
    engine.create(objects.workflow("wf"))
    engine.create(objects.function("f"))
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="remote"))
    done = probe.wait_phase("t", "Succeeded")
    name = job_name(done)
    assert done["status"]["jobRef"]["namespace"] == namespace
    assert probe.secret(name)["metadata"]["ownerReferences"][0]["name"] == name
    cluster = controller.registry.get(done["status"]["mediaProcessingEntityRef"])
    assert cluster is not None
    assert cluster.remote


def test_local_only_function_refuses_a_remote_mpe(
    engine, controller, probe, namespace, api_client, control_plane
):
    """A Function with localMediaProcessingEntitiesOnly on a remote MPE stays JobPending with
    the §3.14 message and creates nothing."""
    kubeconfig_in(api_client, control_plane, namespace)
    engine.create(b.remote_mpe("remote", secret_name="kubeconfig"))
    engine.create(objects.workflow("wf"))
    engine.create(objects.function("f", local_only=True))
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="remote"))
    task = probe.wait_message(
        "t",
        "localMediaProcessingEntitiesOnly is true, but selected MediaProcessingEntity is remote",
    )
    assert task["status"]["phase"] == "JobPending"
    assert probe.jobs() == []
    assert probe.secrets() == []


def test_mpe_not_ready_says_why_then_recovers(
    engine, controller, probe, namespace, api_client, control_plane
):
    """A Task whose MPE cannot be used yet (kubeconfig Secret missing) says so with the MPE's
    reason; once the Secret exists the MPE becomes Ready and the Task runs."""
    engine.create(b.remote_mpe("remote", secret_name="kubeconfig"))
    engine.create(objects.workflow("wf"))
    engine.create(b.never_starting(objects.function("f")))
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="remote"))
    task = probe.wait_message("t", "MediaProcessingEntity does not exist or is not ready: ")
    assert 'secrets "kubeconfig" not found' in task["status"]["message"]
    assert task["status"]["phase"] == "JobPending"
    kubeconfig_in(api_client, control_plane, namespace)
    wait_for(
        lambda: (engine.get(c.KIND_MEDIA_PROCESSING_ENTITY, "remote").get("status") or {}).get(
            "message"
        )
        == "",
        timeout=90,
        what="MPE Ready",
    )
    running = probe.wait_phase("t", "Running", timeout=90)
    assert running["status"]["message"] == ""
