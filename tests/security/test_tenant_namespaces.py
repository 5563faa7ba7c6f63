"""Every reference a tenant's object makes stays in the tenant's namespace (or names a
cluster-scoped kind, the administrator's): docs/security.md, "References stay in their namespace".

One test per reference kind: an MPE's Job namespace, a remote MPE's kubeconfig Secret, a
MediaLocation's credential Secret, a Task's MPE, Function, TaskTemplate and Workflow, and the
labels the controllers trust (a Task's Workflow labels, a child's Task labels). Each is aimed at
the bystander tenant's namespace or the controller's own; the refusal is asserted, and that
nothing was created or changed there.
"""

from __future__ import annotations

import time

import pytest

from taskfsm.api import constants as c
from taskfsm.kube.errors import Forbidden
from taskfsm.kube.resources import TASKS
from taskfsm.kube.rest import SECRETS
from taskfsm_dev import objects
from taskfsm_dev.objects import kubeconfig_secret, remote_mpe
from taskfsm_dev.waiting import wait_for
from tests.support.tenancy import Tenant, no_task_children_outside

CONTROLLER_NAMESPACE = "taskfsm-system"


def refused_mpe(tenant: Tenant, name: str) -> dict:
    wait_for(
        lambda: tenant.condition("MediaProcessingEntity", name, "Ready").get("status") == "False",
        timeout=60,
        what=f"MPE {name} refused",
    )
    return tenant.condition("MediaProcessingEntity", name, "Ready")


def task_message(tenant: Tenant, name: str, fragment: str) -> str:
    wait_for(
        lambda: fragment in str(tenant.status("Task", name).get("message") or ""),
        timeout=60,
        what=lambda: f"Task {name} message with {fragment!r}: {tenant.status('Task', name)}",
    )
    return str(tenant.status("Task", name)["message"])


@pytest.mark.parametrize("target", ["bystander", CONTROLLER_NAMESPACE, "kube-system"])
def test_an_mpe_cannot_run_jobs_in_another_namespace(tenant, bystander, target):
    namespace = bystander.namespace if target == "bystander" else target
    tenant.create(objects.workflow("wf"))
    tenant.create(objects.function("fn"))
    tenant.create(objects.local_mpe("elsewhere", namespace=namespace))
    ready = refused_mpe(tenant, "elsewhere")
    assert ready["reason"] == "NamespaceNotAllowed"
    tenant.wait_event("elsewhere", "NamespaceNotAllowed")
    tenant.task(
        "t", mediaProcessingEntityRef={"kind": c.KIND_MEDIA_PROCESSING_ENTITY, "name": "elsewhere"}
    )
    task_message(tenant, "t", "MediaProcessingEntity")
    time.sleep(2)
    no_task_children_outside(tenant, [namespace, tenant.namespace])


def test_a_remote_mpe_cannot_read_a_kubeconfig_secret_of_another_namespace(tenant, bystander):
    bystander.create(kubeconfig_secret("theirs", {"clusters": []}))
    mpe = remote_mpe("borrowed", "theirs")
    mpe["spec"]["remote"]["kubeconfig"]["secretRef"]["namespace"] = bystander.namespace
    tenant.create(mpe)
    assert refused_mpe(tenant, "borrowed")["reason"] == "NamespaceNotAllowed"


def test_a_media_location_cannot_copy_a_secret_of_another_namespace(tenant, bystander):
    value = "bystander-s3cret-value"
    bystander.create(objects.secret("aws", {"accessKeyID": value, "secretAccessKey": value}))
    tenant.create(
        objects.s3_location("s3", secret_name="aws", secret_namespace=bystander.namespace)
    )
    workflow = objects.workflow("wf")
    workflow["spec"]["mediaLocations"] = [objects.location_entry("media", "s3")]
    tenant.create(workflow)
    tenant.create(objects.function("fn"))
    tenant.create(objects.local_mpe("local", default=True))
    tenant.task("t")
    message = task_message(tenant, "t", "references a Secret in a different namespace")
    assert value not in message
    assert tenant.jobs() == []
    for secret in tenant.admin.list(SECRETS, tenant.namespace)["items"]:
        assert value not in str(secret.get("data"))


@pytest.mark.parametrize(
    ("field", "ref", "fragment"),
    [
        (
            "mediaProcessingEntityRef",
            {"kind": c.KIND_MEDIA_PROCESSING_ENTITY, "name": "local"},
            "not found",
        ),
        ("functionRef", {"kind": c.KIND_FUNCTION, "name": "bystander-fn"}, "not found"),
        (
            "taskTemplateRef",
            {"kind": c.KIND_TASK_TEMPLATE, "name": "bystander-template"},
            "not found",
        ),
    ],
    ids=["mpe", "function", "task-template"],
)
def test_a_task_resolves_refs_only_in_its_own_namespace(tenant, bystander, field, ref, fragment):
    """The bystander has an MPE ``local``, a Function ``bystander-fn`` and a TaskTemplate
    ``bystander-template``; the tenant names them and finds nothing."""
    if bystander.get("Function", "bystander-fn") is None:
        bystander.create(objects.function("bystander-fn"))
        bystander.create(objects.task_template("bystander-template"))
    tenant.create(objects.workflow("wf"))
    if field != "functionRef":
        tenant.create(objects.function("fn"))
    spec = {field: ref}
    if field == "functionRef":
        tenant.create(objects.local_mpe("own", default=True))
        task = objects.task("t", workflow_name="wf", **spec)
    else:
        task = objects.task("t", workflow_name="wf", function_name="fn", **spec)
    tenant.create(task)
    task_message(tenant, "t", fragment)
    assert tenant.jobs() == []
    no_task_children_outside(tenant, [bystander.namespace])


def test_a_task_joins_only_a_workflow_of_its_own_namespace(tenant, bystander):
    tenant.create(objects.function("fn"))
    tenant.create(objects.local_mpe("local", default=True))
    tenant.create(
        objects.task("t", workflow_name="wf", function_name="fn")
    )  # "wf" is the bystander's
    task_message(tenant, "t", "not found")
    assert tenant.jobs() == []


def test_workflow_labels_naming_another_namespace_count_nothing_there(tenant, bystander):
    """A failing Task labelled for the bystander's Workflow (policy FailWorkflow) neither counts
    in it nor fails it; the controller puts the Task's own labels right."""
    before = bystander.status("Workflow", "wf")
    tenant.create(objects.workflow("own"))
    tenant.create(objects.function("failing", exit_code=1))
    tenant.create(objects.local_mpe("local", default=True))
    task = objects.task("t", workflow_name="own", function_name="failing")
    task["metadata"]["labels"] = {
        c.LABEL_WORKFLOW_NAMESPACE: bystander.namespace,
        c.LABEL_WORKFLOW_NAME: "wf",
    }
    tenant.create(task)
    tenant.wait_phase("t", "Failed")
    labels = (tenant.get("Task", "t") or {})["metadata"]["labels"]
    assert labels[c.LABEL_WORKFLOW_NAMESPACE] == tenant.namespace
    time.sleep(3)  # the Workflow controller's batching window
    after = bystander.status("Workflow", "wf")
    assert after.get("phase") == before.get("phase")
    assert after.get("failed", 0) == before.get("failed", 0)


def test_children_labelled_for_another_namespaces_task_are_left_alone(tenant, bystander):
    """A Secret in the tenant's namespace labelled for a (gone) Task of the bystander: the orphan
    collector neither deletes it nor writes an Event into the bystander's namespace."""
    tenant.basics()
    secret = objects.secret("fake-child", {"x": "y"})
    secret["metadata"]["labels"] = {
        c.LABEL_TASK_NAMESPACE: bystander.namespace,
        c.LABEL_TASK_NAME: "ghost",
    }
    tenant.create(secret)
    tenant.task("t")  # the tenant's namespace is a Job namespace now: it is swept
    tenant.wait_phase("t", "Succeeded")
    time.sleep(8)  # more than the controller's --orphan-sweep-period
    assert tenant.get_secret("fake-child") is not None
    assert "OrphanDeleted" not in {e.get("reason") for e in bystander.events()}


def test_a_tenant_cannot_write_task_status(tenant):
    """The controller trusts ``status.mediaProcessingEntityRef`` and ``jobRef`` only because
    tenants may not write status (the Role of docs/security.md, "Who is who")."""
    tenant.basics()
    tenant.task("t")
    with pytest.raises(Forbidden):
        tenant.rest.patch(
            TASKS, tenant.namespace, "t", {"status": {"phase": "Succeeded"}}, subresource="status"
        )
