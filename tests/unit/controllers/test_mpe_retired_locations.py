"""The MPE registry's earlier locations: an MPE pointed at another cluster or namespace keeps its
old client and Job watch while a Task has its Job there (docs/operations.md, "Changing where an
MPE runs Jobs")."""

from __future__ import annotations

from typing import Any

from taskfsm.api import constants as c
from taskfsm.controllers.clusters.cluster import MpeCluster
from taskfsm.controllers.clusters.registry import MpeRegistry
from taskfsm.controllers.clusters.watches import SharedWatch
from tests.support.fakes import FakeInformer

KEY = (c.KIND_MEDIA_PROCESSING_ENTITY, "ns", "m")
REF = {"kind": KEY[0], "namespace": KEY[1], "name": KEY[2]}


def job(namespace: str, name: str, uid: str) -> dict[str, Any]:
    labels = {c.LABEL_TASK_NAMESPACE: "ns", c.LABEL_TASK_NAME: "t"}
    return {"metadata": {"namespace": namespace, "name": name, "uid": uid, "labels": labels}}


def cluster(reg: MpeRegistry, cluster_id: str, namespace: str, jobs: FakeInformer) -> MpeCluster:
    """A cluster of MPE ``KEY`` whose Job watch is registered (as ``sync`` would)."""
    watch_key = (cluster_id, namespace, "")
    shared = SharedWatch(jobs)  # type: ignore[arg-type]  # a fake informer
    shared.users.add(KEY)
    reg.jobs._watches[watch_key] = shared
    return MpeCluster(KEY, None, namespace, False, jobs, (1,), cluster_id, watch_key)  # type: ignore[arg-type]  # no Rest needed


def registry() -> tuple[MpeRegistry, list[Any]]:
    requeued: list[Any] = []
    reg = MpeRegistry(
        None,  # type: ignore[arg-type]  # nothing here talks to the API
        on_job_event=lambda _key: None,
        rest_factory=lambda _api: None,  # type: ignore[arg-type,return-value]  # not used
        on_mpe_event=requeued.append,
    )
    return reg, requeued


def test_a_task_reads_its_job_in_the_earlier_location_that_holds_it():
    reg, _ = registry()
    old_jobs = FakeInformer({("old", "t-1"): job("old", "t-1", "u1")})
    old = cluster(reg, "main", "old", old_jobs)
    new = cluster(reg, "main", "new", FakeInformer())
    reg._clusters[KEY] = new
    reg._retire_locked(old)
    assert reg.job_cluster(REF, {"namespace": "old", "name": "t-1", "uid": "u1"}) is old
    # Another UID under that name, or no Job recorded yet: the MPE's current cluster.
    assert reg.job_cluster(REF, {"namespace": "old", "name": "t-1", "uid": "u2"}) is new
    assert reg.job_cluster(REF, {}) is new
    assert reg.clusters_with_retired() == [new, old]


def test_an_earlier_location_no_task_needs_is_let_go_and_its_watch_stopped():
    reg, _ = registry()
    old_jobs = FakeInformer()
    old = cluster(reg, "main", "old", old_jobs)
    reg._clusters[KEY] = cluster(reg, "main", "new", FakeInformer())
    reg._retire_locked(old)
    assert reg.release_retired(KEY, []) == 1
    assert not old_jobs.stopped
    assert reg.release_retired(KEY, [old]) == 0
    assert reg.retired(KEY) == []
    assert old_jobs.stopped


def test_a_job_deleted_in_an_earlier_location_requeues_the_mpe():
    reg, requeued = registry()
    old = cluster(reg, "main", "old", FakeInformer())
    reg._clusters[KEY] = cluster(reg, "main", "new", FakeInformer())
    reg._retire_locked(old)
    reg.jobs._job_event(old.watch_key, "MODIFIED", job("old", "t-1", "u1"))
    assert requeued == []
    reg.jobs._job_event(old.watch_key, "DELETED", job("old", "t-1", "u1"))
    assert requeued == [KEY]


def test_pointing_back_at_an_earlier_location_makes_it_current_again():
    reg, _ = registry()
    first_jobs = FakeInformer()
    first = cluster(reg, "main", "a", first_jobs)
    reg._retire_locked(first)
    back = MpeCluster(KEY, None, "a", False, first_jobs, (3,), "main", first.watch_key)  # type: ignore[arg-type]  # no Rest needed
    reg._unretire(KEY, back)
    assert reg.retired(KEY) == []
    assert not first_jobs.stopped  # the current cluster uses that watch again
