"""The Workflow reconciler without a cluster: counting, status writes, requeues, triggers.

A tiny in-memory API (`FakeRest`) and caches stand in for the cluster, so each rule of
`taskfsm.controllers.workflow.reconciler` is checked directly: what is counted, what one status merge
patch carries (a removed endTime as null), how long the termination wait asks to be requeued,
that a Task cache which cannot answer is an error (D20), and which Task events wake a Workflow.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from taskfsm.api import constants as c
from taskfsm.controllers.workflow.handlers import WorkflowWatch
from taskfsm.controllers.workflow.member_tasks import (
    WorkflowTasks,
    task_workflow_key,
    written_failure_action,
)
from taskfsm.controllers.workflow.reconciler import WorkflowReconciler
from taskfsm.kube.cache import WrittenObjects
from tests.support.fakes import FakeEvents, FakeInformer, FakeRest

NS = "ns"
T0 = datetime(2024, 5, 1, 12, 0, 0, 250000, tzinfo=UTC)


class FakeCaches:
    def __init__(self) -> None:
        self.informers = {c.KIND_TASK: FakeInformer(), c.KIND_WORKFLOW: FakeInformer()}
        self.written = WrittenObjects()

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        cached = self.informers[kind].get(namespace, name)
        plural = c.PLURAL_WORKFLOWS if kind == c.KIND_WORKFLOW else c.PLURAL_TASKS
        return self.written.pick(("main", plural, namespace or "", name), cached)


def workflow(name: str = "wf", **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_WORKFLOW,
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "finalizers": [c.FINALIZER_WORKFLOW_PROTECTION],
            "labels": {c.LABEL_WORKFLOW_NAMESPACE: NS, c.LABEL_WORKFLOW_NAME: name},
        },
        "spec": {},
        "status": status,
    }


def task(
    name: str, phase: str = "", *, wf: str = "wf", labelled: bool = True, policy: str | None = None
) -> dict[str, Any]:
    labels = {c.LABEL_WORKFLOW_NAMESPACE: NS, c.LABEL_WORKFLOW_NAME: wf} if labelled else {}
    spec: dict[str, Any] = {"workflowRef": {"name": wf}}
    if policy:
        spec["jobFailurePolicy"] = {"defaultAction": policy}
    return {
        "metadata": {"name": name, "namespace": NS, "labels": labels, "resourceVersion": "1"},
        "spec": spec,
        "status": {"phase": phase} if phase else {},
    }


class World:
    def __init__(
        self, now: datetime = T0, waiting: float = 20.0, finished_ttl: float | None = None
    ) -> None:
        self.caches = FakeCaches()
        self.rest = FakeRest(self.caches.informers[c.KIND_WORKFLOW].objects)
        self.events = FakeEvents()
        self.now = now
        self.reconciler = WorkflowReconciler(
            rest=self.rest,
            caches=self.caches,
            events=self.events,  # type: ignore[arg-type]  # a fake standing in for the real type: duck-typed
            waiting_seconds=waiting,
            resync_seconds=300.0,
            finished_ttl=finished_ttl,
            clock=lambda: self.now,
        )

    def add(self, *objs: dict[str, Any]) -> None:
        for obj in objs:
            kind = c.KIND_WORKFLOW if obj.get("kind") == c.KIND_WORKFLOW else c.KIND_TASK
            self.caches.informers[kind].objects[(NS, obj["metadata"]["name"])] = obj

    def wf(self, name: str = "wf") -> dict[str, Any]:
        return self.caches.informers[c.KIND_WORKFLOW].objects[(NS, name)]


# -- pure helpers ----------------------------------------------------------------------------


def test_tasks_are_counted_by_phase_through_the_cache_indexes_with_each_failure_action() -> None:
    informer = FakeInformer()
    for each in (
        task("a"),
        task("b", "Running"),
        task("c", "Succeeded"),
        task("d", "Failed"),
        task("e", "Failed", policy="Ignore"),
        task("f", "Failed", policy="FailWorkflow"),
    ):
        informer.objects[(NS, each["metadata"]["name"])] = each
    count = WorkflowTasks(informer).count(NS, "wf")  # type: ignore[arg-type]  # a fake informer
    assert (count.total, count.active, count.succeeded, count.failed) == (6, 2, 1, 3)
    assert count.failed_tasks == (("d", ""), ("e", "Ignore"), ("f", "FailWorkflow"))


def test_the_failure_action_is_read_as_written() -> None:
    assert written_failure_action(task("a")) == ""
    assert written_failure_action(task("a", policy="Ignore")) == "Ignore"


def test_task_workflow_key_prefers_labels_then_the_ref() -> None:
    assert task_workflow_key(task("a", wf="x")) == f"{NS}/x"
    assert task_workflow_key(task("a", wf="y", labelled=False)) == f"{NS}/y"
    assert task_workflow_key({"metadata": {"name": "a", "namespace": NS}}) is None


# -- reconcile -------------------------------------------------------------------------------


def test_a_new_workflow_gets_finalizer_labels_and_status_in_one_reconcile() -> None:
    w = World()
    new = workflow()
    new["metadata"].pop("finalizers")
    new["metadata"].pop("labels")
    w.add(new, task("a", "Running"))
    result = w.reconciler.reconcile(f"{NS}/wf")
    assert result.error is None
    assert result.requeue_after == 300.0
    stored = w.wf()
    assert stored["metadata"]["finalizers"] == [c.FINALIZER_WORKFLOW_PROTECTION]
    assert stored["metadata"]["labels"][c.LABEL_WORKFLOW_NAME] == "wf"
    status = stored["status"]
    assert status["phase"] == "Running"
    assert (status["total"], status["active"], status["succeeded"], status["failed"]) == (
        1,
        1,
        0,
        0,
    )
    assert status["queuedTime"] == status["startTime"] == "2024-05-01T12:00:00Z"
    # One metadata write (finalizer and labels) and one status write, each at the version read.
    assert [p[0] for p in w.rest.patches] == [None, "status"]
    # the metadata write at the version read, the status write at the version it answered
    assert [p[1]["metadata"]["resourceVersion"] for p in w.rest.patches] == ["1", "101"]
    assert w.events.recorded == [("Normal", "Running", "(new) -> Initializing -> Running")]


def test_the_termination_wait_is_a_requeue_measured_exactly() -> None:
    w = World(waiting=20.0)
    w.add(
        workflow(phase="Running", total=1, active=1, succeeded=0, failed=0), task("a", "Succeeded")
    )
    result = w.reconciler.reconcile(f"{NS}/wf")
    # endTime is stamped now (second precision on the wire) but the wait is the whole 20 s.
    assert result.requeue_after == pytest.approx(20.0)
    assert w.wf()["status"]["phase"] == "AwaitingCompletion"
    assert w.wf()["status"]["endTime"] == "2024-05-01T12:00:00Z"

    # A later reconcile reads the persisted endTime (12:00:00, the 0.25 s are lost).
    w.now = T0 + timedelta(seconds=8)
    assert w.reconciler.reconcile(f"{NS}/wf").requeue_after == pytest.approx(11.75)
    w.now = T0 + timedelta(seconds=20)
    result = w.reconciler.reconcile(f"{NS}/wf")
    assert result.requeue_after is None
    assert w.wf()["status"]["phase"] == "Succeeded"
    reasons = [r for _, r, _ in w.events.recorded]
    assert reasons == ["AwaitingCompletion", "Succeeded"]
    assert "TasksCompleted" in w.events.recorded[-1][2]


def test_a_new_active_task_clears_end_time_with_a_null() -> None:
    w = World()
    w.add(
        workflow(
            phase="AwaitingCompletion",
            total=1,
            active=0,
            succeeded=1,
            failed=0,
            endTime="2024-05-01T11:59:55Z",
        ),
        task("a", "Succeeded"),
        task("b", "JobPending"),
    )
    assert w.reconciler.reconcile(f"{NS}/wf").error is None
    status_patch = next(body for sub, body in w.rest.patches if sub == "status")["status"]
    assert status_patch["endTime"] is None
    assert status_patch["phase"] == "Running"
    assert "endTime" not in w.wf()["status"]


def test_d20_an_unsynced_task_cache_is_an_error_not_zero_tasks() -> None:
    w = World()
    w.add(workflow(phase="Running", total=2, active=2, succeeded=0, failed=0))
    w.caches.informers[c.KIND_TASK].has_synced = False
    result = w.reconciler.reconcile(f"{NS}/wf")
    assert result.error == "failed to list Tasks: the Task cache has not synced yet"
    status = w.wf()["status"]
    assert (status["phase"], status["total"], status["active"]) == ("Running", 2, 2)
    assert status["message"] == result.error
    assert ("Warning", "ReconcileError", result.error) in w.events.recorded


def test_counts_come_from_the_task_cache_by_workflow_and_outcome() -> None:
    """The Workflow's counters come from indexes of the Task cache (by Workflow and outcome):
    a Task of another Workflow is not counted, a fatal failure fails the Workflow. A phase the
    Task reconciler wrote but the cache does not show yet is counted once the cache has it; its
    watch event wakes the Workflow (see test_only_task_changes_that_matter_wake_the_workflow)."""
    w = World()
    w.add(
        workflow(phase="Running", total=2, active=2, succeeded=0, failed=0),
        task("a", "Failed"),
        task("b", "Succeeded"),
        task("other", "Failed", wf="other"),
    )
    w.reconciler.reconcile(f"{NS}/wf")
    status = w.wf()["status"]
    assert (status["total"], status["succeeded"], status["failed"]) == (2, 1, 1)
    assert status["phase"] == "Failed"
    assert w.events.recorded[0][:2] == ("Warning", "Failed")
    assert "TaskFailed: Task a failed" in w.events.recorded[0][2]


def test_deletion_waits_then_releases_the_finalizer() -> None:
    w = World()
    going = workflow(phase="Running", total=1, active=1, succeeded=0, failed=0)
    going["metadata"]["deletionTimestamp"] = "2024-05-01T11:00:00Z"
    w.add(going, task("a", "Running"))
    assert w.reconciler.reconcile(f"{NS}/wf").error == "not all Tasks have terminated"
    assert c.FINALIZER_WORKFLOW_PROTECTION in w.wf()["metadata"]["finalizers"]
    del w.caches.informers[c.KIND_TASK].objects[(NS, "a")]
    result = w.reconciler.reconcile(f"{NS}/wf")
    assert result.error is None
    assert result.requeue_after is None
    assert w.wf()["metadata"]["finalizers"] == []
    assert w.events.recorded[-1][1] == "Deleted"


def test_retention_deletes_a_finished_workflow_as_read_once_its_ttl_has_passed() -> None:
    """With `--finished-ttl`, a Succeeded Workflow is requeued at its expiry, then deleted with
    its UID and resourceVersion as preconditions; the deletion path then releases it."""
    w = World(finished_ttl=3600.0)
    finished = workflow(
        phase="Succeeded",
        total=1,
        active=0,
        succeeded=1,
        failed=0,
        endTime="2024-05-01T11:00:00Z",
    )
    w.add(finished, task("a", "Succeeded"))
    w.now = T0 - timedelta(minutes=10)  # 50 minutes after endTime
    result = w.reconciler.reconcile(f"{NS}/wf")
    assert result.error is None
    assert result.requeue_after == pytest.approx(599.75)  # T0 is 0.25 s past its second
    assert w.rest.deletes == []

    w.now = T0  # an hour after endTime
    result = w.reconciler.reconcile(f"{NS}/wf")
    assert result.error is None
    assert w.rest.deletes == [(NS, "wf")]
    assert w.wf()["metadata"]["deletionTimestamp"]
    assert [r for _, r, _ in w.events.recorded] == ["FinishedTTLPassed"]
    result = w.reconciler.reconcile(f"{NS}/wf")  # its deletionTimestamp's watch event
    assert result.error is None
    assert w.wf()["metadata"]["finalizers"] == []


def test_retention_never_deletes_a_changed_workflow_from_a_stale_view() -> None:
    """A delete computed from a lagging cache (resourceVersion 1, the server holds 7) does not
    land: nothing is deleted, and the retry starts from the current version."""
    w = World(finished_ttl=60.0)
    stale = workflow(
        phase="Succeeded", total=0, active=0, succeeded=0, failed=0, endTime="2024-05-01T11:00:00Z"
    )
    newer = copy.deepcopy(stale)
    newer["metadata"]["resourceVersion"] = "7"
    w.add(newer)
    w.reconciler.read_workflow = lambda ns, name: copy.deepcopy(stale)  # type: ignore[method-assign]  # test instrumentation: the lagging view a cache can have
    result = w.reconciler.reconcile(f"{NS}/wf")
    assert w.rest.deletes == []
    assert "deletionTimestamp" not in w.wf()["metadata"]
    # The status the pass computed does not land either: a quiet retry from a fresh read.
    assert result.transient
    assert (result.error or "").startswith("conflict")
    assert w.events.recorded == []


def test_without_retention_a_finished_workflow_is_never_deleted() -> None:
    w = World()
    w.add(
        workflow(
            phase="Failed", total=0, active=0, succeeded=0, failed=0, endTime="2020-01-01T00:00:00Z"
        )
    )
    result = w.reconciler.reconcile(f"{NS}/wf")
    assert result.error is None
    assert result.requeue_after is None
    assert w.rest.deletes == []


def test_a_missing_workflow_is_nothing_to_do() -> None:
    w = World()
    w.reconciler.rest.get = lambda *a: (_ for _ in ()).throw(_not_found())  # type: ignore[attr-defined]  # test instrumentation on the fake's REST object
    assert w.reconciler.reconcile(f"{NS}/gone").error is None


def _not_found() -> Exception:
    from taskfsm.kube.errors import NotFound

    return NotFound.__new__(NotFound)


# -- triggers --------------------------------------------------------------------------------


def test_only_task_changes_that_matter_wake_the_workflow() -> None:
    added: list[str] = []
    watch = WorkflowWatch(FakeCaches(), added.append)  # type: ignore[arg-type]  # a fake standing in for the real type: duck-typed
    a = task("a", "", labelled=False)
    watch.on_task("ADDED", a)
    watch.on_task("MODIFIED", a)  # nothing the Workflow counts changed
    watch.on_task("MODIFIED", task("a", ""))  # now labelled: same Workflow key, no change
    watch.on_task("MODIFIED", task("a", "Running"))
    watch.on_task("MODIFIED", task("a", "Running"))
    watch.on_task("MODIFIED", task("a", "Running", wf="other"))  # moved: both Workflows
    watch.on_task("DELETED", task("a", "Running", wf="other"))
    wf, other = f"{NS}/wf", f"{NS}/other"
    assert len(added) == 5
    assert added[:2] == [wf, wf]  # appeared; went Running
    assert sorted(added[2:4]) == [other, wf]  # moved: the old and the new Workflow
    assert added[4] == other  # deleted


def test_workflow_events_queue_the_workflow() -> None:
    added: list[str] = []
    watch = WorkflowWatch(FakeCaches(), added.append)  # type: ignore[arg-type]  # a fake standing in for the real type: duck-typed
    watch.on_workflow("MODIFIED", workflow("x"))
    watch.on_workflow("DELETED", workflow("x"))
    assert added == [f"{NS}/x", f"{NS}/x"]


def test_a_failed_status_write_is_a_retried_error_not_a_crash() -> None:
    from taskfsm.kube.errors import Unavailable

    w = World()
    w.add(
        workflow(phase="Running", total=1, active=1, succeeded=0, failed=0), task("a", "Succeeded")
    )

    def unavailable(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise Unavailable("the API server is restarting", status=503)

    w.rest.patch = unavailable  # type: ignore[method-assign]  # test instrumentation: replaces the method on this one object
    result = w.reconciler.reconcile(f"{NS}/wf")
    assert result.error is not None
    assert result.error.startswith("failed to update Workflow")
    assert result.transient  # a failure of the API: retried with the short backoff
    # said on the Workflow, as the Task's failed writes are
    assert [(t, r) for t, r, _note in w.events.recorded] == [("Warning", "ReconcileError")]


def test_a_status_computed_from_a_stale_view_does_not_land() -> None:
    """The status write carries the resourceVersion the pass read: when someone else wrote the
    Workflow meanwhile (here its phase set to Succeeded), the stale write fails with 409, the
    newer phase stays, and the retry is quiet (no Warning) and starts from the current version."""
    w = World()
    stale = workflow(phase="Initializing")
    w.add(stale, task("a", "Running"))
    newer = copy.deepcopy(stale)
    newer["metadata"]["resourceVersion"] = "7"
    newer["status"] = {"phase": "Succeeded"}
    w.add(newer)  # what the API server holds now

    # The reconcile reads the lagging view a cache can have (resourceVersion 1).
    w.reconciler.read_workflow = lambda ns, name: copy.deepcopy(stale)  # type: ignore[method-assign]  # test instrumentation: replaces the method on this one object
    result = w.reconciler.reconcile(f"{NS}/wf")

    assert result.error is not None, result
    assert result.error.startswith("conflict"), result
    assert result.transient
    assert w.events.recorded == []
    assert w.wf()["status"] == {"phase": "Succeeded"}
    status_writes = [body for sub, body in w.rest.patches if sub == "status"]
    assert status_writes
    assert all(body["metadata"]["resourceVersion"] == "1" for body in status_writes)
    assert w.caches.written.pick(("main", c.PLURAL_WORKFLOWS, NS, "wf"), None) == newer


def test_metadata_computed_from_a_stale_view_does_not_land() -> None:
    """The finalizer and labels are one merge patch at the resourceVersion the pass read (a merge
    patch replaces the finalizer list whole): when someone else wrote the Workflow meanwhile (here
    another finalizer added), the stale write fails with 409, the other finalizer stays, nothing
    of the pass's status is written, and the retry is quiet and starts from the current version."""
    w = World()
    stale = workflow()
    stale["metadata"].pop("finalizers")
    stale["metadata"].pop("labels")
    w.add(stale, task("a", "Running"))
    newer = copy.deepcopy(stale)
    newer["metadata"]["resourceVersion"] = "7"
    newer["metadata"]["finalizers"] = ["example.com/other"]
    w.add(newer)

    w.reconciler.read_workflow = lambda ns, name: copy.deepcopy(stale)  # type: ignore[method-assign]  # test instrumentation: replaces the method on this one object
    result = w.reconciler.reconcile(f"{NS}/wf")

    assert result.error is not None, result
    assert result.error.startswith("conflict"), result
    assert result.transient
    assert w.events.recorded == []
    assert w.wf()["metadata"]["finalizers"] == ["example.com/other"]
    assert [sub for sub, _body in w.rest.patches] == [None]  # no status write after the conflict
    assert w.caches.written.pick(("main", c.PLURAL_WORKFLOWS, NS, "wf"), None) == newer
