"""What one reconcile pass saw of a MediaProcessingEntity's world, as immutable data.

Where this sits in the flow: the MPE reconciler (`taskfsm.controllers.mpe.reconciler`) reads the
MPE from the cache, what this process holds of its client (`taskfsm.controllers.clusters`), and
the Tasks whose status names it, and condenses them into one `MpeObservation`. The MPE
statechart (`machines.mpe.chart`) decides from it alone.

An MPE has no `status.phase`: the state a pass starts in is observed, not persisted (its
deletionTimestamp, whether this replica writes its status, its `Ready` condition together with
whether this process holds a working client for it).

Every field carries a one-line `doc` in its metadata; `docs/mpe-lifecycle.md` is generated
from it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from machines.conditions import Condition


def _doc(text: str) -> dict[str, str]:
    return {"doc": text}


@dataclass(frozen=True, slots=True)
class MpeObservation:
    """One pass's view of a MediaProcessingEntity (or ClusterMediaProcessingEntity).

    Spec: docs/behaviour.md §1.7 and §4.2.
    """

    exists: bool = field(
        default=True, metadata=_doc("The MPE is in the cache (False: it is gone).")
    )
    deletion_requested: bool = field(
        default=False, metadata=_doc("The MPE has a `metadata.deletionTimestamp`.")
    )
    has_finalizer: bool = field(
        default=False,
        metadata=_doc("The MPE carries the `engine.nagare.media/mpe-protection` finalizer."),
    )
    manages_status: bool = field(
        default=True,
        metadata=_doc(
            "This replica writes the MPE's finalizer and status (with `--buckets`: the holder of "
            "bucket 0; with `--controllers` without `mpe`: none). Otherwise it only keeps the "
            "MPE's client for its own Tasks."
        ),
    )
    ready_condition: str = field(
        default="",
        metadata=_doc('The persisted `Ready` condition\'s status (`"True"`, `"False"`, `""`).'),
    )
    client_ready: bool = field(
        default=False,
        metadata=_doc("This process holds a client for the MPE whose Job watch has listed."),
    )
    tasks_using: int = field(
        default=0, metadata=_doc("Tasks whose `status.mediaProcessingEntityRef` names the MPE.")
    )
    tasks_active: int = field(
        default=0, metadata=_doc("Of those, Tasks not finished (neither Succeeded nor Failed).")
    )
    jobs_kept: int = field(
        default=0,
        metadata=_doc(
            "Of the finished ones, those whose Job is still in the MPE's cluster (or whose "
            "cluster cannot be searched yet): each deletes it once the MPE is being deleted."
        ),
    )
    retired_locations: int = field(
        default=0,
        metadata=_doc(
            "Earlier locations (cluster or namespace) kept for Jobs made there before the MPE "
            "was pointed elsewhere."
        ),
    )
    retired_locations_unused: int = field(
        default=0,
        metadata=_doc(
            "Of those, the ones in which no Task using the MPE has its Job any more: a Ready "
            "MPE lets go of them."
        ),
    )
    never_reached: str = field(
        default="",
        metadata=_doc(
            'Why nothing of a Task can be in the MPE\'s cluster (`""` when something may): its '
            "spec is refused by policy (`NamespaceNotAllowed`, `KubeconfigRefused`, "
            "`InvalidSpec`), or it was created while this process ran and no client of it ever "
            "listed its Jobs; never while a Task's status names a Job made through it."
        ),
    )
    unbuildable: str = field(
        default="",
        metadata=_doc(
            "Why no client of the MPE can be built from its spec and kubeconfig Secret as they "
            "are now (`KubeconfigSecretUnavailable`, `KubeconfigInvalid`, `KubeconfigRefused`, "
            "`NamespaceNotAllowed`, `InvalidSpec`), while this process holds no client of it: "
            'waiting does not help until one of them changes, which queues the MPE again. `""` '
            "when a client may be built, or one is held."
        ),
    )
    unreachable_seconds: float = field(
        default=0.0,
        metadata=_doc("Seconds the MPE's cluster has been unreachable without a break (0: fine)."),
    )
    cleanup_timeout: float = field(
        default=120.0,
        metadata=_doc(
            "`--cleanup-timeout`: how long a deleting MPE keeps trying to search its cluster "
            "for the children of gone Tasks while it does not answer."
        ),
    )
    resync_seconds: float = field(
        default=60.0,
        metadata=_doc(
            "How often a live MPE is looked at again without events (its kubeconfig Secret is "
            "re-read, its earlier locations released)."
        ),
    )
    conditions: tuple[Condition, ...] = field(
        default=(), metadata=_doc("`status.conditions` as persisted, in order.")
    )

    def __post_init__(self) -> None:
        if min(self.tasks_using, self.tasks_active, self.jobs_kept) < 0:
            raise ValueError("a negative Task count")
        if self.tasks_active + self.jobs_kept > self.tasks_using:
            raise ValueError("more active Tasks and kept Jobs than Tasks using the MPE")
        if not 0 <= self.retired_locations_unused <= self.retired_locations:
            raise ValueError("more unused earlier locations than earlier locations")
        object.__setattr__(self, "conditions", tuple(self.conditions))

    @property
    def phase(self) -> str:
        """An MPE has no phase (the engine's persisted phase is always empty)."""
        return ""

    @property
    def tasks_needing_cluster(self) -> int:
        """Tasks that still need the MPE's cluster: unfinished, or keeping a Job there."""
        return self.tasks_active + self.jobs_kept

    def replace(self, **changes: Any) -> MpeObservation:
        """Return a copy with `changes` applied (validated like the constructor)."""
        return dataclasses.replace(self, **changes)


def field_docs() -> list[tuple[str, str, str]]:
    """Return `(name, type, doc)` for every `MpeObservation` field, in declaration order."""
    rows = []
    for f in dataclasses.fields(MpeObservation):
        type_name = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        rows.append((f.name, type_name, f.metadata["doc"]))
    return rows
