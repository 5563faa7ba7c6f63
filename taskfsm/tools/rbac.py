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


NAMESPACED_RULES: tuple[Rule, ...] = (
    Rule(
        (c.GROUP,),
        ("tasks",),
        ("get", "list", "watch", "patch", "delete"),
        "Task cache; fresh read when the cache lacks a Task; finalizer, labels and owner "
        "reference; self-deletion when the Workflow is deleted (D9) and, after --finished-ttl, "
        "when it does not exist",
    ),
    Rule((c.GROUP,), ("tasks/status",), ("patch",), "Task status (one merge patch per reconcile)"),
    Rule(
        (c.GROUP,),
        ("workflows",),
        ("get", "list", "watch", "patch", "delete"),
        "Workflow sync of Tasks (§3.5); the Workflow controller's finalizer and labels (§4.3); "
        "deletion of finished Workflows after --finished-ttl",
    ),
    Rule(
        (c.GROUP,),
        ("workflows/status",),
        ("patch",),
        "Workflow phase, counters and conditions (§4.3)",
    ),
    Rule(
        (c.GROUP,),
        ("functions", "tasktemplates", "medialocations"),
        ("list", "watch"),
        "selection, Job template and helper data, from caches",
    ),
    Rule(
        (c.GROUP,),
        ("mediaprocessingentities",),
        ("list", "watch", "patch"),
        "MediaProcessingEntity cache and the mpe-protection finalizer",
    ),
    Rule(
        (c.GROUP,),
        ("mediaprocessingentities/status",),
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
    Rule(
        ("events.k8s.io",),
        ("events",),
        ("create", "patch"),
        "an Event per phase change and error; a repeat patches its Event's series count",
    ),
    Rule(
        ("",),
        ("events",),
        ("list",),
        "the FailedCreate Events of a running Job without pods, and the FailedMount Events of "
        "its pod that cannot start: why its pods are refused (Pod Security, an admission "
        "policy, a quota) or wait (a volume, such as a Secret, that is not there)",
    ),
    Rule(
        ("",),
        ("pods",),
        ("list",),
        "the pods of a running Job none of whose pods is ready (by its UID label): why they "
        "cannot start (an image that cannot be pulled, a ConfigMap or Secret they need)",
    ),
)
"""Rules on namespaced objects: a ClusterRole by default (Tasks and local MediaProcessingEntities
may be in any namespace); with the chart's ``watchNamespace``, a Role in that namespace only."""

CLUSTER_RULES: tuple[Rule, ...] = (
    Rule(
        (c.GROUP,),
        ("clusterfunctions", "clustertasktemplates", "clustermedialocations"),
        ("list", "watch"),
        "the cluster-scoped kinds of selection, Job template and helper data, from caches",
    ),
    Rule(
        (c.GROUP,),
        ("clustermediaprocessingentities",),
        ("list", "watch", "patch"),
        "ClusterMediaProcessingEntity cache and the mpe-protection finalizer",
    ),
    Rule(
        (c.GROUP,),
        ("clustermediaprocessingentities/status",),
        ("patch",),
        "ClusterMediaProcessingEntity Ready/Failed conditions",
    ),
)
"""Rules on cluster-scoped objects: always a ClusterRole."""

RULES: tuple[Rule, ...] = NAMESPACED_RULES + CLUSTER_RULES
"""Everything the controller needs cluster-wide (deploy/rbac.yaml's ClusterRole)."""

METRICS_AUTH_RULES: tuple[Rule, ...] = (
    Rule(
        ("authentication.k8s.io",),
        ("tokenreviews",),
        ("create",),
        "--metrics-secure: who is the caller of /metrics (TokenReview)",
    ),
    Rule(
        ("authorization.k8s.io",),
        ("subjectaccessreviews",),
        ("create",),
        "--metrics-secure: may the caller get /metrics (SubjectAccessReview)",
    ),
)
"""Only used with ``taskfsm run --metrics-secure``; a ClusterRole of its own."""

LEASE_RULES: tuple[Rule, ...] = (
    Rule(
        ("coordination.k8s.io",),
        ("leases",),
        ("get", "list", "create", "update", "delete"),
        "leader election: read, take, renew and release on shutdown (update); with --buckets "
        "above 1 also the membership Leases: the coordinator lists the namespace's Leases each "
        "round and deletes expired members' and its own on shutdown",
    ),
)
"""Role rules in the controller's own namespace."""

METRICS_READER_RULES: tuple[dict[str, Any], ...] = (
    {"nonResourceURLs": ["/metrics"], "verbs": ["get"]},
)
"""The ClusterRole ``taskfsm-metrics-reader``, for whoever scrapes a --metrics-secure endpoint
(bind it to Prometheus' ServiceAccount)."""


LABELS = {"app.kubernetes.io/name": "taskfsm", "app.kubernetes.io/component": "controller"}
RBAC_API = "rbac.authorization.k8s.io/v1"


def _role(
    kind: str, name: str, rules: list[dict[str, Any]], namespace: str | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = dict(LABELS)
    return {"apiVersion": RBAC_API, "kind": kind, "metadata": meta, "rules": rules}


def _binding(
    kind: str,
    name: str,
    role_kind: str,
    subject: list[dict[str, str]],
    namespace: str | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = dict(LABELS)
    return {
        "apiVersion": RBAC_API,
        "kind": kind,
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
        "subjects": subject,
    }


def manifests(
    namespace: str = NAMESPACE, *, watch_namespace: str | None = None, name: str = NAME
) -> list[dict[str, Any]]:
    """ServiceAccount; the controller's rules (a ClusterRole, or with ``watch_namespace`` a Role
    there plus a ClusterRole for the cluster-scoped kinds); the metrics-auth ClusterRole; the
    leader-election Role; their bindings; and the ``<name>-metrics-reader`` ClusterRole."""
    subject = [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": namespace}]
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": SERVICE_ACCOUNT, "namespace": namespace, "labels": dict(LABELS)},
        },
    ]
    if watch_namespace:
        docs += [
            _role("Role", name, [r.policy_rule() for r in NAMESPACED_RULES], watch_namespace),
            _binding("RoleBinding", name, "Role", subject, watch_namespace),
            _role("ClusterRole", name, [r.policy_rule() for r in CLUSTER_RULES]),
            _binding("ClusterRoleBinding", name, "ClusterRole", subject),
        ]
    else:
        docs += [
            _role("ClusterRole", name, [r.policy_rule() for r in RULES]),
            _binding("ClusterRoleBinding", name, "ClusterRole", subject),
        ]
    metrics_auth = f"{name}-metrics-auth"
    election = f"{name}-leader-election"
    docs += [
        _role("ClusterRole", metrics_auth, [r.policy_rule() for r in METRICS_AUTH_RULES]),
        _binding("ClusterRoleBinding", metrics_auth, "ClusterRole", subject),
        _role("Role", election, [r.policy_rule() for r in LEASE_RULES], namespace),
        _binding("RoleBinding", election, "Role", subject, namespace),
        _role("ClusterRole", f"{name}-metrics-reader", [dict(r) for r in METRICS_READER_RULES]),
    ]
    return docs


def comments() -> str:
    """A header listing each rule and why it is needed."""
    lines = [
        "# Generated by `python -m taskfsm.tools.deploygen` from taskfsm/tools/rbac.py; "
        "do not edit.",
        "#",
    ]
    for rule in (*RULES, *METRICS_AUTH_RULES, *LEASE_RULES):
        lines.append(f"# {','.join(rule.resources)} [{','.join(rule.verbs)}]: {rule.why}")
    lines.append(
        "# metrics-reader: get /metrics (bind it to whoever scrapes a --metrics-secure endpoint)"
    )
    return "\n".join(lines) + "\n"
