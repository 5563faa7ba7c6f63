"""Reference types (§1.2): omitted members, both forms of ConfigMapOrSecretReference."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskfsm.api import (
    Condition,
    ConfigMapOrSecretReference,
    ExactObjectReference,
    InvalidObjectError,
    LocalObjectReference,
    MediaProcessingEntity,
    ObjectReference,
    find_condition,
)
from taskfsm.api.constants import ConditionStatus


def test_local_object_reference_writes_only_what_is_set() -> None:
    assert LocalObjectReference(name="wf").to_dict() == {"name": "wf"}
    assert LocalObjectReference(name="f", kind="Function").to_dict() == {
        "kind": "Function",
        "name": "f",
    }


def test_local_object_reference_requires_name() -> None:
    with pytest.raises(ValueError, match="name"):
        LocalObjectReference.model_validate({"kind": "Function"})


def test_local_reference_becomes_object_reference_in_a_namespace() -> None:
    ref = LocalObjectReference(kind="Function", name="f").to_object_reference("ns")
    assert ref == ObjectReference(kind="Function", name="f", namespace="ns")
    cluster = LocalObjectReference(kind="ClusterFunction", name="f").to_object_reference(None)
    assert cluster.to_dict() == {"kind": "ClusterFunction", "name": "f"}


def test_object_reference_members_are_all_optional() -> None:
    assert ObjectReference().to_dict() == {}


def test_exact_object_reference_always_writes_uid_even_empty() -> None:
    ref = ExactObjectReference(api_version="batch/v1", kind="Job", name="j", namespace="n", uid="")
    assert ref.to_dict() == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "j",
        "namespace": "n",
        "uid": "",
    }
    with pytest.raises(ValueError, match="uid"):
        ExactObjectReference.model_validate({"name": "j"})


def test_secret_reference_as_written_by_users_never_has_data() -> None:
    ref = ConfigMapOrSecretReference.model_validate(
        {"name": "s", "namespace": "ns", "key": "k", "data": {"k": base64.b64encode(b"v").decode()}}
    )
    assert ref.data == {"k": b"v"}
    assert not ref.is_resolved
    assert ref.to_dict() == {"name": "s", "namespace": "ns", "key": "k"}


def test_resolved_secret_reference_writes_only_sorted_base64_data() -> None:
    ref = ConfigMapOrSecretReference(name="s", namespace="ns", key="b", kind="Secret")
    resolved = ref.with_data({"b": b"\x00\xff", "a": b"user"})
    assert resolved.is_resolved
    written = resolved.to_dict()
    assert written == {"data": {"a": "dXNlcg==", "b": "AP8="}}
    assert list(written["data"]) == ["a", "b"]
    assert resolved.to_json() == '{"data":{"a":"dXNlcg==","b":"AP8="}}'


def test_resolved_secret_reference_without_data_is_an_empty_object() -> None:
    assert ConfigMapOrSecretReference(name="s").with_data({}).to_dict() == {}


def test_resolving_leaves_the_original_reference_alone() -> None:
    ref = ConfigMapOrSecretReference(name="s")
    ref.with_data({"a": b"1"})
    assert ref.data is None
    assert ref.to_dict() == {"name": "s"}


@given(st.dictionaries(st.text(min_size=1, max_size=8), st.binary(max_size=16), max_size=4))
def test_resolved_form_parses_back_to_the_same_bytes_in_the_user_form(
    data: dict[str, bytes],
) -> None:
    written = ConfigMapOrSecretReference(name="s").with_data(data).to_dict()
    parsed = ConfigMapOrSecretReference.model_validate(written)
    assert (parsed.data or {}) == data
    assert not parsed.is_resolved  # the data-only flag never survives parsing (§1.2)


def test_invalid_base64_is_rejected_without_echoing_the_secret() -> None:
    body = {
        "apiVersion": "engine.nagare.media/v1alpha1",
        "kind": "MediaProcessingEntity",
        "metadata": {"name": "m", "namespace": "ns"},
        "spec": {"remote": {"kubeconfig": {"secretRef": {"data": {"k": "top-secret!"}}}}},
    }
    with pytest.raises(InvalidObjectError) as caught:
        MediaProcessingEntity.from_dict(body)
    message = str(caught.value)
    assert "spec.remote.kubeconfig.secretRef.data.k: secret data must be standard base64" in message
    assert "top-secret" not in message


def test_find_condition_reads_by_type_not_position() -> None:
    conditions = [
        Condition(type="Initialized", status=ConditionStatus.TRUE),
        Condition(type="Ready", status=ConditionStatus.FALSE),
    ]
    found = find_condition(conditions, "Ready")
    assert found is not None
    assert found.status == ConditionStatus.FALSE
    assert find_condition(conditions, "Failed") is None
    assert find_condition(None, "Ready") is None


def test_condition_timestamp_is_utc_seconds() -> None:
    condition = Condition.model_validate(
        {"type": "Ready", "status": "True", "lastTransitionTime": "2024-03-01T12:30:45.678+02:00"}
    )
    assert condition.to_dict()["lastTransitionTime"] == "2024-03-01T10:30:45Z"


def test_condition_rejects_a_timestamp_without_zone() -> None:
    with pytest.raises(ValueError, match="timezone"):
        Condition.model_validate(
            {"type": "Ready", "status": "True", "lastTransitionTime": "2024-03-01T12:30:45"}
        )
