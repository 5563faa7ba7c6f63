"""Opt-in: nagare's seed-era samples and CRDs (``../shared/reference``) against our models and CRDs.

* Every sample object parses through our models and round-trips without loss (every member of
  the sample comes back with the same value; members the API server would default may be added).
* Every property path of the reference CRDs is present in ours, or lies inside an object ours
  keeps verbatim (``x-kubernetes-preserve-unknown-fields``, e.g. the embedded JobTemplateSpec).

Skipped, with the reason, only when the reference folder is absent.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from taskfsm.api import (
    MODEL_BY_KIND,
    WorkflowManagerConfiguration,
    WorkflowManagerHelperData,
    crdgen,
    parse_object,
)

REFERENCE = Path(__file__).resolve().parents[3].parent / "shared" / "reference"

pytestmark = [
    pytest.mark.reference,
    pytest.mark.skipif(
        not REFERENCE.is_dir(), reason=f"reference inputs not present at {REFERENCE}"
    ),
]


def sample_documents() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted((REFERENCE / "samples").glob("*.yaml")):
        with path.open(encoding="utf-8") as handle:
            for index, doc in enumerate(yaml.safe_load_all(handle)):
                if doc is not None:
                    yield f"{path.name}#{index}", doc


SAMPLES = list(sample_documents()) if REFERENCE.is_dir() else []


def parse_any(doc: dict[str, Any]) -> Any:
    kind = doc.get("kind")
    if kind in MODEL_BY_KIND:
        return parse_object(doc)
    if kind == "WorkflowManagerHelperData":
        return WorkflowManagerHelperData.model_validate(doc)
    if kind == "WorkflowManagerConfiguration":
        return WorkflowManagerConfiguration.from_dict(doc)
    return None


def missing_members(original: Any, written: Any, path: str = "") -> list[str]:
    """Paths where ``written`` lost or changed what ``original`` had (null counts as absent)."""
    if isinstance(original, dict):
        if not isinstance(written, dict):
            return [path or "<root>"]
        problems = []
        for key, value in original.items():
            if value is None:
                continue
            if key not in written:
                problems.append(f"{path}.{key}")
            else:
                problems += missing_members(value, written[key], f"{path}.{key}")
        return problems
    if isinstance(original, list):
        if not isinstance(written, list) or len(original) != len(written):
            return [path]
        return [p for i, (a, b) in enumerate(zip(original, written, strict=True))
                for p in missing_members(a, b, f"{path}[{i}]")]  # fmt: skip
    return [] if original == written else [path]


def test_samples_were_found() -> None:
    kinds = {doc.get("kind") for _, doc in SAMPLES}
    assert {"Function", "MediaLocation", "MediaProcessingEntity", "Workflow", "Task",
            "WorkflowManagerHelperData", "WorkflowManagerConfiguration"} <= kinds  # fmt: skip


@pytest.mark.parametrize(("name", "doc"), SAMPLES, ids=[name for name, _ in SAMPLES])
def test_sample_parses_and_round_trips_without_loss(name: str, doc: dict[str, Any]) -> None:
    parsed = parse_any(doc)
    if parsed is None:
        assert doc["apiVersion"] == "v1"  # the Secret next to the MediaLocation: not ours
        return
    written = parsed.to_dict()
    assert missing_members(doc, written) == []
    assert type(parsed).model_validate(written) == parsed


def property_paths(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, bool]]:
    """``(path, keeps_unknown)`` for every schema node below ``node``."""
    yield path, bool(node.get("x-kubernetes-preserve-unknown-fields"))
    for name, child in (node.get("properties") or {}).items():
        yield from property_paths(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from property_paths(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from property_paths(node["additionalProperties"], f"{path}{{}}")


@functools.cache
def reference_crds() -> list[dict[str, Any]]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the files are large (650 kB each)
    docs = []
    for path in sorted((REFERENCE / "crds").glob("*.yaml")):
        with path.open(encoding="utf-8") as handle:
            docs += [doc for doc in yaml.load_all(handle, Loader=loader) if doc]
    return docs


def test_reference_crd_paths_are_all_in_ours() -> None:
    ours = {d["metadata"]["name"]: d for d in crdgen.crd_documents()}
    theirs = reference_crds()
    assert {d["metadata"]["name"] for d in theirs} == set(ours)
    missing = []
    for doc in theirs:
        name = doc["metadata"]["name"]
        ours_schema = ours[name]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        their_schema = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        our_paths = dict(property_paths(ours_schema))
        kept_verbatim = [p for p, keeps in our_paths.items() if keeps]
        for path, _ in property_paths(their_schema):
            if path.startswith(".metadata."):
                continue  # the API server owns metadata's schema
            covered = path in our_paths or any(
                path.startswith((k + ".", k + "[", k + "{")) for k in kept_verbatim
            )
            if not covered:
                missing.append(f"{name}: {path}")
    assert missing == []


def test_reference_crd_names_scope_categories_and_columns_match() -> None:
    ours = {d["metadata"]["name"]: d for d in crdgen.crd_documents()}
    for doc in reference_crds():
        mine = ours[doc["metadata"]["name"]]["spec"]
        spec = doc["spec"]
        # taskfsm adds short names (docs/api.md); the other names are the reference's.
        assert {k: v for k, v in mine["names"].items() if k != "shortNames"} == spec["names"]
        assert "shortNames" not in spec["names"]
        assert mine["scope"] == spec["scope"]
        their_version, my_version = spec["versions"][0], mine["versions"][0]
        assert my_version.get("subresources") == their_version.get("subresources")
        their_columns = [(c["name"], c["jsonPath"], c["type"])
                         for c in their_version.get("additionalPrinterColumns", [])]  # fmt: skip
        my_columns = [(c["name"], c["jsonPath"], c["type"])
                      for c in my_version.get("additionalPrinterColumns", [])]  # fmt: skip
        # taskfsm adds the Task's Job, the Task's and Workflow's Reason, the MPEs' Reason,
        # Message and Age and the Functions' Version and Age (docs/api.md); all others are the
        # reference's.
        reason = ("Reason", '.status.conditions[?(@.status=="True")].reason', "string")
        age = ("Age", ".metadata.creationTimestamp", "date")
        mpe = [
            ("Reason", '.status.conditions[?(@.type=="Ready")].reason', "string"),
            ("Message", ".status.message", "string"),
            age,
        ]
        function = [("Version", ".spec.version", "string"), age]
        added = {
            "Task": [("Job", ".status.jobRef.name", "string"), reason],
            "Workflow": [reason],
            "MediaProcessingEntity": mpe,
            "ClusterMediaProcessingEntity": mpe,
            "Function": function,
            "ClusterFunction": function,
        }.get(spec["names"]["kind"], [])
        assert [c for c in my_columns if c not in added] == their_columns
        assert [c for c in my_columns if c in added] == added
