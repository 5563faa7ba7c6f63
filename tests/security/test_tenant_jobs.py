"""What a tenant's Job may be (docs/security.md, "What a Job may be").

In a namespace the tenant owns, Pod Security Admission applies to its Job's pods: refused pods
make the Task say so (Ready=False, reason JobPodsRefused, a Warning Event) and fail it after
--job-pods-refused-timeout, never leave it silently Running. Where several tenants share a
namespace (a ClusterMediaProcessingEntity's), the optional ValidatingAdmissionPolicy
(deploy/admission/) refuses a Job the controller's identity would create with host access or
another ServiceAccount; the refusal is the Task's status message and an Event.
"""

from __future__ import annotations

import contextlib

import pytest
from kubernetes import client, utils

from taskfsm.kube import client as kube_client
from taskfsm.kube.errors import KubeError
from taskfsm.kube.rest import JOBS, Rest
from taskfsm.tools import job_policy, rbac
from taskfsm_dev import objects
from taskfsm_dev.waiting import wait_for
from tests.support.tenancy import PODS_REFUSED_TIMEOUT, Tenant


def test_pods_refused_by_pod_security_make_the_task_say_so_then_fail(tenant: Tenant, admin):
    client.CoreV1Api(admin).patch_namespace(
        tenant.namespace,
        {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}},
    )
    function = objects.function("fn")
    pod = function["spec"]["template"]["spec"]["template"]["spec"]
    pod["containers"][0]["securityContext"] = {"privileged": True}
    tenant.basics(function=function)
    tenant.task("t")
    wait_for(
        lambda: tenant.condition("Task", "t", "Ready").get("reason") == "JobPodsRefused",
        timeout=90,
        what=lambda: (
            f"Ready=False JobPodsRefused: {tenant.status('Task', 't')}, jobs "
            f"{[j.get('status') for j in tenant.jobs()]}, events {[e.get('reason') for e in tenant.events()]}"
        ),
    )
    ready = tenant.condition("Task", "t", "Ready")
    assert ready["status"] == "False"
    assert "PodSecurity" in ready["message"]
    assert tenant.phase("t") == "Running"
    tenant.wait_event("t", "JobPodsRefused")
    done = tenant.wait_phase("t", "Failed", timeout=PODS_REFUSED_TIMEOUT + 90)
    failed = next(c for c in done["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "JobPodsRefused"
    wait_for(lambda: tenant.jobs() == [], timeout=60, what="the refused Job deleted")


@pytest.fixture
def job_bounds(admin, controller, tenant: Tenant):
    """The shipped ValidatingAdmissionPolicy, for the controller's ServiceAccount; returns once
    the API server enforces it (a server-side dry run of a violating Job, as the controller, is
    refused)."""
    docs = job_policy.render(user=job_policy.controller_user(rbac.NAMESPACE))
    utils.create_from_yaml(admin, yaml_objects=docs)
    kubeconfig = next(a.split("=", 1)[1] for a in controller.cmd if a.startswith("--kubeconfig="))
    as_controller = Rest(kube_client.from_kubeconfig(kubeconfig))
    probe = {
        "metadata": {"name": "policy-probe"},
        "spec": {
            "template": {
                "spec": {
                    "hostNetwork": True,
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "example.invalid/probe"}],
                }
            }
        },
    }

    def enforced() -> bool:
        try:
            as_controller.create(JOBS, tenant.namespace, probe, dry_run=True)
        except KubeError as exc:
            return "taskfsm" in str(exc)
        return False

    wait_for(enforced, timeout=30, what="the job policy enforced")
    yield
    api = client.AdmissionregistrationV1Api(admin)
    with contextlib.suppress(client.ApiException):
        api.delete_validating_admission_policy_binding(job_policy.NAME)
    with contextlib.suppress(client.ApiException):
        api.delete_validating_admission_policy(job_policy.NAME)


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        (
            {"volumes": [{"name": "host", "hostPath": {"path": "/"}}]},
            "may not mount hostPath volumes",
        ),
        ({"hostNetwork": True}, "may not use the node's network"),
        ({"serviceAccountName": "taskfsm"}, "may run only as the allowed ServiceAccounts"),
        (
            {"containers": [{"name": "function", "securityContext": {"privileged": True}}]},
            "may not run privileged containers",
        ),
        (
            {"volumes": [{"name": "theirs", "secret": {"secretName": "someone-elses-task-data"}}]},
            "may mount no Secret but their own task data",
        ),
    ],
    ids=["hostPath", "hostNetwork", "serviceAccount", "privileged", "other-secret"],
)
def test_the_job_policy_refuses_host_access_and_other_identities(
    tenant: Tenant, job_bounds, patch, message
):
    tenant.basics()
    tenant.task("t", templatePatches={"spec": {"template": {"spec": patch}}})
    wait_for(
        lambda: message in str(tenant.status("Task", "t").get("message") or ""),
        timeout=90,
        what=lambda: f"the policy's refusal in status: {tenant.status('Task', 't')}",
    )
    tenant.wait_event("t", "ReconcileError")
    assert tenant.jobs() == []


def test_the_job_policy_lets_ordinary_jobs_through(tenant: Tenant, job_bounds):
    tenant.basics()
    tenant.task("ok")
    tenant.wait_phase("ok", "Succeeded", timeout=90)
