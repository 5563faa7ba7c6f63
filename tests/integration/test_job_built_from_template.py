"""The Job a Task runs as, built from the Function template and patches (D4, §3.7, §2).

``templatePatches`` of the TaskTemplate and then of the Task are Kubernetes strategic merge
patches on the sparse patch as written, checked here on real Jobs accepted by the API server:
a patch without containers keeps them, env is merged into the named container, ``$patch:
delete`` removes list items. The controller's own parts: deterministic name, the four labels
(over the template's), annotations, job-protection finalizer, TTL, the data volume mounted
read-only in every container and init container. A template that cannot make a valid Job is
a clear status message with nothing created (D5).
"""

from __future__ import annotations

import copy
from typing import Any

from taskfsm.api import constants as c
from taskfsm.manifests.jobs import job_name
from taskfsm_dev import objects


def function_with(
    pod_spec_changes: dict[str, Any], *, job_spec: dict[str, Any] | None = None, metadata=None
):
    fn = objects.never_starting(objects.function("f"))
    template = fn["spec"]["template"]
    template["spec"]["template"]["spec"].update(copy.deepcopy(pod_spec_changes))
    template["spec"].update(job_spec or {})
    if metadata:
        template["metadata"] = metadata
    return fn


def run(
    engine, probe, *, function: dict[str, Any], template_patches=None, task_patches=None
) -> dict[str, Any]:
    """Create everything, wait for Running, return the Job."""
    engine.create(objects.workflow("wf"))
    engine.create(function)
    engine.create(objects.local_mpe("m"))
    spec: dict[str, Any] = {}
    if template_patches is not None:
        engine.create(objects.task_template("tt", templatePatches=template_patches))
        spec["taskTemplateRef"] = {"kind": c.KIND_TASK_TEMPLATE, "name": "tt"}
    if task_patches is not None:
        spec["templatePatches"] = task_patches
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="m", **spec))
    task = probe.wait_phase("t", "Running")
    job = probe.job(job_name(task))
    assert job is not None
    return job


def containers(job: dict[str, Any], group: str = "containers") -> dict[str, dict[str, Any]]:
    return {ctr["name"]: ctr for ctr in job["spec"]["template"]["spec"].get(group) or []}


def test_d4_patch_without_containers_keeps_them(engine, controller, probe):
    """D4: patches that never mention containers (deadline, node selector, labels) leave the
    Function's containers as they are."""
    fn = objects.never_starting(objects.function("f"))
    original = copy.deepcopy(fn["spec"]["template"]["spec"]["template"]["spec"]["containers"])
    job = run(
        engine,
        probe,
        function=fn,
        template_patches={"spec": {"activeDeadlineSeconds": 600}},
        task_patches={
            "metadata": {"labels": {"team": "media"}},
            "spec": {"template": {"spec": {"nodeSelector": {"disk": "ssd"}}}},
        },
    )
    assert job["spec"]["activeDeadlineSeconds"] == 600
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {"disk": "ssd"}
    assert job["metadata"]["labels"]["team"] == "media"
    ctr = containers(job)["function"]
    assert ctr["image"] == original[0]["image"]
    assert list(containers(job)) == ["function"]


def test_env_is_merged_into_the_named_container(engine, controller, probe):
    """Env from the TaskTemplate and then the Task is merged by name into the container of that
    name: new variables are added, an existing one is overridden, the image is kept."""
    fn = function_with(
        {
            "containers": [
                {
                    "name": "function",
                    "image": "example.invalid/f:1",
                    "env": [{"name": "A", "value": "fn"}, {"name": "B", "value": "fn"}],
                }
            ]
        }
    )
    job = run(
        engine,
        probe,
        function=fn,
        template_patches={
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "function",
                                "env": [
                                    {"name": "B", "value": "template"},
                                    {"name": "C", "value": "template"},
                                ],
                            }
                        ]
                    }
                }
            }
        },
        task_patches={
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "function",
                                "env": [
                                    {"name": "C", "value": "task"},
                                    {"name": "D", "value": "task"},
                                ],
                            }
                        ]
                    }
                }
            }
        },
    )
    ctr = containers(job)["function"]
    assert ctr["image"] == "example.invalid/f:1"
    assert {e["name"]: e["value"] for e in ctr["env"]} == {
        "A": "fn",
        "B": "template",
        "C": "task",
        "D": "task",
    }


def test_patch_delete_directive_removes_container_and_env(engine, controller, probe):
    """``$patch: delete`` in a list item removes that container, and that env variable."""
    fn = function_with(
        {
            "containers": [
                {
                    "name": "function",
                    "image": "example.invalid/f:1",
                    "env": [{"name": "KEEP", "value": "1"}, {"name": "DROP", "value": "1"}],
                },
                {"name": "sidecar", "image": "example.invalid/sidecar:1"},
            ]
        }
    )
    job = run(
        engine,
        probe,
        function=fn,
        task_patches={
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {"name": "sidecar", "$patch": "delete"},
                            {"name": "function", "env": [{"name": "DROP", "$patch": "delete"}]},
                        ]
                    }
                }
            }
        },
    )
    assert list(containers(job)) == ["function"]
    assert [e["name"] for e in containers(job)["function"]["env"]] == ["KEEP"]


def test_job_carries_controller_parts(engine, controller, probe, namespace):
    """The Job is named after the Task, labelled with the four labels (over the template's own
    values), keeps template annotations, has the job-protection finalizer and the 1-day TTL
    (over the template's), and mounts the data Secret read-only in every container and init
    container; the Secret of the same name is owned by the Job."""
    fn = function_with(
        {
            "initContainers": [{"name": "init", "image": "example.invalid/init:1"}],
            "containers": [
                {"name": "function", "image": "example.invalid/f:1"},
                {
                    "name": "helper",
                    "image": "example.invalid/h:1",
                    "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                },
            ],
            "volumes": [{"name": "scratch", "emptyDir": {}}],
        },
        job_spec={"ttlSecondsAfterFinished": 5},
        metadata={
            "name": "ignored",
            "labels": {c.LABEL_TASK_NAME: "spoofed", "app": "demo"},
            "annotations": {"note": "from-template"},
        },
    )
    job = run(engine, probe, function=fn)
    task = probe.task("t")
    name = job_name(task)
    assert job["metadata"]["name"] == name
    assert name.startswith("t-")
    assert job["metadata"]["labels"][c.LABEL_TASK_NAME] == "t"
    assert job["metadata"]["labels"][c.LABEL_WORKFLOW_NAME] == "wf"
    assert job["metadata"]["labels"]["app"] == "demo"
    assert job["metadata"]["annotations"]["note"] == "from-template"
    assert job["metadata"]["finalizers"] == [c.FINALIZER_JOB_PROTECTION]
    assert job["spec"]["ttlSecondsAfterFinished"] == c.JOB_TTL_SECONDS_AFTER_FINISHED
    volumes = {v["name"]: v for v in job["spec"]["template"]["spec"]["volumes"]}
    assert volumes[c.TASK_DATA_VOLUME_NAME]["secret"]["secretName"] == name
    assert "scratch" in volumes
    mount = {"name": c.TASK_DATA_VOLUME_NAME, "mountPath": c.TASK_DATA_MOUNT_PATH, "readOnly": True}
    for group in ("initContainers", "containers"):
        for ctr in containers(job, group).values():
            assert mount in ctr["volumeMounts"], ctr["name"]
    assert {"name": "scratch", "mountPath": "/scratch"} in containers(job)["helper"]["volumeMounts"]
    secret = probe.secret(name)
    assert secret["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": job["metadata"]["uid"]}
    ]
    assert task["status"]["jobRef"] == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": name,
        "namespace": namespace,
        "uid": job["metadata"]["uid"],
    }


def nothing_created(probe) -> None:
    assert probe.jobs() == []
    assert probe.secrets() == []


def test_d5_reserved_volume_name_is_a_clear_error_and_nothing_is_created(engine, controller, probe):
    """D5: a template already using the data volume's name fails with a message saying so, and
    neither Job nor Secret is left behind."""
    fn = function_with({"volumes": [{"name": c.TASK_DATA_VOLUME_NAME, "emptyDir": {}}]})
    engine.create(objects.workflow("wf"))
    engine.create(fn)
    engine.create(objects.local_mpe("m"))
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="m"))
    task = probe.wait_message("t", f"already has a volume named {c.TASK_DATA_VOLUME_NAME}")
    assert task["status"]["phase"] == "JobPending"
    nothing_created(probe)


def test_differently_named_patch_container_is_an_invalid_job_not_a_crash(engine, controller, probe):
    """A patch container whose name matches none (the seed sample's ``sleep``) is added as an
    image-less container beside the Function's: the API server's validation message becomes
    the status message and nothing is created."""
    engine.create(objects.workflow("wf"))
    engine.create(objects.function("f"))
    engine.create(objects.local_mpe("m"))
    patch = {
        "spec": {
            "template": {"spec": {"containers": [{"name": "sleep", "command": ["sleep", "1"]}]}}
        }
    }
    engine.create(
        objects.task(
            "t", workflow_name="wf", function_name="f", mpe_name="m", templatePatches=patch
        )
    )
    task = probe.wait_message("t", "image: Required value")
    assert task["status"]["phase"] == "JobPending"
    nothing_created(probe)


def test_malformed_patch_names_the_path(engine, controller, probe):
    """A patch whose containers is not a list is reported with the path that is wrong."""
    engine.create(objects.workflow("wf"))
    engine.create(objects.function("f"))
    engine.create(objects.local_mpe("m"))
    patch = {"spec": {"template": {"spec": {"containers": {"name": "function"}}}}}
    engine.create(
        objects.task(
            "t", workflow_name="wf", function_name="f", mpe_name="m", templatePatches=patch
        )
    )
    task = probe.wait_message("t", "containers")
    assert task["status"]["phase"] == "JobPending"
    nothing_created(probe)
