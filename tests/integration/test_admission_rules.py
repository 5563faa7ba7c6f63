"""The CEL rules (``x-kubernetes-validations``) of our CRDs on a real kube-apiserver.

One test per rule. Each refuses an object with a 422 whose message names the field and carries the
rule's message (``spec.functionRef.kind: Invalid value: kind must be Function or
ClusterFunction``), and lets the nearest valid objects through, so no rule refuses more than it
says. ``test_every_cel_rule_has_a_test`` fails when the generator emits a rule that no test here
(or, for the Function's ``version``, in ``test_api_server_crds.py``) exercises. The rules and why
each exists: docs/api.md "Validation".
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from taskfsm.api import MODEL_BY_KIND
from taskfsm.api.constants import API_VERSION, GROUP, VERSION
from taskfsm.api.crdgen import crd_documents
from tests.integration import test_api_server_crds as crd_tests

CLUSTER_TWIN_OF = {twin: kind for kind, twin in crd_tests.CLUSTER_TWIN.items()}
SECRET = {"secretRef": {"name": "creds"}}


@pytest.fixture
def objects(api_client: client.ApiClient, crds: list[str]) -> client.CustomObjectsApi:
    """The custom objects API; ``crds`` (tests/integration/conftest.py) installs our CRDs."""
    return client.CustomObjectsApi(api_client)


@dataclass(frozen=True)
class Rule:
    """A CEL rule at ``path`` of ``kind``'s schema: ``refused`` specs get a 422 naming ``field``
    with ``message``; ``accepted`` specs are stored."""

    kind: str
    path: str
    message: str
    field: str
    refused: list[dict[str, Any]]
    accepted: list[dict[str, Any]] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.kind}.{self.path}"


def task_spec(**spec: Any) -> dict[str, Any]:
    return {"workflowRef": {"name": "wf"}, **spec}


def location(backend: str, **members: Any) -> dict[str, Any]:
    base = {
        "http": {"baseURL": "https://media.example"},
        "opencast": {"serviceRegistryURL": "https://oc.example", "auth": {"basic": SECRET}},
        "rtmp": {"baseURL": "rtmp://live.example"},
        "rtsp": {"baseURL": "rtsp://cam.example"},
        "rist": {"baseURL": "rist://relay.example"},
        "s3": {"bucket": "b", "region": "r", "auth": {"aws": SECRET}},
    }[backend]
    return {backend: {**base, **members}}


def kind_rule(kind: str, path: str, allowed: tuple[str, str], spec: Any) -> Rule:
    """A reference's ``kind`` rule: another kind refused; no kind, ``""`` and both kinds pass."""
    ref_field = path.removeprefix("spec.").replace("[]", "[0]")
    return Rule(
        kind,
        path,
        f"kind must be {allowed[0]} or {allowed[1]}",
        f"spec.{ref_field}.kind",
        refused=[spec({"kind": "ConfigMap", "name": "x"}), spec({"kind": "Secret", "name": "x"})],
        accepted=[
            spec({"name": "x"}),
            spec({"kind": "", "name": "x"}),
            spec({"kind": allowed[0], "name": "x"}),
            spec({"apiVersion": API_VERSION, "kind": allowed[1], "name": "x"}),
        ],
    )


RULES = [
    Rule(
        "MediaProcessingEntity",
        "spec",
        "exactly one of local, remote must be set",
        "spec",
        refused=[{}, {"local": {}, "remote": {"kubeconfig": SECRET}}],
        accepted=[
            {"local": {}},
            {"local": {"namespace": "jobs"}},
            {"remote": {"kubeconfig": SECRET}},
        ],
    ),
    Rule(
        "MediaLocation",
        "spec",
        "exactly one of http, s3, opencast, rtmp, rtsp, rist must be set",
        "spec",
        refused=[{}, {**location("http"), **location("s3")}],
        accepted=[
            location(backend) for backend in ("http", "s3", "opencast", "rtmp", "rtsp", "rist")
        ],
    ),
    Rule(
        "MediaLocation",
        "spec.http.auth",
        "exactly one of basic, digest, token must be set",
        "spec.http.auth",
        refused=[
            location("http", auth={}),
            location("http", auth={"basic": SECRET, "token": SECRET}),
        ],
        accepted=[
            location("http", auth={method: SECRET}) for method in ("basic", "digest", "token")
        ],
    ),
    Rule(
        "MediaLocation",
        "spec.opencast.auth",
        "exactly one of basic must be set",
        "spec.opencast.auth",
        refused=[location("opencast", auth={})],
        accepted=[location("opencast", auth={"basic": SECRET})],
    ),
    Rule(
        "MediaLocation",
        "spec.rtmp.auth",
        "at least one of basic, streamingKey must be set",
        "spec.rtmp.auth",
        refused=[location("rtmp", auth={})],
        accepted=[
            location("rtmp", auth={"basic": SECRET}),
            location("rtmp", auth={"streamingKey": SECRET}),
            location("rtmp", auth={"basic": SECRET, "streamingKey": SECRET}),
        ],
    ),
    Rule(
        "MediaLocation",
        "spec.rtsp.auth",
        "exactly one of basic must be set",
        "spec.rtsp.auth",
        refused=[location("rtsp", auth={})],
        accepted=[location("rtsp", auth={"basic": SECRET})],
    ),
    Rule(
        "MediaLocation",
        "spec.rist.bufferSize",
        "must be between 0s and 30s",
        "spec.rist.bufferSize",
        refused=[location("rist", bufferSize="31s"), location("rist", bufferSize="-1s")],
        accepted=[location("rist", bufferSize=size) for size in ("0s", "500ms", "30s")],
    ),
    Rule(
        "Task",
        "spec.workflowRef",
        "name must not be empty",
        "spec.workflowRef.name",
        refused=[{"workflowRef": {"name": ""}}, {"workflowRef": {"kind": "Workflow", "name": ""}}],
        accepted=[{"workflowRef": {"name": "wf"}}],
    ),
    kind_rule(
        "Task",
        "spec.mediaProcessingEntityRef",
        ("MediaProcessingEntity", "ClusterMediaProcessingEntity"),
        lambda ref: task_spec(mediaProcessingEntityRef=ref),
    ),
    kind_rule(
        "Task",
        "spec.functionRef",
        ("Function", "ClusterFunction"),
        lambda ref: task_spec(functionRef=ref),
    ),
    kind_rule(
        "Task",
        "spec.taskTemplateRef",
        ("TaskTemplate", "ClusterTaskTemplate"),
        lambda ref: task_spec(taskTemplateRef=ref),
    ),
    kind_rule(
        "TaskTemplate",
        "spec.mediaProcessingEntityRef",
        ("MediaProcessingEntity", "ClusterMediaProcessingEntity"),
        lambda ref: {"mediaProcessingEntityRef": ref},
    ),
    kind_rule(
        "TaskTemplate",
        "spec.functionRef",
        ("Function", "ClusterFunction"),
        lambda ref: {"functionRef": ref},
    ),
    kind_rule(
        "Workflow",
        "spec.mediaLocations[].ref",
        ("MediaLocation", "ClusterMediaLocation"),
        lambda ref: {"mediaLocations": [{"name": "media", "ref": ref}]},
    ),
]

# Transition rules (``oldSelf``) need an update; each has its own test: (module, test name).
TRANSITION_TESTS = {
    "Task.status": (__name__, "test_terminal_task_phase_never_changes"),
    "Function.spec.version": (crd_tests.__name__, "test_function_version_is_immutable"),
}


def cel_rules() -> Iterator[tuple[str, str]]:
    """``(<kind>.<path>, message)`` of every CEL rule in the generated CRDs; cluster kinds are
    named by their namespaced twin (they share the models, so the rules)."""

    def walk(node: dict[str, Any], path: str) -> Iterator[tuple[str, str]]:
        for rule in node.get("x-kubernetes-validations", ()):
            yield path, rule["message"]
        for name, child in (node.get("properties") or {}).items():
            yield from walk(child, f"{path}.{name}" if path else name)
        if "items" in node:
            yield from walk(node["items"], f"{path}[]")

    for doc in crd_documents():
        kind = doc["spec"]["names"]["kind"]
        schema = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        for path, message in walk(schema, ""):
            yield f"{CLUSTER_TWIN_OF.get(kind, kind)}.{path}", message


def refusal(field: str, message: str) -> re.Pattern[str]:
    """The API server's words for a CEL rule's refusal; a scalar's value is quoted after
    ``Invalid value:`` (``spec.rist.bufferSize: Invalid value: "31s": must be ...``)."""
    return re.compile(rf'{re.escape(field)}: Invalid value: ("[^"]*": )?{re.escape(message)}')


def body(kind: str, spec: dict[str, Any], name: str) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec}


def test_every_cel_rule_has_a_test() -> None:
    """Every rule the generator emits is exercised: by a RULES case (with its message) or by a
    transition test that exists."""
    rules = set(cel_rules())
    covered = {(rule.id, rule.message) for rule in RULES}
    transition = {(where, message) for where, message in rules if where in TRANSITION_TESTS}
    assert rules - covered - transition == set()
    assert covered - rules == set()
    assert {where for where, _ in transition} == set(TRANSITION_TESTS)
    for module, name in TRANSITION_TESTS.values():
        assert callable(getattr(sys.modules[module], name, None)), (module, name)


@pytest.mark.parametrize("rule", RULES, ids=[rule.id for rule in RULES])
def test_cel_rule_refuses_with_field_and_message(
    objects: client.CustomObjectsApi, namespace: str, rule: Rule
) -> None:
    """Each refused spec gets a 422 naming ``rule.field`` with the rule's message, for the kind
    and for its cluster-scoped twin; each accepted spec is stored."""
    kinds = [rule.kind] + (
        [crd_tests.CLUSTER_TWIN[rule.kind]] if rule.kind in crd_tests.CLUSTER_TWIN else []
    )
    for kind in kinds:
        for spec in rule.refused:
            message = crd_tests.rejection(
                objects, body(kind, spec, crd_tests.unique("bad")), namespace
            )
            assert refusal(rule.field, rule.message).search(message), (kind, spec, message)
        for spec in rule.accepted:
            crd_tests.try_create(objects, body(kind, spec, crd_tests.unique("ok")), namespace)


@pytest.mark.parametrize("terminal", ["Succeeded", "Failed"])
def test_terminal_task_phase_never_changes(
    objects: client.CustomObjectsApi, namespace: str, terminal: str
) -> None:
    """A Task whose ``status.phase`` is Succeeded or Failed keeps it: another phase or removing it
    is a 422 naming ``status.phase``; the rest of the status may still change, and every
    non-terminal phase may still move on."""
    plural = MODEL_BY_KIND["Task"].PLURAL
    objects.create_namespaced_custom_object(
        GROUP, VERSION, namespace, plural, body("Task", task_spec(), "t")
    )

    def patch(status: dict[str, Any]) -> dict[str, Any]:
        return objects.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, plural, "t", {"status": status}
        )

    for phase in ("Initializing", "JobPending", "Running", "Initializing", "Running", terminal):
        assert patch({"phase": phase})["status"]["phase"] == phase
    assert patch({"phase": terminal, "message": "kept"})["status"]["message"] == "kept"
    refused = [{"phase": other} for other in ("Running", "Initializing", "Succeeded", "Failed")]
    for status in [s for s in refused if s["phase"] != terminal] + [{"phase": None}]:
        with pytest.raises(ApiException) as caught:
            patch(status)
        assert caught.value.status == 422, caught.value.body
        message = json.loads(caught.value.body)["message"]
        assert refusal("status.phase", "phase Succeeded or Failed never changes").search(message)
    stored = objects.get_namespaced_custom_object(GROUP, VERSION, namespace, plural, "t")
    assert stored["status"]["phase"] == terminal
