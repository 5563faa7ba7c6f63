"""Plain-dict helpers for end-to-end tests: one namespace of a cluster, and the audit that every
Task has exactly one Job and Secret (the objects themselves: :mod:`taskfsm_dev.objects`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from taskfsm.api import constants as c
from taskfsm.kube.errors import NotFound
from taskfsm.kube.resources import BY_KIND, TASKS
from taskfsm.kube.rest import JOBS, SECRETS, Rest


class Cluster:
    """Plain-dict access to one namespace of a cluster, for setting up and asserting."""

    def __init__(self, api_client: client.ApiClient, namespace: str) -> None:
        self.rest = Rest(api_client)
        self.namespace = namespace

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        res = BY_KIND.get(obj["kind"])
        if res is None:
            res = {"Secret": SECRETS}[obj["kind"]]
        return self.rest.create(res, self.namespace if res.namespaced else None, obj)

    def task(self, name: str) -> dict[str, Any] | None:
        try:
            return self.rest.get(TASKS, self.namespace, name)
        except NotFound:
            return None

    def phase(self, name: str) -> str:
        return ((self.task(name) or {}).get("status") or {}).get("phase") or ""

    def tasks(self) -> list[dict[str, Any]]:
        return self.rest.list(TASKS, self.namespace)["items"]

    def jobs(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.rest.list(JOBS, namespace or self.namespace)["items"]

    def secrets(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.rest.list(SECRETS, namespace or self.namespace)["items"]

    def delete_task(self, name: str) -> None:
        self.rest.delete(TASKS, self.namespace, name)

    def relabel_task(self, name: str, **labels: str) -> dict[str, Any]:
        return self.rest.patch(TASKS, self.namespace, name, {"metadata": {"labels": labels}})


def write_kubeconfig(path: Path, kubeconfig: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(kubeconfig))
    return path


def job_audit(
    tasks: list[dict[str, Any]], jobs: list[dict[str, Any]], secrets: list[dict[str, Any]]
) -> list[str]:
    """Problems with the children of ``tasks``: each must have exactly one Job (labelled with
    its name, the one ``status.jobRef`` names) and a Secret of the same name owned by that Job;
    no Secret with task labels may lack a Job. Returns readable problems (empty: all good)."""
    problems = []
    jobs_by_task: dict[str, list[dict[str, Any]]] = {}
    for job in jobs:
        labels = job["metadata"].get("labels") or {}
        jobs_by_task.setdefault(labels.get(c.LABEL_TASK_NAME, ""), []).append(job)
    job_uids = {job["metadata"]["uid"] for job in jobs}
    secrets_by_name = {s["metadata"]["name"]: s for s in secrets}
    for task in tasks:
        name = task["metadata"]["name"]
        mine = jobs_by_task.get(name, [])
        if len(mine) != 1:
            problems.append(f"{name}: {len(mine)} Jobs {[j['metadata']['name'] for j in mine]}")
            continue
        job = mine[0]
        ref = (task.get("status") or {}).get("jobRef") or {}
        if ref.get("uid") and ref["uid"] != job["metadata"]["uid"]:
            problems.append(
                f"{name}: jobRef names {ref.get('name')}/{ref.get('uid')}, the Job is {job['metadata']['uid']}"
            )
        secret = secrets_by_name.get(job["metadata"]["name"])
        if secret is None:
            problems.append(f"{name}: no Secret {job['metadata']['name']}")
            continue
        owners = [o.get("uid") for o in secret["metadata"].get("ownerReferences") or []]
        if owners != [job["metadata"]["uid"]]:
            problems.append(
                f"{name}: Secret owners {owners} are not its Job {job['metadata']['uid']}"
            )
    for secret in secrets:
        labels = secret["metadata"].get("labels") or {}
        if c.LABEL_TASK_NAME not in labels:
            continue
        owners = {o.get("uid") for o in secret["metadata"].get("ownerReferences") or []}
        if not owners & job_uids:
            problems.append(f"leaked Secret {secret['metadata']['name']} (owners {sorted(owners)})")
    return problems
