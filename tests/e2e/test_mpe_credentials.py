"""A remote MediaProcessingEntity's kubeconfig Secret rotated to new credentials (and the old ones
revoked) gives both its API client and its Job watch the new credentials (D19)."""

from __future__ import annotations

import time

from taskfsm.kube.resources import MEDIA_PROCESSING_ENTITIES
from taskfsm.kube.rest import SECRETS, Resource
from taskfsm.testing import objects
from taskfsm.testing.cluster import job_audit, kubeconfig_secret, remote_mpe
from taskfsm.testing.waiting import wait_for

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
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
        },
    )
    token = cluster.rest.request(
        "POST",
        SERVICE_ACCOUNTS,
        SERVICE_ACCOUNTS.path(ns, name, "token"),
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}},
    )["status"]["token"]
    kubeconfig = control_plane.kubeconfig_dict(namespace=ns)
    kubeconfig["users"][0]["user"] = {"token": token}
    return kubeconfig


def test_rotated_kubeconfig_reaches_the_job_watch(cluster, kubelet, start_controller, control_plane):
    """A rotated kubeconfig Secret (old identity deleted) also gives the Job watch the new identity."""
    proc = start_controller(args=[f"--watch-timeout={WATCH_TIMEOUT}", "--watch-read-margin=2"])
    cluster.create(kubeconfig_secret("edge-kubeconfig", service_account_kubeconfig(cluster, control_plane, "old")))
    cluster.create(remote_mpe("edge", "edge-kubeconfig"))
    cluster.create(objects.function("fn", run_seconds=0.5))
    cluster.create(objects.workflow("wf-one"))
    cluster.create(objects.task("one", workflow_name="wf-one", function_name="fn", mpe_name="edge"))
    wait_for(lambda: cluster.phase("one") == "Succeeded", timeout=45, what="first Task Succeeded")

    rotated = kubeconfig_secret("edge-kubeconfig", service_account_kubeconfig(cluster, control_plane, "new"))
    cluster.rest.patch(SECRETS, cluster.namespace, "edge-kubeconfig", {"data": rotated["data"]})
    # Secrets are read, not watched: an MPE event (or its 60 s resync) picks the rotation up.
    cluster.rest.patch(MEDIA_PROCESSING_ENTITIES, cluster.namespace, "edge", {"metadata": {"annotations": {"rotated": "1"}}})
    time.sleep(2)
    cluster.rest.delete(SERVICE_ACCOUNTS, cluster.namespace, "old")  # the old token stops working

    time.sleep(3 * WATCH_TIMEOUT)  # every watch opened with the old token would have failed by now
    assert proc.probe("/readyz") == (200, "ok\n")
    cluster.create(objects.workflow("wf-two"))
    cluster.create(objects.task("two", workflow_name="wf-two", function_name="fn", mpe_name="edge"))
    wait_for(lambda: cluster.phase("two") == "Succeeded", timeout=45, what="second Task Succeeded")
    assert job_audit(cluster.tasks(), cluster.jobs(), cluster.secrets()) == []
    assert proc.probe("/readyz") == (200, "ok\n")
