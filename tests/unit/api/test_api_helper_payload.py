"""The helper payload ``data.json`` (docs/behaviour.md §1.11), byte for byte.

Expected bytes are written out by hand from the spec: Go struct order, sorted maps, compact
separators, HTML-safe escapes, ``null`` inputs/outputs, ``{}`` mediaLocations, data-only
secret references, canonical Go durations, no apiVersion/kind, trailing newline.
"""

from __future__ import annotations

import json
from typing import Any

from taskfsm.api import (
    MediaLocation,
    NatsConfiguration,
    Task,
    Workflow,
    WorkflowManagerHelperData,
)


def workflow(**spec: Any) -> Workflow:
    return Workflow.from_dict({"metadata": {"name": "wf", "namespace": "ns"}, "spec": spec})


def task(**spec: Any) -> Task:
    return Task.from_dict(
        {
            "metadata": {"name": "t1", "namespace": "ns"},
            "spec": {"workflowRef": {"name": "wf"}, **spec},
        }
    )


def test_minimal_payload_shape() -> None:
    payload = WorkflowManagerHelperData.build(
        workflow=workflow(), task=task(), config={}, media_locations={}, nats=None
    ).to_payload()
    assert payload == (
        b'{"workflow":{"id":"wf"},'
        b'"task":{"id":"t1","inputs":null,"outputs":null},'
        b'"mediaLocations":{},'
        b'"system":{"nats":{"url":"","username":"","password":""}}}\n'
    )


def test_full_payload_bytes() -> None:
    wf = workflow(
        humanReadable={"name": "a <b> & c", "description": "line\u2028sep"},
        config={"z": "1", "a": "2"},
    )
    t = task(
        humanReadable={"name": "Tâche"},
        inputs=[
            {
                "id": "in",
                "type": "media",
                "portBindings": [{"id": "p"}],
                "metadata": {"duration": "3m"},
            }
        ],
        outputs=[],
        config={"ignored": "the merged config is passed separately"},
    )
    s3 = MediaLocation.from_dict(
        {
            "metadata": {"name": "s3", "namespace": "ns"},
            "spec": {
                "s3": {
                    "bucket": "b",
                    "region": "r",
                    "auth": {"aws": {"secretRef": {"name": "aws", "key": "accessKeyID"}}},
                }
            },
        }
    )
    rist = MediaLocation.from_dict(
        {
            "metadata": {"name": "rist", "namespace": "ns"},
            "spec": {"rist": {"baseURL": "rist://x", "bufferSize": "1500ms"}},
        }
    )
    resolved = s3.spec.resolve_secret_refs(lambda path, ref: {"accessKeyID": b"AKIA"})
    payload = WorkflowManagerHelperData.build(
        workflow=wf,
        task=t,
        config={"y": "merged", "b": "<&>"},
        media_locations={"z-rist": rist.spec, "a-s3": resolved},
        nats=NatsConfiguration(url="nats://n:4222", username="u", password="p"),
    ).to_payload()
    expected = (
        '{"workflow":{"id":"wf",'
        '"humanReadable":{"name":"a \\u003cb\\u003e \\u0026 c","description":"line\\u2028sep"},'
        '"config":{"a":"2","z":"1"}},'
        '"task":{"id":"t1","humanReadable":{"name":"Tâche"},'
        '"inputs":[{"id":"in","type":"media","portBindings":[{"id":"p"}],'
        '"metadata":{"duration":"3m0s"}}],'
        '"outputs":[],'
        '"config":{"b":"\\u003c\\u0026\\u003e","y":"merged"}},'
        '"mediaLocations":{'
        '"a-s3":{"s3":{"bucket":"b","region":"r",'
        '"auth":{"aws":{"secretRef":{"data":{"accessKeyID":"QUtJQQ=="}}}},"usePathStyle":false}},'
        '"z-rist":{"rist":{"baseURL":"rist://x","profile":"main","bufferSize":"1.5s"}}},'
        '"system":{"nats":{"url":"nats://n:4222","username":"u","password":"p"}}}\n'
    )
    assert payload == expected.encode("utf-8")
    assert json.loads(payload)["task"]["humanReadable"]["name"] == "Tâche"


def test_unresolved_secret_reference_keeps_its_user_form() -> None:
    http = MediaLocation.from_dict(
        {
            "metadata": {"name": "h"},
            "spec": {
                "http": {"baseURL": "https://x", "auth": {"basic": {"secretRef": {"name": "s"}}}}
            },
        }
    )
    payload = WorkflowManagerHelperData.build(
        workflow=workflow(), task=task(), config=None, media_locations={"h": http.spec}, nats=None
    ).to_payload()
    assert json.loads(payload)["mediaLocations"]["h"]["http"]["auth"] == {
        "basic": {"secretRef": {"name": "s"}}
    }


def test_empty_config_and_human_readable_are_omitted() -> None:
    payload = WorkflowManagerHelperData.build(
        workflow=workflow(humanReadable={}, config={}),
        task=task(humanReadable={}),
        config={},
        media_locations={},
        nats=NatsConfiguration(url="nats://n"),
    ).to_payload()
    data = json.loads(payload)
    assert data["workflow"] == {"id": "wf"}
    assert data["task"] == {"id": "t1", "inputs": None, "outputs": None}
    assert data["system"]["nats"] == {"url": "nats://n", "username": "", "password": ""}


def test_payload_never_carries_api_version_or_kind() -> None:
    parsed = WorkflowManagerHelperData.model_validate(
        {
            "apiVersion": "engine.nagare.media/v1alpha1",
            "kind": "WorkflowManagerHelperData",
            "workflow": {"id": "w", "config": None},
            "task": {"id": "t", "inputs": [], "outputs": []},
            "system": {"nats": {"url": "nats://n"}},
        }
    )
    data = json.loads(parsed.to_payload())
    assert "apiVersion" not in data
    assert "kind" not in data
    assert data["task"]["inputs"] == []
    assert parsed.to_dict()["kind"] == "WorkflowManagerHelperData"  # kept outside the payload


def test_build_copies_instead_of_sharing() -> None:
    t = task(inputs=[{"id": "in", "type": "media", "portBindings": [], "metadata": {}}])
    data = WorkflowManagerHelperData.build(
        workflow=workflow(), task=t, config={"a": "1"}, media_locations={}, nats=None
    )
    assert data.task.inputs is not None
    data.task.inputs[0].id = "changed"
    assert t.spec.inputs is not None
    assert t.spec.inputs[0].id == "in"


def test_payload_is_compact_with_trailing_newline() -> None:
    payload = WorkflowManagerHelperData.build(
        workflow=workflow(), task=task(), config=None, media_locations={}, nats=None
    ).to_payload()
    assert payload.endswith(b"}\n")
    assert b": " not in payload
    assert b", " not in payload
