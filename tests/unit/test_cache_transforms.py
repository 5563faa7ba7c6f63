"""What the informer caches keep of each object (``taskfsm.kube.transforms``)."""

from __future__ import annotations

import copy
import json

from taskfsm.kube.transforms import (
    LAST_APPLIED,
    SHARED_STRING_MAX,
    default_transform,
    job_transform,
)


def task(name: str) -> dict:
    return {
        "apiVersion": "engine.nagare.media/v1alpha1",
        "kind": "Task",
        "metadata": {
            "name": name,
            "namespace": "media",
            "resourceVersion": "42",
            "labels": {"engine.nagare.media/workflow-name": "wf"},
            "annotations": {LAST_APPLIED: json.dumps({"spec": {"x": 1}}), "keep": "me"},
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
        },
        "spec": {
            "templatePatches": {
                "spec": {
                    "template": {"spec": {"containers": [{"name": "main", "args": ["a"] * 3}]}}
                }
            }
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "message": "m" * 200}],
        },
    }


def job() -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "task-1",
            "namespace": "media",
            "uid": "u",
            "finalizers": ["engine.nagare.media/job-protection"],
            "managedFields": [{}],
        },
        "spec": {"template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}},
        "status": {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1},
    }


def test_default_transform_drops_managed_fields_and_last_applied_and_keeps_the_rest():
    original = task("t1")
    before = copy.deepcopy(original)
    cached = default_transform(original)
    assert original == before, "the informer's event object must not be changed"
    assert "managedFields" not in cached["metadata"]
    assert cached["metadata"]["annotations"] == {"keep": "me"}
    expected = copy.deepcopy(before)
    del expected["metadata"]["managedFields"]
    del expected["metadata"]["annotations"][LAST_APPLIED]
    assert cached == expected


def test_objects_without_anything_to_drop_are_equal_after_the_transform():
    plain = task("t1")
    del plain["metadata"]["managedFields"], plain["metadata"]["annotations"]
    assert default_transform(plain) == plain


def test_repeated_strings_are_stored_once_across_objects():
    # Two objects parsed separately (as two watch events are) share their keys and short values.
    a = default_transform(json.loads(json.dumps(task("t1"))))
    b = default_transform(json.loads(json.dumps(task("t2"))))
    assert a["metadata"]["namespace"] is b["metadata"]["namespace"]
    assert next(iter(a["status"])) is next(iter(b["status"]))
    assert a["status"]["conditions"][0]["type"] is b["status"]["conditions"][0]["type"]
    # Long values (messages) are left alone: rarely repeated, not worth a shared table entry.
    long_a, long_b = (
        a["status"]["conditions"][0]["message"],
        b["status"]["conditions"][0]["message"],
    )
    assert len(long_a) > SHARED_STRING_MAX
    assert long_a == long_b
    assert long_a is not long_b


def test_job_transform_keeps_identity_finalizers_and_status_not_the_pod_template():
    original = job()
    cached = job_transform(original)
    assert "spec" in original, "the informer's event object must not be changed"
    assert set(cached) == {"apiVersion", "kind", "metadata", "status"}
    assert cached["metadata"] == {
        k: v for k, v in original["metadata"].items() if k != "managedFields"
    }
    assert cached["status"] == original["status"]
