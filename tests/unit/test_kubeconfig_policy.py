"""Tenants' kubeconfigs (taskfsm.kube.kubeconfig): what they may hold and how the client is built.

A kubeconfig from a Secret is held to an allow-list: anything that would run a command, read a
file of the controller's, or redirect or unguard the connection is refused with the key's path
and never its value; the client is built from inline data only, with nothing left on disk
(docs/security.md, "Remote kubeconfigs").
"""

from __future__ import annotations

import base64
import os
import tempfile
from pathlib import Path

import pytest

from taskfsm.kube import kubeconfig
from taskfsm.kube.kubeconfig import KubeconfigPolicy, KubeconfigRefused
from taskfsm_dev.proxies import _make_ca_and_cert


def doc(cluster: dict | None = None, user: dict | None = None, **top: object) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "c",
                "cluster": cluster if cluster is not None else {"server": "https://10.0.0.1:6443"},
            }
        ],
        "users": [{"name": "u", "user": user if user is not None else {"token": "t0ken"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "jobs"}}],
        "current-context": "x",
        **top,
    }


def refused(document: dict, policy: KubeconfigPolicy = kubeconfig.STRICT) -> str:
    with pytest.raises(KubeconfigRefused) as info:
        kubeconfig.check(document, policy)
    return str(info.value)


@pytest.mark.parametrize(
    ("user", "key"),
    [
        ({"exec": {"command": "/bin/sh", "args": ["-c", "id"]}}, "users[0].user.exec"),
        ({"auth-provider": {"name": "gcp", "config": {"cmd-path": "/bin/id"}}}, "auth-provider"),
        ({"tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}, "tokenFile"),
        ({"client-certificate": "/etc/ssl/cert.pem"}, "users[0].user.client-certificate"),
        ({"client-key": "/etc/ssl/key.pem"}, "users[0].user.client-key"),
        ({"username": "admin", "password": "s3cret-value"}, "users[0].user.password"),
        ({"as": "system:admin"}, "users[0].user.as"),
    ],
)
def test_user_keys_that_run_read_or_impersonate_are_refused_by_path(user, key):
    message = refused(doc(user=user))
    assert key in message
    assert "not allowed" in message
    for value in ("/bin/sh", "/bin/id", "serviceaccount", "/etc/ssl", "s3cret-value"):
        assert value not in message


@pytest.mark.parametrize(
    ("cluster", "key"),
    [
        (
            {"server": "https://1.2.3.4", "certificate-authority": "/var/run/ca.crt"},
            "clusters[0].cluster.certificate-authority",
        ),
        ({"server": "https://1.2.3.4", "insecure-skip-tls-verify": True}, "insecure-skip-tls"),
        ({"server": "https://1.2.3.4", "proxy-url": "http://evil:3128"}, "proxy-url"),
        ({"server": "http://1.2.3.4"}, "clusters[0].cluster.server: must be an https:// URL"),
        ({"server": "file:///etc/passwd"}, "must be an https:// URL"),
        ({"server": "https://user:pw@1.2.3.4"}, "must not carry credentials"),
        ({}, "clusters[0].cluster.server: required"),
    ],
)
def test_cluster_keys_that_read_files_or_unguard_the_connection_are_refused(cluster, key):
    message = refused(doc(cluster=cluster))
    assert key in message
    assert "evil" not in message
    assert "/var/run" not in message
    assert "pw@" not in message


def test_unknown_keys_anywhere_are_refused_and_every_one_is_named():
    document = doc(extensions=[{"name": "x"}])
    document["contexts"][0]["context"]["extensions"] = []
    message = refused(document)
    assert "extensions: not allowed" in message
    assert "contexts[0].context.extensions: not allowed" in message


def test_an_inline_kubeconfig_passes():
    kubeconfig.check(
        doc(
            cluster={
                "server": "https://api.example:6443",
                "certificate-authority-data": "Zm9v",
                "tls-server-name": "api.example",
            },
            user={"client-certificate-data": "Zm9v", "client-key-data": "YmFy"},
            preferences={},
        )
    )


def test_administrator_opt_ins_allow_only_what_they_name():
    exec_user = doc(user={"exec": {"command": "aws"}})
    kubeconfig.check(exec_user, KubeconfigPolicy(allow_exec=True))
    assert "exec" in refused(exec_user, KubeconfigPolicy(allow_proxy=True, allow_insecure=True))
    insecure = doc(cluster={"server": "http://x", "insecure-skip-tls-verify": True})
    kubeconfig.check(insecure, KubeconfigPolicy(allow_insecure=True))
    assert "tokenFile" in refused(
        doc(user={"tokenFile": "/t"}),
        KubeconfigPolicy(allow_exec=True, allow_insecure=True, allow_proxy=True),
    )


def test_parse_refuses_aliases_depth_size_and_non_mappings():
    bomb = b"a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n"
    with pytest.raises(ValueError, match="aliases"):
        kubeconfig.parse(bomb)
    with pytest.raises(ValueError, match="deeper"):
        kubeconfig.parse(b"[" * 100 + b"]" * 100)
    with pytest.raises(ValueError, match="larger"):
        kubeconfig.parse(b"a: " + b"x" * (kubeconfig.MAX_BYTES + 1))
    with pytest.raises(ValueError, match="mapping"):
        kubeconfig.parse(b"- just a list")
    with pytest.raises(ValueError, match="not valid YAML") as info:
        kubeconfig.parse(b"token: [unclosed s3cret-value")
    assert "s3cret-value" not in str(info.value)


def test_namespace_of_the_current_context_else_default():
    assert kubeconfig.namespace_of(doc()) == "jobs"
    assert kubeconfig.namespace_of({"contexts": []}) == "default"


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_the_client_is_built_from_inline_data_and_leaves_nothing_on_disk(tmp_path: Path):
    ca, cert, key = _make_ca_and_cert(tmp_path)
    b64 = {p: base64.b64encode(p.read_bytes()).decode() for p in (ca, cert, key)}
    document = doc(
        cluster={"server": "https://127.0.0.1:6443", "certificate-authority-data": b64[ca]},
        user={"token": "t0ken", "client-certificate-data": b64[cert], "client-key-data": b64[key]},
    )
    temp_before = set(os.listdir(tempfile.gettempdir()))
    fds_before = _fds()
    api = kubeconfig.build_client(document)
    assert set(os.listdir(tempfile.gettempdir())) == temp_before
    assert _fds() == fds_before  # the in-memory certificate file is closed again
    configuration = api.configuration
    assert configuration.host == "https://127.0.0.1:6443"
    assert configuration.api_key == {"BearerToken": "t0ken"}
    assert configuration.ssl_ca_cert is None
    assert configuration.cert_file is None
    context = api.rest_client.pool_manager.connection_pool_kw["ssl_context"]
    assert context.verify_mode.name == "CERT_REQUIRED"
    assert len(context.get_ca_certs()) == 1
    api.close()


def test_unusable_data_is_named_without_its_value():
    bad_ca = doc(cluster={"server": "https://h", "certificate-authority-data": "c2VjcmV0LWNh"})
    with pytest.raises(ValueError, match="certificate-authority-data") as info:
        kubeconfig.build_client(bad_ca)
    assert "secret-ca" not in str(info.value)
    half = doc(user={"client-certificate-data": "Zm9v"})
    with pytest.raises(ValueError, match="go together"):
        kubeconfig.build_client(half)
    with pytest.raises(ValueError, match="no entry named by the current context"):
        kubeconfig.build_client({**doc(), "current-context": "missing"})


def test_a_token_with_a_line_break_is_refused_by_path_without_its_value():
    """A token is sent as a header line: one holding a line break would add a header (or a
    request) of the tenant's choosing, so the kubeconfig is refused, naming where."""
    with pytest.raises(kubeconfig.KubeconfigRefused) as info:
        kubeconfig.check(doc(user={"token": "t0ken\r\nX-Injected: yes"}))
    assert "users[0].user.token: holds a line break" in str(info.value)
    assert "X-Injected" not in str(info.value)
