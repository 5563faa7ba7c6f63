"""Decoding what an API server sends, whatever its nesting (docs/security.md, "No object stops
the controller").

An API server accepts objects nested up to 10,000 levels deep in their free-form fields (a Task's
``templatePatches``, a Function's ``template``, a selector), and a remote MediaProcessingEntity's
API server is whatever its owner runs. ``orjson`` refuses nesting deeper than 1,024 levels, so one
such object made every list of its kind fail: no informer could sync, no Task anywhere was
reconciled, and a restarted controller gave up at its cache-sync timeout.

:func:`loads` decodes with ``orjson`` and, for a document nested deeper than it allows, again with
``ijson`` (an iterative parser from PyPI, C backend), which never recurses; containers nested
deeper than an object's bound are dropped on the way. Holding each object to :data:`MAX_DEPTH`
is the cache transform's job (:mod:`taskfsm.kube.transforms`), which walks every object anyway:
an object over the bound keeps its identity, and :data:`UNUSABLE` says why (:func:`problem`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import ijson
import orjson

MAX_DEPTH: Final = 64
"""Deepest nesting below an object's root that is processed (a Job template nests about 15)."""

UNUSABLE: Final = "$taskfsm-unusable"
"""Key set on an object that was cut to its identity, saying why (never a Kubernetes field)."""

_WRAPPER_DEPTH: Final = 3
"""Levels a list (``items``) or a watch event (``object``) adds above its objects."""


def loads(data: bytes | str) -> Any:
    """The JSON document ``data``; nesting deeper than ``orjson`` allows is decoded without
    recursion and cut below an object's bound (the transform then cuts the object). Raises
    ``ValueError`` when ``data`` is not JSON."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if "depth" not in str(exc) and "recursion" not in str(exc):
            raise
    return _iterative_loads(data if isinstance(data, bytes) else data.encode())


def problem(obj: Mapping[str, Any] | None) -> str:
    """Why ``obj`` was cut to its identity ("" when it was not): for status messages and
    Events (:func:`taskfsm.kube.transforms.default_transform` cuts)."""
    if not obj:
        return ""
    why = obj.get(UNUSABLE)
    return str(why) if why else ""


def _iterative_loads(data: bytes) -> Any:
    """Decode without recursion; containers nested deeper than an object's bound plus its
    wrapper are replaced by None on the way (the transform then cuts the object)."""
    limit = MAX_DEPTH + _WRAPPER_DEPTH + 1
    root: list[Any] = []
    stack: list[Any] = [root]  # containers being filled; keys pending for maps
    keys: list[Any] = [None]
    skipping = 0  # depth inside a subtree that is being dropped
    for event, value in ijson.basic_parse(data, use_float=True):
        if skipping:
            if event in ("start_map", "start_array"):
                skipping += 1
            elif event in ("end_map", "end_array"):
                skipping -= 1
                if not skipping:
                    _add(stack, keys, None)
            continue
        if event in ("start_map", "start_array"):
            if len(stack) > limit:
                skipping = 1
                continue
            container: Any = {} if event == "start_map" else []
            _add(stack, keys, container)
            stack.append(container)
            keys.append(None)
        elif event in ("end_map", "end_array"):
            stack.pop()
            keys.pop()
        elif event == "map_key":
            keys[-1] = value
        else:
            _add(stack, keys, value)
    return root[0] if root else None


def _add(stack: list[Any], keys: list[Any], value: Any) -> None:
    parent = stack[-1]
    if isinstance(parent, dict):
        parent[keys[-1]] = value
    else:
        parent.append(value)
