"""The local control plane is a real cluster: Jobs, TTL, garbage collection, CRDs, two clusters.

Acceptance of the control-plane issue; every test talks to the real kube-apiserver, etcd and
kube-controller-manager started by ``tests/conftest.py``.
"""

from __future__ import annotations

import socket
import uuid

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from taskfsm_dev import controlplane
from taskfsm_dev.controlplane import ControlPlane, free_port
from taskfsm_dev.crds import install_crds
from taskfsm_dev.kubelet import ANNOTATION_EXIT_CODE, ANNOTATION_NEVER_START
from taskfsm_dev.waiting import wait_for


def job_body(
    name: str, *, annotations: dict[str, str] | None = None, ttl: int | None = None
) -> dict:
    spec: dict = {
        "backoffLimit": 0,
        "template": {
            "metadata": {"annotations": annotations or {}},
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "example.invalid/noop:1"}],
            },
        },
    }
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


def job_condition(batch: client.BatchV1Api, namespace: str, name: str, type_: str) -> bool:
    job = batch.read_namespaced_job_status(name, namespace)
    return any(c.type == type_ and c.status == "True" for c in job.status.conditions or [])


def exists(read, *args) -> bool:
    try:
        read(*args)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def test_job_pod_succeeds_and_job_completes(api_client, namespace, kubelet):
    """The simulated kubelet completes the pod; the real Job controller sets Complete=True."""
    batch = client.BatchV1Api(api_client)
    batch.create_namespaced_job(namespace, job_body("ok"))
    wait_for(
        lambda: job_condition(batch, namespace, "ok", "Complete"), timeout=60, what="Job Complete"
    )
    job = batch.read_namespaced_job_status("ok", namespace)
    assert job.status.succeeded == 1
    pods = client.CoreV1Api(api_client).list_namespaced_pod(
        namespace, label_selector="batch.kubernetes.io/job-name=ok"
    )
    assert [p.status.phase for p in pods.items] == ["Succeeded"]


def test_job_pod_fails_and_job_fails(api_client, namespace, kubelet):
    """A pod exiting non-zero with backoffLimit 0 makes the Job Failed=True."""
    batch = client.BatchV1Api(api_client)
    batch.create_namespaced_job(namespace, job_body("bad", annotations={ANNOTATION_EXIT_CODE: "3"}))
    wait_for(
        lambda: job_condition(batch, namespace, "bad", "Failed"), timeout=60, what="Job Failed"
    )
    pods = client.CoreV1Api(api_client).list_namespaced_pod(
        namespace, label_selector="batch.kubernetes.io/job-name=bad"
    )
    statuses = pods.items[0].status.container_statuses
    assert statuses[0].state.terminated.exit_code == 3


def test_never_start_policy_keeps_pod_pending(api_client, namespace, kubelet):
    """A pod annotated never-start stays Pending and its Job stays active."""
    batch = client.BatchV1Api(api_client)
    core = client.CoreV1Api(api_client)
    batch.create_namespaced_job(
        namespace, job_body("stuck", annotations={ANNOTATION_NEVER_START: "true"})
    )
    pods = wait_for(
        lambda: (
            core.list_namespaced_pod(
                namespace, label_selector="batch.kubernetes.io/job-name=stuck"
            ).items
        ),
        what="the Job's pod",
    )
    # Give the kubelet time to (wrongly) act, then check nothing moved.
    batch.create_namespaced_job(namespace, job_body("witness"))
    wait_for(
        lambda: job_condition(batch, namespace, "witness", "Complete"), what="witness Job Complete"
    )
    pod = core.read_namespaced_pod(pods[0].metadata.name, namespace)
    assert pod.status.phase == "Pending"
    assert not job_condition(batch, namespace, "stuck", "Complete")


def test_garbage_collector_removes_secret_owned_by_deleted_job(api_client, namespace):
    """Deleting a Job with background propagation removes the Secret it owns."""
    batch = client.BatchV1Api(api_client)
    core = client.CoreV1Api(api_client)
    job = batch.create_namespaced_job(namespace, job_body("owner"))
    core.create_namespaced_secret(
        namespace,
        {
            "metadata": {
                "name": "owned",
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": "owner",
                        "uid": job.metadata.uid,
                    }
                ],
            },
            "stringData": {"k": "v"},
        },
    )
    batch.delete_namespaced_job("owner", namespace, propagation_policy="Background")
    wait_for(
        lambda: not exists(core.read_namespaced_secret, "owned", namespace),
        timeout=90,
        what="garbage collection of the owned Secret",
    )


def test_ttl_controller_removes_finished_job(api_client, namespace, kubelet):
    """A finished Job with ttlSecondsAfterFinished: 0 is deleted by the TTL controller."""
    batch = client.BatchV1Api(api_client)
    batch.create_namespaced_job(namespace, job_body("short", ttl=0))
    wait_for(
        lambda: not exists(batch.read_namespaced_job, "short", namespace),
        timeout=90,
        what="TTL deletion of the finished Job",
    )


WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.test.taskfsm.dev"},
    "spec": {
        "group": "test.taskfsm.dev",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                            "status": {
                                "type": "object",
                                "properties": {"phase": {"type": "string"}},
                            },
                        },
                    }
                },
            }
        ],
    },
}


def test_crd_installs_and_objects_round_trip_with_status_subresource(api_client, namespace):
    """A CRD becomes Established; an object round-trips; status is only written via /status."""
    install_crds(api_client, [WIDGET_CRD])
    custom = client.CustomObjectsApi(api_client)
    args = ("test.taskfsm.dev", "v1", namespace, "widgets")
    created = custom.create_namespaced_custom_object(
        *args,
        {
            "apiVersion": "test.taskfsm.dev/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"size": 3},
            "status": {"phase": "ignored"},
        },
    )
    assert created["spec"] == {"size": 3}
    assert "status" not in created  # the main resource ignores status when the subresource is on
    custom.patch_namespaced_custom_object_status(*args, "w", {"status": {"phase": "Ready"}})
    read = custom.get_namespaced_custom_object(*args, "w")
    assert read["status"] == {"phase": "Ready"}
    assert read["spec"] == {"size": 3}


def test_two_control_planes_run_side_by_side(
    control_plane: ControlPlane, remote_control_plane: ControlPlane
):
    """The main and a remote cluster have their own ports and their own data."""
    assert control_plane.server != remote_control_plane.server
    assert control_plane.etcd_url != remote_control_plane.etcd_url
    name = f"only-remote-{uuid.uuid4().hex[:6]}"
    with remote_control_plane.api_client() as remote, control_plane.api_client() as main:
        client.CoreV1Api(remote).create_namespace({"metadata": {"name": name}})
        assert exists(client.CoreV1Api(remote).read_namespace, name)
        assert not exists(client.CoreV1Api(main).read_namespace, name)


def test_stop_ends_only_its_own_processes(control_plane: ControlPlane, server_minor: int):
    """A throwaway control plane stops cleanly and leaves the session's one running."""
    extra = ControlPlane(
        name="taskfsm-extra", controller_manager=False, bin_dir=control_plane.bin_dir
    )
    extra.start()
    pids = [p.popen.pid for p in extra._procs]
    extra.stop()
    import os

    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    with control_plane.api_client() as api:
        assert client.VersionApi(api).get_code().git_version.startswith(f"v1.{server_minor}.")


def test_a_control_plane_whose_port_was_taken_meanwhile_starts_on_fresh_ones(
    control_plane: ControlPlane, monkeypatch: pytest.MonkeyPatch
):
    """Ports are picked free before etcd and kube-apiserver bind them; another process taking
    one meanwhile (a busy machine's ephemeral port) must not fail the start: it is tried again."""
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    picks = iter([squatter.getsockname()[1]])
    monkeypatch.setattr(
        controlplane,
        "free_port",
        lambda address="127.0.0.1": next(picks, None) or free_port(address),
    )
    extra = ControlPlane(
        name="taskfsm-squatted", controller_manager=False, bin_dir=control_plane.bin_dir
    )
    try:
        extra.start()
        assert extra.etcd_url != f"http://127.0.0.1:{squatter.getsockname()[1]}"
        with extra.api_client() as api:
            assert client.VersionApi(api).get_code().git_version
    finally:
        extra.stop()
        squatter.close()


def test_pod_waits_for_the_secret_it_mounts(api_client, namespace, kubelet):
    """Like a kubelet, the simulated one starts a pod only once its Secret volume exists."""
    batch = client.BatchV1Api(api_client)
    core = client.CoreV1Api(api_client)
    body = job_body("needs-secret")
    pod_spec = body["spec"]["template"]["spec"]
    pod_spec["volumes"] = [{"name": "data", "secret": {"secretName": "late"}}]
    pod_spec["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    batch.create_namespaced_job(namespace, body)
    wait_for(lambda: kubelet.waiting_for_secrets, what="the kubelet to wait for the Secret")
    assert not job_condition(batch, namespace, "needs-secret", "Complete")
    core.create_namespaced_secret(
        namespace, {"metadata": {"name": "late"}, "stringData": {"k": "v"}}
    )
    wait_for(
        lambda: job_condition(batch, namespace, "needs-secret", "Complete"), what="Job Complete"
    )


def test_the_server_is_the_version_of_its_binaries(control_plane: ControlPlane, api_client):
    """The cluster answers with the version its kube-apiserver binary was built as: v1.35.4 from
    tools/controlplane, v1.30.14 in the run against the oldest supported Kubernetes."""
    import subprocess

    assert control_plane.bin_dir is not None
    built = subprocess.run(
        [str(control_plane.bin_dir / "kube-apiserver"), "--version"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[-1]
    assert built in {"v1.35.4", "v1.30.14"}
    assert client.VersionApi(api_client).get_code().git_version == built
