"""Hypothesis strategies that generate Kubernetes JSON from the models' OpenAPI schemas.

The generator walks a schema produced by ``taskfsm.api.crdgen`` and draws documents the schema
accepts: every required member and every member with a default is present (so the expected
output of a parse/serialise round trip is the input itself), one-of unions get exactly one
member, list-maps get unique keys, patterns are honoured. With ``unknown=True`` it also adds
members no schema declares (``zz...``) to every object with declared properties, to check that
unknown fields survive.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st

from taskfsm.api import duration
from taskfsm.api.constants import API_VERSION
from taskfsm.api.crdgen import model_schema, openapi_schema
from taskfsm.api.objectmeta import ObjectMeta
from taskfsm.api.resource import ApiObject
from taskfsm.api.scalars import format_time

MAX_ITEMS = 2

_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_UNKNOWN_KEY = st.from_regex(r"zz[A-Za-z0-9]{0,6}", fullmatch=True)


def _parses_as_duration(text: str) -> bool:
    try:
        duration.parse_go_duration(text)
    except ValueError:
        return False
    return True


json_scalars = (
    st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
json_values = st.recursive(
    st.none() | json_scalars,
    lambda inner: (
        st.lists(inner, max_size=MAX_ITEMS)
        | st.dictionaries(st.text(max_size=6), inner, max_size=MAX_ITEMS)
    ),
    max_leaves=6,
)
"""Any JSON value (what a preserve-unknown-fields node may hold)."""

json_objects = st.dictionaries(st.text(max_size=6), json_values, max_size=3)

times = st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(9999, 12, 31), timezones=st.just(UTC)
).map(format_time)
"""RFC 3339 timestamps as Kubernetes writes them (UTC, seconds, ``Z``)."""

go_durations = st.integers(-(10**15), 10**15).map(duration.format_go_duration) | st.from_regex(
    duration.GO_DURATION_PATTERN, fullmatch=True
).filter(_parses_as_duration)
"""Go duration strings: canonical ones and anything else the syntax allows."""

rist_buffer_sizes = st.integers(0, 30 * duration.SECOND).map(duration.format_go_duration)


def _string(node: dict[str, Any]) -> st.SearchStrategy[str]:
    if node.get("format") == "date-time":
        return times
    if node.get("pattern") == duration.GO_DURATION_PATTERN:
        if "duration(self)" in str(node.get("x-kubernetes-validations", "")):
            return rist_buffer_sizes
        return go_durations
    if "pattern" in node:
        # Python's \d and \w are wider than RE2's; the models' patterns avoid them.
        return st.from_regex(node["pattern"], fullmatch=True)
    return st.text(max_size=12)


def _union_limit(node: dict[str, Any], members: int) -> int:
    """How many members an inline union node allows (0: not a union), read from the CEL rule
    ``taskfsm.api.base.union_rule`` wrote: "exactly one of ..." or "at least one of ..."."""
    for rule in node.get("x-kubernetes-validations", ()):
        message = rule.get("message", "")
        if message.startswith("exactly one of "):
            return 1
        if message.startswith("at least one of "):
            return members
    return 0


def _object(node: dict[str, Any], unknown: bool) -> st.SearchStrategy[dict[str, Any]]:
    properties: dict[str, Any] = node["properties"]
    always = set(node.get("required", ())) | {k for k, v in properties.items() if "default" in v}
    optional = [name for name in properties if name not in always]
    one_of = [branch["required"] for branch in node.get("oneOf", ())]
    if one_of:
        optional = [name for name in optional if not any(name in b for b in one_of)]
    union = _union_limit(node, len(optional))

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        names = set(always)
        if union and optional:
            at_most = union
            members = st.lists(st.sampled_from(optional), min_size=1, max_size=at_most, unique=True)
            names |= set(draw(members))
        else:
            names |= {name for name in optional if draw(st.booleans())}
        if one_of:
            names |= set(draw(st.sampled_from(one_of)))
        result = {
            name: draw(strategy(properties[name], unknown)) for name in properties if name in names
        }
        if unknown:
            for key in draw(st.lists(_UNKNOWN_KEY, max_size=2, unique=True)):
                result[key] = draw(json_values.filter(lambda v: v is not None))
        return result

    return build()


def strategy(node: dict[str, Any], unknown: bool = False) -> st.SearchStrategy[Any]:
    """Documents valid for the schema ``node`` (a ``taskfsm.api.crdgen`` schema)."""
    if "const" in node:
        return st.just(node["const"])
    if "enum" in node:
        return st.sampled_from(node["enum"])
    kind = node.get("type")
    if kind is None and node.get("x-kubernetes-preserve-unknown-fields"):
        return json_values
    if kind == "object":
        if "properties" in node:
            return _object(node, unknown)
        if isinstance(node.get("additionalProperties"), dict):
            return st.dictionaries(
                st.text(max_size=10), strategy(node["additionalProperties"], unknown), max_size=3
            )
        return json_objects
    if kind == "array":
        items = strategy(node["items"], unknown)
        keys = node.get("x-kubernetes-list-map-keys")
        if keys:
            return st.lists(
                items, max_size=MAX_ITEMS, unique_by=lambda item: tuple(item[k] for k in keys)
            )
        return st.lists(items, max_size=MAX_ITEMS)
    if kind == "string":
        return _string(node)
    if kind == "integer":
        low, high = _INT_RANGES.get(node.get("format", ""), (-(2**53), 2**53))
        return st.integers(low, high)
    if kind == "boolean":
        return st.booleans()
    raise NotImplementedError(f"no strategy for schema node {node}")


_METADATA = model_schema(ObjectMeta)


@functools.cache
def resources(model: type[ApiObject], unknown: bool = False) -> st.SearchStrategy[dict[str, Any]]:
    """Objects of ``model``'s kind as the API server would return them (valid for its CRD)."""
    schema = openapi_schema(model)
    schema["properties"]["apiVersion"] = {"const": API_VERSION}
    schema["properties"]["kind"] = {"const": model.KIND}
    schema["properties"]["metadata"] = _METADATA
    schema["required"] = [*schema.get("required", ()), "apiVersion", "kind", "metadata"]
    return strategy(schema, unknown)


@functools.cache
def documents(model: Any, unknown: bool = False) -> st.SearchStrategy[dict[str, Any]]:
    """Documents of any model (e.g. the helper payload), from its JSON schema."""
    return strategy(model_schema(model), unknown)
