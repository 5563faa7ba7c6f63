"""The Job and the helper-data Secret a Task runs as (docs/behaviour.md §1.13, §2, §3.7 steps 4-6).

Pure builders over plain Kubernetes JSON. With the fixes of docs/behaviour.md §6:

* D5/D7: the Job's name is derived from the Task (name + a hash of its UID), so a retried create
  finds the Job it already made (``AlreadyExists`` → adopt) instead of making a second one; the
  Secret has the same name and an owner reference to the Job, so it can never outlive it.
* D24: the labels carry the Task's and Workflow's names; a name too long for a label is cut
  with a hash and kept whole in the annotation of the same key (:mod:`taskfsm.api.names`), and
  a child is matched to its Task through both (:func:`task_key_of`).
* D4: ``templatePatches`` are Kubernetes strategic merge patches (``taskfsm.strategic_merge``).
* The data volume and mount are added to every container and init container; a template that
  already uses the volume name or mount path is rejected with a clear message instead of
  producing an invalid Job.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Mapping
from typing import Any

from taskfsm.api import constants as c
from taskfsm.api import names
from taskfsm.kube import wire
from taskfsm.strategic_merge import JOB_TEMPLATE_SPEC, PatchError, merge_job_template
from taskfsm.strategic_merge.errors import format_path
from taskfsm.strategic_merge.schema import type_shape
from taskfsm.strategic_merge.validate import validate_patch

#: Job names end up in the pod label ``batch.kubernetes.io/job-name`` (≤ 63 characters).
MAX_JOB_NAME = 63
_HASH_LEN = 10


class JobTemplateError(Exception):
    """The Function template and patches do not make a usable Job; the message says why."""


def task_names(task: Mapping[str, Any]) -> dict[str, str]:
    """The full values of the four Workflow/Task labels of ``task`` (§2)."""
    meta = task["metadata"]
    return {
        c.LABEL_WORKFLOW_NAMESPACE: meta["namespace"],
        c.LABEL_WORKFLOW_NAME: ((task.get("spec") or {}).get("workflowRef") or {}).get("name", ""),
        c.LABEL_TASK_NAMESPACE: meta["namespace"],
        c.LABEL_TASK_NAME: meta["name"],
    }


def task_labels(task: Mapping[str, Any]) -> dict[str, str]:
    """The four Workflow/Task labels put on the Task, its Secret and its Job (§2): the names
    themselves, a name too long for a label cut with a hash (D24, :mod:`taskfsm.api.names`)."""
    return names.labels_and_annotations(task_names(task))[0]


def task_annotations(task: Mapping[str, Any]) -> dict[str, str]:
    """The full names of the labels :func:`task_labels` had to cut, under the same keys (empty
    for names that fit a label)."""
    return names.labels_and_annotations(task_names(task))[1]


def task_key_of(obj: Mapping[str, Any]) -> str | None:
    """``namespace/name`` of the Task a Job's or Secret's labels name (read through their
    annotations when cut, :func:`taskfsm.api.names.full_value`), or None for one without."""
    meta = obj.get("metadata") or {}
    namespace = names.full_value(meta, c.LABEL_TASK_NAMESPACE)
    name = names.full_value(meta, c.LABEL_TASK_NAME)
    return f"{namespace}/{name}" if namespace and name else None


def job_name(task: Mapping[str, Any]) -> str:
    """``<task name, made DNS-label safe and truncated>-<10 hex of sha256(task UID)>``.

    Deterministic for one Task object and different for a re-created Task of the same name.
    """
    meta = task["metadata"]
    digest = hashlib.sha256(meta["uid"].encode()).hexdigest()[:_HASH_LEN]
    stem = re.sub(r"[^a-z0-9-]", "-", meta["name"].lower())[: MAX_JOB_NAME - _HASH_LEN - 1].strip(
        "-"
    )
    return f"{stem or 'task'}-{digest}"


def owns(job_or_secret: Mapping[str, Any], task: Mapping[str, Any]) -> bool:
    """True when the object carries this Task's labels (used before adopting on AlreadyExists);
    a cut name label counts only with the annotation that confirms it."""
    meta = task["metadata"]
    return task_key_of(job_or_secret) == f"{meta['namespace']}/{meta['name']}"


def build_job(
    *,
    task: Mapping[str, Any],
    function: Mapping[str, Any],
    task_template: Mapping[str, Any] | None,
    namespace: str,
    ttl_seconds: int = c.JOB_TTL_SECONDS_AFTER_FINISHED,
) -> dict[str, Any]:
    """The Job for ``task`` in ``namespace`` (the MediaProcessingEntity's Job namespace).

    Raises:
        JobTemplateError: the Function template is not shaped like a Job template, a
            ``templatePatches`` is malformed (the message names the object, field and path),
            or the merged template has no pod spec or collides with the data volume.
    """
    for source in (task, function, task_template):
        why = wire.problem(source)  # cut on reading: nested deeper than taskfsm processes
        if source is not None and why:
            meta = source.get("metadata") or {}
            raise JobTemplateError(
                f"{source.get('kind')} {meta.get('name')!r} cannot be used: {why}"
            )
    patches = [
        ((task_template or {}).get("spec") or {}).get("templatePatches"),
        (task.get("spec") or {}).get("templatePatches"),
    ]
    template = (function.get("spec") or {}).get("template") or {}
    try:
        # The schema keeps the template free-form: check its shape like a patch's before merging,
        # so a wrong type is reported by path instead of failing somewhere inside the merge.
        validate_patch(template, type_shape(JOB_TEMPLATE_SPEC))
    except PatchError as exc:
        meta = function.get("metadata") or {}
        path = "spec.template" + ("" if not exc.path else "." + format_path(exc.path))
        raise JobTemplateError(
            f"{function.get('kind') or c.KIND_FUNCTION} {meta.get('name')!r} has an unusable "
            f"{path}: {exc.problem}"
        ) from None
    try:
        merged = merge_job_template(copy.deepcopy(template), *patches)
    except PatchError as exc:
        raise JobTemplateError(f"{_patch_source(exc.patch_index, task_template)}: {exc}") from None
    name = job_name(task)
    template_meta = merged.get("metadata") or {}
    spec = copy.deepcopy(merged.get("spec") or {})
    pod_spec = (spec.get("template") or {}).get("spec")
    if not isinstance(pod_spec, dict) or not pod_spec.get("containers"):
        raise JobTemplateError(
            "the Function template (with templatePatches applied) has no "
            "spec.template.spec.containers"
        )
    _add_task_data_volume(pod_spec, secret_name=name)
    spec["ttlSecondsAfterFinished"] = ttl_seconds  # always overrides the template (§1.13)
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {**(template_meta.get("labels") or {}), **task_labels(task)},
        "finalizers": [c.FINALIZER_JOB_PROTECTION],
    }
    annotations = {**(template_meta.get("annotations") or {}), **task_annotations(task)}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": c.JOB_API_VERSION, "kind": c.KIND_JOB, "metadata": metadata, "spec": spec}


def _patch_source(index: int | None, task_template: Mapping[str, Any] | None) -> str:
    """Which ``templatePatches`` a merge error comes from (``build_job`` passes the
    TaskTemplate's first, the Task's second)."""
    if index == 0 and task_template is not None:
        meta = task_template.get("metadata") or {}
        kind = task_template.get("kind") or c.KIND_TASK_TEMPLATE
        return f"{kind} {meta.get('name')!r} spec.templatePatches"
    return "spec.templatePatches"


def _add_task_data_volume(pod_spec: dict[str, Any], *, secret_name: str) -> None:
    volumes = pod_spec.setdefault("volumes", [])
    if any(v.get("name") == c.TASK_DATA_VOLUME_NAME for v in volumes):
        raise JobTemplateError(
            f"the Job template already has a volume named {c.TASK_DATA_VOLUME_NAME}, "
            "which taskfsm reserves"
        )
    volumes.append({"name": c.TASK_DATA_VOLUME_NAME, "secret": {"secretName": secret_name}})
    mount = {"name": c.TASK_DATA_VOLUME_NAME, "mountPath": c.TASK_DATA_MOUNT_PATH, "readOnly": True}
    for group in ("initContainers", "containers"):
        for container in pod_spec.get(group) or []:
            mounts = container.setdefault("volumeMounts", [])
            if any(m.get("mountPath") == c.TASK_DATA_MOUNT_PATH for m in mounts):
                raise JobTemplateError(
                    f"container {container.get('name')!r} already mounts {c.TASK_DATA_MOUNT_PATH}, "
                    "which taskfsm reserves for the task data"
                )
            mounts.append(dict(mount))


def build_secret(
    *, task: Mapping[str, Any], job: Mapping[str, Any], payload: bytes
) -> dict[str, Any]:
    """The helper-data Secret: named like the Job, owned by it (GC removes it with the Job)."""
    import base64

    meta = job["metadata"]
    metadata: dict[str, Any] = {
        "name": meta["name"],
        "namespace": meta["namespace"],
        "labels": task_labels(task),
        "ownerReferences": [
            {
                "apiVersion": c.JOB_API_VERSION,
                "kind": c.KIND_JOB,
                "name": meta["name"],
                "uid": meta["uid"],
            }
        ],
    }
    annotations = task_annotations(task)
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": c.SECRET_API_VERSION,
        "kind": c.KIND_SECRET,
        "metadata": metadata,
        "data": {c.TASK_DATA_FILE_NAME: base64.b64encode(payload).decode()},
    }


def exact_ref(job: Mapping[str, Any]) -> dict[str, str]:
    """``status.jobRef``: an ExactObjectReference, apiVersion/kind filled at once (§3.7 step 6)."""
    meta = job["metadata"]
    return {
        "apiVersion": c.JOB_API_VERSION,
        "kind": c.KIND_JOB,
        "name": meta["name"],
        "namespace": meta["namespace"],
        "uid": meta["uid"],
    }
