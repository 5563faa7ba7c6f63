"""Finalizer edits as JSON patches that test only what they rely on.

A merge patch replaces ``metadata.finalizers`` wholesale, so it needs the object's resourceVersion
to be safe, and then conflicts with every unrelated write (a Job's status changes many times
while it runs). A JSON patch instead tests exactly what the edit relies on: that the object is
still the one we read (its UID) and that our finalizer still sits at the position we remove.
Other controllers' finalizers (the garbage collector's ``foregroundDeletion``, for one) may come
and go meanwhile; when they move ours, the test fails (422), and :func:`remove` re-reads the
object and tries again, quietly: that is a normal race, not an error.
"""

from __future__ import annotations

from typing import Any

from taskfsm.kube.errors import Invalid, NotFound
from taskfsm.kube.rest import JSON_PATCH, Resource, Rest

ATTEMPTS = 4
"""Re-reads :func:`remove` allows when the finalizer list keeps moving under it."""


def removal(obj: dict[str, Any], finalizer: str) -> list[dict[str, Any]] | None:
    """JSON patch removing ``finalizer`` from ``obj``; None when it is not there.

    Tests the object's UID (when known) and our finalizer at its index, nothing else.
    """
    meta = obj.get("metadata") or {}
    finalizers = meta.get("finalizers") or []
    if finalizer not in finalizers:
        return None
    index = finalizers.index(finalizer)
    patch: list[dict[str, Any]] = []
    if meta.get("uid"):
        patch.append({"op": "test", "path": "/metadata/uid", "value": meta["uid"]})
    patch += [
        {"op": "test", "path": f"/metadata/finalizers/{index}", "value": finalizer},
        {"op": "remove", "path": f"/metadata/finalizers/{index}"},
    ]
    return patch


def addition(obj: dict[str, Any], finalizer: str) -> list[dict[str, Any]] | None:
    """JSON patch appending ``finalizer`` to ``obj``; None when it is already there.

    Appending is safe whatever else the list holds; the test of the list as read only keeps
    two writers from both appending ours.
    """
    finalizers = (obj.get("metadata") or {}).get("finalizers")
    if finalizers and finalizer in finalizers:
        return None
    if not finalizers:
        return [
            {"op": "test", "path": "/metadata/uid", "value": obj["metadata"]["uid"]},
            {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]},
        ]
    return [
        {"op": "test", "path": "/metadata/finalizers", "value": finalizers},
        {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer},
    ]


def remove(rest: Rest, res: Resource, obj: dict[str, Any], finalizer: str) -> dict[str, Any] | None:
    """Remove ``finalizer`` from ``obj`` on the API server; re-read and retry when it moved.

    Returns the updated object; None when the object is gone, was replaced by another of the
    same name (another UID: never touched), or no longer carries the finalizer.

    Raises:
        KubeError: the API failed, or the list kept moving for :data:`ATTEMPTS` tries.
    """
    meta = obj.get("metadata") or {}
    namespace, name, uid = meta.get("namespace"), meta["name"], meta.get("uid")
    for attempt in range(ATTEMPTS):
        patch = removal(obj, finalizer)
        if patch is None:
            return None
        try:
            return rest.patch(res, namespace, name, patch, content_type=JSON_PATCH)
        except NotFound:
            return None
        except Invalid:
            if attempt == ATTEMPTS - 1:
                raise
        try:
            obj = rest.get(res, namespace, name)
        except NotFound:
            return None
        if uid and (obj.get("metadata") or {}).get("uid") != uid:
            return None
    return None
