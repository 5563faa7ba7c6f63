"""The MediaProcessingEntity lifecycle's effects: the model the MPE chart's engine calls.

Guards come from ``machines.mpe.guards.MpeObservationGuards``; this class adds the effects, on
the MPE's ports (:class:`MpePorts`): the main cluster (its finalizer), the MPE client registry
(connect, keep, retire, forget; the reachability clock), the Tasks using it, and the orphan
collection. None calls back into the reconciler.

Spec: docs/behaviour.md §1.7 and §4.2.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from machines.mpe.guards import MpeObservationGuards
from machines.mpe.observation import MpeObservation
from taskfsm.api import constants as c
from taskfsm.controllers.clusters.cluster import MpeCluster, MpeError, MpeKey, ref_of_key
from taskfsm.controllers.clusters.registry import MpeRegistry
from taskfsm.controllers.writes import patch_metadata
from taskfsm.kube import finalizers
from taskfsm.kube.errors import KubeError, NotFound
from taskfsm.kube.resources import BY_KIND
from taskfsm.kube.rest import JSON_PATCH, Rest


class ShuttingDown(Exception):
    """The process is stopping while the MPE's cluster was being set up: nothing is reported
    (a failure then may be the stop's own; the next process, or leader, connects again)."""


@dataclass
class MpeReads:
    """What one pass of an MPE read (the reconciler's ``read``): the facts its observation is
    condensed from, and the earlier locations the effects may let go of."""

    key: MpeKey
    mpe: dict[str, Any] | None
    manages_status: bool = True
    tasks_using: int = 0
    """How many Tasks' ``status.mediaProcessingEntityRef`` names the MPE."""
    tasks_active: int = 0
    jobs_kept: int = 0
    """Finished Tasks whose Job is still in a cluster of the MPE (or cannot be searched yet)."""
    jobs_recorded: bool = False
    retired_locations: int = 0
    retired_unused: list[MpeCluster] = field(default_factory=list)
    """The earlier locations in which no Task using the MPE has its Job any more."""


@dataclass(frozen=True)
class MpePorts:
    """What the MPE chart's effects act on.

    Attributes:
        rest: the main cluster (the MPE's finalizer).
        registry: the MPE clients (set up, kept, retired, forgotten; the reachability clock).
        tasks_using: how many Tasks' ``status.mediaProcessingEntityRef`` names an MPE, and those
            of them not finished or still naming a Job (dicts, read one at a time).
        on_ready: called with the MPE key when it becomes usable (its Tasks are woken, its
            cluster searched for the children of gone Tasks).
        collect_orphans: deletes the children of gone Tasks in one of the MPE's clusters.
        remember: keeps an MPE this process wrote, for the next pass to read.
    """

    rest: Rest
    registry: MpeRegistry
    tasks_using: Callable[[MpeKey], tuple[int, Iterable[dict[str, Any]]]]
    on_ready: Callable[[MpeKey], None]
    collect_orphans: Callable[[MpeCluster], None]
    remember: Callable[[dict[str, Any]], None] = lambda _written: None


class MpeEffects(MpeObservationGuards):
    """``machines.mpe.model.MpeLifecycleModel`` for one reconcile of one MPE, on its ports."""

    def __init__(self, ports: MpePorts, key: MpeKey, mpe: dict[str, Any] | None) -> None:
        self.rest = ports.rest
        self.registry = ports.registry
        self.tasks_using = ports.tasks_using
        self.on_ready = ports.on_ready
        self.collect_orphans = ports.collect_orphans
        self.remember = ports.remember
        self.key = key
        self.reads: MpeReads | None = None
        """What the pass read (set by the reconciler's observe step, before the chart runs)."""
        self.mpe = mpe
        """The MPE as this reconcile knows it: a metadata write puts the version it answered
        here, so the status write that follows is made at that version."""

    def _mpe(self) -> dict[str, Any]:
        assert self.mpe is not None  # only a gone MPE has none, and its pass drops the client
        return self.mpe

    def add_mpe_finalizer(self, observation: MpeObservation) -> None:
        """The metadata write of every controller (:mod:`taskfsm.controllers.writes`): one merge
        patch at the resourceVersion read; a 409 ends the pass, quietly retried."""
        mpe = self._mpe()
        meta = mpe["metadata"]
        present = meta.get("finalizers") or []
        if c.FINALIZER_MPE_PROTECTION in present:
            return
        wanted = {**meta, "finalizers": [*present, c.FINALIZER_MPE_PROTECTION]}
        updated = patch_metadata(
            self.rest,
            BY_KIND[mpe["kind"]],
            wanted,
            self.remember,
            reread_on_conflict=False,  # MPEs are listed and watched, never read one by one
        )
        self.mpe = {**updated, "kind": mpe["kind"]}

    def remove_mpe_finalizer(self, observation: MpeObservation) -> None:
        """The MPE's last write: a JSON patch that removes our finalizer only if the list is still
        as read (:func:`taskfsm.kube.finalizers.removal`)."""
        mpe = self._mpe()
        remove = finalizers.removal(mpe, c.FINALIZER_MPE_PROTECTION)
        if remove is None:
            return
        meta = mpe["metadata"]
        try:
            self.rest.patch(
                BY_KIND[mpe["kind"]],
                meta.get("namespace"),
                meta["name"],
                remove,
                content_type=JSON_PATCH,
            )
        except NotFound:
            return

    def _sync(self, *, keep: bool) -> MpeCluster:
        try:
            cluster = self.registry.sync(self._mpe(), keep=keep)
        except MpeError:
            if self.registry.interrupted:
                raise ShuttingDown from None
            raise
        # MpeSettingUp propagates: the chart waits until the Job watch has listed.
        problem = self.registry.refusal(cluster)
        ref = ref_of_key(self.key)
        if problem is not None:
            self.registry.mark_unreachable(ref)
            raise problem
        self.registry.mark_reachable(ref)
        return cluster

    def connect(self, observation: MpeObservation) -> None:
        self._sync(keep=False)

    def connect_keeping_client(self, observation: MpeObservation) -> None:
        self._sync(keep=True)
        kept = self.registry.kept(self.key)
        if kept is not None:
            raise MpeError(
                f"{kept}; the client set up before is kept while Tasks use this "
                "MediaProcessingEntity",
                kept.reason,
            )

    def wake_tasks(self, observation: MpeObservation) -> None:
        self.on_ready(self.key)

    def release_retired_locations(self, observation: MpeObservation) -> None:
        """Let go of the MPE's earlier locations (it was pointed elsewhere) in which no Task
        using it has its Job any more, as the pass read them (`retired_locations_unused`;
        docs/operations.md, "Changing where an MPE runs Jobs")."""
        if self.reads is not None and self.reads.retired_unused:
            self.registry.release_retired(self.key, self.reads.retired_unused)

    def delete_orphans(self, observation: MpeObservation) -> None:
        """Nothing of a Task may stay behind where no client reaches any more: the children of
        gone Tasks in the MPE's cluster (with the client kept, if no new one can be built) and
        in its earlier locations (docs/operations.md, "Lost Jobs and orphaned children")."""
        ref = ref_of_key(self.key)
        try:
            try:
                self._sync(keep=True)
            except MpeError:
                if self.registry.kept(self.key) is None:
                    raise
            cluster = self.registry.get(ref)
            if cluster is None:
                raise KubeError("the cluster's client is not ready")
            for each in [cluster, *self.registry.retired(self.key)]:
                self.collect_orphans(each)
        except (KubeError, MpeError):
            # --cleanup-timeout counts the time the cluster has not answered, not since the
            # deletion (a queue may have held the reconcile back while it answered).
            self.registry.mark_unreachable(ref)
            raise
        self.registry.mark_reachable(ref)

    def drop_client(self, observation: MpeObservation) -> None:
        self.registry.forget(self.key)

    def release_client(self, observation: MpeObservation) -> None:
        self.registry.release(self.key)
