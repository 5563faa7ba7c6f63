"""A tenant's kubeconfig (a remote MediaProcessingEntity's Secret) never runs code in the
controller, reads its files or obtains its credentials (docs/security.md, "Remote kubeconfigs").

Each attack needs only a Secret and an MPE in the tenant's own namespace. The refusal is on the
MPE (Ready=False, reason KubeconfigRefused, the key's path in the message, never its value), as
a Warning Event, and nothing is executed or sent.
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

import pytest
import yaml

from taskfsm.kube.rest import SECRETS
from taskfsm_dev import objects
from taskfsm_dev.objects import kubeconfig_secret, remote_mpe
from taskfsm_dev.waiting import wait_for
from tests.support.tenancy import CredentialTrap, Tenant, kubeconfig

CONTROLLER_TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"


@pytest.fixture
def trap(tmp_path: Path):
    server = CredentialTrap(tmp_path)
    yield server
    server.close()


def attack(tenant: Tenant, document: dict, name: str = "evil") -> dict:
    """Create the Secret and the MPE, wait for the MPE's verdict, return its Ready condition."""
    tenant.create(kubeconfig_secret(f"{name}-kubeconfig", document))
    tenant.create(remote_mpe(name, f"{name}-kubeconfig"))
    wait_for(
        lambda: tenant.condition("MediaProcessingEntity", name, "Ready").get("status") == "False",
        timeout=60,
        what=f"MPE {name} Ready=False",
    )
    return tenant.condition("MediaProcessingEntity", name, "Ready")


def test_an_exec_kubeconfig_runs_nothing_in_the_controller(tenant, trap, tmp_path):
    marker = Path("/tmp") / f"taskfsm-pwned-{uuid.uuid4().hex}"
    document = kubeconfig(
        trap.url,
        user={
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": "/bin/sh",
                "args": ["-c", f"touch {marker}; echo '{{}}'"],
                "interactiveMode": "Never",
            }
        },
    )
    ready = attack(tenant, document)
    assert ready["reason"] == "KubeconfigRefused"
    status = tenant.status("MediaProcessingEntity", "evil")
    assert "users[0].user.exec: not allowed" in status["message"]
    assert str(marker) not in status["message"]
    tenant.wait_event("evil", "KubeconfigRefused")
    assert not marker.exists()
    assert trap.seen == []


def test_an_auth_provider_command_runs_nothing(tenant, trap):
    marker = Path("/tmp") / f"taskfsm-pwned-{uuid.uuid4().hex}"
    document = kubeconfig(
        trap.url,
        user={"auth-provider": {"name": "gcp", "config": {"cmd-path": f"/usr/bin/touch {marker}"}}},
    )
    assert attack(tenant, document)["reason"] == "KubeconfigRefused"
    assert not marker.exists()
    assert trap.seen == []


@pytest.mark.parametrize(
    ("cluster", "user", "key"),
    [
        ({}, {"tokenFile": CONTROLLER_TOKEN_FILE}, "users[0].user.tokenFile"),
        (
            {"certificate-authority": "/etc/ssl/certs/ca-certificates.crt"},
            {},
            "certificate-authority",
        ),
        (
            {},
            {"client-certificate": "/etc/passwd", "client-key": "/etc/passwd"},
            "client-certificate",
        ),
        ({"proxy-url": "http://127.0.0.1:9"}, {}, "clusters[0].cluster.proxy-url"),
        ({"insecure-skip-tls-verify": True}, {}, "insecure-skip-tls-verify"),
    ],
    ids=["tokenFile", "ca-path", "client-cert-path", "proxy-url", "insecure"],
)
def test_file_paths_proxies_and_insecure_transport_are_refused_before_any_request(
    tenant, trap, cluster, user, key
):
    ready = attack(tenant, kubeconfig(trap.url, cluster=cluster, user=user))
    assert ready["reason"] == "KubeconfigRefused"
    assert key in tenant.status("MediaProcessingEntity", "evil")["message"]
    assert trap.seen == []


def test_an_allowed_kubeconfig_without_credentials_gets_none_of_the_controllers(tenant, trap):
    """Pointed at a server of the tenant's, with no user: the requests carry no Authorization
    header at all (no fallback to the controller's own token), and the MPE reports the 401."""
    ca = base64.b64encode(trap.ca.read_bytes()).decode()
    document = kubeconfig(trap.url, cluster={"certificate-authority-data": ca})
    ready = attack(tenant, document)
    assert ready["reason"] in ("NotReachable", "ClusterRefused")
    wait_for(lambda: trap.seen, timeout=30, what="a request at the tenant's server")
    assert {auth for _, auth in trap.seen} == {""}


def test_a_yaml_alias_bomb_is_refused_cheaply(tenant):
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
    )
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "bomb-kubeconfig"},
        "data": {"kubeconfig": base64.b64encode(bomb.encode()).decode()},
    }
    tenant.create(secret)
    tenant.create(remote_mpe("bomb", "bomb-kubeconfig"))
    wait_for(
        lambda: (
            tenant.condition("MediaProcessingEntity", "bomb", "Ready").get("reason")
            == "KubeconfigInvalid"
        ),
        timeout=60,
        what="the alias bomb refused",
    )
    assert "aliases" in tenant.status("MediaProcessingEntity", "bomb")["message"]


def test_a_fixed_kubeconfig_secret_makes_the_mpe_usable(tenant, remote_tenant_kubeconfig):
    """The refusal is not sticky: the tenant replaces the Secret with an inline kubeconfig of
    its remote cluster and the MPE becomes Ready."""
    tenant.create(kubeconfig_secret("k", {"users": [{"name": "u", "user": {"exec": {}}}]}))
    tenant.create(remote_mpe("fixable", "k"))
    wait_for(
        lambda: (
            tenant.condition("MediaProcessingEntity", "fixable", "Ready").get("reason")
            == "KubeconfigRefused"
        ),
        timeout=60,
        what="refused first",
    )
    data = base64.b64encode(yaml.safe_dump(remote_tenant_kubeconfig).encode()).decode()
    tenant.rest.patch(SECRETS, tenant.namespace, "k", {"data": {"kubeconfig": data}})
    wait_for(
        lambda: (
            tenant.condition("MediaProcessingEntity", "fixable", "Ready").get("status") == "True"
        ),
        timeout=60,
        what="Ready after the fix",
    )


def test_clusters_that_never_answer_hold_no_other_mpe_up(tenant, bystander):
    """Ten MPEs of a tenant point at a server that accepts connections and never answers; the
    controller's one MPE worker used to wait up to 30 s on each. Another tenant's new MPE is
    Ready, and its new Task succeeds, as fast as without them."""
    import socket
    import threading
    import time

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(100)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.5)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])  # never read, never answered
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()
    try:
        server = f"https://127.0.0.1:{listener.getsockname()[1]}"
        for i in range(10):
            tenant.create(kubeconfig_secret(f"hole-{i}", kubeconfig(server, user={"token": "t"})))
            tenant.create(remote_mpe(f"hole-{i}", f"hole-{i}"))
        time.sleep(1)
        started = time.monotonic()
        bystander.create(objects.local_mpe("fresh"))
        wait_for(
            lambda: (
                bystander.condition("MediaProcessingEntity", "fresh", "Ready").get("status")
                == "True"
            ),
            timeout=20,
            what="the bystander's new MPE Ready despite ten unanswering ones",
        )
        name = f"fresh-{uuid.uuid4().hex[:6]}"
        bystander.create(objects.workflow(name))
        bystander.create(
            objects.task(name, workflow_name=name, function_name="fn", mpe_name="fresh")
        )
        bystander.wait_phase(name, "Succeeded", timeout=30)
        print(f"new MPE and its Task done in {time.monotonic() - started:.1f}s")
    finally:
        stop.set()
        for conn in held:
            conn.close()
        listener.close()
