"""Where a Task's Job runs, as the command-line user can see it: the cluster and namespace of the
Task's MediaProcessingEntity, reached with the user's own credentials.

A local MediaProcessingEntity runs Jobs in the main cluster; a remote one in the cluster of the
kubeconfig stored in a Secret of the main cluster (docs/behaviour.md §1.7). The controller reads
that Secret with its own RBAC; ``taskfsm get/logs/explain`` and ``taskfsm ui`` run with the
user's, which may not allow reading Secrets. Then :func:`job_site` returns a site without a
client whose ``problem`` says which Secret could not be read and what to do instead (use the
remote cluster's own kubeconfig), and every caller prints that line instead of failing.

The kubeconfig is held to the controller's allow-list (:mod:`taskfsm.kube.kubeconfig`): a
tenant's ``exec`` or file path must not run or read anything on the user's machine. Its contents
never reach an output: a Secret that does not parse is reported by the exception's type only, as
the controller does.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from taskfsm.api import constants as c
from taskfsm.kube import kubeconfig
from taskfsm.kube.errors import Forbidden, KubeError, NotFound
from taskfsm.kube.resources import BY_KIND
from taskfsm.kube.rest import SECRETS, Rest

DEFAULT_KUBECONFIG_KEY = "kubeconfig"


@dataclass(frozen=True)
class JobSite:
    """Where a Task's Job is (or would be).

    Attributes:
        rest: the Job's cluster, or None when it cannot be reached (``problem`` says why).
        namespace: the Job namespace (from ``status.jobRef``; "" when unknown).
        where: a short description for output: ``main cluster`` or
            ``remote MediaProcessingEntity ns/name (https://...)``.
        remote: True for a remote MediaProcessingEntity.
        problem: why the Job cannot be read with the user's credentials, or "".
    """

    rest: Rest | None
    namespace: str
    where: str
    remote: bool = False
    problem: str = ""


def mpe_of(main: Rest, task: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The Task's chosen MediaProcessingEntity object, or None with the reason."""
    ref = (task.get("status") or {}).get("mediaProcessingEntityRef") or {}
    if not ref.get("name"):
        return None, "no MediaProcessingEntity chosen yet"
    kind = ref.get("kind") or c.KIND_MEDIA_PROCESSING_ENTITY
    res = BY_KIND.get(kind)
    if res is None:
        return None, f"unknown MediaProcessingEntity kind {kind!r}"
    namespace = (ref.get("namespace") or task["metadata"]["namespace"]) if res.namespaced else None
    label = f"{kind} {namespace + '/' if namespace else ''}{ref['name']}"
    try:
        return main.get(res, namespace, ref["name"]), ""
    except NotFound:
        return None, f"{label} does not exist any more"
    except KubeError as exc:
        return None, f"could not read {label}: {exc}"


def job_site(main: Rest, task: dict[str, Any]) -> JobSite:
    """The cluster of the Task's Job (see the module docstring)."""
    job_ref = (task.get("status") or {}).get("jobRef") or {}
    namespace = job_ref.get("namespace") or task["metadata"]["namespace"]
    mpe, why = mpe_of(main, task)
    if mpe is None:
        # No MPE to ask: the Job, if any, was recorded in the main cluster's terms.
        return JobSite(main, namespace, f"main cluster ({why})")
    spec = mpe.get("spec") or {}
    if "remote" not in spec:
        return JobSite(main, namespace, "main cluster (local MediaProcessingEntity)")
    return _remote_site(main, mpe, namespace)


def _remote_site(main: Rest, mpe: dict[str, Any], namespace: str) -> JobSite:
    meta = mpe["metadata"]
    label = f"{mpe['kind']} {meta.get('namespace') + '/' if meta.get('namespace') else ''}"
    label += meta["name"]
    secret_ref = (((mpe.get("spec") or {}).get("remote") or {}).get("kubeconfig") or {}).get(
        "secretRef"
    ) or {}
    secret_ns = meta.get("namespace") or secret_ref.get("namespace") or ""
    name = secret_ref.get("name") or ""
    key = secret_ref.get("key") or DEFAULT_KUBECONFIG_KEY
    where = f"remote {label}"
    if not name or not secret_ns:
        return JobSite(None, namespace, where, True, f"{label} names no kubeconfig Secret")
    try:
        secret = main.get(SECRETS, secret_ns, name)
    except Forbidden:
        return JobSite(
            None,
            namespace,
            where,
            True,
            f"your credentials may not read the kubeconfig Secret {secret_ns}/{name} of {label} "
            f"(forbidden); to see the Job, use a kubeconfig of that cluster, e.g. `kubectl get "
            f"jobs -n {namespace or '<its namespace>'} --kubeconfig <the MPE cluster's>`, or ask "
            f"for `get` on that Secret",
        )
    except KubeError as exc:
        return JobSite(None, namespace, where, True, f"could not read the kubeconfig Secret: {exc}")
    data = (secret.get("data") or {}).get(key)
    if data is None:
        return JobSite(
            None, namespace, where, True, f"Secret {secret_ns}/{name} has no key {key!r}"
        )
    try:
        # Held to the same allow-list as the controller's: a tenant's kubeconfig must not run
        # a command or read a file on the machine of whoever runs this (docs/security.md).
        document = kubeconfig.parse(base64.b64decode(data))
        api_client = kubeconfig.build_client(document)
    except kubeconfig.KubeconfigRefused as exc:
        return JobSite(
            None,
            namespace,
            where,
            True,
            f"Secret {secret_ns}/{name} key {key!r} holds what taskfsm does not use on anyone's "
            f'behalf: {exc} (docs/security.md, "Remote kubeconfigs")',
        )
    except Exception as exc:  # never echo the kubeconfig's content
        return JobSite(
            None,
            namespace,
            where,
            True,
            f"Secret {secret_ns}/{name} key {key!r} is not a usable kubeconfig "
            f"({type(exc).__name__})",
        )
    host = api_client.configuration.host
    return JobSite(
        Rest(api_client),
        namespace or kubeconfig.namespace_of(document),
        f"{where} ({host})",
        True,
    )
