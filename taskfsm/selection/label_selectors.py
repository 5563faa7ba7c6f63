"""Kubernetes label selectors (``metav1.LabelSelector``) evaluated locally against cached objects.

Selection of MediaProcessingEntities and Functions (docs/behaviour.md §3.6) lists from the
informer caches, so the selector semantics of the API server are reproduced here: every
``matchLabels`` pair and every ``matchExpressions`` requirement must hold (``In``, ``NotIn``,
``Exists``, ``DoesNotExist``); an empty selector matches everything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


class SelectorError(ValueError):
    """The selector is malformed; the message says where, in plain words."""


def validate(selector: Mapping[str, Any], *, field: str) -> None:
    """Raise :class:`SelectorError` unless ``selector`` is a well-formed LabelSelector."""
    if not isinstance(selector, Mapping):
        raise SelectorError(f"{field}: must be an object with matchLabels/matchExpressions")
    match_labels = selector.get("matchLabels") or {}
    if not isinstance(match_labels, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in match_labels.items()
    ):
        raise SelectorError(f"{field}.matchLabels: must map label keys to string values")
    for i, req in enumerate(selector.get("matchExpressions") or []):
        where = f"{field}.matchExpressions[{i}]"
        if (
            not isinstance(req, Mapping)
            or not isinstance(req.get("key"), str)
            or not req.get("key")
        ):
            raise SelectorError(f"{where}.key: required")
        op, values = req.get("operator"), req.get("values") or []
        if op not in OPERATORS:
            raise SelectorError(
                f"{where}.operator: {op!r} is not a valid selector operator "
                f"({', '.join(OPERATORS)})"
            )
        if op in ("In", "NotIn") and not values:
            raise SelectorError(f"{where}.values: must be non-empty for operator {op}")
        if op in ("Exists", "DoesNotExist") and values:
            raise SelectorError(f"{where}.values: must be empty for operator {op}")


def matches(selector: Mapping[str, Any], labels: Mapping[str, str] | None) -> bool:
    """True when ``labels`` satisfy ``selector`` (assumed valid, see :func:`validate`)."""
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for req in selector.get("matchExpressions") or []:
        key, op, values = req["key"], req["operator"], req.get("values") or []
        present = key in labels
        if op == "In" and (not present or labels[key] not in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True
