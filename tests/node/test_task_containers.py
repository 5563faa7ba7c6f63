"""Tasks whose Jobs run real containers on a real node, with the controller installed by the
chart: the container reads exactly the helper data its Task should carry, a non-zero exit fails
the Task with the Job's own reason, pods that cannot start (an image that cannot be pulled, a
ConfigMap or Secret they need) fail it with what the kubelet says, and no pod ever waits for a
helper Secret that is not coming."""

from __future__ import annotations

import base64
import contextlib
import json
import time
from pathlib import Path
from typing import Any

from taskfsm.api import constants as c
from taskfsm.kube.client import ApiClient
from taskfsm.kube.errors import KubeError, NotFound
from taskfsm.kube.resources import BY_KIND
from taskfsm.kube.rest import PODS, SECRETS, Resource, Rest
from taskfsm_dev import objects
from taskfsm_dev.node import WORKLOAD_IMAGE
from taskfsm_dev.waiting import wait_for
from tests.support import installs, kubetools
from tests.support.cluster import Cluster
from tests.support.probes import Probe, failed_message, failed_reason

PODS_REFUSED_TIMEOUT = 20
CONTROLLER_VALUES = {
    "replicaCount": 1,
    "extraArgs": [f"--job-pods-refused-timeout={PODS_REFUSED_TIMEOUT}"],
}
DATA = f"{c.TASK_DATA_MOUNT_PATH}/{c.TASK_DATA_FILE_NAME}"
VAPS = Resource("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies",
                "ValidatingAdmissionPolicy", namespaced=False)  # fmt: skip
VAP_BINDINGS = Resource("admissionregistration.k8s.io", "v1",
                        "validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding",
                        namespaced=False)  # fmt: skip


def _tenant(api: ApiClient, namespace: str, *functions: dict[str, Any]) -> Cluster:
    """A Workflow ``wf``, a local MPE ``m`` (Jobs in the tenant's namespace) and ``functions``."""
    cluster = Cluster(api, namespace)
    for obj in (objects.workflow("wf"), objects.local_mpe("m"), *functions):
        cluster.create(obj)
    Probe(api, namespace).wait_mpe_ready("m")
    return cluster


def _task(cluster: Cluster, name: str, function: str, *, workflow: str = "wf", **spec: Any) -> None:
    cluster.create(
        objects.task(name, workflow_name=workflow, function_name=function, mpe_name="m", **spec)
    )


def test_the_container_reads_exactly_the_helper_data_of_its_task(
    installed_controller: installs.Installed,
    node_admin: ApiClient,
    node_kubeconfig: Path,
    tenant_namespace: str,
) -> None:
    """The Job's container prints its helper data: what `taskfsm logs` and `kubectl logs` show is
    the Task's identity, its merged config and its MediaLocation with only the credential keys
    the auth method uses (the Secret's other key stays out), byte for byte the Secret's data."""
    cluster = _tenant(
        node_admin,
        tenant_namespace,
        objects.container_function("show", "cat", DATA, image=WORKLOAD_IMAGE),
        objects.secret(
            "creds",
            {"accessKeyID": "AKIA-TEST", "secretAccessKey": "s3cr3t", "unrelated": "keep-out"},
        ),
        objects.s3_location("media", secret_name="creds"),
    )
    cluster.rest.patch(
        BY_KIND[c.KIND_WORKFLOW], tenant_namespace, "wf",
        {"spec": {"mediaLocations": [objects.location_entry("in", "media")]}},
    )  # fmt: skip
    _task(cluster, "t", "show", config={"preset": "h264-720p"})
    probe = Probe(node_admin, tenant_namespace)
    task = probe.wait_phase("t", "Succeeded", timeout=90)
    job = task["status"]["jobRef"]["name"]

    shown = kubetools.run(
        kubetools.quote("taskfsm", "logs", "t", "-n", tenant_namespace), node_kubeconfig,
        with_helm=False,
    ).stdout  # fmt: skip
    kubelet = kubetools.run(
        kubetools.quote("kubectl", "logs", f"job/{job}", "-n", tenant_namespace),
        node_kubeconfig, with_helm=False,
    ).stdout  # fmt: skip
    assert shown == kubelet
    data = json.loads(shown)
    assert data == probe.payload(job)
    assert data["task"]["id"] == "t"
    assert data["workflow"]["id"] == "wf"
    assert data["task"]["config"] == {"preset": "h264-720p"}
    secret_ref = data["mediaLocations"]["in"]["s3"]["auth"]["aws"]["secretRef"]
    assert secret_ref == {
        "data": {
            "accessKeyID": base64.b64encode(b"AKIA-TEST").decode(),
            "secretAccessKey": base64.b64encode(b"s3cr3t").decode(),
        }
    }
    assert "unrelated" not in shown
    assert base64.b64encode(b"keep-out").decode() not in shown


def test_a_container_exiting_non_zero_fails_the_task_with_the_jobs_reason(
    installed_controller: installs.Installed, node_admin: ApiClient, tenant_namespace: str
) -> None:
    """Exit code 3: the Job fails (BackoffLimitExceeded, its backoffLimit is 0) and the Task is
    Failed with reason JobFailed and the Job's own words."""
    cluster = _tenant(
        node_admin,
        tenant_namespace,
        objects.container_function("fail", "exit", "3", "transcode failed", image=WORKLOAD_IMAGE),
    )
    _task(cluster, "t", "fail")
    task = Probe(node_admin, tenant_namespace).wait_phase("t", "Failed", timeout=90)
    assert failed_reason(task) == "JobFailed"
    assert "BackoffLimitExceeded" in failed_message(task)


def test_pods_that_cannot_start_fail_the_task_with_what_the_kubelet_says(
    installed_controller: installs.Installed, node_admin: ApiClient, tenant_namespace: str
) -> None:
    """An image that cannot be pulled, a missing ConfigMap the container reads and a missing
    Secret the pod mounts: each Task fails with reason JobPodsRefused and the kubelet's words
    once --job-pods-refused-timeout ran out (Ready=False with them until then: the chart's
    scenarios), with a Warning Event, and its Job goes."""
    cases = {
        "no-image": (
            objects.container_function(
                "no-image", "sleep", "0", image="registry.invalid/none:1",
                pull_policy="IfNotPresent",
            ),
            ("ErrImagePull", "ImagePullBackOff"),
        ),
        "no-configmap": (
            objects.container_function(
                "no-configmap", "sleep", "0", image=WORKLOAD_IMAGE,
                env=[{"name": "PRESET", "valueFrom": {
                    "configMapKeyRef": {"name": "absent", "key": "preset"}}}],
            ),
            ("CreateContainerConfigError",),
        ),
        "no-secret": (
            objects.container_function(
                "no-secret", "sleep", "0", image=WORKLOAD_IMAGE,
                volumes=[{"name": "keys", "secret": {"secretName": "absent"}}],
                mounts=[{"name": "keys", "mountPath": "/keys"}],
            ),
            ('secret "absent" not found',),
        ),
    }  # fmt: skip
    cluster = _tenant(node_admin, tenant_namespace, *(f for f, _ in cases.values()))
    for name in cases:
        # A Workflow each: the first Task to fail would fail a shared one, and with it the rest.
        cluster.create(objects.workflow(name))
        _task(cluster, name, name, workflow=name)
    probe = Probe(node_admin, tenant_namespace)
    for name, (_, said) in cases.items():
        task = probe.wait_phase(name, "Failed", timeout=PODS_REFUSED_TIMEOUT + 60)
        assert failed_reason(task) == "JobPodsRefused"
        assert any(s in failed_message(task) for s in said), failed_message(task)
        probe.wait_event(name, "Failed")
    wait_for(lambda: not probe.jobs(), timeout=60, what="the Jobs deleted")


def test_helper_data_larger_than_a_secret_fails_the_task_before_anything_is_made(
    installed_controller: installs.Installed, node_admin: ApiClient, tenant_namespace: str
) -> None:
    """A config that makes the helper data exceed 1 MiB: no Job, no Secret, the Task Failed with
    reason HelperDataTooLarge and a message naming the size and the limit."""
    cluster = _tenant(
        node_admin,
        tenant_namespace,
        objects.container_function("show", "cat", DATA, image=WORKLOAD_IMAGE),
    )
    _task(cluster, "t", "show", config={"blob": "x" * (1024 * 1024 + 1)})
    probe = Probe(node_admin, tenant_namespace)
    task = probe.wait_phase("t", "Failed", timeout=60)
    assert failed_reason(task) == "HelperDataTooLarge"
    assert "1048576 bytes" in failed_message(task)
    assert probe.jobs() == []
    assert probe.secrets() == []
    probe.wait_event("t", "Failed")


def test_a_helper_secret_refused_for_a_while_lands_and_its_pod_runs(
    installed_controller: installs.Installed, node_admin: ApiClient, tenant_namespace: str
) -> None:
    """An admission policy refuses the namespace's Secrets: the Job exists, its pod waits for
    the Secret, the Task says why and retries; the policy goes, the Secret lands, the pod runs
    and the Task succeeds."""
    cluster = _tenant(
        node_admin,
        tenant_namespace,
        objects.container_function("show", "cat", DATA, image=WORKLOAD_IMAGE),
    )
    with _secrets_refused(node_admin, tenant_namespace):
        _task(cluster, "t", "show")
        probe = Probe(node_admin, tenant_namespace)
        probe.wait_message("t", "no Secrets here", timeout=60)
        assert probe.phase("t") == "JobPending"
        (job,) = probe.jobs()
        wait_for(lambda: probe.pods(job["metadata"]["name"]), timeout=30, what="its pod")
        assert probe.secrets() == []
    task = probe.wait_phase("t", "Succeeded", timeout=120)
    assert task["status"]["jobRef"]["uid"] == job["metadata"]["uid"]


def test_a_helper_secret_refused_for_good_fails_the_task_and_its_job_goes(
    installed_controller: installs.Installed, node_admin: ApiClient, tenant_namespace: str
) -> None:
    """Refused for the whole --job-pods-refused-timeout: the Task is Failed with reason
    HelperDataNotCreated and its Job (and so its waiting pod) is deleted."""
    cluster = _tenant(
        node_admin,
        tenant_namespace,
        objects.container_function("show", "cat", DATA, image=WORKLOAD_IMAGE),
    )
    with _secrets_refused(node_admin, tenant_namespace):
        _task(cluster, "t", "show")
        probe = Probe(node_admin, tenant_namespace)
        task = probe.wait_phase("t", "Failed", timeout=PODS_REFUSED_TIMEOUT + 90)
        assert failed_reason(task) == "HelperDataNotCreated"
        wait_for(lambda: not probe.jobs(), timeout=60, what="the Job deleted")
        wait_for(
            lambda: not [p for p in _pods(probe) if p["metadata"].get("labels", {})
                         .get("batch.kubernetes.io/job-name")],
            timeout=60, what="its pod gone",
        )  # fmt: skip


def _pods(probe: Probe) -> list[dict[str, Any]]:
    return probe.rest.list(PODS, probe.namespace).get("items") or []


class _secrets_refused:
    """A ValidatingAdmissionPolicy refusing every Secret created in ``namespace`` while the
    block runs; waits until the API server enforces it (a dry-run create is refused)."""

    def __init__(self, api: ApiClient, namespace: str) -> None:
        self.rest = Rest(api)
        self.namespace = namespace
        self.name = f"no-secrets-{namespace}"

    def __enter__(self) -> None:
        self.rest.create(VAPS, None, {
            "metadata": {"name": self.name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [{
                    "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                    "resources": ["secrets"]}]},
                "validations": [{"expression": "false", "message": "no Secrets here",
                                 "reason": "Forbidden"}],
            },
        })  # fmt: skip
        self.rest.create(VAP_BINDINGS, None, {
            "metadata": {"name": self.name},
            "spec": {
                "policyName": self.name,
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": {"matchLabels": {
                    "kubernetes.io/metadata.name": self.namespace}}},
            },
        })  # fmt: skip
        wait_for(self._enforced, timeout=30, what="the Secret policy in force")

    def _enforced(self) -> bool:
        probe = objects.secret("probe", {"x": "y"})
        try:
            self.rest.create(SECRETS, self.namespace, probe, dry_run=True)
        except KubeError:
            return True
        return False

    def __exit__(self, *exc: object) -> None:
        for res in (VAP_BINDINGS, VAPS):
            with contextlib.suppress(NotFound):
                self.rest.delete(res, None, self.name)
        time.sleep(1)  # the API server drops a policy from its own watch
