"""Where an MPE's spec and kubeconfig say its Jobs run, under the tenants' rules.

docs/behaviour.md §1.7, with D19 (a spec or kubeconfig change makes a new fingerprint, so the
client is rebuilt):

* ``local: {namespace?}`` runs Jobs in the main cluster, in ``local.namespace`` or the MPE's own
  namespace (a ClusterMediaProcessingEntity must name one; a namespaced MPE may name only its
  own, docs/security.md "Where Jobs run");
* ``remote: {kubeconfig: {secretRef}}`` runs Jobs in the cluster of a kubeconfig stored in a
  Secret of the main cluster (key ``kubeconfig`` by default, the Secret in the MPE's own
  namespace for a namespaced MPE), in the kubeconfig context's namespace or ``default``; the
  kubeconfig is held to the allow-list of :mod:`taskfsm.kube.kubeconfig` (the administrator's
  opt-ins apply to ClusterMediaProcessingEntities only).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from taskfsm.api import constants as c
from taskfsm.controllers.clusters.cluster import (
    MpeError,
    Reason,
    SecretKey,
)
from taskfsm.kube import client as kube_client
from taskfsm.kube import kubeconfig
from taskfsm.kube.errors import KubeError, NotFound
from taskfsm.kube.rest import SECRETS, Rest

DEFAULT_KUBECONFIG_KEY: Final = "kubeconfig"


@dataclass(frozen=True)
class Target:
    """Where an MPE's Jobs run.

    Attributes:
        fingerprint: what the client was built from (generation, and the kubeconfig Secret's
            version for a remote MPE): a change rebuilds the client (D19).
        api_client: the remote cluster's client (None: the main cluster).
        namespace: the Job namespace.
        remote: the Jobs run in another cluster.
        cluster_id: ``"main"``, or the remote API server's address.
    """

    fingerprint: tuple[Any, ...]
    api_client: kube_client.ApiClient | None
    namespace: str
    remote: bool
    cluster_id: str


def resolve(
    mpe: dict[str, Any],
    *,
    main: Rest,
    policy: kubeconfig.KubeconfigPolicy,
    watch_namespace: str | None,
    watch_secret: Callable[[SecretKey | None], None],
) -> Target:
    """Where ``mpe``'s Jobs run; raises :class:`MpeError` (with its reason) if nowhere.

    ``watch_secret`` is told which kubeconfig Secret the MPE names (None: none) before it is
    read, so a Secret created or fixed after this read still re-queues the MPE.
    """
    kind = mpe["kind"]
    meta = mpe["metadata"]
    spec = mpe.get("spec") or {}
    cluster_kind = kind == c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY
    generation = meta.get("generation")
    if "remote" not in spec or "local" in spec:
        watch_secret(None)
    if "local" in spec and "remote" not in spec:
        namespace = (spec.get("local") or {}).get("namespace") or ""
        if not namespace:
            if cluster_kind:
                raise MpeError(
                    "local ClusterMediaProcessingEntity has no namespace defined",
                    Reason.INVALID_SPEC,
                )
            namespace = meta["namespace"]
        elif not cluster_kind and namespace != meta["namespace"]:
            # A namespaced MPE is its namespace's tenant's: its Jobs, their Secrets and pods
            # stay in that namespace (docs/security.md, "Where Jobs run").
            raise MpeError(
                f"spec.local.namespace {namespace!r} is not this MediaProcessingEntity's "
                f"namespace: a MediaProcessingEntity runs Jobs in its own namespace only (a "
                f"ClusterMediaProcessingEntity may name another)",
                Reason.NAMESPACE_NOT_ALLOWED,
            )
        _require_watched(watch_namespace, namespace, "spec.local.namespace")
        return Target((generation, namespace), None, namespace, False, "main")
    if "remote" in spec and "local" not in spec:
        kubeconfig_ref = (spec.get("remote") or {}).get("kubeconfig") or {}
        secret_ref = kubeconfig_ref.get("secretRef") or {}
        secret_ns = secret_ref.get("namespace") or ""
        if cluster_kind and not secret_ns:
            raise MpeError(
                "remote ClusterMediaProcessingEntity secretRef has no namespace defined",
                Reason.INVALID_SPEC,
            )
        if not cluster_kind:
            if secret_ns and secret_ns != meta["namespace"]:
                raise MpeError(
                    "remote MediaProcessingEntity references secretRef in different namespace",
                    Reason.NAMESPACE_NOT_ALLOWED,
                )
            secret_ns = meta["namespace"]
        name = secret_ref.get("name") or ""
        if not name:
            raise MpeError("remote kubeconfig secretRef has no name", Reason.INVALID_SPEC)
        _require_watched(watch_namespace, secret_ns, "the kubeconfig secretRef's namespace")
        key = secret_ref.get("key") or DEFAULT_KUBECONFIG_KEY
        # Watched before it is read, so a Secret created or fixed after this read still
        # re-queues the MPE; an earlier Secret of another name is no longer watched for it.
        watch_secret((secret_ns, name))
        try:
            secret = main.get(SECRETS, secret_ns, name)
        except KubeError as exc:
            # Only a Secret that is not there says no client can be built as things are; a
            # failed read (a timeout, a 5xx) may well succeed next time.
            raise MpeError(
                f"failed to read kubeconfig Secret: {exc}",
                Reason.SECRET_UNAVAILABLE,
                transient=not isinstance(exc, NotFound),
            ) from None
        data = (secret.get("data") or {}).get(key)
        if data is None:
            raise MpeError(
                f"Secret '{secret_ns}/{name}' has no key '{key}'", Reason.SECRET_UNAVAILABLE
            )
        where = f"Secret '{secret_ns}/{name}' key '{key}'"
        # A tenant's kubeconfig is held to the allow-list; the administrator's opt-ins
        # apply to ClusterMediaProcessingEntities only (docs/security.md).
        allowed = policy if cluster_kind else kubeconfig.STRICT
        try:
            document = kubeconfig.parse(base64.b64decode(data))
            api_client = kubeconfig.build_client(document, allowed)
        except kubeconfig.KubeconfigRefused as exc:
            raise MpeError(
                f'{where} is refused: {exc} (docs/security.md, "Remote kubeconfigs")',
                Reason.KUBECONFIG_REFUSED,
            ) from None
        except Exception as exc:  # malformed: never echo its content
            detail = str(exc) if isinstance(exc, ValueError) else type(exc).__name__
            raise MpeError(
                f"{where} is not a usable kubeconfig: {detail}", Reason.KUBECONFIG_INVALID
            ) from None
        namespace = kubeconfig.namespace_of(document)
        version = secret["metadata"].get("resourceVersion")
        fingerprint = (generation, f"{secret_ns}/{name}@{version}")
        return Target(fingerprint, api_client, namespace, True, api_client.configuration.host)
    raise MpeError(
        "MediaProcessingEntity spec must have exactly one of local or remote",
        Reason.INVALID_SPEC,
    )


def _require_watched(watch_namespace: str | None, namespace: str, what: str) -> None:
    """Refuse a namespace of the main cluster outside ``--namespace`` (when set)."""
    if watch_namespace and namespace != watch_namespace:
        raise MpeError(
            f"{what} {namespace!r} is outside the namespace this controller works in "
            f"({watch_namespace!r}, taskfsm run --namespace)",
            Reason.NAMESPACE_NOT_ALLOWED,
        )
