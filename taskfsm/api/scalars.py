"""Scalar wire types shared by all kinds: identifiers, timestamps, durations, maps, embedded data.

Each is an ``Annotated`` type carrying its own validation, its JSON form and the OpenAPI schema
the CRD generator (``taskfsm.api.crdgen``) emits for it, so a field's Python type alone decides
all three.

* Identifiers (``ObjectName``, ``UID``, ...) are ``NewType``\\ s of ``str``: free at run time, but a
  type checker keeps a Task name from being passed where a UID is expected.
* ``Time`` is a Kubernetes ``metav1.Time``: RFC 3339, UTC, to the second (docs/behaviour.md §1.3).
* ``GoDuration`` is a Go ``time.Duration`` string such as ``1m30s`` (§1.9, §1.12); see
  ``taskfsm.api.duration`` for parsing and Go's canonical formatting.
* ``StringMap`` is ``map[string]string`` (``config``, ``labels``), written with sorted keys (as Go).
* ``JobTemplateSpec`` and ``LabelSelector`` are Kubernetes objects kept as plain JSON dicts; their
  CRD schema preserves unknown fields so the API server never prunes them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, NewType

from pydantic import AfterValidator, AwareDatetime, Field, PlainSerializer, WithJsonSchema
from pydantic import SerializationInfo as _SerializationInfo

from taskfsm.api import duration as _duration
from taskfsm.api.limits import MAX_MAP_ENTRIES

# --- Identifiers ---------------------------------------------------------------------------------

ObjectName = NewType("ObjectName", str)
"""``metadata.name`` of an object, or the ``name`` of a reference."""
NamespaceName = NewType("NamespaceName", str)
"""A namespace name."""
UID = NewType("UID", str)
"""``metadata.uid``; compared to detect that a name now denotes another object."""
Kind = NewType("Kind", str)
"""A Kubernetes kind, e.g. ``Task`` or ``Job``."""
APIVersion = NewType("APIVersion", str)
"""``group/version`` (or ``v1`` for the core group)."""
ConditionType = NewType("ConditionType", str)
"""``Condition.type``; the Task controller's values are ``constants.TaskConditionType``."""

# --- Integers ------------------------------------------------------------------------------------

Int32 = Annotated[
    int,
    Field(ge=-(2**31), le=2**31 - 1),
    WithJsonSchema({"type": "integer", "format": "int32"}),
]
"""A Go ``int32``."""

Int64 = Annotated[
    int,
    Field(ge=-(2**63), le=2**63 - 1),
    WithJsonSchema({"type": "integer", "format": "int64"}),
]
"""A Go ``int64``."""

# --- Time ----------------------------------------------------------------------------------------


def _to_utc_seconds(value: datetime) -> datetime:
    return value.astimezone(UTC).replace(microsecond=0)


def format_time(value: datetime) -> str:
    """``value`` as Kubernetes writes a ``metav1.Time``: ``2006-01-02T15:04:05Z`` (UTC, seconds)."""
    value = _to_utc_seconds(value)
    return (
        f"{value.year:04d}-{value.month:02d}-{value.day:02d}"
        f"T{value.hour:02d}:{value.minute:02d}:{value.second:02d}Z"
    )


Time = Annotated[
    AwareDatetime,
    AfterValidator(_to_utc_seconds),
    PlainSerializer(format_time, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
"""A ``metav1.Time``: timezone-aware, normalised to UTC and truncated to the second on input, so
what the model holds is exactly what it writes (docs/behaviour.md §1.3). Naive datetimes are
rejected."""

# --- Durations -----------------------------------------------------------------------------------

GO_CANONICAL_DURATIONS = "go_canonical_durations"
"""Serialisation context key: when true, ``GoDuration`` values are written the way Go re-encodes a
decoded ``time.Duration`` (``3m`` -> ``3m0s``), as in the helper payload (§1.11)."""


def _check_go_duration(value: str) -> str:
    _duration.parse_go_duration(value)  # raises ValueError naming the problem
    return value


def _serialise_go_duration(value: str, info: _SerializationInfo) -> str:
    context = info.context or {}
    if context.get(GO_CANONICAL_DURATIONS):
        return _duration.format_go_duration(_duration.parse_go_duration(value))
    return value


GoDuration = Annotated[
    str,
    AfterValidator(_check_go_duration),
    PlainSerializer(_serialise_go_duration, return_type=str),
    WithJsonSchema({"type": "string", "pattern": _duration.GO_DURATION_PATTERN}),
]
"""A Go ``time.Duration`` string (``300ms``, ``1m30s``, ``-2h``). Kept verbatim as written; invalid
syntax is rejected with the reason."""

# --- Maps and embedded Kubernetes objects --------------------------------------------------------


def _sorted_map(value: dict[str, str]) -> dict[str, str]:
    return dict(sorted(value.items()))


StringMap = Annotated[
    dict[str, str],
    Field(max_length=MAX_MAP_ENTRIES),
    PlainSerializer(_sorted_map, return_type=dict[str, str]),
]
"""A Go ``map[string]string``; written with keys sorted, like Go's encoder."""

JobTemplateSpec = Annotated[
    dict[str, Any],
    WithJsonSchema({"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
]
"""A batch/v1 ``JobTemplateSpec`` (``{metadata?, spec?}``) as plain Kubernetes JSON."""

LabelSelector = Annotated[
    dict[str, Any],
    WithJsonSchema(
        {
            "type": "object",
            "x-kubernetes-map-type": "atomic",
            "x-kubernetes-preserve-unknown-fields": True,
        }
    ),
]
"""A metav1 ``LabelSelector`` (``{matchLabels?, matchExpressions?}``) as plain Kubernetes JSON."""

OpaqueObject = Annotated[
    dict[str, Any],
    WithJsonSchema({"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
]
"""Any JSON object passed through verbatim (e.g. a media stream's ``video`` description)."""
