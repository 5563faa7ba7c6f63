"""What one reconcile pass saw of a Workflow's world, as immutable data.

Where this sits in the flow: the Workflow reconciler (`taskfsm.controllers.workflow.reconciler`)
reads the Workflow and counts its Tasks in the Task informer cache (by the two workflow labels),
and condenses both into one `WorkflowObservation`. The Workflow lifecycle statechart
(`machines.workflow.chart`) decides from it alone; guards never read the cluster or the clock.

The clock enters here, once: `seconds_since_end` is how long ago `status.endTime` was when the
pass looked, so the termination wait is a guard over data and the driver can say how long to
wait (`WorkflowPassOutcome.requeue_after`) instead of sleeping.

Every field carries a one-line `doc` in its metadata; `docs/workflow-lifecycle.md` is
generated from it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Final

from machines.conditions import Condition, seconds_left
from machines.workflow.phases import PHASES, TERMINAL_PHASES

__all__ = [
    "DEFAULT_WAITING_SECONDS",
    "FAIL_WORKFLOW",
    "IGNORE",
    "JOB_FAILURE_ACTIONS",
    "PHASES",
    "TERMINAL_PHASES",
    "WorkflowObservation",
]

FAIL_WORKFLOW: Final = "FailWorkflow"
IGNORE: Final = "Ignore"
JOB_FAILURE_ACTIONS: Final = (FAIL_WORKFLOW, IGNORE)
"""`spec.jobFailurePolicy.defaultAction` of a Task; absent means FailWorkflow (§4.3)."""

DEFAULT_WAITING_SECONDS: Final = 20.0
"""`workflowTerminationWaitingDuration` when the configuration does not set it."""


def _doc(text: str) -> dict[str, str]:
    return {"doc": text}


@dataclass(frozen=True, slots=True)
class WorkflowObservation:
    """One pass's view of a Workflow and the Tasks it counts.

    Shape: flat, hashable data; defaults describe a Workflow nobody has touched yet, with no
    Tasks. Build it with keyword arguments. `phase=None` is stored as `""`.

    Raises:
        ValueError: if the counts contradict each other (negative, or active + succeeded +
            failed != total, or more fatal failures than failed Tasks); that is a bug in the
            reconciler's counting, not a cluster state.

    Spec: docs/behaviour.md §4.3 with D20.
    """

    name: str = field(default="", metadata=_doc("The Workflow's name, used in messages."))
    phase: str = field(default="", metadata=_doc('`status.phase` as persisted (`""` when unset).'))
    deletion_requested: bool = field(
        default=False, metadata=_doc("The Workflow has a `metadata.deletionTimestamp`.")
    )
    has_finalizer: bool = field(
        default=False,
        metadata=_doc(
            "The Workflow carries the `engine.nagare.media/workflow-protection` finalizer."
        ),
    )
    labels_set: bool = field(
        default=False,
        metadata=_doc("The Workflow carries its own workflow-namespace and workflow-name labels."),
    )
    list_error: str = field(
        default="",
        metadata=_doc(
            'Why its Tasks could not be listed (`""` when they were; the counts are then '
            "meaningless)."
        ),
    )
    total: int = field(default=0, metadata=_doc("Tasks carrying the Workflow's two labels."))
    active: int = field(
        default=0, metadata=_doc("Of those, Tasks not Succeeded or Failed (empty phase included).")
    )
    succeeded: int = field(default=0, metadata=_doc("Of those, Tasks in phase Succeeded."))
    failed: int = field(default=0, metadata=_doc("Of those, Tasks in phase Failed."))
    failed_tasks: tuple[tuple[str, str], ...] = field(
        default=(),
        metadata=_doc(
            'Each Failed Task\'s name and its `jobFailurePolicy.defaultAction` as written (`""` '
            "when unset), sorted; the chart's guards decide which of them fail the Workflow."
        ),
    )
    counts_recorded: bool = field(
        default=False,
        metadata=_doc("`status.total/active/succeeded/failed` already hold these counts."),
    )
    seconds_since_end: float | None = field(
        default=None,
        metadata=_doc(
            "Seconds from `status.endTime` to the pass's clock (None when endTime is unset)."
        ),
    )
    waiting_seconds: float = field(
        default=DEFAULT_WAITING_SECONDS,
        metadata=_doc(
            "`workflowTerminationWaitingDuration`: how long AwaitingCompletion waits for new Tasks."
        ),
    )
    resync_seconds: float | None = field(
        default=None,
        metadata=_doc(
            "How long a Workflow that may still change waits for events before it is looked at "
            "again (`--resync-period`; None: only on events)."
        ),
    )
    finished_ttl: float | None = field(
        default=None,
        metadata=_doc(
            "`--finished-ttl`: seconds a Succeeded or Failed Workflow is kept after "
            "`status.endTime` before it is deleted with its Tasks (None: kept forever)."
        ),
    )
    conditions: tuple[Condition, ...] = field(
        default=(), metadata=_doc("`status.conditions` as persisted, in order.")
    )

    def __post_init__(self) -> None:
        if self.phase is None:  # an omitted status.phase must never travel on as None
            object.__setattr__(self, "phase", "")
        counts = (self.total, self.active, self.succeeded, self.failed)
        if min(counts) < 0:
            raise ValueError(f"negative Task count in {counts}")
        if self.active + self.succeeded + self.failed != self.total:
            raise ValueError(f"active + succeeded + failed != total in {counts}")
        if len(self.failed_tasks) > self.failed:
            raise ValueError("more Failed Tasks named than counted")
        if self.waiting_seconds < 0:
            raise ValueError("a negative waiting duration")
        if self.finished_ttl is not None and self.finished_ttl <= 0:
            raise ValueError("a finished TTL must be positive (None keeps forever)")
        object.__setattr__(self, "failed_tasks", tuple(sorted(self.failed_tasks)))
        object.__setattr__(self, "conditions", tuple(self.conditions))

    # Derived facts: kept as properties so no combination of fields can contradict them.

    @property
    def phase_known(self) -> bool:
        """Whether `phase` is one of `PHASES`."""
        return self.phase in PHASES

    @property
    def tasks_listed(self) -> bool:
        """The Tasks were listed, so the counts can be trusted."""
        return not self.list_error

    @property
    def end_time_set(self) -> bool:
        """`status.endTime` is set."""
        return self.seconds_since_end is not None

    @property
    def remaining_wait(self) -> float:
        """Seconds left of the termination wait (the whole wait when endTime is unset)."""
        if self.seconds_since_end is None:
            return self.waiting_seconds
        return max(0.0, self.waiting_seconds - self.seconds_since_end)

    @property
    def finished_ttl_left(self) -> float:
        """Seconds until the finished TTL has passed since endTime (the whole TTL when endTime
        is unset; 0 when it has passed; infinite without a TTL)."""
        return seconds_left(self.finished_ttl, self.seconds_since_end)

    def replace(self, **changes: Any) -> WorkflowObservation:
        """Return a copy with `changes` applied (validated like the constructor)."""
        return dataclasses.replace(self, **changes)


def field_docs() -> list[tuple[str, str, str]]:
    """Return `(name, type, doc)` for every `WorkflowObservation` field, in declaration order."""
    rows = []
    for f in dataclasses.fields(WorkflowObservation):
        type_name = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        rows.append((f.name, type_name, f.metadata["doc"]))
    return rows
