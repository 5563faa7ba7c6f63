"""Read access to the generated strategic-merge metadata (``patch_meta.json``).

Why: the merge and the patch validator walk the patch and the template side by side and need,
at every step, the shape of the value under a key (decisions.md D4). The metadata is generated
from the Kubernetes OpenAPI document by :mod:`taskfsm.patching.generate`; this module only loads
it and answers lookups. A shape is a small dict, see the generator's docstring.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

Shape = dict[str, Any]
"""``{"kind": "object"|"map"|"list"|"scalar"|"any", ...}``; ``None`` means "unknown field"."""


@functools.cache
def _meta() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("patch_meta.json").read_text(encoding="utf-8")
    return json.loads(text)


def type_shape(type_name: str) -> Shape:
    """The shape of a whole object of an OpenAPI definition, e.g. ``io.k8s.api.core.v1.PodSpec``.

    Raises:
        ValueError: the type is not reachable from JobTemplateSpec, so no metadata exists.
    """
    if type_name not in _meta()["types"]:
        raise ValueError(f"no strategic-merge metadata for type {type_name!r}")
    return {"kind": "object", "type": type_name}


def field_shape(shape: Shape | None, key: str) -> Shape | None:
    """The shape of ``key`` inside a map/object of ``shape``; ``None`` when unknown.

    Unknown fields (not in the Kubernetes schema, or below a free-form object) are merged without
    metadata: maps recursively, lists and scalars replaced.
    """
    if shape is None:
        return None
    kind = shape["kind"]
    if kind == "object":
        return _meta()["types"][shape["type"]].get(key)
    if kind == "map":
        return shape["values"]
    return None


def list_items(shape: Shape | None) -> Shape | None:
    """The item shape of a list shape (``None`` when unknown or not a list)."""
    if shape is not None and shape["kind"] == "list":
        return shape["items"]
    return None


def merge_key(shape: Shape | None) -> str:
    """The list's ``x-kubernetes-patch-merge-key`` or ``""``."""
    return shape.get("mergeKey", "") if shape is not None else ""


def strategies(shape: Shape | None) -> frozenset[str]:
    """The field's ``x-kubernetes-patch-strategy`` entries, e.g. ``{"merge", "retainKeys"}``."""
    if shape is None or not shape.get("strategy"):
        return frozenset()
    return frozenset(s.strip() for s in shape["strategy"].split(","))


def merges(shape: Shape | None) -> bool:
    """Whether a list (or map) field is merged rather than replaced by a patch."""
    return "merge" in strategies(shape)


def describe(shape: Shape | None) -> str:
    """A short human description of what a shape expects, for error messages."""
    if shape is None:
        return "any value"
    kind = shape["kind"]
    if kind in ("object", "map", "any"):
        return "an object"
    if kind == "list":
        return "a list"
    return {
        "string": "a string",
        "integer": "an integer",
        "number": "a number",
        "boolean": "true or false",
        "int-or-string": "an integer or a string",
        "quantity": "a quantity (string or number)",
    }[shape["type"]]
