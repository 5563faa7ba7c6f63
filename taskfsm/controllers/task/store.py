"""The Tasks of the main cluster as the Task controller reads and writes them.

Reads go through the informer cache with read-your-writes (`taskfsm.kube.cache`): a pass never
starts from a status older than the one this process last wrote (F1), and a Task seen deleted
needs no GET. Every write carries a precondition (the resourceVersion read, or the UID) and is
remembered, so the watch event of the version this process wrote wakes nobody (the reconcile
that wrote it knew it).
"""

from __future__ import annotations

import copy
from typing import Any

from taskfsm.api import constants as c
from taskfsm.controllers.task.working_copy import WorkingCopy
from taskfsm.controllers.writes import delete_as_read, patch_metadata, patch_status
from taskfsm.kube import finalizers
from taskfsm.kube.cache import Caches
from taskfsm.kube.errors import Conflict, NotFound
from taskfsm.kube.resources import TASKS, WORKFLOWS
from taskfsm.kube.rest import SECRETS, Rest
from taskfsm.kube.transforms import default_transform


class TaskStore:
    """The main cluster's Tasks (and what a Task reads there: its Workflow, Secrets)."""

    def __init__(self, rest: Rest, caches: Caches) -> None:
        self.rest = rest
        self.caches = caches

    # -- read-your-writes ------------------------------------------------------------------------

    def remember(self, task: dict[str, Any]) -> None:
        meta = task["metadata"]
        # Kept as the cache would keep it (no managedFields, strings shared): what a reader gets
        # is the same either way, and a copy may live until the watch delivers that version.
        self.caches.written.wrote(
            ("main", TASKS.plural, meta["namespace"], meta["name"]), default_transform(task)
        )

    def forget(self, task: dict[str, Any]) -> None:
        """The Task is deleted (our write removed its last finalizer)."""
        meta = task["metadata"]
        self.caches.written.gone(("main", TASKS.plural, meta["namespace"], meta["name"]), task)

    # -- reads -----------------------------------------------------------------------------------

    def read(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Task as this process knows it best (a copy to work on), None when it is gone."""
        key = ("main", TASKS.plural, namespace, name)
        cached = self.caches.informers[c.KIND_TASK].get(namespace, name)
        picked = self.caches.written.pick(key, cached)
        if picked is not None:
            return copy.deepcopy(picked)
        if self.caches.written.deleted(key):
            return None  # seen deleted, nothing since: a new Task of that name is an event away
        try:  # not in the cache: ask the source (kept as the cache keeps it, cut if too deep)
            return default_transform(self.rest.get(TASKS, namespace, name))
        except NotFound:
            return None

    def workflow(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Task's Workflow (cache, else the source: a just-created Workflow must not fail
        its Tasks)."""
        cached = self.caches.get(c.KIND_WORKFLOW, namespace, name)
        if cached is not None:
            return cached
        try:
            return self.rest.get(WORKFLOWS, namespace, name)
        except NotFound:
            return None

    def secret(self, namespace: str, name: str) -> dict[str, Any]:
        """A Secret of the main cluster (a MediaLocation's credentials)."""
        return self.rest.get(SECRETS, namespace, name)

    # -- writes ----------------------------------------------------------------------------------

    def patch_metadata(self, meta: dict[str, Any]) -> dict[str, Any]:
        """One merge patch of the metadata the controller writes, at the resourceVersion as read
        (:func:`taskfsm.controllers.writes.patch_metadata`). Returns the new metadata (as the
        cache keeps it)."""
        updated = patch_metadata(self.rest, TASKS, meta, self.remember)
        # managedFields mirror the spec and may nest as deep: kept as the cache keeps them.
        return copy.deepcopy(default_transform(updated)["metadata"])

    def write_metadata(self, work: WorkingCopy) -> None:
        """Write ``work``'s collected metadata changes in one merge patch, if any (keeping the
        working status: the patch reply carries the stored one)."""
        if not work.metadata_dirty:
            return
        work.task["metadata"] = self.patch_metadata(work.meta)
        work.metadata_dirty = False

    def patch_status(self, meta: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any] | None:
        """Patch ``/status`` at ``meta``'s resourceVersion (see
        :func:`taskfsm.controllers.writes.patch_status`); None when the Task is gone."""
        return patch_status(self.rest, TASKS, meta, patch, self.remember)

    def delete(self, meta: dict[str, Any]) -> None:
        """Delete the Task (UID precondition); one already gone is done.

        Raises:
            RuntimeError: another Task of that name exists now (the precondition failed).
        """
        try:
            self.rest.delete(TASKS, meta["namespace"], meta["name"], uid=meta["uid"])
        except NotFound:
            return
        except Conflict as exc:
            raise RuntimeError(f"failed to delete Task: {exc}") from None

    def delete_as_read(self, meta: dict[str, Any]) -> bool:
        """Delete the Task ``meta`` describes, only in that version (see
        :func:`taskfsm.controllers.writes.delete_as_read`)."""
        return delete_as_read(self.rest, TASKS, meta)

    def remove_finalizer(self, task: dict[str, Any]) -> None:
        """Remove the task-protection finalizer (a moved finalizer list is re-read)."""
        updated = finalizers.remove(self.rest, TASKS, task, c.FINALIZER_TASK_PROTECTION)
        if updated is None:
            return
        gone = updated["metadata"].get("deletionTimestamp") and not updated["metadata"].get(
            "finalizers"
        )
        if gone:
            self.forget(updated)  # deleted by this write: nothing left to remember
        else:
            self.remember(updated)
