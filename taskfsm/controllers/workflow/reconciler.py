"""One Workflow reconcile: key in, :class:`~taskfsm.controllers.result.Result` out,
level-triggered.

Flow of :meth:`WorkflowReconciler.reconcile` (docs/behaviour.md §4.3 with D20):

1. read the Workflow (cache, or our own newer write, or a fresh GET when neither is known);
2. count its Tasks in the Task informer cache, by the two workflow labels (each Task read
   through read-your-writes, so a phase the Task reconciler has just written counts at once),
   into a ``machines.workflow.observation.WorkflowObservation``; a cache that cannot answer is
   a list error the pass returns (D20), never "zero Tasks";
3. run the statechart (``machines.workflow.driver.run_pass``) with :class:`WorkflowEffects`;
   while a step moves the phase without error, observe again and take the next step, so a
   Workflow whose Tasks all finished goes Initializing → Running → AwaitingCompletion in one
   reconcile;
4. write status in one merge patch on ``/status`` (phase, conditions, message, times,
   counters), record Events, and return the requeue: an error backs off; AwaitingCompletion
   comes back when the termination wait is due (``requeue_after``), so the timed transition
   needs no sleeping thread.

Triggers (:func:`attach`): every Workflow event queues that Workflow; a Task event queues its
Workflow when the Task appears, disappears, or changes phase or workflow labels. The Task
controller already queues a Workflow's Tasks on every Workflow event, so the two reconcilers
drive each other through the watch loop: a Workflow turning Failed fails its active Tasks, a
Workflow being deleted makes its Tasks delete themselves, and each Task going away wakes the
Workflow, which releases its finalizer once no Task is active.

One Workflow's exception never escapes (D23): it becomes ``status.message`` and a retry.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from machines.conditions import Condition
from machines.workflow.driver import WorkflowPassOutcome, run_pass
from machines.workflow.guards import WorkflowObservationGuards
from machines.workflow.observation import (
    DEFAULT_WAITING_SECONDS,
    FAIL_WORKFLOW,
    WorkflowObservation,
)
from taskfsm.api import constants as c
from taskfsm.controllers.result import Result, is_conflict, is_transient, retry_after_of
from taskfsm.controllers.status_write import patch_status
from taskfsm.kube import finalizers
from taskfsm.kube.errors import KubeError, NotFound
from taskfsm.kube.events import NORMAL, WARNING, EventRecorder
from taskfsm.kube.resources import WORKFLOWS
from taskfsm.kube.rest import JSON_PATCH, Rest

if TYPE_CHECKING:
    from taskfsm.kube.cache import Caches

log = logging.getLogger(__name__)

CONTROLLER_LABEL: Final = "workflow"
"""The ``controller`` label of this reconciler's metrics and work queue."""

TASKS_BY_WORKFLOW: Final = "workflow-labels"
"""Index of the Task cache by the Workflow the two workflow labels name (``namespace/name``)."""


TASKS_BY_OUTCOME: Final = "workflow-outcome"
"""Index of the Task cache: ``<workflow key>#Succeeded`` / ``#Failed`` for finished Tasks."""

FATAL_FAILURES: Final = "workflow-fatal-failures"
"""Index of the Task cache: the Workflow of every Failed Task whose policy is FailWorkflow."""


def _labelled_workflow(task: dict[str, Any]) -> str | None:
    """The Workflow the two workflow labels name, if it is in the Task's own namespace.

    Labels are the Task author's to write: a label naming another namespace's Workflow would
    count (and with FailWorkflow, fail) a Workflow its author may not touch, so it is ignored
    (docs/security.md, "References stay in their namespace")."""
    meta = task.get("metadata") or {}
    labels = meta.get("labels") or {}
    namespace, name = labels.get(c.LABEL_WORKFLOW_NAMESPACE), labels.get(c.LABEL_WORKFLOW_NAME)
    if not (namespace and name) or namespace != meta.get("namespace"):
        return None
    return workflow_key(namespace, name)


def _workflow_and_outcome(task: dict[str, Any]) -> str | None:
    workflow = _labelled_workflow(task)
    phase = (task.get("status") or {}).get("phase") or ""
    if workflow is None or phase not in (c.TaskPhase.SUCCEEDED, c.TaskPhase.FAILED):
        return None
    return f"{workflow}#{phase}"


def _fatal_failure_of(task: dict[str, Any]) -> str | None:
    if (task.get("status") or {}).get("phase") != c.TaskPhase.FAILED:
        return None
    return _labelled_workflow(task) if job_failure_action(task) == FAIL_WORKFLOW else None


MAX_STEPS: Final = 6
"""Steps per reconcile; the longest path (new → Initializing → Running → AwaitingCompletion →
Succeeded with a zero wait) needs 5."""

_RFC3339: Final = "%Y-%m-%dT%H:%M:%SZ"
_COUNTERS: Final = ("total", "active", "succeeded", "failed")


def rfc3339(now: datetime) -> str:
    return now.astimezone(UTC).strftime(_RFC3339)


def _parse_time(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.strptime(str(value), _RFC3339).replace(tzinfo=UTC)
    except ValueError:
        return None


def workflow_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def workflow_labels(namespace: str, name: str) -> dict[str, str]:
    """The two labels that tie Tasks (and the Workflow itself) to a Workflow (§2)."""
    return {c.LABEL_WORKFLOW_NAMESPACE: namespace, c.LABEL_WORKFLOW_NAME: name}


def task_workflow_key(task: dict[str, Any]) -> str | None:
    """The Workflow a Task belongs to: by its labels (in its own namespace only), else by
    ``spec.workflowRef.name``."""
    meta = task.get("metadata") or {}
    labelled = _labelled_workflow(task)
    if labelled is not None:
        return labelled
    ref = ((task.get("spec") or {}).get("workflowRef") or {}).get("name")
    if ref and meta.get("namespace"):
        return workflow_key(meta["namespace"], ref)
    return None


def job_failure_action(task: dict[str, Any]) -> str:
    """``spec.jobFailurePolicy.defaultAction``, FailWorkflow when unset (§4.3)."""
    policy = (task.get("spec") or {}).get("jobFailurePolicy") or {}
    return policy.get("defaultAction") or FAIL_WORKFLOW


class TaskListError(Exception):
    """The Tasks of a Workflow could not be listed (D20: the pass fails, nothing is assumed)."""


@dataclass(frozen=True)
class TaskCount:
    """A Workflow's Tasks, counted (§4.3)."""

    total: int = 0
    active: int = 0
    succeeded: int = 0
    failed: int = 0
    fatal_failures: tuple[str, ...] = ()
    phases: tuple[tuple[str, str], ...] = ()
    """``(task name, phase)`` of every Task, sorted by name (for ``taskfsm explain``)."""


def count_tasks(tasks: list[dict[str, Any]]) -> TaskCount:
    """Count Tasks by phase; an empty or unknown phase counts as active (§4.3)."""
    succeeded = failed = 0
    fatal: list[str] = []
    phases = []
    for task in tasks:
        name = task["metadata"]["name"]
        phase = (task.get("status") or {}).get("phase") or ""
        phases.append((name, phase))
        if phase == c.TaskPhase.SUCCEEDED:
            succeeded += 1
        elif phase == c.TaskPhase.FAILED:
            failed += 1
            if job_failure_action(task) == FAIL_WORKFLOW:
                fatal.append(name)
    total = len(tasks)
    return TaskCount(
        total=total,
        active=total - succeeded - failed,
        succeeded=succeeded,
        failed=failed,
        fatal_failures=tuple(sorted(fatal)),
        phases=tuple(sorted(phases)),
    )


@dataclass
class WorkflowPassState:
    """What one reconcile works on: the Workflow as read, its working copy, the clock."""

    original: dict[str, Any]
    workflow: dict[str, Any]
    now: datetime
    count: TaskCount = field(default_factory=TaskCount)
    path: list[str] = field(default_factory=list)
    """Phases this reconcile went through, starting with the persisted one (for Events)."""
    reason: str = ""
    """``Reason: message`` of the step that entered Succeeded/Failed (for the Event)."""

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


class WorkflowEffects(WorkflowObservationGuards):
    """``machines.workflow.model.WorkflowLifecycleModel`` bound to the cluster for one reconcile.

    Status effects change the working copy (patched once at the end); metadata effects patch
    the Workflow at once and keep the working status.
    """

    def __init__(self, reconciler: WorkflowReconciler, state: WorkflowPassState) -> None:
        self.r = reconciler
        self.s = state

    # -- metadata --------------------------------------------------------------------------------

    def _patch_metadata(self, body: Any, content_type: str | None = None) -> None:
        meta = self.s.meta
        kwargs = {"content_type": content_type} if content_type else {}
        updated = self.r.rest.patch(WORKFLOWS, meta["namespace"], meta["name"], body, **kwargs)
        self.r.remember(updated)
        self.s.workflow["metadata"] = copy.deepcopy(updated["metadata"])

    def add_workflow_finalizer(self, observation: WorkflowObservation) -> None:
        """§4.3: added on the first pass; never on a terminating Workflow (the chart's order)."""
        patch = finalizers.addition(self.s.workflow, c.FINALIZER_WORKFLOW_PROTECTION)
        if patch is not None:
            self._patch_metadata(patch, JSON_PATCH)

    def set_workflow_labels(self, observation: WorkflowObservation) -> None:
        """§4.3: the Workflow carries the labels its Tasks carry (a merge patch merges per key)."""
        meta = self.s.meta
        wanted = workflow_labels(meta["namespace"], meta["name"])
        have = meta.get("labels") or {}
        if any(have.get(k) != v for k, v in wanted.items()):
            self._patch_metadata({"metadata": {"labels": wanted}})

    def remove_workflow_finalizer(self, observation: WorkflowObservation) -> None:
        """Deletion: no Task is active any more; the Workflow may go."""
        updated = finalizers.remove(
            self.r.rest, WORKFLOWS, self.s.workflow, c.FINALIZER_WORKFLOW_PROTECTION
        )
        if updated is not None:
            self.r.remember(updated)
            self.s.workflow["metadata"] = copy.deepcopy(updated["metadata"])

    # -- status ----------------------------------------------------------------------------------

    def record_task_counts(self, observation: WorkflowObservation) -> None:
        status = self.s.status
        for name in _COUNTERS:
            status[name] = getattr(observation, name)

    def record_queued_time(self, observation: WorkflowObservation) -> None:
        self.s.status.setdefault("queuedTime", rfc3339(self.s.now))

    def record_start_time(self, observation: WorkflowObservation) -> None:
        self.s.status.setdefault("startTime", rfc3339(self.s.now))

    def record_end_time(self, observation: WorkflowObservation) -> None:
        self.s.status["endTime"] = rfc3339(self.s.now)

    def clear_end_time(self, observation: WorkflowObservation) -> None:
        self.s.status.pop("endTime", None)

    def ensure_end_time(self, observation: WorkflowObservation) -> None:
        self.s.status.setdefault("endTime", rfc3339(self.s.now))


class WorkflowReconciler:
    """Reconciles Workflows of the main cluster.

    Args:
        rest: the main cluster.
        caches: informer caches (the Task and Workflow informers) and read-your-writes.
        events: where Events go.
        waiting_seconds: ``workflowTerminationWaitingDuration`` in seconds (default 20).
        resync_seconds: a Workflow that is neither terminated nor waiting is looked at again
            at least this often without events (None: only on events).
        clock: wall-clock ``now`` (injected by tests).
    """

    def __init__(
        self,
        *,
        rest: Rest,
        caches: Caches,
        events: EventRecorder,
        waiting_seconds: float = DEFAULT_WAITING_SECONDS,
        resync_seconds: float | None = 300.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.rest = rest
        self.caches = caches
        self.events = events
        self.waiting_seconds = waiting_seconds
        self.resync_seconds = resync_seconds
        # A Workflow's Tasks are found through an index of the Task cache: counting them costs
        # the same whatever else the cache holds.
        tasks = caches.informers[c.KIND_TASK]
        tasks.index(TASKS_BY_WORKFLOW, _labelled_workflow)
        tasks.index(TASKS_BY_OUTCOME, _workflow_and_outcome)
        tasks.index(FATAL_FAILURES, _fatal_failure_of)
        self.clock = clock

    # -- reads -----------------------------------------------------------------------------------

    def remember(self, workflow: dict[str, Any]) -> None:
        meta = workflow["metadata"]
        self.caches.written.wrote(
            ("main", WORKFLOWS.plural, meta["namespace"], meta["name"]), workflow
        )

    def read_workflow(self, namespace: str, name: str) -> dict[str, Any] | None:
        picked = self.caches.get(c.KIND_WORKFLOW, namespace, name)
        if picked is not None:
            return copy.deepcopy(picked)
        try:
            return self.rest.get(WORKFLOWS, namespace, name)  # not in the cache: ask the source
        except NotFound:
            return None

    def count_of(self, namespace: str, name: str) -> TaskCount:
        """The Workflow's Tasks (by the two workflow labels), counted through indexes of the
        Task cache: the cost does not grow with the Workflow's size or the cache's.

        Raises:
            TaskListError: the Task cache cannot answer (not synced yet, or failing).
        """
        informer = self.caches.informers[c.KIND_TASK]
        if not informer.has_synced:
            raise TaskListError("the Task cache has not synced yet")
        key = workflow_key(namespace, name)
        try:
            total = informer.count(TASKS_BY_WORKFLOW, key)
            succeeded = informer.count(TASKS_BY_OUTCOME, f"{key}#{c.TaskPhase.SUCCEEDED}")
            failed = informer.count(TASKS_BY_OUTCOME, f"{key}#{c.TaskPhase.FAILED}")
            fatal = [t["metadata"]["name"] for t in informer.by_index(FATAL_FAILURES, key)]
        except Exception as exc:  # a cache that cannot answer must not read as "no Tasks"
            raise TaskListError(f"{type(exc).__name__}: {exc}") from exc
        return TaskCount(
            total=total,
            active=total - succeeded - failed,
            succeeded=succeeded,
            failed=failed,
            fatal_failures=tuple(sorted(fatal)),
        )

    # -- the reconcile ---------------------------------------------------------------------------

    def reconcile(self, key: str) -> Result:
        """Reconcile the Workflow ``namespace/name``; never raises (D23)."""
        try:
            return self._reconcile(key)
        except Exception as exc:  # a bug or an API failure outside the machine: retry later
            log.exception("workflow reconcile failed", extra={"workflow": key})
            return Result(
                error=f"internal error: {type(exc).__name__}: {exc}",
                transient=is_transient(exc),
                retry_after=retry_after_of(exc),
            )

    def _reconcile(self, key: str) -> Result:
        namespace, name = key.split("/", 1)
        workflow = self.read_workflow(namespace, name)
        if workflow is None:
            return Result()
        state = WorkflowPassState(
            original=copy.deepcopy(workflow), workflow=workflow, now=self.clock()
        )
        effects = WorkflowEffects(self, state)
        state.path.append((workflow.get("status") or {}).get("phase") or "")
        outcome: WorkflowPassOutcome | None = None
        for _ in range(MAX_STEPS):
            before = state.path[-1]
            outcome = run_pass(self.observe(state), effects, now=state.now)
            self._apply(state, outcome)
            if outcome.reason is not None:
                state.reason = f"{outcome.reason.value}: {outcome.reason_message}"
            if outcome.phase != before:
                state.path.append(outcome.phase)
            if outcome.error or outcome.finalized or outcome.phase == before:
                break
        assert outcome is not None
        if outcome.finalized:
            if "remove_workflow_finalizer" in outcome.effects:
                self.events.record(
                    state.workflow,
                    NORMAL,
                    "Deleted",
                    "no Task is active any more; Workflow finalizer released",
                )
            return Result()
        message = outcome.message
        try:
            self._write_status(state)
        except KubeError as exc:  # e.g. the API server is restarting: retry with backoff
            if is_conflict(exc):
                # Computed from a version that is no longer current (a lagging cache, another
                # writer): nothing of it lands; the retry starts from a fresh read. No Warning.
                return Result(error=f"conflict: {exc}", transient=True)
            log.warning("workflow status write failed", extra={"workflow": key, "error": str(exc)})
            return Result(error=f"failed to update Workflow status: {exc}")
        self._record_events(state, outcome, message)
        if message:
            return Result(error=message)
        return Result(requeue_after=self._requeue_after(state, outcome))

    def _requeue_after(
        self, state: WorkflowPassState, outcome: WorkflowPassOutcome
    ) -> float | None:
        if outcome.requeue_after is not None:
            return max(outcome.requeue_after, 0.01)  # 0 would mean "no requeue" to the worker
        phase = state.status.get("phase") or ""
        if phase in c.WORKFLOW_TERMINAL_PHASES or outcome.state == "deleting":
            return None
        return self.resync_seconds

    def _apply(self, state: WorkflowPassState, outcome: WorkflowPassOutcome) -> None:
        status = state.status
        if outcome.phase:
            status["phase"] = outcome.phase
        conditions = [cond.to_dict() for cond in outcome.conditions]
        if conditions:
            status["conditions"] = conditions
        else:
            status.pop("conditions", None)
        if outcome.message:
            status["message"] = outcome.message
        else:
            status.pop("message", None)

    def _write_status(self, state: WorkflowPassState) -> None:
        before = state.original.get("status") or {}
        after = state.workflow.get("status") or {}
        patch: dict[str, Any] = {k: v for k, v in after.items() if before.get(k) != v}
        patch.update({k: None for k in before if k not in after})  # merge patch: null removes
        if not patch:
            return
        patch_status(self.rest, WORKFLOWS, state.meta, patch, self.remember)

    def _record_events(
        self, state: WorkflowPassState, outcome: WorkflowPassOutcome, message: str
    ) -> None:
        before = (state.original.get("status") or {}).get("phase") or ""
        after = state.status.get("phase") or ""
        if after != before and after:
            text = " -> ".join(p or "(new)" for p in state.path)
            if state.reason:
                text += f": {state.reason}"
            kind = WARNING if after == c.WorkflowPhase.FAILED else NORMAL
            self.events.record(state.workflow, kind, after, text)
        if message:
            self.events.record(state.workflow, WARNING, "ReconcileError", message)

    # -- observation -----------------------------------------------------------------------------

    def observe(self, state: WorkflowPassState) -> WorkflowObservation:
        """Condense the Workflow and its Tasks into a WorkflowObservation (no writes)."""
        workflow = state.workflow
        meta = workflow["metadata"]
        status = workflow.get("status") or {}
        namespace, name = meta["namespace"], meta["name"]
        list_error = ""
        try:
            state.count = self.count_of(namespace, name)
        except TaskListError as exc:
            list_error, state.count = str(exc), TaskCount()
        count = state.count
        labels = meta.get("labels") or {}
        end = _parse_time(status.get("endTime"))
        if end is not None and status.get("endTime") != (state.original.get("status") or {}).get(
            "endTime"
        ):
            end = state.now  # stamped by this reconcile: exact, not truncated to the second
        return WorkflowObservation(
            name=name,
            phase=status.get("phase") or "",
            deletion_requested=bool(meta.get("deletionTimestamp")),
            has_finalizer=c.FINALIZER_WORKFLOW_PROTECTION in (meta.get("finalizers") or []),
            labels_set=all(labels.get(k) == v for k, v in workflow_labels(namespace, name).items()),
            list_error=list_error,
            total=count.total,
            active=count.active,
            succeeded=count.succeeded,
            failed=count.failed,
            fatal_failures=count.fatal_failures,
            counts_recorded=all(status.get(k) == getattr(count, k) for k in _COUNTERS),
            seconds_since_end=None if end is None else max(0.0, (state.now - end).total_seconds()),
            waiting_seconds=self.waiting_seconds,
            conditions=tuple(Condition.from_dict(d) for d in status.get("conditions") or []),
        )
