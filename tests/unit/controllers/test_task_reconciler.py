"""The Task reconciler without a cluster, driven through its ports.

The pipeline (read → observe → pass → effects → write → requeue) runs for real; what it talks
to is faked at its ports: the main cluster's Tasks (`FakeStore`, a `TaskStore`), the Jobs in the
MPE clusters (`FakeJobs`, a `JobSite`), the MPE clients (`FakeClusters`, the registry's
surface), the cached catalog (`FakeCatalog`), Events, and the signals to the MPE controller.
Each test names a rule of docs/behaviour.md §3 and checks what the reconcile wrote, which
Events it asked for and when it wants to look again.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from taskfsm.api import constants as c
from taskfsm.controllers.result import AT_ONCE
from taskfsm.controllers.task.effects import TaskEffects
from taskfsm.controllers.task.read import TaskReader
from taskfsm.controllers.task.reconciler import MpeSignals, TaskReconciler
from taskfsm.controllers.task.seen_jobs import SeenJobs
from taskfsm.controllers.task.store import TaskStore
from taskfsm.controllers.task.write import TaskWriter
from taskfsm.kube.errors import Conflict, Forbidden, NotFound
from taskfsm.kube.rest import JOBS
from taskfsm.manifests import jobs
from taskfsm_dev import objects
from tests.support.fakes import FakeEvents, FakeRest

NS = "ns"
NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
MPE_KEY = (c.KIND_MEDIA_PROCESSING_ENTITY, NS, "m")
_uids = itertools.count(1)


def _meta(obj: dict[str, Any], **more: Any) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    meta = obj["metadata"]
    meta.setdefault("namespace", NS)
    meta.setdefault("uid", f"uid-{next(_uids)}")
    meta.setdefault("resourceVersion", "1")
    meta.setdefault("creationTimestamp", "2024-05-01T11:59:00Z")
    meta.update(more)
    return obj


class FakeCatalog:
    """The cached catalog: Workflows, Functions, MPEs (what selection and the builders read)."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}

    def add(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj = _meta(obj)
        cluster_kind = obj["kind"].startswith("Cluster")
        self.objects[(obj["kind"], "" if cluster_kind else NS, obj["metadata"]["name"])] = obj
        return obj

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.objects.get((kind, namespace or "", name))

    def list(self, kind: str, namespace: str | None) -> list[dict[str, Any]]:
        return [
            o for (k, ns, _), o in self.objects.items() if k == kind and ns == (namespace or "")
        ]


class FakeStore:
    """The main cluster's Tasks: resourceVersion preconditions, as the API server keeps them."""

    def __init__(self, catalog: FakeCatalog) -> None:
        self.catalog = catalog
        self.tasks: dict[str, dict[str, Any]] = {}
        self.writes: list[tuple[str, Any]] = []
        self.conflict_on_status = False
        self.deleted: list[str] = []

    def put(self, task: dict[str, Any]) -> dict[str, Any]:
        self.tasks[task["metadata"]["name"]] = task
        return task

    def _bump(self, task: dict[str, Any]) -> None:
        task["metadata"]["resourceVersion"] = str(int(task["metadata"]["resourceVersion"]) + 1)

    def read(self, namespace: str, name: str) -> dict[str, Any] | None:
        task = self.tasks.get(name)
        return copy.deepcopy(task) if task is not None else None

    def workflow(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.catalog.get(c.KIND_WORKFLOW, namespace, name)

    def secret(self, namespace: str, name: str) -> dict[str, Any]:
        raise NotFound(f'secrets "{name}" not found')

    def _check(self, meta: dict[str, Any]) -> dict[str, Any]:
        stored = self.tasks[meta["name"]]
        if stored["metadata"]["resourceVersion"] != meta.get("resourceVersion"):
            raise Conflict("the object has been modified")
        return stored

    def write_metadata(self, work: Any) -> None:
        if not work.metadata_dirty:
            return
        stored = self._check(work.meta)
        for key in ("finalizers", "ownerReferences", "labels"):
            stored["metadata"][key] = copy.deepcopy(work.meta.get(key))
        self._bump(stored)
        self.writes.append(("metadata", copy.deepcopy(stored["metadata"])))
        work.task["metadata"] = copy.deepcopy(stored["metadata"])
        work.metadata_dirty = False

    def patch_status(self, meta: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any] | None:
        if self.conflict_on_status:
            raise Conflict("the object has been modified")
        stored = self._check(meta)
        status = stored.setdefault("status", {})
        for key, value in patch.items():
            if value is None:
                status.pop(key, None)
            else:
                status[key] = copy.deepcopy(value)
        self._bump(stored)
        self.writes.append(("status", copy.deepcopy(patch)))
        return copy.deepcopy(stored)

    def delete(self, meta: dict[str, Any]) -> None:
        self.deleted.append(meta["name"])

    def delete_as_read(self, meta: dict[str, Any]) -> bool:
        self._check(meta)  # the resourceVersion precondition
        stored = self.tasks[meta["name"]]
        self.deleted.append(f"{meta['name']} as read")
        stored["metadata"]["deletionTimestamp"] = "2024-05-01T13:00:00Z"
        self._bump(stored)
        return True

    def remove_finalizer(self, task: dict[str, Any]) -> None:
        stored = self.tasks[task["metadata"]["name"]]
        stored["metadata"]["finalizers"] = [
            f
            for f in stored["metadata"].get("finalizers") or []
            if f != c.FINALIZER_TASK_PROTECTION
        ]
        self.writes.append(("finalizer removed", task["metadata"]["name"]))


@dataclass
class FakeCluster:
    """An MPE's cluster as the Task controller uses it."""

    namespace: str = "jobs"
    remote: bool = False
    cluster_id: str = "main"
    healthy: bool = True
    """Its Job watch is connected."""

    def may_hold_jobs_in(self, namespace: str) -> bool:
        return True


@dataclass
class FakeJobSite:
    """The Job site (``taskfsm.controllers.task.jobsite``) of the MPE cluster: what the cluster
    holds, and what the Job watch shows."""

    server: dict[str, dict[str, Any]] = field(default_factory=dict)
    cache_lags: bool = False
    refuse: bool = False
    calls: list[str] = field(default_factory=list)

    def cached(self, cluster: Any, name: str) -> dict[str, Any] | None:
        self.calls.append(f"cached {name}")
        return None if self.cache_lags else copy.deepcopy(self.server.get(name))

    def written(self, cluster: Any, name: str) -> dict[str, Any] | None:
        return None

    def fetch(self, cluster: Any, namespace: str, name: str) -> dict[str, Any] | None:
        self.calls.append(f"fetch {name}")
        if self.refuse:
            raise Forbidden("jobs.batch is forbidden: the token was revoked")
        return copy.deepcopy(self.server.get(name))

    def refusal(self, cluster: Any, job: dict[str, Any], *, now: Any) -> Any:
        return None

    def pods_not_starting(self, cluster: Any, job: dict[str, Any], *, now: Any) -> Any:
        return None

    def remember(self, cluster: Any, job: dict[str, Any], *, known: bool = False) -> None:
        pass

    def create_or_adopt(self, cluster: Any, res: Any, body: dict[str, Any], task: Any) -> Any:
        self.calls.append(f"create {res.plural}")
        made = _meta(body, namespace=cluster.namespace)
        if res is JOBS:
            self.server[made["metadata"]["name"]] = made
        return made

    def own_secret(self, cluster: Any, existing: Any, secret: Any) -> None:
        self.calls.append("own secret")

    def delete(self, cluster: Any, job: dict[str, Any], *, name: str, uid: str) -> Any:
        self.calls.append(f"delete {name}")
        self.server.pop(name, None)
        return None

    def release(self, cluster: Any, job: dict[str, Any], *, known: bool) -> None:
        self.calls.append(f"release {job['metadata']['name']}")
        stored = self.server.get(job["metadata"]["name"])
        if stored is not None:
            stored["metadata"]["finalizers"] = []


@dataclass
class FakeClusters:
    """The MPE client registry's surface the read uses."""

    cluster: FakeCluster | None = field(default_factory=FakeCluster)
    pending_: bool = False
    released_: bool = False
    unreachable: float = 0.0
    reachable: list[bool] = field(default_factory=list)

    def job_cluster(self, ref: Any, job_ref: Any) -> FakeCluster | None:
        return self.cluster if ref else None

    def pending(self, ref: Any) -> bool:
        return self.pending_

    def released(self, ref: Any) -> bool:
        return self.released_

    def error(self, ref: Any) -> str:
        return ""

    def never_reached(self, mpe: Any, *, jobs_recorded: bool) -> str:
        return ""

    def unreachable_for(self, ref: Any) -> float:
        return self.unreachable

    def mark_reachable(self, ref: Any) -> None:
        self.reachable.append(True)

    def mark_unreachable(self, ref: Any) -> None:
        self.reachable.append(False)


class World:
    """A Task reconciler on fake ports, with a Workflow, a Function and a local MPE."""

    def __init__(self, finished_ttl: float | None = None, *, phase_events: bool = False) -> None:
        self.now = NOW
        self.catalog = FakeCatalog()
        self.catalog.add(objects.workflow("wf"))
        self.catalog.add(objects.function("f"))
        self.mpe = self.catalog.add(objects.local_mpe("m", default=True))
        self.store = FakeStore(self.catalog)
        self.jobs = FakeJobSite()
        self.clusters = FakeClusters()
        self.events = FakeEvents()
        self.seen = SeenJobs()
        self.waits: list[tuple[Any, str]] = []
        self.rechecks: list[Any] = []
        self.still_pending = True
        reader = TaskReader(
            store=self.store,  # type: ignore[arg-type]  # a fake port
            caches=self.catalog,  # type: ignore[arg-type]  # a fake port
            clusters=self.clusters,  # type: ignore[arg-type]  # a fake port
            jobs=self.jobs,  # type: ignore[arg-type]  # a fake port
            seen=self.seen,
            clock=lambda: self.now,
            cleanup_timeout=120.0,
            job_pods_refused_timeout=600.0,
        )
        self.reconciler = TaskReconciler(
            reader=reader,
            effects=lambda work: TaskEffects(
                work,
                store=self.store,  # type: ignore[arg-type]  # a fake port
                jobs=self.jobs,  # type: ignore[arg-type]  # a fake port
                catalog=self.catalog,  # type: ignore[arg-type]  # a fake port
                seen=self.seen,
            ),
            writer=TaskWriter(
                self.store,  # type: ignore[arg-type]  # a fake port
                self.events,  # type: ignore[arg-type]  # a fake port
                phase_events=phase_events,
            ),
            signals=MpeSignals(wait=self._wait, recheck=self.rechecks.append),
            resync_seconds=300.0,
            finished_ttl=finished_ttl,
            clock=lambda: self.now,
        )

    def _wait(self, mpe: Any, key: str) -> bool:
        self.waits.append((mpe, key))
        return self.still_pending

    def task(self, name: str = "t", **status: Any) -> dict[str, Any]:
        body = _meta(objects.task(name, workflow_name="wf", function_name="f", mpe_name="m"))
        if status:
            body["status"] = status
        return self.store.put(body)

    def running(self, name: str = "t", *, job_state: str = "active", **meta: Any) -> dict[str, Any]:
        """A Task Running with its Job (``job_state``: active, suspended, succeeded, failed)."""
        task = self.task(name)
        self.reconciler.reconcile(f"{NS}/{name}")
        stored = self.store.tasks[name]
        assert stored["status"]["phase"] == "Running"
        job = self.jobs.server[jobs.job_name(stored)]
        job["metadata"]["finalizers"] = [c.FINALIZER_JOB_PROTECTION]
        conditions = {
            "active": [],
            "suspended": [{"type": "Suspended", "status": "True"}],
            "succeeded": [{"type": "Complete", "status": "True"}],
            "failed": [{"type": "Failed", "status": "True"}],
        }[job_state]
        job["status"] = {"conditions": conditions, "active": 1 if job_state == "active" else 0}
        stored["metadata"].update(meta)
        self.store.writes.clear()
        self.events.recorded.clear()
        return task

    def reconcile(self, name: str = "t") -> Any:
        return self.reconciler.reconcile(f"{NS}/{name}")

    def status(self, name: str = "t") -> dict[str, Any]:
        return self.store.tasks[name].get("status") or {}


def test_a_new_task_reaches_running_in_one_reconcile_with_one_metadata_and_one_status_write():
    w = World()
    w.task()
    result = w.reconcile()
    assert result.error is None
    # The Job has no pods yet: the chart looks again soon (a refusal of its pods is no event).
    assert result.requeue_after == 10.0
    assert [kind for kind, _ in w.store.writes] == ["metadata", "status"]
    assert w.jobs.calls[-2:] == ["create jobs", "create secrets"]
    status = w.status()
    assert status["phase"] == "Running"
    assert status["jobRef"]["name"] == jobs.job_name(w.store.tasks["t"])
    assert status["startTime"] == status["queuedTime"] == "2024-05-01T12:00:00Z"
    assert w.events.recorded == []  # a phase change is an Event only with --task-phase-events


def test_with_task_phase_events_each_phase_change_is_a_normal_event():
    w = World(phase_events=True)
    w.task()
    w.reconcile()
    assert w.events.recorded == [
        ("Normal", "Running", "(new) -> Initializing -> JobPending -> Running")
    ]
    w.jobs.server[jobs.job_name(w.store.tasks["t"])]["status"] = {
        "conditions": [{"type": "Complete", "status": "True"}]
    }
    w.reconcile()
    assert w.events.reasons()[-1] == "Normal/Succeeded"


def test_the_finalizer_is_written_before_the_job_exists():
    w = World()
    w.task()
    order: list[str] = []
    store_write, create = w.store.write_metadata, w.jobs.create_or_adopt
    w.store.write_metadata = lambda work: (order.append("metadata"), store_write(work))[1]  # type: ignore[method-assign]  # test instrumentation
    w.jobs.create_or_adopt = lambda *a: (order.append("create"), create(*a))[1]  # type: ignore[method-assign]  # test instrumentation
    w.reconcile()
    assert order[:2] == ["metadata", "create"]


def test_entering_a_terminal_phase_ends_the_reconcile_and_looks_again_at_once():
    w = World()
    w.running(job_state="succeeded")
    result = w.reconcile()
    assert w.status()["phase"] == "Succeeded"
    assert result.requeue_after == AT_ONCE
    assert not any(call.startswith("release") for call in w.jobs.calls)  # D18: not yet
    assert w.events.reasons() == []  # no --task-phase-events
    w.reconcile()  # the housekeeping, once the outcome is durable
    assert w.jobs.calls[-1].startswith("release")


def test_a_finished_task_is_no_longer_remembered_as_having_seen_its_job():
    """Once the outcome is recorded a missing Job changes nothing (F9a): the next read forgets
    what the process saw of the Task's Job, and housekeeping reads do not note it again (a
    restart with 10,000 finished Tasks kept an entry for each)."""
    w = World()
    w.running(job_state="succeeded")
    w.reconcile()
    assert w.status()["phase"] == "Succeeded"
    assert len(w.seen) == 1  # the pass that recorded the outcome had read the Job
    w.reconcile()  # the housekeeping reads the Job again
    assert w.jobs.calls[-1].startswith("release")
    assert len(w.seen) == 0


def test_a_failed_job_fails_the_task_with_a_warning_event():
    w = World()  # without --task-phase-events: a Warning phase change is an Event all the same
    w.running(job_state="failed")
    w.reconcile()
    assert w.status()["phase"] == "Failed"
    assert w.events.recorded[0][:2] == ("Warning", "Failed")
    assert w.events.recorded[0][2].endswith(": JobFailed")


def test_a_job_missing_from_the_cache_is_confirmed_from_its_cluster_before_it_is_lost():
    w = World()
    w.running()
    name = jobs.job_name(w.store.tasks["t"])
    w.jobs.cache_lags = True  # the watch has not shown it: the cluster still has it
    w.jobs.calls.clear()
    w.reconcile()
    assert f"fetch {name}" in w.jobs.calls
    assert w.status()["phase"] == "Running"
    del w.jobs.server[name]  # now it is really gone
    w.reconcile()
    assert w.status()["phase"] == "Failed"
    assert w.status()["conditions"][-1]["reason"] == "JobLost"
    note = w.events.recorded[-1][2]
    assert "JobLost (Job" in note
    assert "was lost before its outcome was recorded" in note


def test_an_mpe_ref_of_another_namespace_in_status_is_replaced_by_selection():
    """A namespaced MPE ref naming another namespace is not followed (docs/security.md); the
    Task selected again instead of waiting in JobPending with no word (a regression)."""
    w = World()
    foreign = {"kind": c.KIND_MEDIA_PROCESSING_ENTITY, "namespace": "other", "name": "m"}
    function = {"kind": c.KIND_FUNCTION, "namespace": NS, "name": "f"}
    w.task(phase="JobPending", mediaProcessingEntityRef=foreign, functionRef=function)
    assert w.reconcile().error is None
    status = w.status()
    assert status["mediaProcessingEntityRef"]["namespace"] == NS
    assert status["phase"] == "Running"
    assert "create jobs" in w.jobs.calls


def _squat(w: World, name: str, **labels: str) -> dict[str, Any]:
    """A Job under ``name`` that some tenant made: not the Task's (no labels, or another's)."""
    job = _meta({"metadata": {"name": name, "labels": labels}}, uid="uid-squatter")
    job["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    w.jobs.server[name] = job
    return job


def test_an_object_under_the_jobs_name_that_is_not_the_tasks_is_left_alone():
    w = World()
    w.task()
    name = jobs.job_name(w.store.tasks["t"])
    _squat(w, name, **{c.LABEL_TASK_NAME: "other"})
    result = w.reconcile()
    status = w.status()
    # Not adopted (its Complete condition is not the Task's outcome), not deleted, no Job made.
    assert status["phase"] == "JobPending"
    assert "jobRef" not in status
    assert result.error is not None
    assert "does not belong to this Task" in result.error
    assert "create jobs" not in w.jobs.calls
    assert f"delete {name}" not in w.jobs.calls
    assert w.jobs.server[name]["metadata"]["uid"] == "uid-squatter"
    assert w.events.recorded[-1][:2] == ("Warning", "ReconcileError")
    # Once it is gone, the Task makes its own Job.
    del w.jobs.server[name]
    assert w.reconcile().error is None
    assert w.status()["phase"] == "Running"
    assert w.jobs.server[name]["metadata"]["uid"] != "uid-squatter"


def test_the_job_status_recorded_stays_the_tasks_even_without_its_labels():
    w = World()
    w.running(job_state="succeeded")
    name = jobs.job_name(w.store.tasks["t"])
    w.jobs.server[name]["metadata"]["labels"] = {}  # someone edited them away
    w.reconcile()
    status = w.status()
    assert status["phase"] == "Succeeded"
    assert status["conditions"][-1]["reason"] != "JobLost"


def test_a_tasks_job_replaced_by_another_object_is_lost_and_the_other_is_never_deleted():
    w = World()
    w.running()
    name = jobs.job_name(w.store.tasks["t"])
    _squat(w, name)  # the Task's Job was deleted and something else took its name
    w.reconcile()
    status = w.status()
    assert status["phase"] == "Failed"
    assert status["conditions"][-1]["reason"] == "JobLost"  # not the squatter's Complete
    for _ in range(3):  # terminal housekeeping: nothing of the other object is touched
        w.reconcile()
    assert f"delete {name}" not in w.jobs.calls
    assert f"release {name}" not in w.jobs.calls
    assert w.jobs.server[name]["metadata"]["uid"] == "uid-squatter"
    assert "jobRef" not in w.status() or w.status()["jobRef"] is None


def test_a_terminated_workflow_reads_the_job_from_its_cluster_and_its_outcome_wins():
    w = World()
    w.running(job_state="succeeded")
    w.catalog.objects[(c.KIND_WORKFLOW, NS, "wf")]["status"] = {"phase": "Failed"}
    w.jobs.calls.clear()
    w.reconcile()
    assert any(call.startswith("fetch") for call in w.jobs.calls)
    assert w.status()["phase"] == "Succeeded"


def test_a_task_waits_quietly_for_its_mpe_client_and_registers_with_the_mpe():
    w = World()
    w.task()
    w.clusters.cluster = None
    w.clusters.pending_ = True
    result = w.reconcile()
    assert result.error is None
    assert result.requeue_after == 300.0  # the MPE's reconcile wakes it; the resync bounds it
    assert w.waits == [(MPE_KEY, f"{NS}/t")]
    assert w.status()["phase"] == "JobPending"
    assert "waiting for its client to be set up" in w.status()["message"]
    assert "Warning/ReconcileError" not in w.events.reasons()


def test_a_wait_whose_mpe_is_no_longer_pending_is_decided_again_now():
    w = World()
    w.task()
    w.clusters.cluster = None
    w.clusters.pending_ = True
    w.still_pending = False  # ready or failed meanwhile
    assert w.reconcile().requeue_after == AT_ONCE


def test_a_refused_job_read_reports_the_mpe_and_asks_its_reconcile_to_look_now():
    w = World()
    w.running()
    w.catalog.objects[(c.KIND_WORKFLOW, NS, "wf")]["status"] = {"phase": "Failed"}  # a fresh read
    w.jobs.refuse = True
    result = w.reconcile()
    assert result.error is not None
    assert "forbidden" in result.error
    assert result.transient  # the MPE's cluster, not the Task: a short backoff
    assert w.rechecks == [MPE_KEY]
    assert w.clusters.reachable[-1] is False  # the cleanup bound's clock runs
    assert w.events.reasons() == ["Warning/ReconcileError"]


def test_a_conflict_on_the_status_write_discards_the_reconcile_without_an_event():
    w = World()
    w.task()
    w.store.conflict_on_status = True
    result = w.reconcile()
    assert result.error is not None
    assert result.error.startswith("conflict")
    assert result.transient
    assert w.events.recorded == []


def test_a_job_whose_function_is_missing_is_not_made_and_the_task_says_why():
    w = World()
    w.task()
    del w.catalog.objects[(c.KIND_FUNCTION, NS, "f")]
    w.task(
        "t",
        phase="JobPending",
        mediaProcessingEntityRef={
            "kind": c.KIND_MEDIA_PROCESSING_ENTITY,
            "name": "m",
            "namespace": NS,
        },
        functionRef={"kind": c.KIND_FUNCTION, "name": "f", "namespace": NS},
    )
    result = w.reconcile()
    assert result.error == 'functions.engine.nagare.media "f" not found'
    assert not any(call.startswith("create") for call in w.jobs.calls)


def test_a_remote_mpe_for_a_local_only_function_makes_no_job():
    w = World()
    w.catalog.objects[(c.KIND_FUNCTION, NS, "f")]["spec"]["localMediaProcessingEntitiesOnly"] = True
    w.clusters.cluster = FakeCluster(remote=True, cluster_id="https://remote")
    w.task()
    result = w.reconcile()
    assert result.error is not None
    assert "localMediaProcessingEntitiesOnly" in result.error
    assert w.status()["phase"] == "JobPending"
    assert not any(call.startswith("create") for call in w.jobs.calls)


def test_a_suspended_job_is_one_event_and_its_resumption_another():
    w = World()
    w.running(job_state="suspended")
    w.reconcile()
    w.reconcile()
    assert w.events.reasons() == ["Normal/JobSuspended"]
    job = w.jobs.server[jobs.job_name(w.store.tasks["t"])]
    job["status"] = {"conditions": [], "active": 1}
    w.reconcile()
    assert w.events.reasons() == ["Normal/JobSuspended", "Normal/JobResumed"]
    assert {"type": "Ready", "status": "True"}.items() <= w.status()["conditions"][1].items()


def test_a_finished_task_deletes_its_job_when_its_mpe_is_being_deleted():
    w = World()
    w.running(job_state="succeeded")
    w.reconcile()  # Succeeded
    w.reconcile()  # the Job's finalizer released
    w.mpe["metadata"]["deletionTimestamp"] = "2024-05-01T12:00:00Z"
    w.events.recorded.clear()
    w.reconcile()
    name = jobs.job_name(w.store.tasks["t"])
    assert f"delete {name}" in w.jobs.calls
    assert w.events.reasons() == ["Normal/JobDeleted"]
    assert w.status()["phase"] == "Succeeded"  # the outcome stays


def test_retention_deletes_a_finished_task_without_its_workflow_once_its_ttl_has_passed():
    """With `--finished-ttl`, a Succeeded Task whose Workflow does not exist is no error: it is
    requeued at its expiry, then deleted as read, and its deletion cleans up its Job."""
    w = World(finished_ttl=3600.0)
    w.running(job_state="succeeded")
    w.reconcile()  # Succeeded, endTime now
    w.reconcile()  # the Job's finalizer released
    del w.catalog.objects[(c.KIND_WORKFLOW, NS, "wf")]
    w.events.recorded.clear()
    w.now = NOW + timedelta(minutes=50)
    result = w.reconcile()
    assert result.error is None
    assert result.requeue_after == pytest.approx(600.0)
    assert w.store.deleted == []

    w.now = NOW + timedelta(hours=1)
    result = w.reconcile()
    assert result.error is None
    assert w.store.deleted == ["t as read"]
    assert w.events.reasons() == ["Normal/FinishedTTLPassed"]
    assert w.status()["phase"] == "Succeeded"
    result = w.reconcile()  # its deletionTimestamp's watch event: the normal deletion path
    name = jobs.job_name(w.store.tasks["t"])
    assert f"delete {name}" in w.jobs.calls
    assert w.store.writes[-1] == ("finalizer removed", "t")


def test_without_retention_a_finished_task_without_its_workflow_is_reported_not_deleted():
    w = World()
    w.running(job_state="succeeded")
    w.reconcile()
    del w.catalog.objects[(c.KIND_WORKFLOW, NS, "wf")]
    w.now = NOW + timedelta(days=365)
    result = w.reconcile()
    assert (result.error or "").startswith("failed to fetch Workflow")
    assert w.store.deleted == []


def test_the_task_store_deletes_only_the_version_it_read():
    """`TaskStore.delete_as_read` sends UID and resourceVersion preconditions: a Task changed
    since (or another Task of that name) is not deleted; one already gone is done."""
    task = _meta(objects.task("t", workflow_name="wf"), resourceVersion="5")
    rest = FakeRest({(NS, "t"): task})
    store = TaskStore(rest, None)  # type: ignore[arg-type]  # deleting reads no cache
    assert store.delete_as_read({**task["metadata"], "resourceVersion": "4"}) is False
    assert store.delete_as_read({**task["metadata"], "uid": "another"}) is False
    assert rest.deletes == []
    assert store.delete_as_read(task["metadata"]) is True
    assert rest.deletes == [(NS, "t")]
    assert (NS, "t") not in rest.objects  # no finalizer: gone
    assert store.delete_as_read(task["metadata"]) is True


def test_a_deleting_task_whose_status_named_no_mpe_records_the_one_selection_finds():
    w = World()
    task = w.task()
    task["metadata"]["finalizers"] = [c.FINALIZER_TASK_PROTECTION]
    task["metadata"]["deletionTimestamp"] = "2024-05-01T11:59:30Z"
    task["status"] = {"phase": "JobPending", "functionRef": {"kind": c.KIND_FUNCTION, "name": "f"}}
    w.clusters.cluster = None  # its client is being set up: the deletion waits for it
    w.clusters.pending_ = True
    w.reconcile()
    assert w.status()["mediaProcessingEntityRef"]["name"] == "m"
    assert w.waits == [(MPE_KEY, f"{NS}/t")]


def test_a_deleting_task_cleans_up_its_job_removes_its_finalizer_and_says_so():
    w = World()
    w.running()
    stored = w.store.tasks["t"]
    stored["metadata"]["deletionTimestamp"] = "2024-05-01T12:00:00Z"
    result = w.reconcile()
    name = jobs.job_name(stored)
    assert result.error is None
    assert result.requeue_after is None
    assert w.jobs.calls[-2:] == [f"delete {name}", f"release {name}"]
    assert w.store.writes == [("finalizer removed", "t")]  # no status write for a Task that goes
    assert w.events.reasons() == ["Normal/Deleted"]
    assert len(w.seen) == 0  # what the process remembered of the Task goes with it


def test_a_deleting_task_whose_job_watch_fails_reads_its_job_from_the_cluster():
    w = World()
    w.running()
    stored = w.store.tasks["t"]
    stored["metadata"]["deletionTimestamp"] = "2024-05-01T12:00:00Z"
    name = jobs.job_name(stored)
    assert w.clusters.cluster is not None
    w.clusters.cluster.healthy = False  # the cache no longer follows the cluster
    w.jobs.calls.clear()
    w.reconcile()
    assert w.jobs.calls[0] == f"fetch {name}"
    assert f"cached {name}" not in w.jobs.calls


def test_a_deleting_task_reads_its_job_from_a_healthy_watch_cache():
    w = World()
    w.running()
    stored = w.store.tasks["t"]
    stored["metadata"]["deletionTimestamp"] = "2024-05-01T12:00:00Z"
    name = jobs.job_name(stored)
    w.jobs.calls.clear()
    w.reconcile()
    assert w.jobs.calls[0] == f"cached {name}"
    assert f"fetch {name}" not in w.jobs.calls


def test_a_deleting_task_leaves_the_job_of_an_unreachable_mpe_after_the_cleanup_bound():
    w = World()
    w.running()
    w.store.tasks["t"]["metadata"]["deletionTimestamp"] = "2024-05-01T12:00:00Z"
    w.clusters.unreachable = 30.0
    w.jobs.cache_lags = w.jobs.refuse = True
    result = w.reconcile()
    assert result.error is not None
    assert "waits 90s more" in result.error
    assert w.rechecks == [MPE_KEY]
    w.clusters.unreachable = 121.0
    result = w.reconcile()
    assert result.error is None
    assert w.events.reasons()[-2:] == ["Warning/JobAbandoned", "Normal/Deleted"]


def test_the_workflow_terminating_before_the_job_is_made_fails_the_task():
    w = World()
    w.task()
    w.catalog.objects[(c.KIND_WORKFLOW, NS, "wf")]["status"] = {"phase": "Failed"}
    w.reconcile()
    assert w.status()["phase"] == "Failed"
    assert w.status()["conditions"][-1]["reason"] == "WorkflowTerminated"
    assert not any(call.startswith("create") for call in w.jobs.calls)


def test_a_deleting_task_whose_mpe_was_let_go_at_its_deletion_goes_without_waiting():
    """Regression (CI, a namespace deletion): the Task failed when the namespace's deletion
    took its Job; its MPE, needed by no Task any more, finished its deletion and dropped its
    client while still in the cache. The Task must not wait for a client nobody sets up."""
    w = World()
    w.running()
    name = jobs.job_name(w.store.tasks["t"])
    del w.jobs.server[name]
    w.reconcile()
    assert w.status()["phase"] == "Failed"  # JobLost
    w.mpe["metadata"]["deletionTimestamp"] = "2024-05-01T12:00:00Z"
    w.store.tasks["t"]["metadata"]["deletionTimestamp"] = "2024-05-01T12:00:00Z"
    w.clusters.cluster = None
    w.clusters.released_ = True  # the MPE's last reconcile let go of it
    w.events.recorded.clear()
    result = w.reconcile()
    assert result.error is None
    assert w.waits == []
    assert w.store.writes[-1] == ("finalizer removed", "t")
    assert w.events.reasons() == ["Warning/JobAbandoned", "Normal/Deleted"]


def test_a_task_deleted_meanwhile_is_nothing_to_do():
    w = World()
    assert w.reconcile("gone").error is None
    assert w.store.writes == []
