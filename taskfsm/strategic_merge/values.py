"""Small helpers on JSON values shared by the patch validator and the merge.

Why a module of its own: both sides must agree on the directive names, on how JSON values are
named in error messages, and on when two merge-key values are "the same" (Kubernetes compares
decoded JSON values with integers kept apart from floats, so ``80`` matches ``80`` but neither
``80.0`` nor ``true`` does, unlike Python's ``==``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

PATCH = "$patch"
RETAIN_KEYS = "$retainKeys"
SET_ORDER = "$setElementOrder/"
DELETE_FROM = "$deleteFromPrimitiveList/"
DIRECTIVE_PREFIX = "$"

Ident = tuple[str, Any]
"""A hashable stand-in for a JSON value under Kubernetes' equality (see :func:`ident`)."""
KeyFn = Callable[[Any], Ident]
"""How list items are identified: by a merge key's value, or by the whole plain value."""


def json_kind(value: Any) -> str:
    """Name a JSON value's type for messages: ``an object``, ``a list``, ``a string``, ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__} (not a JSON value)"


def is_scalar(value: Any) -> bool:
    """True for JSON strings, numbers, booleans and null."""
    return value is None or isinstance(value, (str, bool, int, float))


def ident(value: Any) -> Ident:
    """A hashable identity with Kubernetes' equality: numbers by value, booleans apart from 1/0."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("float", value)
    if isinstance(value, str):
        return ("str", value)
    if value is None:
        return ("null", None)
    # Objects/lists never match scalars; comparing them by content keeps the merge total.
    return ("json", json.dumps(value, sort_keys=True))


def first_positions(items: list[Any], key: KeyFn) -> dict[Ident, int]:
    """Map ``key(item)`` to the index of its first occurrence (later duplicates are ignored)."""
    positions: dict[Ident, int] = {}
    for index, item in enumerate(items):
        positions.setdefault(key(item), index)
    return positions
