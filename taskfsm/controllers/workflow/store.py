"""The Workflows of the main cluster as the Workflow controller reads and writes them, and the
working copy of one reconcile.

Reads go through the informer cache with read-your-writes; every write carries a precondition
(:mod:`taskfsm.controllers.writes`) and is remembered, so the watch event of the version this
process wrote wakes nobody.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from taskfsm.api import constants as c
from taskfsm.controllers.writes import delete_as_read, patch_metadata, patch_status
from taskfsm.kube import finalizers
from taskfsm.kube.cache import Caches
from taskfsm.kube.errors import NotFound
from taskfsm.kube.resources import WORKFLOWS
from taskfsm.kube.rest import Rest


@dataclass
class WorkflowWork:
    """One reconcile's working copy of the Workflow (metadata and status changes collect here)."""

    original: dict[str, Any]
    workflow: dict[str, Any]
    now: datetime
    metadata_dirty: bool = False
    """Metadata changed in the working copy and not written yet."""

    @classmethod
    def of(cls, workflow: dict[str, Any], now: datetime) -> WorkflowWork:
        return cls(original=copy.deepcopy(workflow), workflow=workflow, now=now)

    @property
    def meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = self.workflow.setdefault("metadata", {})
        return meta

    @property
    def status(self) -> dict[str, Any]:
        status = self.workflow.get("status")
        if status is None:
            status = self.workflow["status"] = {}
        return status


class WorkflowStore:
    """The main cluster's Workflows."""

    def __init__(self, rest: Rest, caches: Caches) -> None:
        self.rest = rest
        self.caches = caches

    def remember(self, workflow: dict[str, Any]) -> None:
        meta = workflow["metadata"]
        self.caches.written.wrote(
            ("main", WORKFLOWS.plural, meta["namespace"], meta["name"]), workflow
        )

    def read(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Workflow as this process knows it best (a copy to work on), None when gone."""
        picked = self.caches.get(c.KIND_WORKFLOW, namespace, name)
        if picked is not None:
            return copy.deepcopy(picked)
        try:
            return self.rest.get(WORKFLOWS, namespace, name)  # not in the cache: ask the source
        except NotFound:
            return None

    def write_metadata(self, work: WorkflowWork) -> None:
        """Write ``work``'s collected metadata changes in one merge patch at the resourceVersion
        read (:func:`taskfsm.controllers.writes.patch_metadata`), if any; the working status
        stays (the reply carries the stored one)."""
        if not work.metadata_dirty:
            return
        updated = patch_metadata(self.rest, WORKFLOWS, work.meta, self.remember)
        work.workflow["metadata"] = copy.deepcopy(updated["metadata"])
        work.metadata_dirty = False

    def remove_finalizer(self, workflow: dict[str, Any]) -> dict[str, Any] | None:
        """Remove the workflow-protection finalizer; the new metadata, None when nothing
        changed (gone, replaced, or without it)."""
        updated = finalizers.remove(self.rest, WORKFLOWS, workflow, c.FINALIZER_WORKFLOW_PROTECTION)
        if updated is None:
            return None
        self.remember(updated)
        metadata: dict[str, Any] = copy.deepcopy(updated["metadata"])
        return metadata

    def delete_as_read(self, meta: dict[str, Any]) -> bool:
        """Delete the Workflow ``meta`` describes, only in that version (see
        :func:`taskfsm.controllers.writes.delete_as_read`)."""
        return delete_as_read(self.rest, WORKFLOWS, meta)

    def patch_status(self, meta: dict[str, Any], patch: dict[str, Any]) -> None:
        """Patch ``/status`` at ``meta``'s resourceVersion (see
        :func:`taskfsm.controllers.writes.patch_status`)."""
        patch_status(self.rest, WORKFLOWS, meta, patch, self.remember)
