"""Factories of nagare objects (dicts) for the tests, the benchmarks and the demo.

The kinds (Workflows, Functions, MPEs, Tasks, TaskTemplates, MediaLocations with credential
Secrets, references), and modifiers that change how a Function's Job behaves under the
simulated kubelet (:mod:`taskfsm_dev.kubelet`):

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

import yaml

from taskfsm.api import constants as c
from taskfsm_dev.kubelet import ANNOTATION_EXIT_CODE, ANNOTATION_NEVER_START, ANNOTATION_RUN_SECONDS


def workflow(
    name: str, *, media_locations: list[dict[str, Any]] | None = None, **spec: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_WORKFLOW,
        "metadata": {"name": name},
        "spec": dict(spec),
    }
    if media_locations is not None:
        body["spec"]["mediaLocations"] = media_locations
    return body


def function(
    name: str,
    *,
    version: str = "1.0.0",
    exit_code: int = 0,
    run_seconds: float = 0.0,
    cluster: bool = False,
    default_config: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    local_only: bool = False,
) -> dict[str, Any]:
    """A Function (or ClusterFunction) whose pods the simulated kubelet plays out as told."""
    spec: dict[str, Any] = {
        "version": version,
        "localMediaProcessingEntitiesOnly": local_only,
        "template": {
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "metadata": {
                        "annotations": {
                            ANNOTATION_EXIT_CODE: str(exit_code),
                            ANNOTATION_RUN_SECONDS: str(run_seconds),
                        }
                    },
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {"name": "function", "image": f"example.invalid/{name}:latest"}
                        ],
                    },
                },
            }
        },
    }
    if default_config:
        spec["defaultConfig"] = default_config
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_CLUSTER_FUNCTION if cluster else c.KIND_FUNCTION,
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
    }


RESTRICTED_POD_SECURITY: dict[str, Any] = {
    "runAsNonRoot": True,
    "runAsUser": 65532,
    "runAsGroup": 65532,
    "seccompProfile": {"type": "RuntimeDefault"},
}
"""A pod ``securityContext`` the ``restricted`` Pod Security level admits."""
RESTRICTED_CONTAINER_SECURITY: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}
"""A container ``securityContext`` the ``restricted`` Pod Security level admits."""


def container_function(
    name: str,
    *args: str,
    image: str,
    pull_policy: str = "Never",
    cluster: bool = False,
    volumes: list[dict[str, Any]] | None = None,
    mounts: list[dict[str, Any]] | None = None,
    env: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A Function (or ClusterFunction) whose Job runs ``image`` with ``args`` on a real node
    (:mod:`taskfsm_dev.node`), non-root, read-only, without capabilities (Pod Security
    ``restricted``); ``volumes``, ``mounts`` and ``env`` are added to its pod and container."""
    container: dict[str, Any] = {
        "name": "function",
        "image": image,
        "imagePullPolicy": pull_policy,
        "args": list(args),
        "securityContext": copy.deepcopy(RESTRICTED_CONTAINER_SECURITY),
    }
    if mounts:
        container["volumeMounts"] = mounts
    if env:
        container["env"] = env
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "securityContext": copy.deepcopy(RESTRICTED_POD_SECURITY),
        "containers": [container],
    }
    if volumes:
        pod["volumes"] = volumes
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_CLUSTER_FUNCTION if cluster else c.KIND_FUNCTION,
        "metadata": {"name": name},
        "spec": {
            "version": "1.0.0",
            "template": {"spec": {"backoffLimit": 0, "template": {"spec": pod}}},
        },
    }


def local_mpe(
    name: str, *, namespace: str | None = None, default: bool = False, cluster: bool = False
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if default:
        meta["annotations"] = {
            c.ANNOTATION_IS_DEFAULT_MEDIA_PROCESSING_ENTITY: c.ANNOTATION_VALUE_TRUE
        }
    local = {"namespace": namespace} if namespace else {}
    kind = c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY if cluster else c.KIND_MEDIA_PROCESSING_ENTITY
    return {"apiVersion": c.API_VERSION, "kind": kind, "metadata": meta, "spec": {"local": local}}


def task(
    name: str,
    *,
    workflow_name: str,
    function_name: str | None = None,
    mpe_name: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {"workflowRef": {"name": workflow_name}, **spec}
    if function_name:
        body["functionRef"] = {"kind": c.KIND_FUNCTION, "name": function_name}
    if mpe_name:
        body["mediaProcessingEntityRef"] = {
            "kind": c.KIND_MEDIA_PROCESSING_ENTITY,
            "name": mpe_name,
        }
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_TASK,
        "metadata": {"name": name},
        "spec": body,
    }


MANAGED_BY_TESTS = "taskfsm.dev/tests"
"""``spec.managedBy`` of Jobs whose status the test writes (the Job controller skips them)."""


def _pod_annotations(function: dict[str, Any]) -> dict[str, str]:
    template = function["spec"]["template"].setdefault("spec", {}).setdefault("template", {})
    annotations: dict[str, str] = template.setdefault("metadata", {}).setdefault("annotations", {})
    return annotations


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
    return secret(name, {key: yaml.safe_dump(kubeconfig)})


def remote_mpe(name: str, secret_name: str, *, key: str | None = None) -> dict[str, Any]:
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
