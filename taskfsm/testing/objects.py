"""Small factories of nagare objects (dicts) for tests, benchmarks and the demo."""

from __future__ import annotations

from typing import Any

from taskfsm.api import constants as c
from taskfsm.testing.kubelet import ANNOTATION_EXIT_CODE, ANNOTATION_RUN_SECONDS


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
