"""Finalizer edits as JSON patches that do not depend on resourceVersion.

A merge patch replaces ``metadata.finalizers`` wholesale, so it needs the object's
resourceVersion to be safe, and then conflicts with every unrelated write (a Job's status changes
many times while it runs). A JSON patch with a ``test`` of the finalizer list as we saw it only
fails when the *finalizers* changed concurrently, which is rare and worth a retry.
"""

from __future__ import annotations

from typing import Any


def removal(obj: dict[str, Any], finalizer: str) -> list[dict[str, Any]] | None:
    """JSON patch removing ``finalizer`` from ``obj``; None when it is not there."""
    finalizers = (obj.get("metadata") or {}).get("finalizers") or []
    if finalizer not in finalizers:
        return None
    index = finalizers.index(finalizer)
    return [
        {"op": "test", "path": "/metadata/finalizers", "value": finalizers},
        {"op": "remove", "path": f"/metadata/finalizers/{index}"},
    ]


def addition(obj: dict[str, Any], finalizer: str) -> list[dict[str, Any]] | None:
    """JSON patch appending ``finalizer`` to ``obj``; None when it is already there."""
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
