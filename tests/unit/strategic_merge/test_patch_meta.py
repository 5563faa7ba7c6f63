"""patch_meta.json is generated from the Kubernetes OpenAPI document, never edited by hand.

The freshness check needs the k8s.io/kubernetes Go module in the Go module cache (the control plane
is built from it); when it is missing the test FAILS with the command that fixes it, it is never
skipped: stale merge metadata would silently change how templatePatches merge (docs/behaviour.md D4).
"""

from __future__ import annotations

import json

import pytest

from taskfsm.strategic_merge import generate, schema


def test_committed_patch_meta_matches_regeneration():
    try:
        fresh = generate.generate(offline=True)
    except generate.SwaggerNotFoundError as exc:
        pytest.fail(f"cannot verify taskfsm/strategic_merge/patch_meta.json: {exc}", pytrace=False)
    committed = generate.META_PATH.read_text(encoding="utf-8")
    assert fresh == committed, (
        "taskfsm/strategic_merge/patch_meta.json is stale; run `make generate` and commit the result"
    )


def _field(type_name: str, field: str) -> dict:
    return json.loads(generate.META_PATH.read_text(encoding="utf-8"))["types"][type_name][field]


@pytest.mark.parametrize(
    ("type_name", "field", "merge_key", "strategy"),
    [
        ("io.k8s.api.core.v1.PodSpec", "containers", "name", "merge"),
        ("io.k8s.api.core.v1.PodSpec", "initContainers", "name", "merge"),
        ("io.k8s.api.core.v1.PodSpec", "ephemeralContainers", "name", "merge"),
        ("io.k8s.api.core.v1.PodSpec", "volumes", "name", "merge,retainKeys"),
        ("io.k8s.api.core.v1.PodSpec", "imagePullSecrets", "name", "merge"),
        ("io.k8s.api.core.v1.Container", "env", "name", "merge"),
        ("io.k8s.api.core.v1.Container", "volumeMounts", "mountPath", "merge"),
        ("io.k8s.api.core.v1.Container", "ports", "containerPort", "merge"),
        ("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "ownerReferences", "uid", "merge"),
        ("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "finalizers", None, "merge"),
        ("io.k8s.api.core.v1.PodSpec", "tolerations", None, None),
        ("io.k8s.api.core.v1.Container", "args", None, None),
    ],
)
def test_known_list_metadata(type_name, field, merge_key, strategy):
    shape = _field(type_name, field)
    assert shape["kind"] == "list"
    assert shape.get("mergeKey") == merge_key
    assert shape.get("strategy") == strategy


def test_every_type_reachable_from_job_template_spec_is_described():
    meta = json.loads(generate.META_PATH.read_text(encoding="utf-8"))
    assert meta["root"] == "io.k8s.api.batch.v1.JobTemplateSpec"
    referenced = set()

    def walk(shape):
        if shape["kind"] == "object":
            referenced.add(shape["type"])
        for inner in (shape.get("items"), shape.get("values")):
            if inner:
                walk(inner)

    for fields in meta["types"].values():
        for shape in fields.values():
            walk(shape)
    assert referenced | {meta["root"]} == set(meta["types"])
    assert "io.k8s.api.core.v1.PodTemplateSpec" in meta["types"]


def test_build_meta_on_a_small_document():
    swagger = {
        "definitions": {
            "root.T": {
                "properties": {
                    "items": {
                        "type": "array",
                        "items": {"$ref": "#/definitions/root.Item"},
                        "x-kubernetes-patch-merge-key": "id",
                        "x-kubernetes-patch-strategy": "merge",
                    },
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "limits": {
                        "type": "object",
                        "additionalProperties": {"$ref": "#/definitions/q.Quantity"},
                    },
                    "port": {"$ref": "#/definitions/x.IntOrString"},
                    "raw": {"$ref": "#/definitions/x.Free"},
                }
            },
            "root.Item": {"properties": {"id": {"type": "integer", "format": "int32"}}},
            "root.Unreachable": {"properties": {"x": {"type": "string"}}},
            "q.Quantity": {"type": "string"},
            "x.IntOrString": {"type": "string", "format": "int-or-string"},
            "x.Free": {"type": "object"},
        }
    }
    meta = generate.build_meta(swagger, "test", root="root.T")
    assert set(meta["types"]) == {"root.T", "root.Item"}
    fields = meta["types"]["root.T"]
    assert fields["items"] == {
        "kind": "list",
        "items": {"kind": "object", "type": "root.Item"},
        "mergeKey": "id",
        "strategy": "merge",
    }
    assert fields["labels"] == {"kind": "map", "values": {"kind": "scalar", "type": "string"}}
    assert fields["port"] == {"kind": "scalar", "type": "int-or-string"}
    assert fields["raw"] == {"kind": "any"}
    # Only the real Quantity type is special-cased (it also decodes JSON numbers).
    assert fields["limits"]["values"] == {"kind": "scalar", "type": "string"}


def test_schema_lookups():
    pod_spec = {"kind": "object", "type": "io.k8s.api.core.v1.PodSpec"}
    containers = schema.field_shape(pod_spec, "containers")
    assert schema.merge_key(containers) == "name"
    assert schema.merges(containers)
    assert schema.strategies(schema.field_shape(pod_spec, "volumes")) == {"merge", "retainKeys"}
    assert schema.field_shape(pod_spec, "noSuchField") is None
    assert schema.field_shape(schema.field_shape(pod_spec, "nodeSelector"), "any-key") == {
        "kind": "scalar",
        "type": "string",
    }
