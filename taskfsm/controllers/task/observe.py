"""Observe: condense what a pass read into the chart's `TaskObservation` (pure: no I/O).

:func:`observe` turns a :class:`~taskfsm.controllers.task.working_copy.PassReads` (what
:mod:`taskfsm.controllers.task.read` read) into the facts the Task chart decides from; it reads
no cluster, writes nothing and keeps nothing. The Job's fields come from
:func:`taskfsm.controllers.job_facts.job_facts`, the same function the Job watch's predicate
compares, so a Task is woken exactly when a fact it observes changes.
"""

from __future__ import annotations

from datetime import datetime
from math import inf
from typing import Any

from machines.conditions import Condition
from machines.task.conditions import READY
from machines.task.observation import JobState, TaskObservation, WorkflowState
from taskfsm.api import constants as c
from taskfsm.api.timestamps import parse_time
from taskfsm.controllers.job_facts import job_facts
from taskfsm.controllers.task.working_copy import PassReads
from taskfsm.kube import wire
from taskfsm.manifests import jobs


def job_created(job: dict[str, Any] | None) -> datetime | None:
    """When ``job`` was created (None without a Job or a creationTimestamp)."""
    return parse_time(((job or {}).get("metadata") or {}).get("creationTimestamp"))


def job_age(job: dict[str, Any] | None, now: datetime | None) -> float:
    """Seconds since ``job`` was created (0 without a Job, a clock or a creationTimestamp)."""
    created = job_created(job)
    if created is None or now is None:
        return 0.0
    return max(0.0, (now - created).total_seconds())


def observe(
    reads: PassReads,
    *,
    resync_seconds: float,
    finished_ttl: float | None = None,
    now: datetime | None = None,
) -> TaskObservation:
    """The chart's view of ``world``; ``now`` is the pass's clock (how long ago endTime was)."""
    task = reads.task
    meta = task["metadata"]
    status = task.get("status") or {}
    end = parse_time(status.get("endTime"))
    since_end = None if end is None or now is None else max(0.0, (now - end).total_seconds())
    workflow = reads.workflow
    facts = job_facts(reads.job)
    conditions = tuple(Condition.from_dict(d) for d in status.get("conditions") or [])
    job_ref = status.get("jobRef") or {}
    mpe_ref = reads.mpe_ref
    return TaskObservation(
        phase=status.get("phase") or "",
        deletion_requested=bool(meta.get("deletionTimestamp")),
        has_finalizer=c.FINALIZER_TASK_PROTECTION in (meta.get("finalizers") or []),
        workflow=workflow_state(workflow),
        workflow_name=((task.get("spec") or {}).get("workflowRef") or {}).get("name") or "",
        input_problem=wire.problem(task),
        owned_by_workflow=workflow is not None and owned_by(task, workflow),
        mpe_selected=bool(mpe_ref),
        function_selected=bool(status.get("functionRef")),
        mpe_ready=reads.client_built,
        mpe_client_pending=reads.client_pending,
        mpe_gone=bool(mpe_ref) and (reads.mpe is None or reads.mpe_released),
        mpe_deleting=bool(((reads.mpe or {}).get("metadata") or {}).get("deletionTimestamp")),
        mpe_unrecorded=reads.mpe_unrecorded,
        mpe_problem=reads.mpe_problem,
        mpe_never_reached=reads.mpe_never_reached,
        mpe_refused=reads.job_refused,
        job_unreadable=reads.job_unreadable,
        job_name=reads.job_name,
        job_name_taken=reads.job_name_taken,
        job=facts.state,
        job_uid=facts.uid,
        job_terminating=facts.terminating,
        job_protected=facts.protected,
        job_pods_refused=reads.pods_refused,
        job_pods_refused_left=reads.pods_refused_left,
        job_failure=facts.failure,
        job_pods_waiting=(
            reads.cluster is not None
            and facts.state is JobState.ACTIVE
            and not ((reads.job or {}).get("status") or {}).get("ready")
        ),
        job_age_seconds=job_age(reads.job, now),
        job_unmakeable=reads.job_unmakeable,
        job_inputs_problem=reads.job_inputs_problem,
        helper_data_too_large=reads.helper_data_too_large,
        job_beyond_limits=reads.job_beyond_limits,
        job_pending_left=reads.job_pending_left if facts.state is not JobState.ABSENT else inf,
        job_ref_uid=job_ref.get("uid") or "",
        job_was_seen=reads.job_was_seen,
        cleanup_wait_left=reads.cleanup_wait_left,
        resync_seconds=resync_seconds,
        seconds_since_end=since_end,
        finished_ttl=finished_ttl,
        conditions=conditions,
        ready_reason=next((cond.reason for cond in conditions if cond.type == READY), ""),
    )


def workflow_state(workflow: dict[str, Any] | None) -> WorkflowState:
    """The Task's Workflow as the chart sees it (§3.5, §3.11)."""
    if workflow is None:
        return WorkflowState.MISSING
    if (workflow.get("metadata") or {}).get("deletionTimestamp"):
        return WorkflowState.DELETING
    if ((workflow.get("status") or {}).get("phase") or "") in c.WORKFLOW_TERMINAL_PHASES:
        return WorkflowState.TERMINATED
    return WorkflowState.ACTIVE


def own_mpe_ref(task: dict[str, Any]) -> dict[str, Any] | None:
    """``status.mediaProcessingEntityRef``, unless it names a namespaced MPE of another
    namespace: selection never writes one (a Task uses its own namespace's MPEs or cluster
    ones), so such a ref was not written by this controller and is not followed
    (docs/security.md, "References stay in their namespace")."""
    ref = (task.get("status") or {}).get("mediaProcessingEntityRef")
    if not ref:
        return None
    if ref.get("kind") == c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY:
        return dict(ref)
    if (ref.get("namespace") or "") != task["metadata"]["namespace"]:
        return None
    return dict(ref)


def owned_by(task: dict[str, Any], workflow: dict[str, Any]) -> bool:
    """The Task carries the controller owner reference to ``workflow`` and the four labels."""
    meta = task["metadata"]
    uid = workflow["metadata"].get("uid")
    owners = meta.get("ownerReferences") or []
    if not any(o.get("uid") == uid and o.get("controller") for o in owners):
        return False
    labels = meta.get("labels") or {}
    return all(labels.get(k) == v for k, v in jobs.task_labels(task).items())
