"""No object stops the controller: decoding and caching are bounded (taskfsm.kube.wire and
taskfsm.kube.transforms; docs/security.md, "No object stops the controller").

An API server accepts free-form fields nested 10,000 levels deep; such an object once failed every
list of its kind. Now it decodes, its cached copy is its identity with the reason, and whoever
would build a Job from it refuses it with that reason.
"""

from __future__ import annotations

import copy

import orjson
import pytest

from taskfsm.kube import wire
from taskfsm.kube.transforms import default_transform, job_transform
from taskfsm.manifests import jobs
from taskfsm.strategic_merge.validate import MAX_LIST_ITEMS


def nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def task_json(depth: int, name: str = "deep") -> str:
    return (
        '{"apiVersion":"engine.nagare.media/v1alpha1","kind":"Task",'
        f'"metadata":{{"name":"{name}","namespace":"ns","uid":"u1","resourceVersion":"7",'
        f'"finalizers":["engine.nagare.media/task-protection"],'
        f'"managedFields":[{{"fieldsV1":{nested(depth)}}}]}},'
        f'"spec":{{"templatePatches":{{"spec":{nested(depth)}}}}},'
        '"status":{"phase":"Running"}}'
    )


@pytest.mark.parametrize("depth", [70, 900, 1100, 9000])
def test_a_list_with_one_deep_object_decodes_and_keeps_the_others_whole(depth):
    page = (
        '{"metadata":{"resourceVersion":"9"},"items":['
        + task_json(3, "ok")
        + ","
        + task_json(depth)
        + "]}"
    ).encode()
    body = wire.loads(page)
    ok, deep = (default_transform(item) for item in body["items"])
    assert wire.problem(ok) == ""
    assert ok["spec"]["templatePatches"]["spec"] == orjson.loads(nested(3))
    assert (
        wire.problem(deep) == "it is nested deeper than 64 levels, which taskfsm does not process"
    )
    assert "spec" not in deep
    assert deep["metadata"] == {
        "name": "deep",
        "namespace": "ns",
        "uid": "u1",
        "resourceVersion": "7",
        "finalizers": ["engine.nagare.media/task-protection"],
    }
    assert deep["status"] == {"phase": "Running"}
    copy.deepcopy(deep)  # what the reconciler does first: no RecursionError


def test_a_watch_event_of_a_deep_object_decodes():
    line = ('{"type":"MODIFIED","object":' + task_json(5000) + "}").encode()
    event = wire.loads(line)
    assert event["type"] == "MODIFIED"
    assert wire.problem(default_transform(event["object"]))


def test_objects_within_the_bound_are_untouched():
    obj = orjson.loads(task_json(wire.MAX_DEPTH - 5))
    assert wire.problem(default_transform(obj)) == ""


def test_a_jobs_cached_copy_is_bounded_too():
    job = {"metadata": {"name": "j"}, "spec": {}, "status": orjson.loads(nested(200))}
    cut = job_transform(job)
    assert wire.problem(cut)
    assert cut["metadata"] == {"name": "j"}
    assert "status" not in cut


def test_metadata_over_the_bound_keeps_the_identity():
    obj = {
        "metadata": {"name": "n", "uid": "u", "annotations": orjson.loads(nested(100))},
        "spec": {},
    }
    cut = default_transform(obj)
    assert cut["metadata"] == {"name": "n", "uid": "u"}


def test_not_json_is_still_an_error():
    with pytest.raises(orjson.JSONDecodeError, match="expected a string key"):
        wire.loads(b"{not json")


def test_a_job_is_never_built_from_a_cut_function_or_task():
    function = default_transform(
        {
            "kind": "Function",
            "metadata": {"name": "fn"},
            "spec": {"template": orjson.loads(nested(80))},
        }
    )
    task = {"kind": "Task", "metadata": {"name": "t", "namespace": "ns", "uid": "u"}, "spec": {}}
    with pytest.raises(jobs.JobTemplateError, match="Function 'fn' cannot be used: it is nested"):
        jobs.build_job(task=task, function=function, task_template=None, namespace="ns")


def test_lists_longer_than_the_merge_bound_are_refused_by_path():
    function = {
        "kind": "Function",
        "metadata": {"name": "fn"},
        "spec": {"template": {"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}},
    }
    env = [{"name": f"V{i}", "value": "x"} for i in range(MAX_LIST_ITEMS + 1)]
    task = {
        "kind": "Task",
        "metadata": {"name": "t", "namespace": "ns", "uid": "u"},
        "spec": {
            "templatePatches": {
                "spec": {"template": {"spec": {"containers": [{"name": "c", "env": env}]}}}
            }
        },
    }
    with pytest.raises(jobs.JobTemplateError, match=f"at most {MAX_LIST_ITEMS} are processed"):
        jobs.build_job(task=task, function=function, task_template=None, namespace="ns")


class _Stream:
    """A watch response streaming ``chunks``."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def stream(self, amt=None, decode_content=False):
        yield from self.chunks


def test_a_watch_line_longer_than_the_bound_ends_the_watch_instead_of_filling_memory():
    from taskfsm.kube.errors import Unavailable
    from taskfsm.kube.informer import _lines

    ok = list(_lines(_Stream([b'{"a":1}\n{"b"', b":2}\n"]), 1024))
    assert ok == [b'{"a":1}', b'{"b":2}']
    endless = _Stream([b"x" * 600_000] * 4)
    with pytest.raises(Unavailable, match="larger than"):
        list(_lines(endless, 1024 * 1024))
