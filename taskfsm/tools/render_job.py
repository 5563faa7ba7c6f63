"""``taskfsm render-job``: the Job and helper-data Secret a Task would produce, offline.

Reads local YAML files (the Task, its Function or ClusterFunction, its Workflow, optionally a
TaskTemplate, MediaProcessingEntities, MediaLocations and their Secrets), runs the same selection
and builders as the controller (``taskfsm.selection``, ``taskfsm.manifests``), and prints the Job
and the Secret as YAML.
The Secret's ``data.json`` is shown decoded, with every credential value masked unless
``--show-secrets`` is given. Nothing talks to a cluster, so users can check Functions and
``templatePatches`` before applying them.
"""

from __future__ import annotations

import argparse
import base64
import copy
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from taskfsm import selection
from taskfsm.api import constants as c
from taskfsm.api.config import WorkflowManagerConfiguration
from taskfsm.manifests import helper_payload, jobs

MASK = "***"
PLACEHOLDER_UID = "00000000-0000-0000-0000-000000000000"


class FileCatalog:
    """A :class:`taskfsm.selection.choose.Catalog` over objects loaded from files."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = objects

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        for obj in self.list(kind, namespace):
            if obj["metadata"]["name"] == name:
                return obj
        return None

    def list(self, kind: str, namespace: str | None) -> list[dict[str, Any]]:
        return [
            o
            for o in self.objects
            if o.get("kind") == kind
            and (namespace is None or o["metadata"].get("namespace") in (None, namespace))
        ]

    def secret(self, namespace: str, name: str) -> dict[str, Any]:
        for obj in self.list("Secret", namespace):
            if obj["metadata"]["name"] == name:
                data = dict(obj.get("data") or {})
                for key, value in (obj.get("stringData") or {}).items():
                    data[key] = base64.b64encode(str(value).encode()).decode()
                return {**obj, "data": data}
        raise LookupError(f'secrets "{name}" not found (no such Secret in the given files)')


def load(paths: list[str], namespace: str) -> list[dict[str, Any]]:
    objects = []
    for path in paths:
        for doc in yaml.safe_load_all(Path(path).read_text()):
            if not doc:
                continue
            meta = doc.setdefault("metadata", {})
            if doc.get("kind") not in (
                c.KIND_CLUSTER_FUNCTION,
                c.KIND_CLUSTER_TASK_TEMPLATE,
                c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY,
                c.KIND_CLUSTER_MEDIA_LOCATION,
            ):
                meta.setdefault("namespace", namespace)
            meta.setdefault("uid", PLACEHOLDER_UID)
            objects.append(doc)
    return objects


def render(objects: list[dict[str, Any]], *, task_name: str | None, show_secrets: bool) -> str:
    """The YAML of the Job and the Secret for the chosen Task.

    Raises:
        LookupError: a needed object is not in the files; ``selection.SelectionError``,
            ``helper_payload.HelperDataError``, ``jobs.JobTemplateError`` or
            ``taskfsm.strategic_merge.PatchError`` with the messages the controller would report.
    """
    catalog = FileCatalog(objects)
    tasks = [o for o in objects if o.get("kind") == c.KIND_TASK]
    if task_name:
        tasks = [t for t in tasks if t["metadata"]["name"] == task_name]
    if len(tasks) != 1:
        raise LookupError(
            f"expected exactly one Task in the files (use --task NAME); found {len(tasks)}"
        )
    task = copy.deepcopy(tasks[0])
    namespace = task["metadata"]["namespace"]
    chosen = selection.select(task, catalog)
    function = catalog.get(
        chosen.function_ref["kind"],
        chosen.function_ref.get("namespace"),
        chosen.function_ref["name"],
    )
    assert function is not None  # select() checked it exists
    template = selection.task_template(task.get("spec") or {}, namespace, catalog)
    workflow_name = ((task.get("spec") or {}).get("workflowRef") or {}).get("name", "")
    workflow = catalog.get(c.KIND_WORKFLOW, namespace, workflow_name)
    if workflow is None:
        raise LookupError(
            f'workflows.engine.nagare.media "{workflow_name}" not found '
            "(no such Workflow in the given files)"
        )
    mpe = catalog.get(
        chosen.media_processing_entity_ref["kind"],
        chosen.media_processing_entity_ref.get("namespace"),
        chosen.media_processing_entity_ref["name"],
    )
    job_namespace = (((mpe or {}).get("spec") or {}).get("local") or {}).get(
        "namespace"
    ) or namespace
    job = jobs.build_job(
        task=task, function=function, task_template=template, namespace=job_namespace
    )
    config = next(
        (
            WorkflowManagerConfiguration.from_dict(o)
            for o in objects
            if o.get("kind") == c.KIND_WORKFLOW_MANAGER_CONFIGURATION
        ),
        None,
    )
    payload = helper_payload.build_payload(
        task=task,
        workflow=workflow,
        function=function,
        task_template=template,
        catalog=catalog,
        read_secret=catalog.secret,
        nats=config.nats if config else None,
    )
    secret = jobs.build_secret(
        task=task,
        job={**job, "metadata": {**job["metadata"], "uid": PLACEHOLDER_UID}},
        payload=payload,
    )
    data = json.loads(payload)
    if not show_secrets:
        data = _masked(data)
    shown = {k: v for k, v in secret.items() if k != "data"}
    shown["stringData"] = {c.TASK_DATA_FILE_NAME: json.dumps(data, indent=2)}
    mpe_name = chosen.media_processing_entity_ref["name"]
    function_name = chosen.function_ref["name"]
    header = (
        f"# Task {namespace}/{task['metadata']['name']}: "
        f"MediaProcessingEntity {mpe_name} ({chosen.mpe_source}), "
        f"Function {function_name} ({chosen.function_source})\n"
    )
    return header + yaml.dump_all([job, shown], Dumper=_BlockDumper, sort_keys=False)


class _BlockDumper(yaml.SafeDumper):
    """Writes multi-line strings (the decoded data.json) as readable literal blocks."""


_BlockDumper.add_representer(
    str,
    lambda dumper, value: dumper.represent_scalar(
        "tag:yaml.org,2002:str", value, style="|" if "\n" in value else None
    ),
)


def _masked(data: Any) -> Any:
    """Mask resolved credentials (``{"data": {...}}`` of secret refs) and the NATS password."""
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            if key == "secretRef" and isinstance(value, dict) and "data" in value:
                out[key] = {"data": dict.fromkeys(value["data"], MASK)}
            elif key == "password" and value:
                out[key] = MASK
            else:
                out[key] = _masked(value)
        return out
    if isinstance(data, list):
        return [_masked(v) for v in data]
    return data


def main(args: argparse.Namespace) -> int:
    try:
        objects = load(args.files, args.namespace)
        sys.stdout.write(render(objects, task_name=args.task, show_secrets=args.show_secrets))
    except Exception as exc:  # every failure is the user's input: say what, not a traceback
        print(f"taskfsm render-job: {exc}", file=sys.stderr)
        return 1
    return 0
