"""The permissions taskfsm needs, one rule per thing the code does, and the RBAC built from them.

:data:`RULES` is the source: every API call the controller makes (``taskfsm.kube`` requests
issued by the reconcilers, informers, MPE registry, event recorder and leader election) is covered
by exactly one rule, and every verb of a rule is used. ``python -m taskfsm.tools.deploygen``
renders it into ``deploy/rbac.yaml``; tests check that file is fresh, that a controller bound to
exactly these rules works end to end, and that removing any one rule breaks some operation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from taskfsm.api import constants as c

NAME = "taskfsm-controller"
SERVICE_ACCOUNT = "taskfsm"
NAMESPACE = "taskfsm-system"


@dataclass(frozen=True)
class Rule:
    """A PolicyRule and why it exists (``why`` becomes a comment in the manifest)."""

    groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    why: str

    def policy_rule(self) -> dict[str, Any]:
        return {
            "apiGroups": list(self.groups),
            "resources": list(self.resources),
            "verbs": list(self.verbs),
        }


RULES: tuple[Rule, ...] = (
    Rule(
        (c.GROUP,),
        ("tasks",),
        ("get", "list", "watch", "patch", "delete"),
        "Task cache; fresh read when the cache lacks a Task; finalizer, labels and owner "
        "reference; self-deletion when the Workflow is deleted (D9)",
    ),
    Rule((c.GROUP,), ("tasks/status",), ("patch",), "Task status (one merge patch per reconcile)"),
    Rule(
        (c.GROUP,),
        ("workflows",),
        ("get", "list", "watch", "patch"),
        "Workflow sync of Tasks (§3.5); the Workflow controller's finalizer and labels (§4.3)",
    ),
    Rule(
        (c.GROUP,),
        ("workflows/status",),
        ("patch",),
        "Workflow phase, counters and conditions (§4.3)",
    ),
    Rule(
        (c.GROUP,),
        (
            "functions",
            "clusterfunctions",
            "tasktemplates",
            "clustertasktemplates",
            "medialocations",
            "clustermedialocations",
        ),
        ("list", "watch"),
        "selection, Job template and helper data, from caches",
    ),
    Rule(
        (c.GROUP,),
        ("mediaprocessingentities", "clustermediaprocessingentities"),
        ("list", "watch", "patch"),
        "MediaProcessingEntity cache and the mpe-protection finalizer",
    ),
    Rule(
        (c.GROUP,),
        ("mediaprocessingentities/status", "clustermediaprocessingentities/status"),
        ("patch",),
        "MediaProcessingEntity Ready/Failed conditions",
    ),
    Rule(
        ("",),
        ("secrets",),
        ("get", "list", "create", "patch", "delete"),
        "remote kubeconfigs and MediaLocation credentials (get); helper-data Secrets of local "
        "MediaProcessingEntities (create; patch adopts one left by an earlier Job of that name; "
        "list (metadata only) and delete those whose Task is gone)",
    ),
    Rule(
        ("",),
        ("secrets",),
        ("list", "watch"),
        "kubeconfig Secrets of remote MediaProcessingEntities: one watch per Secret, by name "
        "(metadata.name field selector), caching only its metadata, so a rotation rebuilds the "
        "client at once",
    ),
    Rule(
        ("batch",),
        ("jobs",),
        ("get", "list", "watch", "create", "patch", "delete"),
        "Jobs of local MediaProcessingEntities: watch, create, adopt (get), job-protection "
        "finalizer (patch), delete on termination and Task deletion",
    ),
    Rule(("events.k8s.io",), ("events",), ("create",), "an Event per phase change and error"),
)
"""ClusterRole rules: Tasks and local MediaProcessingEntities may be in any namespace."""

LEASE_RULES: tuple[Rule, ...] = (
    Rule(
        ("coordination.k8s.io",),
        ("leases",),
        ("get", "create", "update"),
        "leader election: read, take, renew and release on shutdown (update)",
    ),
)
"""Role rules in the controller's own namespace."""


def manifests(namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """ServiceAccount, ClusterRole + binding, and the leader-election Role + binding."""
    labels = {"app.kubernetes.io/name": "taskfsm", "app.kubernetes.io/component": "controller"}
    subject = [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": namespace}]
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": SERVICE_ACCOUNT, "namespace": namespace, "labels": labels},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": NAME, "labels": labels},
            "rules": [r.policy_rule() for r in RULES],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": NAME, "labels": labels},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": NAME,
            },
            "subjects": subject,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {
                "name": f"{NAME}-leader-election",
                "namespace": namespace,
                "labels": labels,
            },
            "rules": [r.policy_rule() for r in LEASE_RULES],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {
                "name": f"{NAME}-leader-election",
                "namespace": namespace,
                "labels": labels,
            },
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": f"{NAME}-leader-election",
            },
            "subjects": subject,
        },
    ]


def comments() -> str:
    """A header listing each rule and why it is needed."""
    lines = [
        "# Generated by `python -m taskfsm.tools.deploygen` from taskfsm/tools/rbac.py; "
        "do not edit.",
        "#",
    ]
    for rule in (*RULES, *LEASE_RULES):
        lines.append(f"# {','.join(rule.resources)} [{','.join(rule.verbs)}]: {rule.why}")
    return "\n".join(lines) + "\n"
