"""An optional ValidatingAdmissionPolicy that bounds the Jobs taskfsm's identity creates.

A tenant's Task writes the pod spec of its Job (the Function's template with the Task's and its
TaskTemplate's ``templatePatches``). In a namespace the tenant owns, Pod Security Admission
applies as to any pod of theirs (docs/security.md, "What a Job may be"). A
ClusterMediaProcessingEntity, though, may run several tenants' Jobs in one shared namespace, where
one tenant's ``hostPath`` or ``serviceAccountName`` would reach the others. This policy, evaluated
by the API server itself (GA since Kubernetes 1.30), refuses a Job **created by the controller's
ServiceAccount** whose pods would

* share the node's network, PID or IPC namespaces, or use a ``hostPort``;
* mount a ``hostPath`` volume;
* run a privileged container, allow privilege escalation to be forced on, or add capabilities;
* run as a ServiceAccount outside :data:`DEFAULT_SERVICE_ACCOUNTS` (the chart's
  ``jobPolicy.allowedServiceAccounts``), or pick its own pods (``manualSelector``);
* mount or read any Secret but the Job's own task data (named like the Job): in a shared
  namespace another tenant's helper Secret holds that tenant's credentials.

Only creation is checked: the controller's later edits of a Job (its ``job-protection``
finalizer) must go through even for a Job made before the policy was installed. A refusal
(``reason: Invalid``, HTTP 422) reaches the Task as its ``status.message`` and a Warning Event.

``python -m taskfsm.tools.deploygen`` renders it into ``deploy/admission/job-policy.yaml`` (not
applied by ``kubectl apply -f deploy/``: opt in with ``kubectl apply -f deploy/admission/``) and
the chart's ``templates/job-policy.yaml`` (``jobPolicy.enabled``).
"""

from __future__ import annotations

from typing import Any

from taskfsm.tools import rbac

NAME = "taskfsm-job-bounds"
DEFAULT_SERVICE_ACCOUNTS: tuple[str, ...] = ("default",)
"""ServiceAccounts a Job's pods may run as (``serviceAccountName``; unset means ``default``)."""

_CONTAINERS = (
    "variables.pod.containers"
    " + (has(variables.pod.initContainers) ? variables.pod.initContainers : [])"
    " + (has(variables.pod.ephemeralContainers) ? variables.pod.ephemeralContainers : [])"
)


def _sc(field: str) -> str:
    """CEL: container ``c``'s securityContext has ``field``."""
    return f"has(c.securityContext) && has(c.securityContext.{field})"


VALIDATIONS: tuple[tuple[str, str], ...] = (
    (
        "!(has(variables.pod.hostNetwork) && variables.pod.hostNetwork)"
        " && !(has(variables.pod.hostPID) && variables.pod.hostPID)"
        " && !(has(variables.pod.hostIPC) && variables.pod.hostIPC)",
        "Jobs created by taskfsm may not use the node's network, PID or IPC namespaces",
    ),
    (
        "variables.containers.all(c, !has(c.ports)"
        " || c.ports.all(p, !has(p.hostPort) || p.hostPort == 0))",
        "Jobs created by taskfsm may not use hostPort",
    ),
    (
        "!has(variables.pod.volumes) || variables.pod.volumes.all(v, !has(v.hostPath))",
        "Jobs created by taskfsm may not mount hostPath volumes",
    ),
    (
        f"variables.containers.all(c, !({_sc('privileged')} && c.securityContext.privileged))",
        "Jobs created by taskfsm may not run privileged containers",
    ),
    (
        f"variables.containers.all(c, !({_sc('allowPrivilegeEscalation')}"
        " && c.securityContext.allowPrivilegeEscalation))",
        "Jobs created by taskfsm may not set allowPrivilegeEscalation: true",
    ),
    (
        f"variables.containers.all(c, !({_sc('capabilities')}"
        " && has(c.securityContext.capabilities.add)"
        " && size(c.securityContext.capabilities.add) > 0))",
        "Jobs created by taskfsm may not add Linux capabilities",
    ),
    (
        "!(has(object.spec.manualSelector) && object.spec.manualSelector)",
        "Jobs created by taskfsm may not set manualSelector",
    ),
    (
        "!has(variables.pod.volumes) || variables.pod.volumes.all(v,"
        " (!has(v.secret) || v.secret.secretName == object.metadata.name)"
        " && (!has(v.projected) || !has(v.projected.sources)"
        " || v.projected.sources.all(p, !has(p.secret))))",
        "Jobs created by taskfsm may mount no Secret but their own task data",
    ),
    (
        "variables.containers.all(c,"
        " (!has(c.env) || c.env.all(e, !has(e.valueFrom) || !has(e.valueFrom.secretKeyRef)))"
        " && (!has(c.envFrom) || c.envFrom.all(f, !has(f.secretRef))))",
        "Jobs created by taskfsm may read no Secret into their environment",
    ),
)
"""(CEL expression, message) pairs; the ServiceAccount check is added with its allowed set."""

SERVICE_ACCOUNT_PLACEHOLDER = "__ALLOWED_SERVICE_ACCOUNTS__"
USER_PLACEHOLDER = "__CONTROLLER_USER__"


def controller_user(namespace: str = rbac.NAMESPACE, account: str = rbac.SERVICE_ACCOUNT) -> str:
    """The API server's user name of the controller's ServiceAccount."""
    return f"system:serviceaccount:{namespace}:{account}"


def cel_list(values: tuple[str, ...] | list[str]) -> str:
    """A CEL list literal of strings (double-quoted: the chart's template inserts its own list
    the same way, inside a YAML string that single quotes would end)."""
    quoted = (v.replace("\\", "\\\\").replace('"', '\\"') for v in values)
    return "[" + ", ".join(f'"{v}"' for v in quoted) + "]"


def manifests(
    user: str = USER_PLACEHOLDER, allowed: str = SERVICE_ACCOUNT_PLACEHOLDER
) -> list[dict[str, Any]]:
    """The policy and its binding; ``user`` is the controller's user name, ``allowed`` a CEL
    list of ServiceAccount names (placeholders by default, for :func:`render`)."""
    validations: list[dict[str, Any]] = [
        {"expression": expression, "message": message, "reason": "Invalid"}
        for expression, message in VALIDATIONS
    ]
    validations.append(
        {
            "expression": "(has(variables.pod.serviceAccountName)"
            ' && variables.pod.serviceAccountName != "" ? variables.pod.serviceAccountName'
            f' : "default") in {allowed}'
            ' && (!has(variables.pod.serviceAccount) || variables.pod.serviceAccount == ""'
            f" || variables.pod.serviceAccount in {allowed})",
            "message": "Jobs created by taskfsm may run only as the allowed ServiceAccounts",
            "reason": "Invalid",
        }
    )
    labels = {"app.kubernetes.io/name": "taskfsm", "app.kubernetes.io/component": "job-policy"}
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": NAME, "labels": labels},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": ["batch"],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["jobs"],
                        }
                    ]
                },
                "matchConditions": [
                    {
                        "name": "created-by-taskfsm",
                        "expression": f'request.userInfo.username == "{user}"',
                    }
                ],
                "variables": [
                    {"name": "pod", "expression": "object.spec.template.spec"},
                    {"name": "containers", "expression": _CONTAINERS},
                ],
                "validations": validations,
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": NAME, "labels": labels},
            "spec": {"policyName": NAME, "validationActions": ["Deny"]},
        },
    ]


def render(
    user: str = controller_user(), allowed: tuple[str, ...] = DEFAULT_SERVICE_ACCOUNTS
) -> list[dict[str, Any]]:
    """The manifests for the controller's ``user`` and the ``allowed`` ServiceAccounts."""
    return manifests(user, cel_list(allowed))
