"""The controller's endpoints (docs/security.md, "Endpoints"): ``/metrics`` with
--metrics-secure answers only callers the API server authenticates and authorizes, and nobody who
reaches the ports can hold the controller's threads.
"""

from __future__ import annotations

import socket
import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path

from kubernetes import client

from taskfsm.tools import rbac
from tests.support import identity
from tests.support.tenancy import Tenant


def scrape(url: str, token: str | None) -> int:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the controller's self-signed serving certificate
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as answer:
            body = answer.read().decode()
            assert "controller_runtime_reconcile_total" in body
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_metrics_need_a_token_the_api_server_allows(
    tenant: Tenant, controller, admin, tmp_path: Path
):
    url = f"https://127.0.0.1:{controller.metrics_port}/metrics"
    assert scrape(url, None) == 401
    assert scrape(url, "not-a-token") == 401
    assert scrape(url, identity.token_of(tenant.kubeconfig)) == 403
    # Prometheus' ServiceAccount, bound to the shipped metrics-reader ClusterRole.
    core, rbac_api = client.CoreV1Api(admin), client.RbacAuthorizationV1Api(admin)
    core.create_namespaced_service_account(tenant.namespace, {"metadata": {"name": "prometheus"}})
    reader = f"{identity.role_name(rbac.NAMESPACE)}-metrics-reader"
    rbac_api.create_cluster_role_binding(
        {
            "metadata": {"name": f"prometheus-{tenant.namespace}"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": reader,
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": "prometheus", "namespace": tenant.namespace}
            ],
        }
    )
    try:
        token = core.create_namespaced_service_account_token(
            "prometheus", tenant.namespace, {"spec": {"expirationSeconds": 3600}}
        ).status.token
        assert scrape(url, token) == 200
    finally:
        rbac_api.delete_cluster_role_binding(f"prometheus-{tenant.namespace}")


def _threads(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/task").iterdir()))


def test_hundreds_of_idle_connections_hold_no_more_than_the_cap(tenant: Tenant, controller):
    """300 silent connections to each port: the controller's thread count stays bounded (it was
    one thread per connection) and the probes still answer once they close."""
    before = _threads(controller.pid)
    idle = []
    try:
        for port in (controller.metrics_port, controller.health_port):
            for _ in range(300):
                idle.append(socket.create_connection(("127.0.0.1", port)))
        time.sleep(1)
        during = _threads(controller.pid)
        assert during <= before + 2 * 32 + 4, (before, during)
    finally:
        for conn in idle:
            conn.close()
    controller.wait_ready(30)
