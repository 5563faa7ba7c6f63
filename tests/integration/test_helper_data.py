"""The helper payload (``data.json`` in the Task's Secret) as the Job would read it (§1.11).

Decoded from the real Secret and compared field by field: Workflow and Task identities, the
merged configuration (D2: Function defaultConfig < TaskTemplate config < Task config, later
wins), MediaLocations with their credentials resolved under the D15 rules (a MediaLocation's
Secret in its own namespace, a ClusterMediaLocation's Secret in the namespace it names, only the
keys the auth method uses, only ``key`` when set), NATS from the process configuration. Secret
values never show up in the Task's status or in Events, even when resolution fails.
"""

from __future__ import annotations

import base64
import copy
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from taskfsm.api import constants as c
from taskfsm.api.config import NatsConfiguration
from taskfsm.manifests.jobs import job_name
from taskfsm_dev import objects

SECRET_VALUES = ("AKIA-not-a-real-key", "s3cr3t-access-value", "tok-3f9a-value", "pw-unused-value")


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.fixture
def other_namespace(api_client) -> Iterator[str]:
    name = f"secrets-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(api_client)
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name, propagation_policy="Background")


def create_secret(api_client, namespace: str, name: str, data: dict[str, str]) -> None:
    client.CoreV1Api(api_client).create_namespaced_secret(namespace, objects.secret(name, data))


def with_data(spec: dict[str, Any], path: tuple[str, ...], data: dict[str, str]) -> dict[str, Any]:
    """``spec`` with the secretRef at ``path`` replaced by its resolved, data-only form."""
    out = copy.deepcopy(spec)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = {"data": {k: b64(v) for k, v in sorted(data.items())}}
    return out


def http_location(
    name: str, *, secret_name: str, secret_namespace: str, key: str
) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_CLUSTER_MEDIA_LOCATION,
        "metadata": {"name": name},
        "spec": {
            "http": {
                "baseURL": "https://media.example/",
                "headers": [{"name": "X-Trace", "value": "1"}],
                "auth": {
                    "token": {
                        "secretRef": {
                            "name": secret_name,
                            "namespace": secret_namespace,
                            "key": key,
                        }
                    }
                },
            }
        },
    }


def test_payload_fields_decoded_from_the_secret(
    engine, controller_factory, probe, namespace, api_client, cluster_scoped, other_namespace
):
    """Every payload member is what the Workflow, Task, merged config, MediaLocations (with
    credentials) and the process configuration say; no apiVersion/kind; a trailing newline."""
    controller_factory(
        nats=NatsConfiguration(
            url="nats://nats:4222", username="nagare", password="pw-unused-value"
        )
    )
    create_secret(
        api_client,
        namespace,
        "s3-creds",
        {"accessKeyID": SECRET_VALUES[0], "secretAccessKey": SECRET_VALUES[1]},
    )
    create_secret(
        api_client, other_namespace, "tokens", {"token": SECRET_VALUES[2], "other": "not-copied"}
    )
    store = engine.create(objects.s3_location("store", secret_name="s3-creds"))
    archive_name = f"archive-{namespace}"
    archive = cluster_scoped.create(
        http_location(
            archive_name, secret_name="tokens", secret_namespace=other_namespace, key="token"
        )
    )
    engine.create(
        objects.workflow(
            "wf",
            media_locations=[
                objects.location_entry("store", "store"),
                objects.location_entry("archive", archive_name, kind=c.KIND_CLUSTER_MEDIA_LOCATION),
            ],
            humanReadable={"name": "My workflow", "description": "a <test> & more"},
            config={"wf-key": "wf-value"},
        )
    )
    engine.create(
        objects.function("f", default_config={"a": "function", "b": "function", "c": "function"})
    )
    engine.create(objects.task_template("tt", config={"b": "template", "c": "template"}))
    engine.create(objects.never_starting(objects.function("unused")))
    engine.create(objects.local_mpe("m"))
    media_in = {
        "id": "in",
        "type": "media",
        "portBindings": [{"id": "input"}],
        "url": "s3://media/in.mp4",
        "metadata": {},
    }
    media_out = {
        "id": "out",
        "type": "metadata",
        "direction": "push",
        "portBindings": [],
        "metadata": {"mimeType": "application/json"},
    }
    engine.create(
        objects.task(
            "t",
            workflow_name="wf",
            function_name="f",
            mpe_name="m",
            taskTemplateRef={"kind": c.KIND_TASK_TEMPLATE, "name": "tt"},
            humanReadable={"name": "My task"},
            inputs=[media_in],
            outputs=[media_out],
            config={"c": "task", "d": "task"},
        )
    )
    name = job_name(probe.wait_phase("t", "Running"))
    secret = probe.secret(name)
    raw = base64.b64decode(secret["data"][c.TASK_DATA_FILE_NAME])
    assert raw.endswith(b"\n")
    assert b"\\u003ctest\\u003e \\u0026 more" in raw  # Go's HTML-safe escaping
    payload = probe.payload(name)
    assert list(payload) == ["workflow", "task", "mediaLocations", "system"]
    assert payload["workflow"] == {
        "id": "wf",
        "humanReadable": {"name": "My workflow", "description": "a <test> & more"},
        "config": {"wf-key": "wf-value"},
    }
    assert payload["task"] == {
        "id": "t",
        "humanReadable": {"name": "My task"},
        "inputs": [media_in],
        "outputs": [media_out],
        "config": {"a": "function", "b": "template", "c": "task", "d": "task"},
    }
    assert payload["mediaLocations"] == {
        "archive": with_data(
            archive["spec"], ("http", "auth", "token", "secretRef"), {"token": SECRET_VALUES[2]}
        ),
        "store": with_data(
            store["spec"],
            ("s3", "auth", "aws", "secretRef"),
            {"accessKeyID": SECRET_VALUES[0], "secretAccessKey": SECRET_VALUES[1]},
        ),
    }
    assert payload["system"] == {
        "nats": {"url": "nats://nats:4222", "username": "nagare", "password": "pw-unused-value"}
    }
    assert_no_secret_values(probe, "t")


def test_d2_config_merge_later_wins(engine, controller, probe):
    """D2: Task config overrides the TaskTemplate's, which overrides the Function's
    defaultConfig, key by key; an empty string set later wins too."""
    engine.create(objects.workflow("wf"))
    engine.create(
        objects.function(
            "f", default_config={"keep": "fn", "tt": "fn", "task": "fn", "blank": "fn"}
        )
    )
    engine.create(objects.task_template("tt", config={"tt": "template", "task": "template"}))
    engine.create(objects.local_mpe("m"))
    engine.create(
        objects.task(
            "t",
            workflow_name="wf",
            function_name="f",
            mpe_name="m",
            taskTemplateRef={"kind": c.KIND_TASK_TEMPLATE, "name": "tt"},
            config={"task": "task", "blank": ""},
        )
    )
    name = job_name(probe.wait_phase("t", "Running"))
    assert probe.payload(name)["task"]["config"] == {
        "keep": "fn",
        "tt": "template",
        "task": "task",
        "blank": "",
    }


def test_payload_without_optional_members(engine, controller, probe):
    """A bare Task: inputs/outputs are null, mediaLocations is {}, config and humanReadable are
    left out, NATS members are empty strings."""
    engine.create(objects.workflow("wf"))
    engine.create(objects.function("f"))
    engine.create(objects.local_mpe("m"))
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="m"))
    name = job_name(probe.wait_phase("t", "Running"))
    assert probe.payload(name) == {
        "workflow": {"id": "wf"},
        "task": {"id": "t", "inputs": None, "outputs": None},
        "mediaLocations": {},
        "system": {"nats": {"url": "", "username": "", "password": ""}},
    }


def test_d15_media_location_key_copies_only_that_key(
    engine, controller, probe, api_client, namespace
):
    """D15: with secretRef.key set, only that key of the Secret is copied into the payload."""
    create_secret(
        api_client,
        namespace,
        "creds",
        {"accessKeyID": SECRET_VALUES[0], "secretAccessKey": SECRET_VALUES[1]},
    )
    engine.create(objects.s3_location("store", secret_name="creds", key="accessKeyID"))
    engine.create(objects.workflow("wf", media_locations=[objects.location_entry("s", "store")]))
    engine.create(objects.function("f"))
    engine.create(objects.local_mpe("m"))
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="m"))
    name = job_name(probe.wait_phase("t", "Running"))
    ref = probe.payload(name)["mediaLocations"]["s"]["s3"]["auth"]["aws"]["secretRef"]
    assert ref == {"data": {"accessKeyID": b64(SECRET_VALUES[0])}}


def test_d15_cluster_media_location_needs_secret_namespace(
    engine, controller, probe, api_client, namespace, cluster_scoped
):
    """D15: a ClusterMediaLocation's secretRef without namespace is an error (it is not looked
    up in the Task's namespace); no Job is created."""
    create_secret(
        api_client,
        namespace,
        "creds",
        {"accessKeyID": SECRET_VALUES[0], "secretAccessKey": SECRET_VALUES[1]},
    )
    cml = f"cml-{namespace}"
    cluster_scoped.create(objects.s3_location(cml, secret_name="creds", cluster=True))
    engine.create(
        objects.workflow(
            "wf",
            media_locations=[objects.location_entry("s", cml, kind=c.KIND_CLUSTER_MEDIA_LOCATION)],
        )
    )
    engine.create(objects.function("f"))
    engine.create(objects.local_mpe("m"))
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="m"))
    task = probe.wait_message("t", "has no namespace")
    assert f"ClusterMediaLocation '{cml}'" in task["status"]["message"]
    assert task["status"]["phase"] == "JobPending"
    assert probe.jobs() == []
    assert_no_secret_values(probe, "t")


def test_d15_media_location_secret_in_another_namespace_is_refused(
    engine, controller, probe, api_client, other_namespace
):
    """D15: a namespaced MediaLocation may not read a Secret of another namespace."""
    create_secret(
        api_client,
        other_namespace,
        "creds",
        {"accessKeyID": SECRET_VALUES[0], "secretAccessKey": SECRET_VALUES[1]},
    )
    engine.create(
        objects.s3_location("store", secret_name="creds", secret_namespace=other_namespace)
    )
    engine.create(objects.workflow("wf", media_locations=[objects.location_entry("s", "store")]))
    engine.create(objects.function("f"))
    engine.create(objects.local_mpe("m"))
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="m"))
    probe.wait_message("t", f"references a Secret in a different namespace ({other_namespace})")
    assert probe.jobs() == []
    assert_no_secret_values(probe, "t")


def test_d15_key_the_method_does_not_use_names_key_not_values(
    engine, controller, probe, api_client, namespace
):
    """A secretRef.key the auth method never reads is refused by key name only (it
    would copy data the Job does not need); no value of that Secret appears in status or
    Events, and no Job is created."""
    create_secret(
        api_client,
        namespace,
        "creds",
        {"accessKeyID": SECRET_VALUES[0], "secretAccessKey": SECRET_VALUES[1]},
    )
    engine.create(objects.s3_location("store", secret_name="creds", key="sessionToken"))
    engine.create(objects.workflow("wf", media_locations=[objects.location_entry("s", "store")]))
    engine.create(objects.function("f"))
    engine.create(objects.local_mpe("m"))
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="m"))
    probe.wait_message(
        "t",
        "MediaLocation 'store' s3.auth.aws.secretRef: key 'sessionToken' is not a credential of "
        "this auth method (it uses 'accessKeyID', 'secretAccessKey')",
    )
    assert probe.jobs() == []
    assert_no_secret_values(probe, "t")


def test_job_secret_holds_only_the_keys_each_auth_method_uses(
    engine, controller, probe, api_client, namespace, cluster_scoped, other_namespace
):
    """An S3 ClusterMediaLocation and an RTMP MediaLocation (basic and
    streamingKey) whose secretRefs name no key put only the keys their auth methods use into the
    Job's helper-data Secret; the Secrets' unrelated keys are nowhere in it."""
    unrelated = {"unrelated": "pw-unused-value", "sessionToken": "tok-3f9a-value"}
    create_secret(
        api_client,
        other_namespace,
        "s3-creds",
        {"accessKeyID": SECRET_VALUES[0], "secretAccessKey": SECRET_VALUES[1], **unrelated},
    )
    create_secret(
        api_client,
        namespace,
        "rtmp-creds",
        {"username": "rtmp-user", "password": "rtmp-pass", "streamingKey": "rtmp-key", **unrelated},
    )
    cml = f"store-{namespace}"
    cluster_scoped.create(
        objects.s3_location(
            cml, secret_name="s3-creds", secret_namespace=other_namespace, cluster=True
        )
    )
    rtmp_ref = {"secretRef": {"name": "rtmp-creds"}}
    engine.create(
        {
            "apiVersion": c.API_VERSION,
            "kind": c.KIND_MEDIA_LOCATION,
            "metadata": {"name": "live"},
            "spec": {
                "rtmp": {
                    "baseURL": "rtmp://live/",
                    "auth": {"basic": rtmp_ref, "streamingKey": rtmp_ref},
                }
            },
        }
    )
    engine.create(
        objects.workflow(
            "wf",
            media_locations=[
                objects.location_entry("s", cml, kind=c.KIND_CLUSTER_MEDIA_LOCATION),
                objects.location_entry("live", "live"),
            ],
        )
    )
    engine.create(objects.function("f"))
    engine.create(objects.local_mpe("m"))
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="m"))
    name = job_name(probe.wait_phase("t", "Running"))
    secret = probe.secret(name)
    assert list(secret["data"]) == [c.TASK_DATA_FILE_NAME]
    raw = base64.b64decode(secret["data"][c.TASK_DATA_FILE_NAME]).decode()
    locations = probe.payload(name)["mediaLocations"]
    assert locations["s"]["s3"]["auth"]["aws"]["secretRef"] == {
        "data": {"accessKeyID": b64(SECRET_VALUES[0]), "secretAccessKey": b64(SECRET_VALUES[1])}
    }
    assert locations["live"]["rtmp"]["auth"] == {
        "basic": {
            "secretRef": {"data": {"password": b64("rtmp-pass"), "username": b64("rtmp-user")}}
        },
        "streamingKey": {"secretRef": {"data": {"streamingKey": b64("rtmp-key")}}},
    }
    for key, value in unrelated.items():
        assert key not in raw
        assert b64(value) not in raw
        assert value not in raw


def test_a_missing_auth_method_key_is_a_clear_message(
    engine, controller, probe, api_client, namespace, cluster_scoped, other_namespace
):
    """A ClusterMediaLocation's Secret without one of the keys its auth method
    needs keeps the Task in JobPending with a message naming the Secret, the key and the
    ClusterMediaLocation (no value of the Secret in status or Events); no Job is created."""
    create_secret(
        api_client,
        other_namespace,
        "s3-creds",
        {"accessKeyID": SECRET_VALUES[0], "unrelated": SECRET_VALUES[1]},
    )
    cml = f"store-{namespace}"
    cluster_scoped.create(
        objects.s3_location(
            cml, secret_name="s3-creds", secret_namespace=other_namespace, cluster=True
        )
    )
    engine.create(
        objects.workflow(
            "wf",
            media_locations=[objects.location_entry("s", cml, kind=c.KIND_CLUSTER_MEDIA_LOCATION)],
        )
    )
    engine.create(objects.function("f"))
    engine.create(objects.local_mpe("m"))
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="m"))
    task = probe.wait_message(
        "t",
        f"Secret '{other_namespace}/s3-creds' has no key 'secretAccessKey' "
        f"(needed by ClusterMediaLocation '{cml}' s3.auth.aws.secretRef)",
    )
    assert task["status"]["phase"] == "JobPending"
    assert probe.jobs() == []
    assert_no_secret_values(probe, "t")


# test_d16_media_location_of_wrong_kind_names_media_location: such a Workflow is refused at
# admission now (CEL rules); the controller's message for one stored before them (D16) is in
# test_without_admission_rules.py.


def test_missing_media_location_secret_then_recovers(
    engine, controller, probe, api_client, namespace
):
    """A MediaLocation Secret that does not exist yet keeps the Task in JobPending with a clear
    message and no Job; once it exists the Task runs with the credentials in its payload."""
    engine.create(objects.s3_location("store", secret_name="creds"))
    engine.create(objects.workflow("wf", media_locations=[objects.location_entry("s", "store")]))
    engine.create(objects.function("f"))
    engine.create(objects.local_mpe("m"))
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="m"))
    probe.wait_message(
        "t", "MediaLocation 'store' s3.auth.aws.secretRef: secrets \"creds\" not found"
    )
    assert probe.jobs() == []
    create_secret(
        api_client,
        namespace,
        "creds",
        {"accessKeyID": SECRET_VALUES[0], "secretAccessKey": SECRET_VALUES[1]},
    )
    name = job_name(probe.wait_phase("t", "Running"))
    assert probe.payload(name)["mediaLocations"]["s"]["s3"]["auth"]["aws"]["secretRef"]["data"] == {
        "accessKeyID": b64(SECRET_VALUES[0]),
        "secretAccessKey": b64(SECRET_VALUES[1]),
    }
    assert probe.status("t")["message"] == ""


def assert_no_secret_values(probe, task_name: str) -> None:
    """No Secret value, plain or base64, in the Task object or any Event of the namespace."""
    task_text = repr(probe.task(task_name))
    event_text = repr(probe.events())
    for value in SECRET_VALUES:
        for form in (value, b64(value)):
            assert form not in task_text
            assert form not in event_text
