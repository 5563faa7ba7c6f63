"""What one reconcile pass saw of a Task's world, as immutable data.

Where this sits in the flow: the reconciler reads the cluster (the Task fresh from the API
server, its Workflow, its Job by deterministic name in the MediaProcessingEntity cluster, and
the MediaProcessingEntity client registry) and condenses it into one `TaskObservation`. The
lifecycle statechart (`machines.task.chart`) decides from it alone; guards never read the cluster.

Nothing here imports Kubernetes: the reconciler translates API objects into these fields
(`machines.task.job_status.interpret_job_conditions` turns a Job's conditions into a `JobState`).
Every field carries a one-line `doc` in its metadata; `docs/lifecycle.md` is generated from it.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any

from machines.conditions import Condition, seconds_left
from machines.task.phases import PHASES, TERMINAL_PHASES

__all__ = ["PHASES", "TERMINAL_PHASES", "JobState", "TaskObservation", "WorkflowState"]


class WorkflowState(enum.Enum):
    """The Task's Workflow (`spec.workflowRef.name`, same namespace) as seen by the pass (§3.5)."""

    MISSING = "missing"
    """GET returned NotFound: the pass ends with `failed to fetch Workflow: ...`."""
    ACTIVE = "active"
    """Phase empty, Initializing, Running or AwaitingCompletion (empty counts as active)."""
    TERMINATED = "terminated"
    """Phase Succeeded or Failed: every active Task of it fails (§3.11)."""
    DELETING = "deleting"
    """The Workflow has a deletionTimestamp: the Task deletes itself (§3.5, D9)."""


class JobState(enum.Enum):
    """The Job found under the Task's deterministic name, by its conditions (§3.12, F8)."""

    ABSENT = "absent"
    """No Job with that name (never created, deleted, or removed by its TTL)."""
    ACTIVE = "active"
    """Not terminated yet (no terminal condition is True)."""
    SUSPENDED = "suspended"
    """Not terminated, and `Suspended` is True: its pods are not running (`spec.suspend`)."""
    SUCCEEDED = "succeeded"
    """`Complete=True` or `SuccessCriteriaMet=True`."""
    FAILED = "failed"
    """`Failed=True` or `FailureTarget=True`."""


def _doc(text: str) -> dict[str, str]:
    return {"doc": text}


@dataclass(frozen=True, slots=True)
class TaskObservation:
    """One pass's view of a Task and everything its lifecycle depends on.

    Shape: flat, hashable data; defaults describe a Task nobody has touched yet. Build it with
    keyword arguments. `phase=None` is accepted and stored as `""` (an omitted
    `status.phase`), so the phase is never None downstream.

    Raises:
        ValueError: if the Job fields contradict each other (e.g. a UID for an absent Job);
            that is a bug in the reconciler's reading of the cluster, not a cluster state.

    Spec: docs/behaviour.md §3.2-§3.10, with the defects of its §6 fixed.
    """

    phase: str = field(default="", metadata=_doc('`status.phase` as persisted (`""` when unset).'))
    deletion_requested: bool = field(
        default=False, metadata=_doc("The Task has a `metadata.deletionTimestamp`.")
    )
    has_finalizer: bool = field(
        default=False,
        metadata=_doc("The Task carries the `engine.nagare.media/task-protection` finalizer."),
    )
    workflow: WorkflowState = field(
        default=WorkflowState.ACTIVE,
        metadata=_doc("State of the Task's Workflow (`WorkflowState`)."),
    )
    workflow_name: str = field(
        default="", metadata=_doc("`spec.workflowRef.name`, used in status messages.")
    )
    owned_by_workflow: bool = field(
        default=False,
        metadata=_doc("The owner reference to the Workflow and the four workflow labels are set."),
    )
    input_problem: str = field(
        default="",
        metadata=_doc(
            "Why the Task's own spec cannot be processed (it exceeds what taskfsm reads, e.g. "
            'nesting; `""` when it can): no Job is made from it.'
        ),
    )
    mpe_selected: bool = field(
        default=False, metadata=_doc("`status.mediaProcessingEntityRef` is set.")
    )
    function_selected: bool = field(default=False, metadata=_doc("`status.functionRef` is set."))
    mpe_ready: bool = field(
        default=False,
        metadata=_doc(
            "The selected MediaProcessingEntity has a ready API client (Job fields are "
            "ignored when it has not)."
        ),
    )
    mpe_client_pending: bool = field(
        default=False,
        metadata=_doc(
            "Its client is still being set up (neither ready nor failed yet): the Task waits "
            "quietly, and the MPE's reconcile wakes it."
        ),
    )
    mpe_gone: bool = field(
        default=False,
        metadata=_doc(
            "It does not exist, the reference names no MPE kind, or its deletion is done "
            "(the controller let go of it and sets no client of it up again): nothing can "
            "reach its cluster any more."
        ),
    )
    mpe_deleting: bool = field(
        default=False,
        metadata=_doc("It has a `metadata.deletionTimestamp`: it goes once no Task needs it."),
    )
    mpe_unrecorded: bool = field(
        default=False,
        metadata=_doc(
            "The Task is being deleted and its status names no MPE, but selection finds one "
            "(the one its Job would be in; the other MPE fields describe it)."
        ),
    )
    mpe_problem: str = field(
        default="",
        metadata=_doc('Why it cannot be used: its Ready message (`""` when unknown).'),
    )
    mpe_never_reached: bool = field(
        default=False,
        metadata=_doc(
            "Nothing of a Task can be in its cluster: its spec is refused by policy "
            "(`NamespaceNotAllowed`, `KubeconfigRefused`, `InvalidSpec`), or it was created "
            "while this process ran and no client of it ever listed its Jobs."
        ),
    )
    mpe_refused: bool = field(
        default=False,
        metadata=_doc(
            "Its cluster refused this pass's read of the Job (401/403): the MPE's own "
            "reconcile is asked to look at it now."
        ),
    )
    job_name: str = field(
        default="", metadata=_doc("The Task's deterministic Job name, used in status messages.")
    )
    job_unreadable: str = field(
        default="",
        metadata=_doc(
            'Why this pass could not read the Job from its cluster (`""` when it could): '
            "nothing is known of the Job, and the MPE counts as unavailable."
        ),
    )
    job_name_taken: bool = field(
        default=False,
        metadata=_doc(
            "An object under the Task's Job name exists in its cluster but is not the Task's "
            "Job (it carries another Task's labels, or none, and is not the Job `status.jobRef` "
            "recorded): the Job fields ignore it, nothing "
            "adopts or deletes it, and no Job can be made under that name while it is there."
        ),
    )
    job: JobState = field(
        default=JobState.ABSENT,
        metadata=_doc("The Job under that name, read fresh and interpreted by type (`JobState`)."),
    )
    job_uid: str = field(default="", metadata=_doc('That Job\'s UID (`""` when absent).'))
    job_terminating: bool = field(
        default=False, metadata=_doc("That Job has a `metadata.deletionTimestamp`.")
    )
    job_protected: bool = field(
        default=False,
        metadata=_doc("That Job carries the `engine.nagare.media/job-protection` finalizer."),
    )
    job_failure: str = field(
        default="",
        metadata=_doc(
            "A failed Job's own account of why (`reason: message` of its `Failed` or "
            '`FailureTarget` condition, e.g. `BackoffLimitExceeded: ...`); `""` otherwise.'
        ),
    )
    job_pods_refused: str = field(
        default="",
        metadata=_doc(
            "Why the Job's pods do not run although they should: its latest `FailedCreate` "
            "Event (Pod Security, an admission policy, a quota refused them), or a pod that "
            "cannot start (an image that cannot be pulled, a ConfigMap or Secret it needs "
            'missing, a volume that cannot be mounted); `""` when its pods run, it finished, '
            "or it is suspended."
        ),
    )
    job_pods_refused_left: float = field(
        default=0.0,
        metadata=_doc(
            "Seconds the Task still waits for its Job's pods to be allowed or to start before "
            "it fails (`--job-pods-refused-timeout` minus the time since the first refusal, or "
            "since the pod that cannot start was made; 0 once over)."
        ),
    )
    job_pods_waiting: bool = field(
        default=False,
        metadata=_doc(
            "The Job runs (not suspended, no outcome) but none of its pods is ready (none made "
            "yet, or none started): looked at again soon, so a refusal or a pod that cannot "
            "start is noticed without waiting for the resync."
        ),
    )
    job_age_seconds: float = field(
        default=0.0,
        metadata=_doc(
            "Seconds since the Job under the Task's name was created (0 when there is none): "
            "the pod check of a Job whose pods wait is paced by it."
        ),
    )
    job_unmakeable: str = field(
        default="",
        metadata=_doc(
            "Why no Job can be made for the Task (its Function is missing or not a Function, "
            'or it runs on local MPEs only and the MPE is remote); `""` when one can, or '
            "when the Task is not about to make one."
        ),
    )
    job_inputs_problem: str = field(
        default="",
        metadata=_doc(
            "Why the Job and its helper data cannot be built from the Task's inputs now (a "
            "template patch that does not apply, a MediaLocation or its Secret missing); "
            '`""` when they can, or when the Task is not about to make a Job.'
        ),
    )
    helper_data_too_large: str = field(
        default="",
        metadata=_doc(
            "Why the helper data cannot be a Secret at all: its size against the 1 MiB a "
            'Secret holds (docs/security.md, "Names and sizes"); `""` when it fits, or when '
            "the Task is not about to make a Job."
        ),
    )
    job_beyond_limits: str = field(
        default="",
        metadata=_doc(
            "Why the API server would refuse the Job whatever the retries: its labels or "
            "annotations break the API server's rules, its annotations are over 256 KiB, or "
            'it is over 1 MiB (docs/security.md, "Names and sizes"); `""` when it is within '
            "them, or when the Task is not about to make a Job."
        ),
    )
    job_pending_left: float = field(
        default=float("inf"),
        metadata=_doc(
            "For a JobPending Task whose Job exists (its helper Secret is not made yet): "
            "seconds until that has lasted `--job-pods-refused-timeout` since the Job was "
            "made (0 once over; infinite otherwise, or with the timeout 0)."
        ),
    )
    job_ref_uid: str = field(
        default="", metadata=_doc('`status.jobRef.uid` (`""` when jobRef is unset).')
    )
    job_was_seen: bool = field(
        default=False,
        metadata=_doc(
            "This process saw a Job under that name before (it created it, or read it): a "
            "missing Job was lost, not never made (D18b). Process memory: a restart, a new "
            "leader or a bucket handover starts without it (docs/lifecycle.md)."
        ),
    )
    cleanup_wait_left: float = field(
        default=0.0,
        metadata=_doc(
            "Seconds a deleting Task may still wait for an unreachable MPE to clean up its "
            "Job (`cleanup bound - time since deletionTimestamp`, 0 once over)."
        ),
    )
    resync_seconds: float = field(
        default=300.0,
        metadata=_doc(
            "How long a Task whose Job may still change waits for events before it is looked "
            "at again (`--resync-period`)."
        ),
    )
    seconds_since_end: float | None = field(
        default=None,
        metadata=_doc(
            "Seconds from `status.endTime` to the pass's clock (None when endTime is unset)."
        ),
    )
    finished_ttl: float | None = field(
        default=None,
        metadata=_doc(
            "`--finished-ttl`: seconds a finished Task whose Workflow does not exist is kept "
            "after `status.endTime` before it is deleted (None: kept forever)."
        ),
    )
    conditions: tuple[Condition, ...] = field(
        default=(), metadata=_doc("`status.conditions` as persisted, in order.")
    )
    ready_reason: str = field(
        default="",
        metadata=_doc(
            "The reason of the persisted `Ready` condition (`JobSuspended`, `JobPodsRefused`, "
            "...): whether a Job's suspension or refusal is news for an Event."
        ),
    )

    def __post_init__(self) -> None:
        if self.phase is None:  # an omitted status.phase must never travel on as None
            object.__setattr__(self, "phase", "")
        if self.job is JobState.ABSENT:
            if self.job_uid or self.job_terminating or self.job_protected:
                raise ValueError("an absent Job has no uid, deletionTimestamp or finalizer")
        elif not self.job_uid:
            raise ValueError(f"a {self.job.value} Job must carry its uid")
        object.__setattr__(self, "conditions", tuple(self.conditions))

    # Derived facts: kept as properties so no combination of fields can contradict them.

    @property
    def phase_known(self) -> bool:
        """Whether `phase` is one of `PHASES`."""
        return self.phase in PHASES

    @property
    def outcome_recorded(self) -> bool:
        """The persisted phase is terminal, so the Job's outcome is durably recorded (D18)."""
        return self.phase in TERMINAL_PHASES

    @property
    def job_present(self) -> bool:
        """A Job exists under the deterministic name."""
        return self.job is not JobState.ABSENT

    @property
    def job_unfinished(self) -> bool:
        """A Job exists that has no outcome yet (running or suspended)."""
        return self.job in (JobState.ACTIVE, JobState.SUSPENDED)

    @property
    def job_ref_set(self) -> bool:
        """`status.jobRef` is set."""
        return bool(self.job_ref_uid)

    @property
    def finished_ttl_left(self) -> float:
        """Seconds until the finished TTL has passed since endTime (the whole TTL when endTime
        is unset; 0 when it has passed; infinite without a TTL)."""
        return seconds_left(self.finished_ttl, self.seconds_since_end)

    def replace(self, **changes: Any) -> TaskObservation:
        """Return a copy with `changes` applied (validated like the constructor)."""
        return dataclasses.replace(self, **changes)


def field_docs() -> list[tuple[str, str, str]]:
    """Return `(name, type, doc)` for every `TaskObservation` field, in declaration order."""
    rows = []
    for f in dataclasses.fields(TaskObservation):
        type_name = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        rows.append((f.name, type_name, f.metadata["doc"]))
    return rows
