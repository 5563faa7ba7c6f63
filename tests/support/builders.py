"""More nagare object factories for reconcile tests (complements :mod:`taskfsm.testing.objects`).

TaskTemplates, MediaLocations with credential Secrets, Workflows with media locations, and
modifiers that change how a Function's Job behaves:

* :func:`never_starting`: the simulated kubelet never starts its pods (the Job stays active);
* :func:`externally_managed`: ``spec.managedBy`` names another controller, so the real Job
  controller leaves the Job alone and the test writes its status (``jobs/status``) itself.
  Kubernetes ≥ 1.31 validates such writes: ``Complete`` needs ``SuccessCriteriaMet`` (and
  ``startTime``/``completionTime``), ``Failed`` needs ``FailureTarget``.
"""

from __future__ import annotations

import base64
import copy
from typing import Any

from taskfsm.api import constants as c
from taskfsm.testing.kubelet import ANNOTATION_NEVER_START

MANAGED_BY_TESTS = "taskfsm.dev/tests"
"""``spec.managedBy`` of Jobs whose status the test writes (the Job controller skips them)."""


def _pod_annotations(function: dict[str, Any]) -> dict[str, str]:
    template = function["spec"]["template"].setdefault("spec", {}).setdefault("template", {})
    return template.setdefault("metadata", {}).setdefault("annotations", {})


def never_starting(function: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``function`` whose pods stay Pending (the Job stays active until deleted)."""
    out = copy.deepcopy(function)
    _pod_annotations(out)[ANNOTATION_NEVER_START] = "true"
    return out


def externally_managed(function: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``function`` whose Jobs the built-in Job controller ignores (``managedBy``)."""
    out = copy.deepcopy(function)
    out["spec"]["template"]["spec"]["managedBy"] = MANAGED_BY_TESTS
    _pod_annotations(out)[ANNOTATION_NEVER_START] = "true"
    return out


def task_template(name: str, *, cluster: bool = False, **spec: Any) -> dict[str, Any]:
    kind = c.KIND_CLUSTER_TASK_TEMPLATE if cluster else c.KIND_TASK_TEMPLATE
    return {
        "apiVersion": c.API_VERSION,
        "kind": kind,
        "metadata": {"name": name},
        "spec": dict(spec),
    }


def secret(name: str, data: dict[str, str], *, namespace: str | None = None) -> dict[str, Any]:
    """A core/v1 Secret with ``data`` given as plain strings (encoded here)."""
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta,
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


def s3_location(
    name: str,
    *,
    secret_name: str,
    secret_namespace: str | None = None,
    key: str | None = None,
    cluster: bool = False,
    bucket: str = "media",
) -> dict[str, Any]:
    """A (Cluster)MediaLocation of an S3 bucket whose AWS credentials are in ``secret_name``."""
    ref: dict[str, Any] = {"name": secret_name}
    if secret_namespace:
        ref["namespace"] = secret_namespace
    if key:
        ref["key"] = key
    kind = c.KIND_CLUSTER_MEDIA_LOCATION if cluster else c.KIND_MEDIA_LOCATION
    return {
        "apiVersion": c.API_VERSION,
        "kind": kind,
        "metadata": {"name": name},
        "spec": {
            "s3": {
                "bucket": bucket,
                "region": "us-east-1",
                "endpointURL": "http://minio.s3:9000/",
                "usePathStyle": True,
                "auth": {"aws": {"secretRef": ref}},
            }
        },
    }


def location_entry(
    name: str, ref_name: str, *, kind: str | None = c.KIND_MEDIA_LOCATION
) -> dict[str, Any]:
    """One entry of a Workflow's ``spec.mediaLocations``."""
    ref: dict[str, Any] = {"name": ref_name}
    if kind:
        ref["kind"] = kind
    return {"name": name, "ref": ref}


def mpe_ref(name: str, *, cluster: bool = False, kind: str | None = "") -> dict[str, str]:
    """A ``mediaProcessingEntityRef``; ``kind=None`` leaves the kind out (D13)."""
    ref = {"name": name}
    if kind is None:
        return ref
    ref["kind"] = kind or (
        c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY if cluster else c.KIND_MEDIA_PROCESSING_ENTITY
    )
    return ref


def function_ref(name: str, *, cluster: bool = False, kind: str | None = "") -> dict[str, str]:
    """A ``functionRef``; ``kind=None`` leaves the kind out (D13)."""
    ref = {"name": name}
    if kind is None:
        return ref
    ref["kind"] = kind or (c.KIND_CLUSTER_FUNCTION if cluster else c.KIND_FUNCTION)
    return ref


def labelled(obj: dict[str, Any], **labels: str) -> dict[str, Any]:
    """A copy of ``obj`` with ``labels`` added (keys given with ``__`` for ``/``, ``_`` for ``.``
    are not translated: pass real keys through ``**{"a/b": "v"}``)."""
    out = copy.deepcopy(obj)
    out["metadata"].setdefault("labels", {}).update(labels)
    return out


def annotated(obj: dict[str, Any], **annotations: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"].setdefault("annotations", {}).update(annotations)
    return out


def default_mpe(obj: dict[str, Any]) -> dict[str, Any]:
    """A copy of an MPE marked as the default (``is-default-media-processing-entity: "true"``)."""
    return annotated(
        obj, **{c.ANNOTATION_IS_DEFAULT_MEDIA_PROCESSING_ENTITY: c.ANNOTATION_VALUE_TRUE}
    )


def kubeconfig_secret(
    name: str, kubeconfig: dict[str, Any], *, key: str = "kubeconfig"
) -> dict[str, Any]:
    """A Secret holding ``kubeconfig`` (a dict) as YAML under ``key``, for a remote MPE."""
    import yaml

    return secret(name, {key: yaml.safe_dump(kubeconfig)})


def remote_mpe(name: str, *, secret_name: str, key: str | None = None) -> dict[str, Any]:
    """A remote MediaProcessingEntity whose kubeconfig is in Secret ``secret_name``."""
    ref: dict[str, Any] = {"name": secret_name}
    if key:
        ref["key"] = key
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_MEDIA_PROCESSING_ENTITY,
        "metadata": {"name": name},
        "spec": {"remote": {"kubeconfig": {"secretRef": ref}}},
    }
