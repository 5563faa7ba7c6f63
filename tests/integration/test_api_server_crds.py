"""Our CRDs on a real kube-apiserver: they install, accept nagare's objects, reject bad ones.

* The ten CRDs from ``taskfsm.api.crdgen.crd_documents()`` become Established with structural schemas.
* Every seed-era sample object (opt-in, ``../shared/reference``) is accepted -- as itself and, for
  kinds with a cluster-scoped twin, as the cluster kind -- and what the API server returns parses
  through our models and equals what our models write for the sample (the server's defaulting
  equals the models' defaults, and nothing was pruned).
* A status built with our models is stored through the status subresource and reads back equal.
* Invalid objects are rejected with 422 naming the field; our models reject the same objects and
  name the same field.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from taskfsm.api import (
    MODEL_BY_KIND,
    ApiObject,
    Condition,
    ExactObjectReference,
    InvalidObjectError,
    ObjectReference,
    Task,
    TaskPhase,
    parse_object,
)
from taskfsm.api.constants import API_VERSION, GROUP, VERSION, ConditionStatus, TaskConditionType
from tests.support.probes import ClusterScoped

REFERENCE = Path(__file__).resolve().parents[2].parent / "shared" / "reference"
CLUSTER_TWIN = {
    "Function": "ClusterFunction",
    "TaskTemplate": "ClusterTaskTemplate",
    "MediaProcessingEntity": "ClusterMediaProcessingEntity",
    "MediaLocation": "ClusterMediaLocation",
}


@pytest.fixture
def objects(api_client: client.ApiClient, crds: list[str]) -> client.CustomObjectsApi:
    """The custom objects API; ``crds`` (tests/integration/conftest.py) installs our CRDs."""
    return client.CustomObjectsApi(api_client)


def create_namespaced(
    objects: client.CustomObjectsApi, body: dict[str, Any], namespace: str
) -> dict[str, Any]:
    plural = MODEL_BY_KIND[body["kind"]].PLURAL
    return objects.create_namespaced_custom_object(GROUP, VERSION, namespace, plural, body)


def try_create(objects: client.CustomObjectsApi, body: dict[str, Any], namespace: str) -> None:
    """Create ``body``; a cluster-scoped object that is accepted is deleted again at once."""
    model = MODEL_BY_KIND[body["kind"]]
    if model.NAMESPACED:
        create_namespaced(objects, body, namespace)
    else:
        objects.create_cluster_custom_object(GROUP, VERSION, model.PLURAL, body)
        objects.delete_cluster_custom_object(GROUP, VERSION, model.PLURAL, body["metadata"]["name"])


def rejection(objects: client.CustomObjectsApi, body: dict[str, Any], namespace: str) -> str:
    """Create ``body``, expecting a 422 (Unprocessable Entity); return the server's message."""
    with pytest.raises(ApiException) as caught:
        try_create(objects, body, namespace)
    assert caught.value.status == 422, caught.value.body
    return json.loads(caught.value.body)["message"]


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:6]}"


def test_crds_are_established_and_structural(api_client: client.ApiClient, crds: list[str]) -> None:
    assert sorted(crds) == sorted(f"{m.PLURAL}.{GROUP}" for m in MODEL_BY_KIND.values())
    extensions = client.ApiextensionsV1Api(api_client)
    for name in crds:
        conditions = {
            c.type: c.status
            for c in extensions.read_custom_resource_definition(name).status.conditions
        }
        assert conditions.get("Established") == "True", (name, conditions)
        assert conditions.get("NamesAccepted") == "True", (name, conditions)
        assert conditions.get("NonStructuralSchema") != "True", (name, conditions)


# --- seed-era samples ------------------------------------------------------------------------


def sample_objects() -> list[dict[str, Any]]:
    if not REFERENCE.is_dir():
        return []
    docs = []
    for path in sorted((REFERENCE / "samples").glob("v1alpha1_*.yaml")):
        with path.open(encoding="utf-8") as handle:
            docs += [
                d for d in yaml.safe_load_all(handle) if d and d.get("apiVersion") == API_VERSION
            ]
    return docs


SAMPLES = sample_objects()
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def without_invalid_labels(sample: dict[str, Any]) -> dict[str, Any]:
    """The sample minus label values no API server accepts (metadata validation, not our CRDs).

    nagare's Function samples carry ``app.kubernetes.io/version: 0.0.0+dev``; ``+`` is not
    allowed in label values, so kube-apiserver rejects them whatever the CRD says. Only that
    label may be dropped; anything else invalid fails the test.
    """
    labels = sample["metadata"].get("labels") or {}
    dropped = {key for key, value in labels.items() if not LABEL_VALUE.match(str(value))}
    assert dropped <= {"app.kubernetes.io/version"}, dropped
    metadata = {
        **sample["metadata"],
        "labels": {k: v for k, v in labels.items() if k not in dropped},
    }
    return {**sample, "metadata": metadata}


@pytest.mark.reference
@pytest.mark.skipif(not REFERENCE.is_dir(), reason=f"reference inputs not present at {REFERENCE}")
@pytest.mark.parametrize(
    "sample", SAMPLES, ids=[f"{d['kind']}-{d['metadata']['name'][:12]}" for d in SAMPLES]
)
def test_sample_objects_are_accepted_and_parse(
    objects: client.CustomObjectsApi,
    namespace: str,
    cluster_scoped: ClusterScoped,
    sample: dict[str, Any],
) -> None:
    sample = without_invalid_labels(sample)
    created = [(sample, create_namespaced(objects, sample, namespace))]
    if sample["kind"] in CLUSTER_TWIN:
        twin = {**sample, "kind": CLUSTER_TWIN[sample["kind"]]}
        twin["metadata"] = {**sample["metadata"], "name": unique(sample["metadata"]["name"])}
        created.append((twin, cluster_scoped.create(twin)))
    for body, stored in created:
        parsed = parse_object(stored)
        assert body["kind"] == type(parsed).KIND
        assert parsed.metadata.uid
        expected = parse_object(body).to_dict()
        assert stored["spec"] == expected["spec"]


def test_status_written_by_our_models_reads_back_equal(
    objects: client.CustomObjectsApi, namespace: str
) -> None:
    body = {"apiVersion": API_VERSION, "kind": "Task", "metadata": {"name": "t1"},
            "spec": {"workflowRef": {"name": "wf"}}}  # fmt: skip
    task = Task.from_dict(
        objects.create_namespaced_custom_object(GROUP, VERSION, namespace, Task.PLURAL, body)
    )
    task.status.phase = TaskPhase.RUNNING
    task.status.conditions = [
        Condition(
            type=TaskConditionType.INITIALIZED,
            status=ConditionStatus.TRUE,
            last_transition_time=datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC),
        )
    ]
    task.status.start_time = datetime(2024, 5, 1, 10, 0, 1, 999, tzinfo=UTC)  # stored to the second
    task.status.function_ref = ObjectReference(kind="Function", name="f", namespace=namespace)
    task.status.job_ref = ExactObjectReference(
        api_version="batch/v1", kind="Job", name="j", namespace="mpe", uid="0000-1111"
    )
    stored = objects.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, Task.PLURAL, "t1", {"status": task.status.to_dict()}
    )
    again = Task.from_dict(stored)
    assert again.status == task.status
    assert stored["status"]["startTime"] == "2024-05-01T10:00:01Z"


def test_task_table_shows_the_printer_columns(
    api_client: client.ApiClient, objects: client.CustomObjectsApi, namespace: str
) -> None:
    spec = {"workflowRef": {"name": "wf"}, "humanReadable": {"name": "Sleepy"}}
    body = {"apiVersion": API_VERSION, "kind": "Task", "metadata": {"name": "t1"}, "spec": spec}
    objects.create_namespaced_custom_object(GROUP, VERSION, namespace, Task.PLURAL, body)
    request = api_client.param_serialize(
        "GET",
        f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/tasks",
        header_params={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
        auth_settings=["BearerToken"],
    )
    response = api_client.call_api(*request)
    response.read()
    table = json.loads(response.data)
    columns = [c["name"] for c in table["columnDefinitions"]]
    assert columns == ["Name", "MPE", "Workflow", "Function", "Job", "Human Name", "Status",
                       "Reason", "Age", "Start", "End"]  # fmt: skip
    (row,) = table["rows"]
    assert row["cells"][2] == "wf"
    assert row["cells"][5] == "Sleepy"


# --- invalid objects: the API server and our models reject the same field --------------------

# name: (object, the field both must name, what the API server says about it)
INVALID = {
    "task-without-workflowRef": (
        {"kind": "Task", "metadata": {"name": "t"}, "spec": {"functionRef": {"name": "f"}}},
        "spec.workflowRef",
        "Required value",
    ),
    "mpe-union-with-two-members": (
        {"kind": "MediaProcessingEntity", "metadata": {"name": "m"},
         "spec": {"local": {}, "remote": {"kubeconfig": {"secretRef": {"name": "k"}}}}},
        "spec",
        "exactly one of local, remote must be set",
    ),
    "http-location-with-ftp-url": (
        {"kind": "MediaLocation", "metadata": {"name": "ml"},
         "spec": {"http": {"baseURL": "ftp://example.com/media"}}},
        "spec.http.baseURL",
        "should match",
    ),
    "function-with-malformed-semver": (
        {"kind": "Function", "metadata": {"name": "f"},
         "spec": {"version": "1.2", "template": {"spec": {}}}},
        "spec.version",
        "should match",
    ),
    "cluster-function-with-malformed-semver": (
        {"kind": "ClusterFunction", "metadata": {"name": "cf-bad"},
         "spec": {"version": "v1.2.3", "template": {"spec": {}}}},
        "spec.version",
        "should match",
    ),
    "rist-buffer-over-30s": (
        {"kind": "MediaLocation", "metadata": {"name": "rist"},
         "spec": {"rist": {"baseURL": "rist://h", "bufferSize": "31s"}}},
        "spec.rist.bufferSize",
        "must be between 0s and 30s",
    ),
    "job-failure-action-not-in-enum": (
        {"kind": "Task", "metadata": {"name": "t"},
         "spec": {"workflowRef": {"name": "wf"}, "jobFailurePolicy": {"defaultAction": "Retry"}}},
        "spec.jobFailurePolicy.defaultAction",
        "Unsupported value",
    ),
    "stream-with-two-kinds": (
        {"kind": "Task", "metadata": {"name": "t"},
         "spec": {"workflowRef": {"name": "wf"},
                  "inputs": [{"id": "i", "type": "media", "portBindings": [],
                              "metadata": {"streams": [{"id": "s", "audio": {}, "video": {}}]}}]}},
        "spec.inputs[0].metadata.streams[0]",
        "one and only one",
    ),
}  # fmt: skip


@pytest.mark.parametrize(("body", "field", "problem"), INVALID.values(), ids=INVALID.keys())
def test_invalid_objects_are_rejected_naming_the_field(
    objects: client.CustomObjectsApi,
    namespace: str,
    body: dict[str, Any],
    field: str,
    problem: str,
) -> None:
    body = {"apiVersion": API_VERSION, **body}
    message = rejection(objects, body, namespace)
    assert f"{field}: " in message or f'"{field}"' in message, message
    assert problem in message, message

    model: type[ApiObject] = MODEL_BY_KIND[body["kind"]]
    with pytest.raises(InvalidObjectError) as caught:
        model.from_dict(body)
    assert caught.value.problems.startswith(field), caught.value.problems


def test_function_version_is_immutable(objects: client.CustomObjectsApi, namespace: str) -> None:
    body = {"apiVersion": API_VERSION, "kind": "Function", "metadata": {"name": "f"},
            "spec": {"version": "1.0.0", "template": {"spec": {}}}}  # fmt: skip
    objects.create_namespaced_custom_object(GROUP, VERSION, namespace, "functions", body)
    patch = {"spec": {"version": "1.0.1"}}
    with pytest.raises(ApiException) as caught:
        objects.patch_namespaced_custom_object(GROUP, VERSION, namespace, "functions", "f", patch)
    assert caught.value.status == 422
    assert "spec.version" in caught.value.body
    assert "version is immutable" in caught.value.body
    patch = {"spec": {"localMediaProcessingEntitiesOnly": True}}
    objects.patch_namespaced_custom_object(GROUP, VERSION, namespace, "functions", "f", patch)
