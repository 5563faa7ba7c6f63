"""The writes a reconcile computes from what it read, one path for the Task, Workflow and MPE
controllers: the metadata patch, the status patch, the delete of an object only in the version
read, and what a write that failed tells the worker.

Every patch is a merge patch carrying, as a precondition, the resourceVersion the pass read: a
write computed from a view that is no longer current (a lagging cache, a paused process, another
writer) fails with 409 instead of landing (docs/operations.md, "Retries and backoff"), and the
retry starts from a fresh read, without a Warning (:func:`write_failed`).

A 409 whose current version already holds everything the patch says is the patch itself, landed
once already: a transport may send a request twice (the first landed, its answer was lost), and
the second finds the version moved by the first (docs/architecture.md, "Every write may be sent
twice"). Such a write counts as landed; nothing new is written, so no stale view lands.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from machines.engine import WARNING
from taskfsm.controllers.result import Result, is_conflict, is_transient, retry_after_of
from taskfsm.kube.errors import Conflict, KubeError, NotFound
from taskfsm.kube.events import EventRecorder
from taskfsm.kube.rest import Resource, Rest

METADATA_FIELDS = ("finalizers", "ownerReferences", "labels", "annotations")
"""The metadata a controller writes (lists are replaced wholesale by a merge patch, which is why
the resourceVersion goes with them)."""


def patch_metadata(
    rest: Rest,
    res: Resource,
    meta: dict[str, Any],
    remember: Callable[[dict[str, Any]], None],
    *,
    reread_on_conflict: bool = True,
) -> dict[str, Any]:
    """One merge patch of ``meta``'s finalizers, owner references, labels and annotations, at
    ``meta``'s resourceVersion; returns the updated object (also handed to ``remember``).

    Raises:
        KubeError: the write failed; on a 409 the current version is remembered first (not with
            ``reread_on_conflict`` False: see :func:`patch_status`), so the retry starts from it
            instead of from a cache that may still lag behind. A 409 whose current version
            already holds the fields is no failure (landed already: that version is returned).
    """
    fields = {name: meta.get(name) or None for name in METADATA_FIELDS}
    return _patch_as_read(rest, res, meta, "metadata", fields, remember, reread_on_conflict)


def _patch_as_read(
    rest: Rest,
    res: Resource,
    meta: dict[str, Any],
    part: str,
    content: dict[str, Any],
    remember: Callable[[dict[str, Any]], None],
    reread_on_conflict: bool,
) -> dict[str, Any]:
    """Merge-patch ``content`` into ``part`` (``metadata`` or ``status``, the subresource) at
    ``meta``'s resourceVersion; a 409 whose current version already holds ``content`` is the
    patch landed once already (that version is returned), any other 409 is raised."""
    body: dict[str, Any] = {"metadata": {"resourceVersion": meta.get("resourceVersion")}}
    body[part] = {**body.get(part, {}), **content}
    subresource = "status" if part == "status" else None
    try:
        updated = rest.patch(
            res, meta.get("namespace"), meta["name"], body, subresource=subresource
        )
    except Conflict:
        current = _current(rest, res, meta, remember) if reread_on_conflict else None
        if current is not None and holds(current.get(part) or {}, content):
            return current  # landed already (a resent request)
        raise
    remember(updated)
    return updated


def holds(current: dict[str, Any], patch: dict[str, Any]) -> bool:
    """Whether applying the merge patch ``patch`` to ``current`` would change nothing."""
    for key, value in patch.items():
        if value is None:
            if current.get(key) is not None:
                return False
        elif isinstance(value, dict):
            inner = current.get(key)
            if not isinstance(inner, dict) or not holds(inner, value):
                return False
        elif current.get(key) != value:
            return False
    return True


def _current(
    rest: Rest, res: Resource, meta: dict[str, Any], remember: Callable[[dict[str, Any]], None]
) -> dict[str, Any] | None:
    """The object's current version after a 409 (remembered: the retry starts from it, not from
    a cache that may lag); None when it is gone."""
    try:
        current = rest.get(res, meta.get("namespace"), meta["name"])
    except NotFound:
        return None
    remember(current)
    return current


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
    list and watch: their informer brings it) and the ``Conflict`` is raised, unless the current
    version already holds ``status`` (landed already: that version is returned).
    """
    try:
        return _patch_as_read(rest, res, meta, "status", status, remember, reread_on_conflict)
    except NotFound:
        return None


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


def write_failed(
    exc: KubeError, what: str, *, events: EventRecorder | None = None, obj: Any = None
) -> Result:
    """What a write that did not land tells the worker, for every controller: a conflict is a
    normal race, retried from a fresh read without a word; any other failure is an error retried
    with backoff (short for failures of the API, never sooner than its ``Retry-After``), said in
    a Warning ``ReconcileError`` on ``obj`` when ``events`` are given."""
    if is_conflict(exc):
        return Result(error=f"conflict: {exc}", transient=True)
    failure = f"{what}: {exc}"
    if events is not None and obj is not None:
        events.record(obj, WARNING, "ReconcileError", failure)
    return Result(error=failure, transient=is_transient(exc), retry_after=retry_after_of(exc))
