"""The Job event predicate of the MPE clusters' Job watches: which events wake their Task.

A Task reads only a few facts of its Job (UID, deletion, job-protection, outcome); events that
change none of them, and the events of versions the Task's own reconcile wrote and announced
(``note_own_job``), wake nobody (docs/benchmarks.md). Everything else must still wake the Task.
"""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any

from taskfsm.api import constants as c
from taskfsm.controllers.clusters.watches import JobWatches, SharedWatch


def job(
    rv: int, *, protected: bool = True, complete: bool = False, uid: str = "u1"
) -> dict[str, Any]:
    status: dict[str, Any] = {"active": 1}
    if complete:
        status = {
            "succeeded": 1,
            "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True"},
                {"type": "Complete", "status": "True"},
            ],
        }
    return {
        "metadata": {
            "namespace": "jobs",
            "name": "task-a",
            "uid": uid,
            "resourceVersion": str(rv),
            "labels": {c.LABEL_TASK_NAMESPACE: "ns", c.LABEL_TASK_NAME: "a"},
            "finalizers": [c.FINALIZER_JOB_PROTECTION] if protected else [],
        },
        "status": status,
    }


LOCAL = ("local", "jobs", "")
"""The watch key of a local MPE's Job watch."""
REMOTE = ("https://127.0.0.1:6443", "jobs", "jobs/kubeconfig@7")
"""The watch key of a remote MPE reaching the same cluster and namespace with other credentials."""
CLUSTER = SimpleNamespace(watch_key=LOCAL)
"""Stands in for the MpeCluster the reconcile wrote to (only its watch key is read)."""


CLUSTER_MPE = (c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY, "", "shared")
TENANT_MPE = (c.KIND_MEDIA_PROCESSING_ENTITY, "ns", "own")
OTHER_TENANT_MPE = (c.KIND_MEDIA_PROCESSING_ENTITY, "other", "theirs")


def registry(*users: tuple[str, str, str]) -> tuple[JobWatches, list[str]]:
    """Two Job watches (LOCAL, REMOTE) serving ``users`` (default: a
    ClusterMediaProcessingEntity, which may serve Tasks of any namespace)."""
    woken: list[str] = []
    reg = JobWatches(
        on_job_event=woken.append,
        on_mpe_event=lambda _key: None,
        retired_by=lambda _watch_key: [],
        informer_options={},
    )
    for watch_key in (LOCAL, REMOTE):
        reg._watches[watch_key] = SharedWatch(None, set(users or [CLUSTER_MPE]))  # type: ignore[arg-type]  # the predicate never reads the informer
    return reg, woken


def test_a_job_labelled_for_another_namespaces_task_wakes_nobody():
    """A namespaced MPE's Job watch serves its own namespace's Tasks only: a Job (or a hostile
    remote cluster) naming another namespace's Task in its labels is ignored."""
    reg, woken = registry(OTHER_TENANT_MPE)
    reg._job_event(LOCAL, "ADDED", job(10))
    reg._job_event(REMOTE, "MODIFIED", job(12, complete=True))
    assert woken == []


def test_a_job_labelled_for_the_mpe_namespaces_task_wakes_it():
    reg, woken = registry(TENANT_MPE)
    reg._job_event(LOCAL, "ADDED", job(10))
    assert woken == ["ns/a"]


def test_a_watch_shared_with_a_cluster_mpe_serves_every_namespace():
    reg, woken = registry(OTHER_TENANT_MPE, CLUSTER_MPE)
    reg._job_event(LOCAL, "ADDED", job(10))
    assert woken == ["ns/a"]


def test_a_job_created_by_the_reconcile_does_not_wake_its_task_with_its_added_event():
    reg, woken = registry()
    created = job(10)
    reg.note_own_job(CLUSTER, created)
    reg._job_event(LOCAL, "ADDED", copy.deepcopy(created))
    assert woken == []


def test_the_job_finishing_after_our_own_write_still_wakes_the_task():
    reg, woken = registry()
    reg.note_own_job(CLUSTER, job(10))
    reg._job_event(LOCAL, "ADDED", job(10))
    reg._job_event(LOCAL, "MODIFIED", job(11))  # pods counted: nothing the Task reads
    reg._job_event(LOCAL, "MODIFIED", job(12, complete=True))
    assert woken == ["ns/a"]


def test_our_finalizer_release_is_no_news_but_a_deletion_is():
    reg, woken = registry()
    reg._job_event(LOCAL, "MODIFIED", job(12, complete=True))
    reg.note_own_job(CLUSTER, job(13, complete=True, protected=False))
    reg._job_event(LOCAL, "MODIFIED", job(13, complete=True, protected=False))
    assert woken == ["ns/a"]
    reg._job_event(LOCAL, "DELETED", job(13, complete=True, protected=False))
    assert woken == ["ns/a", "ns/a"]


def test_a_job_replaced_under_the_same_name_wakes_the_task():
    reg, woken = registry()
    reg.note_own_job(CLUSTER, job(10))
    reg._job_event(LOCAL, "ADDED", job(20, uid="u2"))
    assert woken == ["ns/a"]


def test_without_note_own_job_the_first_event_of_a_job_wakes_the_task():
    reg, woken = registry()
    reg._job_event(LOCAL, "ADDED", job(10))
    assert woken == ["ns/a"]


def test_each_job_watch_wakes_the_task_once_its_own_cache_shows_the_outcome():
    """Regression (CI, tests/integration/test_rbac.py): a local and a remote MPE watched the same
    Jobs; the remote watch delivered the completion first, the Task's reconcile read the local
    cache (not there yet) and the local watch's completion event was then dropped as no news:
    the Task stayed Running for ever."""
    reg, woken = registry()
    reg.note_own_job(CLUSTER, job(10))
    reg._job_event(REMOTE, "ADDED", job(10))
    reg._job_event(REMOTE, "MODIFIED", job(12, complete=True))
    reg._job_event(LOCAL, "ADDED", job(10))
    reg._job_event(LOCAL, "MODIFIED", job(12, complete=True))
    assert woken == ["ns/a", "ns/a", "ns/a"]
