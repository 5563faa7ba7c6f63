"""Validation errors name the object, the field path and the problem in plain words."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from taskfsm.api import (
    Function,
    InvalidObjectError,
    MediaLocation,
    MediaProcessingEntity,
    Task,
    describe_validation_error,
    parse_object,
)
from taskfsm.api.errors import format_field_path

WORKFLOW_REF = {"workflowRef": {"name": "wf"}}


def problems(model: Any, body: dict[str, Any]) -> str:
    with pytest.raises(InvalidObjectError) as caught:
        model.from_dict(body)
    return caught.value.problems


def task_body(**spec: Any) -> dict[str, Any]:
    return {"kind": "Task", "metadata": {"name": "t1", "namespace": "ns"}, "spec": spec}


def test_missing_workflow_ref_names_the_task_and_the_field() -> None:
    with pytest.raises(InvalidObjectError) as caught:
        Task.from_dict(task_body())
    assert str(caught.value) == "Task ns/t1 is invalid: spec.workflowRef: field required"
    assert isinstance(caught.value.__cause__, ValidationError)


def test_missing_spec() -> None:
    assert problems(Task, {"metadata": {"name": "t"}}) == "spec: field required"


def test_list_index_in_path() -> None:
    body = task_body(**WORKFLOW_REF, inputs=[{"type": "media", "portBindings": []}])
    assert problems(Task, body) == "spec.inputs[0].id: field required"


def test_map_key_with_dots_is_bracketed() -> None:
    body = task_body(**WORKFLOW_REF, config={"sleep.engine.nagare.media/duration": 30})
    assert (
        problems(Task, body)
        == 'spec.config["sleep.engine.nagare.media/duration"]: must be a string'
    )


def test_enum_lists_the_allowed_values() -> None:
    body = {**task_body(**WORKFLOW_REF), "status": {"phase": "Sleeping"}}
    assert problems(Task, body) == (
        "status.phase: must be one of 'Initializing', 'JobPending', 'Running', 'Succeeded'"
        " or 'Failed' (got 'Sleeping')"
    )


def test_wrong_kind_is_rejected() -> None:
    body = {"kind": "Function", "metadata": {"name": "t"}, "spec": WORKFLOW_REF}
    assert problems(Task, body) == "kind: must be one of 'Task' (got 'Function')"


def test_union_with_two_members() -> None:
    body = {
        "metadata": {"name": "m", "namespace": "ns"},
        "spec": {"local": {}, "remote": {"kubeconfig": {"secretRef": {"name": "k"}}}},
    }
    assert problems(MediaProcessingEntity, body) == (
        "spec: exactly one of local, remote must be set (got local, remote)"
    )


def test_union_with_no_member() -> None:
    body = {"metadata": {"name": "m"}, "spec": {}}
    assert problems(MediaLocation, body) == (
        "spec: exactly one of http, s3, opencast, rtmp, rtsp, rist must be set (got none)"
    )


def test_http_location_with_ftp_url() -> None:
    body = {"metadata": {"name": "m"}, "spec": {"http": {"baseURL": "ftp://example.com/"}}}
    assert problems(MediaLocation, body) == (
        "spec.http.baseURL: 'ftp://example.com/' does not match the pattern '^(http|https)://.*$'"
    )


@pytest.mark.parametrize("version", ["1.0", "01.2.3", "1.2.3-", "v1.2.3", "1.2.3+", "1.2.٣"])
def test_function_with_malformed_semver(version: str) -> None:
    body = {"metadata": {"name": "f"}, "spec": {"version": version, "template": {}}}
    assert problems(Function, body).startswith(
        f"spec.version: {version!r} does not match the pattern"
    )


@pytest.mark.parametrize(
    "version", ["0.0.0+dev", "1.2.3", "1.0.0-rc.1", "10.20.30-alpha.0+build.5"]
)
def test_function_with_valid_semver(version: str) -> None:
    body = {"metadata": {"name": "f"}, "spec": {"version": version, "template": {}}}
    assert Function.from_dict(body).spec.version == version


def test_rist_buffer_size_range() -> None:
    body = {
        "metadata": {"name": "r"},
        "spec": {"rist": {"baseURL": "rist://h", "bufferSize": "31s"}},
    }
    assert (
        problems(MediaLocation, body)
        == "spec.rist.bufferSize: must be between 0s and 30s (got 31s)"
    )
    body["spec"]["rist"]["bufferSize"] = "-1ms"
    assert (
        problems(MediaLocation, body)
        == "spec.rist.bufferSize: must be between 0s and 30s (got -1ms)"
    )


def test_invalid_go_duration() -> None:
    body = {
        "metadata": {"name": "r"},
        "spec": {"rist": {"baseURL": "rist://h", "bufferSize": "5 sec"}},
    }
    assert problems(MediaLocation, body).startswith(
        "spec.rist.bufferSize: invalid duration '5 sec'"
    )


def test_stream_needs_exactly_one_kind() -> None:
    media = {"id": "m", "type": "media", "portBindings": [], "metadata": {"streams": [{"id": "s"}]}}
    body = task_body(**WORKFLOW_REF, outputs=[media])
    assert problems(Task, body) == (
        "spec.outputs[0].metadata.streams[0]: exactly one of audio, video, subtitle, data"
        " must be set (got none)"
    )


def test_several_problems_are_all_reported() -> None:
    body = {
        "metadata": {"name": "f", "namespace": "ns"},
        "spec": {"localMediaProcessingEntitiesOnly": "maybe"},
    }
    text = problems(Function, body)
    assert "spec.version: field required" in text
    assert "spec.template: field required" in text
    assert "spec.localMediaProcessingEntitiesOnly: must be true or false" in text


def test_describe_validation_error_accepts_a_prefix() -> None:
    with pytest.raises(ValidationError) as caught:
        Task.model_validate(task_body())
    assert describe_validation_error(caught.value, prefix="items[2]") == (
        "items[2].spec.workflowRef: field required"
    )


def test_parse_object_rejects_foreign_kinds() -> None:
    with pytest.raises(InvalidObjectError, match=r"not a kind of engine\.nagare\.media/v1alpha1"):
        parse_object({"apiVersion": "v1", "kind": "Secret"})


def test_parse_object_dispatches_on_kind() -> None:
    body = {"apiVersion": "engine.nagare.media/v1alpha1", **task_body(**WORKFLOW_REF)}
    assert isinstance(parse_object(body), Task)


def test_cluster_scoped_object_is_named_without_namespace() -> None:
    from taskfsm.api import ClusterFunction

    with pytest.raises(
        InvalidObjectError, match=r"^ClusterFunction cf is invalid: spec: field required$"
    ):
        ClusterFunction.from_dict({"metadata": {"name": "cf"}})


def test_field_path_formatting() -> None:
    assert format_field_path(["spec", "inputs", 0, "metadata", "streams", 1]) == (
        "spec.inputs[0].metadata.streams[1]"
    )
    assert format_field_path(["metadata", "labels", "app.kubernetes.io/name"]) == (
        'metadata.labels["app.kubernetes.io/name"]'
    )
