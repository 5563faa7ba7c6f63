"""A remote MediaProcessingEntity's kubeconfig Secret rotated to new credentials (and the old ones
revoked) gives both its API client and its Job watch the new credentials (D19), as soon as the
Secret changes; while its cluster refuses the controller (401/403) the MPE is not Ready."""

from __future__ import annotations

import time

from taskfsm.kube.resources import MEDIA_PROCESSING_ENTITIES
from taskfsm.kube.rest import SECRETS, Resource
from taskfsm_dev import objects
from taskfsm_dev.objects import kubeconfig_secret, remote_mpe
from taskfsm_dev.waiting import wait_for
from tests.support.cluster import job_audit

SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")
WATCH_TIMEOUT = 4


def service_account_kubeconfig(cluster, control_plane, name: str) -> dict:
    """A kubeconfig for a new ServiceAccount ``name`` allowed to do anything in the namespace."""
    ns = cluster.namespace
    cluster.rest.create(SERVICE_ACCOUNTS, ns, {"metadata": {"name": name}})
    cluster.rest.create(
        ROLE_BINDINGS,
        ns,
        {
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cluster-admin",
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
        },
    )
    token = cluster.rest.request(
        "POST",
        SERVICE_ACCOUNTS,
        SERVICE_ACCOUNTS.path(ns, name, "token"),
        body={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
    )["status"]["token"]
    kubeconfig = control_plane.kubeconfig_dict(namespace=ns)
    kubeconfig["users"][0]["user"] = {"token": token}
    return kubeconfig


def test_rotated_kubeconfig_reaches_the_job_watch(
    cluster, kubelet, start_controller, control_plane
):
    """A rotated kubeconfig Secret (old identity deleted) also gives the Job watch the new identity."""
    proc = start_controller(args=[f"--watch-timeout={WATCH_TIMEOUT}", "--watch-read-margin=2"])
    cluster.create(
        kubeconfig_secret(
            "edge-kubeconfig", service_account_kubeconfig(cluster, control_plane, "old")
        )
    )
    cluster.create(remote_mpe("edge", "edge-kubeconfig"))
    cluster.create(objects.function("fn", run_seconds=0.5))
    cluster.create(objects.workflow("wf-one"))
    cluster.create(objects.task("one", workflow_name="wf-one", function_name="fn", mpe_name="edge"))
    wait_for(lambda: cluster.phase("one") == "Succeeded", timeout=45, what="first Task Succeeded")

    rotated = kubeconfig_secret(
        "edge-kubeconfig", service_account_kubeconfig(cluster, control_plane, "new")
    )
    cluster.rest.patch(SECRETS, cluster.namespace, "edge-kubeconfig", {"data": rotated["data"]})
    # The kubeconfig Secret's watch re-queues the MPE at once: no MPE event.
    time.sleep(2)
    cluster.rest.delete(SERVICE_ACCOUNTS, cluster.namespace, "old")  # the old token stops working

    time.sleep(3 * WATCH_TIMEOUT)  # every watch opened with the old token would have failed by now
    assert proc.probe("/readyz") == (200, "ok\n")
    cluster.create(objects.workflow("wf-two"))
    cluster.create(objects.task("two", workflow_name="wf-two", function_name="fn", mpe_name="edge"))
    wait_for(lambda: cluster.phase("two") == "Succeeded", timeout=45, what="second Task Succeeded")
    assert job_audit(cluster.tasks(), cluster.jobs(), cluster.secrets()) == []
    assert proc.probe("/readyz") == (200, "ok\n")


def mpe_status(cluster, name: str = "edge") -> tuple[str, str, str]:
    """(Ready, Failed, message) of MPE ``name``."""
    mpe = cluster.rest.get(MEDIA_PROCESSING_ENTITIES, cluster.namespace, name)
    status = mpe.get("status") or {}
    conditions = {x["type"]: x["status"] for x in status.get("conditions") or []}
    return conditions.get("Ready", ""), conditions.get("Failed", ""), status.get("message") or ""


def refused_with(code: int, cluster) -> tuple[str, str, str] | None:
    ready, failed, message = status = mpe_status(cluster)
    refused = ready == "False" and failed == "True" and f"HTTP {code}" in message
    return status if refused else None


def job_watch_broken(proc) -> bool:
    """``taskfsm_watch_healthy`` is 0 for some MediaProcessingEntity Job watch."""
    return any(
        name == "taskfsm_watch_healthy"
        and dict(labels)["resource"].startswith("jobs@")
        and not value
        for (name, labels), value in proc.samples().items()
    )


def fast_controller(start_controller):
    return start_controller(
        args=[f"--watch-timeout={WATCH_TIMEOUT}", "--watch-read-margin=2", "--watch-max-backoff=2"]
    )


def test_revoked_token_turns_ready_false_and_a_rotated_secret_rebuilds_at_once(
    cluster, kubelet, start_controller, control_plane
):
    """Revoking a remote MPE's token turns its Ready False (Failed True, the
    401 from its cluster in the message, no credential in it); writing a new token into the
    kubeconfig Secret -- no MPE event -- rebuilds the client from the Secret's watch, Ready goes
    back True, and Tasks run again."""
    proc = fast_controller(start_controller)
    old = service_account_kubeconfig(cluster, control_plane, "old")
    cluster.create(kubeconfig_secret("edge-kubeconfig", old))
    cluster.create(remote_mpe("edge", "edge-kubeconfig"))
    cluster.create(objects.function("fn", run_seconds=0.5))
    cluster.create(objects.workflow("wf-one"))
    cluster.create(objects.task("one", workflow_name="wf-one", function_name="fn", mpe_name="edge"))
    wait_for(lambda: cluster.phase("one") == "Succeeded", timeout=45, what="first Task Succeeded")
    assert mpe_status(cluster) == ("True", "", "")

    revoked = time.monotonic()
    cluster.rest.delete(SERVICE_ACCOUNTS, cluster.namespace, "old")  # its token stops working
    _ready, _failed, message = wait_for(
        lambda: refused_with(401, cluster), timeout=60, what="Ready False with the 401"
    )
    print(f"revocation -> Ready=False: {time.monotonic() - revoked:.1f}s; message: {message}")
    assert "refuses the controller" in message
    assert old["users"][0]["user"]["token"] not in message
    wait_for(lambda: job_watch_broken(proc), timeout=30, what="taskfsm_watch_healthy 0")
    # A namespaced MPE is a tenant's: its cluster never makes the controller unready.
    assert proc.probe("/readyz") == (200, "ok\n")

    new = service_account_kubeconfig(cluster, control_plane, "new")
    rotated = kubeconfig_secret("edge-kubeconfig", new)
    updated = time.monotonic()
    cluster.rest.patch(SECRETS, cluster.namespace, "edge-kubeconfig", {"data": rotated["data"]})
    wait_for(lambda: mpe_status(cluster) == ("True", "", ""), timeout=60, what="Ready True again")
    print(f"Secret update -> Ready=True: {time.monotonic() - updated:.2f}s")
    wait_for(lambda: not job_watch_broken(proc), timeout=30, what="the Job watch healthy again")
    cluster.create(objects.workflow("wf-two"))
    cluster.create(objects.task("two", workflow_name="wf-two", function_name="fn", mpe_name="edge"))
    wait_for(lambda: cluster.phase("two") == "Succeeded", timeout=45, what="second Task Succeeded")
    print(f"Secret update -> second Task Succeeded: {time.monotonic() - updated:.2f}s")
    assert job_audit(cluster.tasks(), cluster.jobs(), cluster.secrets()) == []


def test_forbidden_cluster_turns_ready_false_until_it_allows_again(
    cluster, kubelet, start_controller, control_plane
):
    """While a remote MPE's cluster answers 403 (its ServiceAccount lost its
    RoleBinding) the MPE's Ready is False with the 403 in its message; once the cluster allows
    the controller again (same credentials, no Secret or MPE change) Ready goes back True."""
    proc = fast_controller(start_controller)
    kubeconfig = service_account_kubeconfig(cluster, control_plane, "sa")
    cluster.create(kubeconfig_secret("edge-kubeconfig", kubeconfig))
    cluster.create(remote_mpe("edge", "edge-kubeconfig"))
    wait_for(lambda: mpe_status(cluster) == ("True", "", ""), timeout=45, what="MPE Ready")
    binding = cluster.rest.get(ROLE_BINDINGS, cluster.namespace, "sa")

    cut = time.monotonic()
    cluster.rest.delete(ROLE_BINDINGS, cluster.namespace, "sa")
    _, _, message = wait_for(
        lambda: refused_with(403, cluster), timeout=60, what="Ready False with the 403"
    )
    print(f"RoleBinding deleted -> Ready=False: {time.monotonic() - cut:.1f}s; message: {message}")
    assert job_watch_broken(proc)
    assert proc.probe("/readyz") == (200, "ok\n")  # a tenant's MPE: not the controller's readiness

    restored = time.monotonic()
    cluster.rest.create(
        ROLE_BINDINGS,
        cluster.namespace,
        {k: binding[k] for k in ("roleRef", "subjects")} | {"metadata": {"name": "sa"}},
    )
    wait_for(lambda: mpe_status(cluster) == ("True", "", ""), timeout=60, what="Ready True again")
    print(f"RoleBinding restored -> Ready=True: {time.monotonic() - restored:.1f}s")
    wait_for(lambda: not job_watch_broken(proc), timeout=30, what="the Job watch healthy again")
