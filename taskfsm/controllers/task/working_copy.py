"""What one Task reconcile works on: the Task as read, the one patch it collects, and the world
its current pass read.

Effects change the working copy only (:class:`WorkingCopy`): metadata (finalizer, owner reference,
labels) and status. The metadata part is written (:meth:`taskfsm.controllers.task.store.
TaskStore.write_metadata`) before any effect that creates or deletes another object (so the
Task's finalizer is durable before its Job exists) and otherwise by the write step; the status
part only by the write step, once (:mod:`taskfsm.controllers.task.write`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from taskfsm.controllers.clusters.cluster import MpeCluster
    from taskfsm.controllers.task.inputs import JobInputs


@dataclass
class PassReads:
    """What one pass read of the Task's world (:mod:`taskfsm.controllers.task.read`): the
    objects the effects build from, and the facts the observation is condensed from.

    `job` is the Job as this reconcile knows it: an effect that changes it (a delete that
    leaves it terminating) puts the version the API server answered here.
    """

    task: dict[str, Any]
    job_name: str
    """The Task's Job's deterministic name (`taskfsm.manifests.jobs.job_name`)."""
    workflow: dict[str, Any] | None = None
    mpe_ref: dict[str, Any] | None = None
    """The Task's own `status.mediaProcessingEntityRef`, or the one selection finds again for
    a deleting Task whose status names none (`mpe_unrecorded`)."""
    mpe_unrecorded: bool = False
    mpe: dict[str, Any] | None = None
    """The MediaProcessingEntity object `mpe_ref` names (None: none, or not an MPE kind)."""
    client_built: bool = False
    """A client of the cluster the Job is in exists (whether or not that cluster answered this
    pass's read of the Job)."""
    cluster: MpeCluster | None = None
    """That client, once its cluster answered this pass's read of the Job (None: no client, or
    the read failed: `job_unreadable`)."""
    client_pending: bool = False
    mpe_released: bool = False
    """The MPE is being deleted and this process let go of it (its deletion is done)."""
    mpe_problem: str = ""
    mpe_never_reached: bool = False
    job: dict[str, Any] | None = None
    job_unreadable: str = ""
    job_name_taken: bool = False
    """An object under the Job's name that is not the Task's (`job` is then None)."""
    job_refused: bool = False
    pods_refused: str = ""
    pods_refused_left: float = 0.0
    job_was_seen: bool = False
    cleanup_wait_left: float = 0.0
    job_unmakeable: str = ""
    job_inputs: JobInputs | None = None
    """What the Job is made from (read for a JobPending Task whose MPE is ready)."""
    job_inputs_problem: str = ""
    helper_data_too_large: str = ""
    job_beyond_limits: str = ""
    job_pending_left: float = float("inf")


@dataclass
class WorkingCopy:
    """One reconcile's working copy of the Task and what its passes read and made."""

    original: dict[str, Any]
    task: dict[str, Any]
    now: datetime
    reads: PassReads | None = None
    """What the current pass read (set before every pass)."""
    made_job: dict[str, Any] | None = None
    """The Job this reconcile created: its next pass reads it back without a GET."""
    metadata_dirty: bool = False
    """Metadata changed in the working copy and not written yet."""

    @classmethod
    def of(cls, task: dict[str, Any], now: datetime) -> WorkingCopy:
        return cls(original=copy.deepcopy(task), task=task, now=now)

    @property
    def meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = self.task.setdefault("metadata", {})
        return meta

    @property
    def status(self) -> dict[str, Any]:
        status = self.task.get("status")
        if status is None:
            status = self.task["status"] = {}
        return status

    @property
    def key(self) -> str:
        return f"{self.meta['namespace']}/{self.meta['name']}"

    @property
    def current_reads(self) -> PassReads:
        """The current pass's world (set by the reconcile before each pass)."""
        assert self.reads is not None
        return self.reads
