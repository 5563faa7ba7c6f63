"""The writes a reconcile computes from what it read, shared by the Task, Workflow and MPE
controllers: the one status write, and the delete of an object only in the version read.

A merge patch of ``/status`` carrying, as a precondition, the resourceVersion the pass read:
a status computed from a view that is no longer current (a lagging cache, a paused process,
another writer) fails with 409 instead of landing (docs/operations.md, "Retries and backoff").
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from taskfsm.kube.errors import Conflict, NotFound
from taskfsm.kube.rest import Resource, Rest


def patch_status(
    rest: Rest,
    res: Resource,
    meta: dict[str, Any],
    status: dict[str, Any],
    remember: Callable[[dict[str, Any]], None],
    *,
    reread_on_conflict: bool = True,
) -> dict[str, Any] | None:
    """Patch ``status`` into the object ``meta`` names, at ``meta``'s resourceVersion.

    Returns the updated object (also handed to ``remember``), or None when the object is gone.
    On a 409 the current version goes to ``remember`` (the retry starts from it, not from a
    cache that may lag; not with ``reread_on_conflict`` False, for kinds the controller may only
    list and watch: their informer brings it) and the ``Conflict`` is raised.
    """
    body = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": status}
    try:
        updated = rest.patch(res, meta.get("namespace"), meta["name"], body, subresource="status")
    except NotFound:
        return None
    except Conflict:
        if not reread_on_conflict:
            raise
        with contextlib.suppress(NotFound):
            remember(rest.get(res, meta.get("namespace"), meta["name"]))
        raise
    remember(updated)
    return updated


def delete_as_read(rest: Rest, res: Resource, meta: dict[str, Any]) -> bool:
    """Delete the object ``meta`` describes, only in that version (UID and resourceVersion
    preconditions): whether the delete landed or it was gone already. False when it changed
    since (a stale view decides nothing; the change's watch event brings a new look)."""
    try:
        rest.delete(
            res,
            meta.get("namespace"),
            meta["name"],
            uid=meta["uid"],
            resource_version=meta["resourceVersion"],
        )
    except NotFound:
        return True
    except Conflict:
        return False
    return True
