"""The pure Job/Secret builders (docs/behaviour.md §1.13, §2, §3.7; D4, D5, D7)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from taskfsm.api import constants as c
from taskfsm.manifests import jobs
from taskfsm.manifests.jobs import JobTemplateError
from taskfsm.manifests.task_config import merge_config
from taskfsm_dev import objects


def task(name: str = "t", uid: str = "uid-1", **spec) -> dict:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_TASK,
        "metadata": {"name": name, "namespace": "ns", "uid": uid},
        "spec": {"workflowRef": {"name": "wf"}, **spec},
    }


def function(pod_spec: dict | None = None, **template_extra) -> dict:
    pod = pod_spec or {"containers": [{"name": "function", "image": "img"}]}
    template = {"spec": {"template": {"spec": pod}}, **template_extra}
    return {
        "kind": c.KIND_FUNCTION,
        "metadata": {"name": "f"},
        "spec": {"version": "1.0.0", "template": template},
    }


def test_job_name_is_deterministic_dns_safe_and_bounded():
    """D5/D7: same Task → same name; another UID → another name; ≤ 63 chars, DNS-safe."""
    assert jobs.job_name(task()) == jobs.job_name(task())
    assert jobs.job_name(task(uid="uid-2")) != jobs.job_name(task())
    long = jobs.job_name(task(name="A_" + "x" * 100))
    assert len(long) <= 63
    assert long == long.lower()
    assert "_" not in long
    assert not long.startswith("-")


def test_build_job_controller_parts():
    """Labels (the four over the template's), annotations, finalizer, TTL, data volume and
    read-only mount on every container and init container; template name ignored."""
    fn = function(
        {
            "initContainers": [{"name": "init", "image": "i"}],
            "containers": [{"name": "a", "image": "a"}, {"name": "b", "image": "b"}],
        },
        metadata={
            "name": "ignored",
            "labels": {c.LABEL_TASK_NAME: "spoof", "x": "y"},
            "annotations": {"k": "v"},
        },
    )
    fn["spec"]["template"]["spec"]["ttlSecondsAfterFinished"] = 5
    job = jobs.build_job(task=task(), function=fn, task_template=None, namespace="jobs")
    meta = job["metadata"]
    assert meta["name"] == jobs.job_name(task())
    assert meta["namespace"] == "jobs"
    assert meta["labels"] == {**jobs.task_labels(task()), "x": "y"}
    assert meta["annotations"] == {"k": "v"}
    assert meta["finalizers"] == [c.FINALIZER_JOB_PROTECTION]
    assert job["spec"]["ttlSecondsAfterFinished"] == c.JOB_TTL_SECONDS_AFTER_FINISHED
    pod = job["spec"]["template"]["spec"]
    assert pod["volumes"] == [
        {"name": c.TASK_DATA_VOLUME_NAME, "secret": {"secretName": meta["name"]}}
    ]
    mount = {"name": c.TASK_DATA_VOLUME_NAME, "mountPath": c.TASK_DATA_MOUNT_PATH, "readOnly": True}
    for ctr in pod["initContainers"] + pod["containers"]:
        assert ctr["volumeMounts"] == [mount]


def test_build_job_does_not_modify_inputs():
    """The Function and Task dicts are left as they were."""
    fn, t = function(), task(templatePatches={"spec": {"activeDeadlineSeconds": 5}})
    before = (repr(fn), repr(t))
    jobs.build_job(task=t, function=fn, task_template=None, namespace="ns")
    assert (repr(fn), repr(t)) == before


def test_patches_apply_template_then_task():
    """TaskTemplate patches apply before Task patches (the Task's value wins)."""
    tt = {"spec": {"templatePatches": {"spec": {"activeDeadlineSeconds": 10, "backoffLimit": 2}}}}
    t = task(templatePatches={"spec": {"activeDeadlineSeconds": 20}})
    job = jobs.build_job(task=t, function=function(), task_template=tt, namespace="ns")
    assert job["spec"]["activeDeadlineSeconds"] == 20
    assert job["spec"]["backoffLimit"] == 2
    assert [ctr["name"] for ctr in job["spec"]["template"]["spec"]["containers"]] == ["function"]


@pytest.mark.parametrize(
    ("pod", "message"),
    [
        (
            {
                "containers": [{"name": "a", "image": "a"}],
                "volumes": [{"name": c.TASK_DATA_VOLUME_NAME}],
            },
            "already has a volume",
        ),
        (
            {
                "containers": [
                    {
                        "name": "a",
                        "image": "a",
                        "volumeMounts": [{"name": "x", "mountPath": c.TASK_DATA_MOUNT_PATH}],
                    }
                ]
            },
            "already mounts",
        ),
        ({"containers": []}, "has no spec.template.spec.containers"),
    ],
    ids=["volume-name", "mount-path", "no-containers"],
)
def test_unusable_templates_are_clear_errors(pod, message):
    """D5: templates that cannot make a valid Job raise JobTemplateError with a clear message."""
    with pytest.raises(JobTemplateError, match=message):
        jobs.build_job(task=task(), function=function(pod), task_template=None, namespace="ns")


def test_secret_is_named_and_owned_like_the_job():
    """The Secret has the Job's name and namespace, the four labels, one owner ref to the Job
    and the payload base64-encoded under data.json."""
    job = {"metadata": {"name": "j", "namespace": "jobs", "uid": "job-uid"}}
    secret = jobs.build_secret(task=task(), job=job, payload=b'{"x":1}\n')
    assert secret["metadata"]["name"] == "j"
    assert secret["metadata"]["namespace"] == "jobs"
    assert secret["metadata"]["labels"] == jobs.task_labels(task())
    assert secret["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "job-uid"}
    ]
    assert base64.b64decode(secret["data"][c.TASK_DATA_FILE_NAME]) == b'{"x":1}\n'


def test_owns_checks_task_labels():
    """An object is the Task's only with both task labels matching."""
    labels = jobs.task_labels(task())
    assert jobs.owns({"metadata": {"labels": labels}}, task())
    assert not jobs.owns({"metadata": {"labels": {**labels, c.LABEL_TASK_NAME: "other"}}}, task())
    assert not jobs.owns({"metadata": {}}, task())


def test_exact_ref_has_api_version_and_kind():
    """jobRef is filled completely at once (§3.7 step 6)."""
    job = {"metadata": {"name": "j", "namespace": "n", "uid": "u"}}
    assert jobs.exact_ref(job) == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "j",
        "namespace": "n",
        "uid": "u",
    }


@pytest.mark.parametrize(
    ("sources", "expected"),
    [
        (({"a": "1", "b": "1"}, {"b": "2"}, {"c": "3"}), {"a": "1", "b": "2", "c": "3"}),
        (({"a": "fn"}, None, {"a": ""}), {"a": ""}),
        ((None, None, None), {}),
        (({"a": "fn"}, {"a": "tt"}, {"a": "task"}), {"a": "task"}),
    ],
    ids=["merge", "empty-later-wins", "nothing", "task-wins"],
)
def test_d2_config_merge_later_wins(sources, expected):
    """D2: Function < TaskTemplate < Task, key by key, later wins even with an empty value."""
    assert merge_config(*sources) == expected


# -- unusable templates and patches name their object ------------------------------------------


def _task(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "t", "namespace": "ns", "uid": "uid-1"},
        "spec": {"workflowRef": {"name": "w"}, **spec},
    }


def test_function_template_of_the_wrong_shape_is_a_clear_error():
    """Bad-input run: a Function whose ``template`` (free-form in the schema) had
    ``spec.template.spec.containers`` as an object made every Task using it report
    ``'str' object has no attribute 'setdefault'``. The template's shape is now checked like a
    patch's, and the message names the Function, the field and what is wrong."""
    function = objects.function("fx")
    function["spec"]["template"]["spec"]["template"]["spec"]["containers"] = {"managedBy": {}}
    with pytest.raises(jobs.JobTemplateError) as err:
        jobs.build_job(task=_task(), function=function, task_template=None, namespace="ns")
    assert str(err.value) == (
        "Function 'fx' has an unusable spec.template.spec.template.spec.containers: expected a list, got an object"
    )


@pytest.mark.parametrize("where", ["task", "task-template"])
def test_template_patch_errors_name_the_object_they_come_from(where):
    """Bad-input run: ``["$$c$c"]: unknown directive`` did not say whose templatePatches held
    it (the Task's or its TaskTemplate's); the message now starts with the field and, for a
    TaskTemplate, its kind and name."""
    patch = {"$$c": [1]}
    task_template = {
        "kind": "TaskTemplate",
        "metadata": {"name": "tt"},
        "spec": {"templatePatches": patch},
    }
    task = _task(templatePatches=patch) if where == "task" else _task()
    with pytest.raises(jobs.JobTemplateError) as err:
        jobs.build_job(
            task=task,
            function=objects.function("fx"),
            task_template=task_template if where == "task-template" else None,
            namespace="ns",
        )
    prefix = (
        "TaskTemplate 'tt' spec.templatePatches: "
        if where == "task-template"
        else "spec.templatePatches: "
    )
    assert str(err.value).startswith(prefix + '["$$c"]: unknown directive')
