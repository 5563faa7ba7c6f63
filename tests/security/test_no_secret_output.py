"""No secret value in any output (docs/security.md, "No secret in any output"): a tenant's
credentials, used or refused, never appear in the controller's log, in Events or in any status;
the helper data holds only the keys the Job needs.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import uuid

from taskfsm.kube.resources import BY_KIND
from taskfsm.kube.rest import SECRETS
from taskfsm_dev import objects
from taskfsm_dev.objects import kubeconfig_secret, remote_mpe
from taskfsm_dev.waiting import wait_for
from tests.support.tenancy import Tenant, kubeconfig


def everything_visible(tenant: Tenant, controller) -> str:
    """The controller's log, every Event and every status in the tenant's namespace."""
    parts = [controller.log_text()]
    parts += [json.dumps(e) for e in tenant.events()]
    for kind in ("Task", "Workflow", "MediaProcessingEntity"):
        for obj in tenant.admin.list(BY_KIND[kind], tenant.namespace)["items"]:
            parts.append(json.dumps(obj.get("status") or {}))
    return "\n".join(parts)


def test_media_location_credentials_reach_only_the_jobs_secret(tenant: Tenant, controller):
    secret_value = f"s3cret-{uuid.uuid4().hex}"
    unused = f"unused-{uuid.uuid4().hex}"
    tenant.create(
        objects.secret(
            "aws",
            {"accessKeyID": "AKIA-test", "secretAccessKey": secret_value, "unrelated": unused},
        )
    )
    tenant.create(objects.s3_location("s3", secret_name="aws"))
    tenant.create(objects.s3_location("broken", secret_name="aws", key="nope"))
    workflow = objects.workflow("wf")
    workflow["spec"]["mediaLocations"] = [objects.location_entry("media", "s3")]
    tenant.create(workflow)
    tenant.create(objects.function("fn", run_seconds=0.2))
    tenant.create(objects.local_mpe("local", default=True))
    tenant.task("t")
    tenant.wait_phase("t", "Succeeded")
    helper = [
        s
        for s in tenant.admin.list(SECRETS, tenant.namespace)["items"]
        if "engine.nagare.media/task-name" in (s["metadata"].get("labels") or {})
    ]
    assert len(helper) == 1
    payload = base64.b64decode(next(iter(helper[0]["data"].values()))).decode()
    assert unused not in payload  # only the auth method's keys
    assert secret_value not in everything_visible(tenant, controller)


def test_a_refused_kubeconfigs_token_is_never_shown(tenant: Tenant, controller):
    token = f"tok-{uuid.uuid4().hex}"
    document = kubeconfig(
        "https://127.0.0.1:9",
        user={"token": token, "exec": {"command": token}, "password": token},
    )
    tenant.create(kubeconfig_secret("leaky", document))
    tenant.create(remote_mpe("leaky", "leaky"))
    wait_for(
        lambda: (
            tenant.condition("MediaProcessingEntity", "leaky", "Ready").get("reason")
            == "KubeconfigRefused"
        ),
        timeout=60,
        what="refused",
    )
    assert token not in everything_visible(tenant, controller)


def test_a_configuration_error_never_prints_the_nats_password(tmp_path):
    password = f"hunter-{uuid.uuid4().hex}"
    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: engine.nagare.media/v1alpha1\nkind: WorkflowManagerConfiguration\n"
        f"nats: {{url: nats://x, password: {{value: {password}}}}}\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "taskfsm", "run", f"--config={config}", "--kubeconfig=/nonexistent"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode != 0
    assert "nats.password" in run.stderr
    assert password not in run.stdout + run.stderr
