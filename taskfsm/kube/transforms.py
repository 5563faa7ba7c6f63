"""Cache transforms: what an informer keeps of each object it receives (client-go's
``SetTransform``, controller-runtime's ``cache.Options.DefaultTransform``).

The controller's memory is mostly its caches, one entry per Task and per Job (issue 8 goal:
≤ 150 MB RSS with 5,000 Tasks cached; ``docs/benchmarks.md``). A JSON document parsed by Python
costs about five times its size, mostly in per-object copies of the same strings (every key,
namespace, label, kind, condition type and reason). So a transform:

* drops what no reader uses: ``metadata.managedFields`` (~40 % of an object) and kubectl's
  ``last-applied-configuration`` annotation (a second copy of the whole spec);
* shares repeated strings with :func:`sys.intern` (keys, and values up to
  :data:`SHARED_STRING_MAX` characters), so each distinct string is stored once per process;
* for Jobs (:func:`job_transform`), keeps only ``metadata`` and ``status``: the controller reads a
  Job's identity, labels, finalizers, deletion timestamp and conditions, never its pod template
  (``spec.template`` is over half of a Job).

Transforms return a new object and never change the one they are given (it may be shared with
the informer's event handlers). A transformed object reads exactly like the original for every
field kept.

The transform is also where an object is held to :data:`taskfsm.kube.wire.MAX_DEPTH` levels of
nesting, since it walks every object anyway: one nested deeper (free-form fields accept 10,000
levels) is cut to its identity -- ``apiVersion``, ``kind``, ``metadata`` without
``managedFields``, and ``status`` when it is within the bound -- with
:data:`taskfsm.kube.wire.UNUSABLE` saying why. Everything that reads objects afterwards
(``copy.deepcopy``, the strategic merge patch, pydantic) recurses, and Python stops at about 1,000
frames; cut, the object costs what any other does, and whoever would use its content refuses it
with that reason (docs/security.md, "No object stops the controller").
"""

from __future__ import annotations

import sys
from typing import Any

from taskfsm.kube.wire import MAX_DEPTH, UNUSABLE

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

SHARED_STRING_MAX = 64
"""Longest string value shared through :func:`sys.intern` (names, uids, timestamps, reasons);
longer values (messages, payloads) are rarely repeated and stay as they are."""


class TooDeep(Exception):
    """A value nests deeper than the depth :func:`share` was allowed."""


def share(value: Any, depth: int = MAX_DEPTH) -> Any:
    """A copy of a JSON value whose dict keys and short strings are interned (an object stays
    an object, a list a list). Raises :class:`TooDeep` when containers nest more than ``depth``
    levels below ``value`` (so the recursion never goes deeper than that)."""
    if isinstance(value, dict):
        if depth < 0:
            raise TooDeep
        return {sys.intern(k): share(v, depth - 1) for k, v in value.items()}
    if isinstance(value, list):
        if depth < 0:
            raise TooDeep
        return [share(v, depth - 1) for v in value]
    if isinstance(value, str) and len(value) <= SHARED_STRING_MAX:
        return sys.intern(value)
    return value


IDENTITY = frozenset(
    {
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "finalizers",
        "labels",
        "ownerReferences",
    }
)
"""What a cut object's metadata keeps should even its metadata be over the bound."""


def default_transform(obj: dict[str, Any]) -> dict[str, Any]:
    """Every cached kind: without managedFields and last-applied-configuration, strings shared;
    an object nested deeper than :data:`~taskfsm.kube.wire.MAX_DEPTH` cut to its identity."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):  # shallow copies: the original is not ours to change
        meta = {k: v for k, v in meta.items() if k != "managedFields"}
        annotations = meta.get("annotations")
        if isinstance(annotations, dict) and LAST_APPLIED in annotations:
            meta["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
        obj = {**obj, "metadata": meta}
    try:
        shared: dict[str, Any] = share(obj)
    except TooDeep:
        return _cut(obj)
    return shared


def _identity(meta: dict[str, Any]) -> dict[str, Any]:
    """What of ``meta`` a cut object keeps: :data:`IDENTITY`, or its plain strings only when
    even those nest too deep (only a hostile API server sends such metadata)."""
    try:
        shared: dict[str, Any] = share({k: v for k, v in meta.items() if k in IDENTITY})
    except TooDeep:
        return {k: v for k, v in meta.items() if k in IDENTITY and isinstance(v, str)}
    return shared


def _cut(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` (``managedFields`` already gone) reduced to its identity, marked unusable."""
    kept: dict[str, Any] = {}
    for key in ("apiVersion", "kind", "metadata", "status"):
        if key not in obj:
            continue
        value = obj[key]
        if key == "metadata" and isinstance(value, dict):
            try:
                kept[key] = share(value)
            except TooDeep:
                kept[key] = _identity(value)
            continue
        try:
            kept[key] = share(value)
        except TooDeep:
            continue  # a status nested that deep was not written by a controller
    kept[UNUSABLE] = f"it is nested deeper than {MAX_DEPTH} levels, which taskfsm does not process"
    return kept


def job_transform(job: dict[str, Any]) -> dict[str, Any]:
    """A cached Job: apiVersion, kind, metadata and status (no ``spec``), as
    :func:`default_transform`."""
    return default_transform({k: v for k, v in job.items() if k != "spec"})
