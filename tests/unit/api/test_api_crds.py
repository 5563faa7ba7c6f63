"""The generated CRDs: the committed files are fresh, schemas are structural and follow the spec."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from taskfsm.api import RESOURCE_MODELS, crdgen
from taskfsm.api.constants import API_VERSION


def schema_of(kind: str) -> dict[str, Any]:
    doc = next(d for d in crdgen.crd_documents() if d["spec"]["names"]["kind"] == kind)
    return doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def at(schema: dict[str, Any], path: str) -> dict[str, Any]:
    """The schema node at a dotted property path; ``[]`` steps into array items."""
    node = schema
    for part in path.split("."):
        node = node["items"] if part == "[]" else node["properties"][part]
    return node


def test_committed_crd_files_are_fresh() -> None:
    stale = crdgen.stale_files()
    assert not stale, (
        f"taskfsm/api/crds/ is out of date with the models ({', '.join(stale)}): "
        "run `make generate` and commit taskfsm/api/crds/"
    )


def test_committed_files_load_to_the_generated_documents() -> None:
    for doc in crdgen.crd_documents():
        path = crdgen.CRD_DIR / crdgen.crd_file_name(doc)
        assert yaml.safe_load(path.read_text(encoding="utf-8")) == doc


def test_stale_files_detects_a_changed_and_a_superfluous_file(tmp_path: Any) -> None:
    for name, text in crdgen.expected_files().items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    assert crdgen.stale_files(tmp_path) == []
    (tmp_path / "engine.nagare.media_tasks.yaml").write_text("# edited\n", encoding="utf-8")
    (tmp_path / "engine.nagare.media_gone.yaml").write_text("", encoding="utf-8")
    (tmp_path / "unrelated.yaml").write_text("", encoding="utf-8")
    assert crdgen.stale_files(tmp_path) == [
        "engine.nagare.media_gone.yaml",
        "engine.nagare.media_tasks.yaml",
    ]
    assert crdgen.main(["--check", "--out", str(tmp_path)]) == 1
    assert crdgen.main(["--out", str(tmp_path)]) == 0
    assert crdgen.stale_files(tmp_path) == []
    assert (tmp_path / "unrelated.yaml").exists()


def test_one_crd_per_kind_with_names_scope_and_categories() -> None:
    docs = {d["spec"]["names"]["kind"]: d for d in crdgen.crd_documents()}
    assert set(docs) == {m.KIND for m in RESOURCE_MODELS}
    both, two = ["nagare-all", "nme-all", "nagare", "nme"], ["nagare-all", "nme-all"]
    expected = {
        "Task": ("tasks", "Namespaced", both, True),
        "Workflow": ("workflows", "Namespaced", both, True),
        "Function": ("functions", "Namespaced", two, False),
        "ClusterFunction": ("clusterfunctions", "Cluster", two, False),
        "TaskTemplate": ("tasktemplates", "Namespaced", two, False),
        "ClusterTaskTemplate": ("clustertasktemplates", "Cluster", two, False),
        "MediaProcessingEntity": (
            "mediaprocessingentities",
            "Namespaced",
            two,
            True,
        ),
        "ClusterMediaProcessingEntity": (
            "clustermediaprocessingentities",
            "Cluster",
            two,
            True,
        ),
        "MediaLocation": ("medialocations", "Namespaced", two, False),
        "ClusterMediaLocation": ("clustermedialocations", "Cluster", two, False),
    }
    for kind, (plural, scope, categories, has_status) in expected.items():
        doc = docs[kind]
        assert doc["metadata"]["name"] == f"{plural}.engine.nagare.media"
        assert doc["spec"]["group"] == "engine.nagare.media"
        assert doc["spec"]["names"]["plural"] == plural
        assert doc["spec"]["names"]["categories"] == categories
        assert doc["spec"]["names"]["shortNames"] == crdgen.SHORT_NAMES[kind]
        assert doc["spec"]["scope"] == scope
        (version,) = doc["spec"]["versions"]
        assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
        assert ("subresources" in version) == has_status
        if has_status:
            assert version["subresources"] == {"status": {}}


def test_task_printer_columns_as_in_the_spec() -> None:
    doc = next(d for d in crdgen.crd_documents() if d["spec"]["names"]["kind"] == "Task")
    columns = [
        (c["name"], c["jsonPath"], c["type"])
        for c in doc["spec"]["versions"][0]["additionalPrinterColumns"]
    ]
    assert columns == [
        ("MPE", ".status.mediaProcessingEntityRef.name", "string"),
        ("Workflow", ".spec.workflowRef.name", "string"),
        ("Function", ".status.functionRef.name", "string"),
        ("Job", ".status.jobRef.name", "string"),  # taskfsm's addition: what to describe next
        ("Human Name", ".spec.humanReadable.name", "string"),
        ("Status", ".status.phase", "string"),
        # taskfsm's addition: the terminal condition's reason (JobFailed, WorkflowTerminated...)
        ("Reason", '.status.conditions[?(@.status=="True")].reason', "string"),
        ("Age", ".metadata.creationTimestamp", "date"),
        ("Start", ".status.startTime", "date"),
        ("End", ".status.endTime", "date"),
    ]


def test_mpe_and_function_printer_columns() -> None:
    """MPEs and ClusterMPEs show why they are (not) Ready and the message saying what to do;
    Functions and ClusterFunctions their version."""

    def columns(kind: str) -> list[tuple[str, str]]:
        doc = next(d for d in crdgen.crd_documents() if d["spec"]["names"]["kind"] == kind)
        return [
            (c["name"], c["jsonPath"])
            for c in doc["spec"]["versions"][0]["additionalPrinterColumns"]
        ]

    for kind in ("MediaProcessingEntity", "ClusterMediaProcessingEntity"):
        assert columns(kind) == [
            ("Ready", '.status.conditions[?(@.type=="Ready")].status'),
            ("Reason", '.status.conditions[?(@.type=="Ready")].reason'),
            ("Message", ".status.message"),
            ("Age", ".metadata.creationTimestamp"),
        ]
    for kind in ("Function", "ClusterFunction"):
        assert columns(kind) == [
            ("Version", ".spec.version"),
            ("Age", ".metadata.creationTimestamp"),
        ]


def test_short_names_are_unique_and_clear_of_other_engines() -> None:
    """Every kind has short names; none is used twice, none is a plural or kind of another
    kind, and none is one Argo Workflows or Tekton installs (wf, cwf, tr, pr, ...)."""
    docs = crdgen.crd_documents()
    short = [n for d in docs for n in d["spec"]["names"]["shortNames"]]
    assert all(d["spec"]["names"]["shortNames"] for d in docs)
    assert len(short) == len(set(short))
    taken = {d["spec"]["names"][k].lower() for d in docs for k in ("plural", "singular", "kind")}
    others = {"wf", "cwf", "wftmpl", "cwftmpl", "wfeb", "tr", "pr", "task", "tasks"}
    assert not set(short) & (taken | others)
    assert crdgen.SHORT_NAMES["Task"][-1] == "nt"


@pytest.mark.parametrize("kind", ["Task", "Workflow", "MediaProcessingEntity"])
def test_conditions_are_a_list_map_by_type(kind: str) -> None:
    conditions = at(schema_of(kind), "status.conditions")
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    assert "type" in conditions["items"]["required"]


@pytest.mark.parametrize("model", RESOURCE_MODELS, ids=lambda m: m.KIND)
def test_schemas_are_structural(model: Any) -> None:
    schema = crdgen.openapi_schema(model)
    crdgen.check_structural(schema)
    assert schema["properties"]["metadata"] == {"type": "object"}


@pytest.mark.parametrize(
    ("node", "problem"),
    [
        ({"type": "object", "properties": {"a": {}}}, ".a: no type"),
        ({"type": "object", "properties": {}, "additionalProperties": {"type": "string"}}, "both"),
        ({"type": "string", "$ref": "#/x"}, "not allowed"),
        ({"type": "object", "properties": {}, "required": ["x"]}, "required 'x'"),
        ({"type": "object", "oneOf": [{"type": "string"}]}, "value validations only"),
        ({"type": "string", "properties": {}}, "properties on a non-object"),
    ],
)
def test_check_structural_rejects_non_structural_schemas(
    node: dict[str, Any], problem: str
) -> None:
    with pytest.raises(crdgen.SchemaError, match=problem.replace("(", r"\(")):
        crdgen.check_structural(node)


def test_task_schema_required_fields_enums_and_defaults() -> None:
    task = schema_of("Task")
    assert task["required"] == ["spec"]
    assert at(task, "spec")["required"] == ["workflowRef"]
    assert at(task, "spec.workflowRef")["required"] == ["name"]
    policy = at(task, "spec.jobFailurePolicy.defaultAction")
    assert (policy["enum"], policy["default"]) == (["FailWorkflow", "Ignore"], "FailWorkflow")
    assert at(task, "status.phase")["enum"] == [
        "Initializing", "JobPending", "Running", "Succeeded", "Failed",
    ]  # fmt: skip
    assert at(task, "status.conditions")["x-kubernetes-list-type"] == "map"
    assert at(task, "status.conditions.[]")["required"] == ["type", "status"]
    assert at(task, "status.conditions.[].status")["enum"] == ["True", "False", "Unknown"]
    assert at(task, "status.jobRef")["required"] == ["uid"]
    assert at(task, "status.startTime") == {
        "description": "When the Job started.", "type": "string", "format": "date-time",
    }  # fmt: skip


def test_config_is_a_string_map_and_media_are_kept() -> None:
    for kind, field in [("Task", "config"), ("Workflow", "config"), ("TaskTemplate", "config"),
                        ("Function", "defaultConfig")]:  # fmt: skip
        node = at(schema_of(kind), f"spec.{field}")
        assert node["type"] == "object"
        assert node["additionalProperties"] == {"type": "string"}
    for kind in ("Task", "Workflow"):
        for field in ("inputs", "outputs"):
            media = at(schema_of(kind), f"spec.{field}.[]")
            assert media["required"] == ["id", "type", "portBindings", "metadata"]
            video = at(media, "metadata.streams.[].video")  # opaque: kept whatever its version
            assert video["x-kubernetes-preserve-unknown-fields"] is True
            assert "properties" not in video


def test_embedded_kubernetes_objects_preserve_unknown_fields() -> None:
    task = schema_of("Task")
    for field in ("templatePatches", "functionSelector", "mediaProcessingEntitySelector"):
        node = at(task, f"spec.{field}")
        assert node["type"] == "object"
        assert node["x-kubernetes-preserve-unknown-fields"] is True
    assert at(schema_of("Function"), "spec")["required"] == ["version", "template"]


def test_unions_are_exactly_one_member() -> None:
    """Inline unions carry a CEL rule with the models' message instead of min/maxProperties."""

    def rules(node: dict[str, Any]) -> list[tuple[str, str]]:
        assert "minProperties" not in node
        assert "maxProperties" not in node
        return [(r["rule"], r["message"]) for r in node.get("x-kubernetes-validations", [])]

    for kind in ("MediaProcessingEntity", "ClusterMediaProcessingEntity"):
        assert rules(at(schema_of(kind), "spec")) == [
            (
                "[has(self.local), has(self.remote)].exists_one(member, member)",
                "exactly one of local, remote must be set",
            )
        ]
    location = schema_of("MediaLocation")
    ((rule, message),) = rules(at(location, "spec"))
    assert rule.endswith(".exists_one(member, member)")
    assert message == "exactly one of http, s3, opencast, rtmp, rtsp, rist must be set"
    assert rules(at(location, "spec.http.auth")) == [
        (
            "[has(self.basic), has(self.digest), has(self.token)].exists_one(member, member)",
            "exactly one of basic, digest, token must be set",
        )
    ]
    for path in ("spec.opencast.auth", "spec.rtsp.auth"):
        assert rules(at(location, path)) == [
            ("has(self.basic)", "exactly one of basic must be set")
        ]
    assert rules(at(location, "spec.s3.auth")) == []  # its one member is required
    assert at(location, "spec.s3.auth")["required"] == ["aws"]
    assert rules(at(location, "spec.rtmp.auth")) == [
        (
            "has(self.basic) || has(self.streamingKey)",
            "at least one of basic, streamingKey must be set",
        )
    ]


def test_media_location_patterns_defaults_and_rules() -> None:
    location = schema_of("ClusterMediaLocation")
    assert at(location, "spec.http.baseURL")["pattern"] == "^(http|https)://.*$"
    assert (
        at(location, "spec.rtmp.baseURL")["pattern"]
        == "^(rtmp|rtmpe|rtmps|rtmpt|rtmpte|rtmpts)://.*$"
    )
    assert at(location, "spec.rtsp.baseURL")["pattern"] == "^(rtsp|rtsps|rtspu)://.*$"
    assert at(location, "spec.rist.baseURL")["pattern"] == "^rist://.*$"
    assert at(location, "spec.opencast.serviceRegistryURL")["pattern"] == "^(http|https)://.*$"
    assert at(location, "spec.s3")["required"] == ["bucket", "region", "auth"]
    assert at(location, "spec.s3.usePathStyle")["default"] is False
    assert at(location, "spec.http.auth.token.headerName")["default"] == "Authorization"
    assert at(location, "spec.http.auth.token.headerValuePrefix")["default"] == "Bearer "
    assert at(location, "spec.rtsp.transportProtocol")["default"] == "auto"
    assert at(location, "spec.rist.profile")["default"] == "main"
    assert at(location, "spec.rist.encryption.type")["enum"] == ["aes-128", "aes-256"]
    headers = at(location, "spec.http.headers")
    assert headers["x-kubernetes-list-type"] == "map"
    assert headers["x-kubernetes-list-map-keys"] == ["name"]
    assert (
        "duration(self)"
        in at(location, "spec.rist.bufferSize")["x-kubernetes-validations"][0]["rule"]
    )
    assert "data" not in at(location, "spec.s3.auth.aws.secretRef")["properties"]


def test_function_version_is_semver_and_immutable() -> None:
    version = at(schema_of("Function"), "spec.version")
    assert version["pattern"].startswith("^(0|[1-9][0-9]*)")
    assert version["x-kubernetes-validations"] == [
        {"rule": "self == oldSelf", "message": "version is immutable"}
    ]
    assert at(schema_of("Function"), "spec.localMediaProcessingEntitiesOnly")["default"] is False


def test_workflow_media_locations_are_a_list_map_by_name() -> None:
    locations = at(schema_of("Workflow"), "spec.mediaLocations")
    assert locations["x-kubernetes-list-map-keys"] == ["name"]
    assert locations["items"]["required"] == ["name", "ref"]
    assert locations["items"]["properties"]["name"]["pattern"] == "[a-zA-Z0-9-]+"
    assert at(schema_of("Workflow"), "spec")["default"] == {}


def test_crd_documents_are_fresh_copies() -> None:
    first = crdgen.crd_documents()
    first[0]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"].clear()
    assert crdgen.crd_documents()[0]["spec"]["versions"][0]["schema"]["openAPIV3Schema"][
        "properties"
    ]


def test_models_kind_and_api_version_match_the_constants() -> None:
    for model in RESOURCE_MODELS:
        assert model.model_fields["kind"].default == model.KIND
        assert model.model_fields["api_version"].default == API_VERSION
