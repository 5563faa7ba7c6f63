"""Identities for tests that run the controller as its own process, as it is installed.

:func:`install_controller` creates, in a namespace of the test's, what ``deploy/rbac.yaml``
installs -- the ServiceAccount ``taskfsm``, the generated ClusterRole, the leader-election Role
(Leases in that namespace) and the metrics roles, all from :func:`taskfsm.tools.rbac.manifests`,
the source of deploy/ and the chart -- and returns a kubeconfig with a bound token of that
ServiceAccount. A permission the controller lacks then fails the test instead of being absorbed
by cluster-admin. Only a test's own setup and checks use the admin identity.

:func:`install_tenant` makes a tenant of a namespace (docs/security.md): a ServiceAccount whose
Role there allows the namespaced nagare kinds and Secrets, and nothing else.

The cluster-scoped objects get names unique to the namespace (several tests install at once);
:func:`uninstall` deletes them.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from taskfsm.api import constants as c
from taskfsm.tools import rbac
from taskfsm_dev.controlplane import ControlPlane

TOKEN_SECONDS = 48 * 3600
"""Lifetime of the bound tokens (longer than any test session)."""

TENANT_KINDS = (
    "tasks",
    "workflows",
    "functions",
    "tasktemplates",
    "medialocations",
    "mediaprocessingentities",
)
"""The namespaced nagare kinds a tenant may write (docs/security.md, "Who is who")."""


def _create_or_replace(api: client.ApiClient, doc: dict[str, Any]) -> None:
    kind = doc["kind"]
    meta = doc["metadata"]
    namespace = meta.get("namespace")
    core, rbac_api = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    create, replace = {
        "ServiceAccount": (
            lambda: core.create_namespaced_service_account(namespace, doc),
            None,
        ),
        "ClusterRole": (
            lambda: rbac_api.create_cluster_role(doc),
            lambda: rbac_api.replace_cluster_role(meta["name"], doc),
        ),
        "ClusterRoleBinding": (
            lambda: rbac_api.create_cluster_role_binding(doc),
            lambda: rbac_api.replace_cluster_role_binding(meta["name"], doc),
        ),
        "Role": (
            lambda: rbac_api.create_namespaced_role(namespace, doc),
            lambda: rbac_api.replace_namespaced_role(meta["name"], namespace, doc),
        ),
        "RoleBinding": (
            lambda: rbac_api.create_namespaced_role_binding(namespace, doc),
            lambda: rbac_api.replace_namespaced_role_binding(meta["name"], namespace, doc),
        ),
    }[kind]
    try:
        create()
    except ApiException as exc:
        if exc.status != 409:
            raise
        if replace is not None:
            replace()


def _ensure_namespace(api: client.ApiClient, namespace: str) -> None:
    with contextlib.suppress(ApiException):
        client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})


def _token_kubeconfig(
    api: client.ApiClient,
    plane: ControlPlane,
    namespace: str,
    account: str,
    path: Path,
    context_namespace: str | None = None,
) -> Path:
    token = (
        client.CoreV1Api(api)
        .create_namespaced_service_account_token(
            account, namespace, {"spec": {"expirationSeconds": TOKEN_SECONDS}}
        )
        .status.token
    )
    kubeconfig = plane.kubeconfig_dict(namespace=context_namespace or namespace)
    kubeconfig["users"] = [{"name": account, "user": {"token": token}}]
    kubeconfig["contexts"][0]["context"]["user"] = account  # type: ignore[index]  # built above
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(kubeconfig))
    return path


def role_name(namespace: str) -> str:
    """The generated roles' name for a controller installed in ``namespace``."""
    return f"{rbac.NAME}-{namespace}"


def install_controller(
    api: client.ApiClient, plane: ControlPlane, namespace: str, workdir: Path
) -> Path:
    """Install the generated RBAC for a controller in ``namespace``; its kubeconfig's path."""
    _ensure_namespace(api, namespace)
    for doc in rbac.manifests(namespace, name=role_name(namespace)):
        _create_or_replace(api, doc)
    return _token_kubeconfig(
        api, plane, namespace, rbac.SERVICE_ACCOUNT, workdir / f"controller-{namespace}.kubeconfig"
    )


def uninstall(api: client.ApiClient, namespace: str) -> None:
    """Delete the cluster-scoped objects :func:`install_controller` made for ``namespace`` (the
    namespaced ones go with the namespace)."""
    rbac_api = client.RbacAuthorizationV1Api(api)
    for doc in rbac.manifests(namespace, name=role_name(namespace)):
        name = doc["metadata"]["name"]
        with contextlib.suppress(ApiException):
            if doc["kind"] == "ClusterRole":
                rbac_api.delete_cluster_role(name)
            elif doc["kind"] == "ClusterRoleBinding":
                rbac_api.delete_cluster_role_binding(name)


def install_tenant(
    api: client.ApiClient, plane: ControlPlane, namespace: str, workdir: Path
) -> Path:
    """A tenant of ``namespace`` (its kubeconfig's path): may write the namespaced nagare kinds
    and Secrets there, read Events and Jobs there (to see what happened), nothing else."""
    name = "tenant"
    _ensure_namespace(api, namespace)
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    docs = [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": namespace},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": namespace},
            "rules": [
                {"apiGroups": [c.GROUP], "resources": list(TENANT_KINDS), "verbs": ["*"]},
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["*"]},
                {
                    "apiGroups": ["", "events.k8s.io"],
                    "resources": ["events"],
                    "verbs": ["get", "list", "watch"],
                },
                {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": subject,
        },
    ]
    for doc in docs:
        _create_or_replace(api, doc)
    return _token_kubeconfig(
        api, plane, namespace, name, workdir / f"tenant-{namespace}.kubeconfig"
    )


def token_of(kubeconfig: Path) -> str:
    """The bearer token in a kubeconfig written here."""
    doc = yaml.safe_load(kubeconfig.read_text())
    return str(doc["users"][0]["user"]["token"])
