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
"""

from __future__ import annotations

import sys
from typing import Any

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

SHARED_STRING_MAX = 64
"""Longest string value shared through :func:`sys.intern` (names, uids, timestamps, reasons);
longer values (messages, payloads) are rarely repeated and stay as they are."""


def share(value: Any) -> Any:
    """A copy of a JSON value whose dict keys and short strings are interned (an object stays
    an object, a list a list)."""
    if isinstance(value, dict):
        return {sys.intern(k): share(v) for k, v in value.items()}
    if isinstance(value, list):
        return [share(v) for v in value]
    if isinstance(value, str) and len(value) <= SHARED_STRING_MAX:
        return sys.intern(value)
    return value


def default_transform(obj: dict[str, Any]) -> dict[str, Any]:
    """Every cached kind: without managedFields and last-applied-configuration, strings shared."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):  # shallow copies: the original is not ours to change
        meta = {k: v for k, v in meta.items() if k != "managedFields"}
        annotations = meta.get("annotations")
        if isinstance(annotations, dict) and LAST_APPLIED in annotations:
            meta["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
        obj = {**obj, "metadata": meta}
    shared: dict[str, Any] = share(obj)
    return shared


def job_transform(job: dict[str, Any]) -> dict[str, Any]:
    """A cached Job: apiVersion, kind, metadata and status (no ``spec``), as
    :func:`default_transform`."""
    return default_transform({k: v for k, v in job.items() if k != "spec"})
