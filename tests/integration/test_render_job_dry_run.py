"""The Job that render-job prints is one the API server accepts (dryRun=All)."""

from __future__ import annotations

import yaml
from kubernetes import client

from taskfsm.tools.render_job import load, render
from taskfsm_dev.demo import SAMPLES


def test_rendered_job_and_secret_pass_server_side_dry_run(api_client, namespace):
    """Every sample Task renders a Job and Secret that kube-apiserver validates without errors."""
    objects = load([str(SAMPLES)], namespace)
    batch = client.BatchV1Api(api_client)
    core = client.CoreV1Api(api_client)
    for name in [o["metadata"]["name"] for o in objects if o["kind"] == "Task"]:
        job, secret = list(
            yaml.safe_load_all(
                render(load([str(SAMPLES)], namespace), task_name=name, show_secrets=True)
            )
        )
        job["metadata"].pop(
            "finalizers"
        )  # dry-run of a finalizer is fine too, but keep the object plain
        created = batch.create_namespaced_job(namespace, job, dry_run="All")
        assert created.metadata.name == job["metadata"]["name"]
        secret["metadata"].pop("ownerReferences")  # the placeholder Job UID does not exist
        core.create_namespaced_secret(namespace, secret, dry_run="All")
    assert objects
