"""Setting an MPE's client up never waits on its cluster: the registry answers at once from what
the client's Job watch has seen so far (docs/mpe-lifecycle.md, docs/security.md "No object stops
the controller")."""

from __future__ import annotations

import time
from typing import Any

import pytest

from taskfsm.api import constants as c
from taskfsm.controllers.clusters.cluster import MpeCluster, MpeError, MpeSettingUp, Reason
from taskfsm.controllers.clusters.registry import MpeRegistry
from taskfsm.controllers.clusters.watches import SharedWatch
from tests.support.fakes import FakeInformer

KEY = (c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY, "", "m")
REF = {"kind": KEY[0], "namespace": "", "name": "m"}


def setup(jobs: FakeInformer, *, age: float = 0.0) -> tuple[MpeRegistry, MpeCluster]:
    reg = MpeRegistry(
        None,  # type: ignore[arg-type]  # nothing here talks to the API
        on_job_event=lambda _key: None,
        rest_factory=lambda _api: None,  # type: ignore[arg-type,return-value]  # not used
        sync_timeout=30.0,
    )
    watch_key = ("main", "jobs", "")
    shared = SharedWatch(jobs)  # type: ignore[arg-type]  # a fake informer
    shared.users.add(KEY)
    reg.jobs._watches[watch_key] = shared
    cluster = MpeCluster(
        KEY,
        None,  # type: ignore[arg-type]  # no Rest: no request may be made
        "jobs",
        False,
        jobs,  # type: ignore[arg-type]  # a fake informer
        (1,),
        "main",
        watch_key,
        built_at=time.monotonic() - age,
    )
    reg._clusters[KEY] = cluster
    return reg, cluster


def test_a_client_whose_watch_is_still_listing_is_being_set_up():
    reg, cluster = setup(FakeInformer(synced=False))
    with pytest.raises(MpeSettingUp):
        reg._settled(KEY, cluster)
    assert reg._clusters[KEY] is cluster  # kept: its first sync or failure re-queues the MPE
    assert reg.pending(REF)  # Tasks naming it wait quietly
    assert reg.error(REF) == ""


def test_a_synced_client_is_usable():
    reg, cluster = setup(FakeInformer(synced=True))
    assert reg._settled(KEY, cluster) is cluster
    assert reg.get(REF) is cluster


def test_a_first_list_refused_makes_the_mpe_unusable_with_cluster_refused():
    jobs = FakeInformer(synced=False, failures=1, status=403)
    reg, cluster = setup(jobs)
    with pytest.raises(MpeError) as raised:
        reg._settled(KEY, cluster)
    assert raised.value.reason == Reason.CLUSTER_REFUSED
    assert "HTTP 403" in str(raised.value)
    assert KEY not in reg._clusters
    assert jobs.stopped
    assert reg.error(REF) == str(raised.value)
    assert KEY in reg._unreachable_since  # what --cleanup-timeout counts starts
    assert not reg.pending(REF)


def test_a_first_list_that_takes_longer_than_the_sync_timeout_makes_the_mpe_unusable():
    reg, cluster = setup(FakeInformer(synced=False), age=31.0)
    with pytest.raises(MpeError) as raised:
        reg._settled(KEY, cluster)
    assert raised.value.reason == Reason.NOT_REACHABLE
    assert "did not sync within 30s" in str(raised.value)


@pytest.mark.parametrize(
    ("jobs", "reason"),
    [
        (FakeInformer(synced=True), None),
        (FakeInformer(synced=True, failures=2, status=401), Reason.CLUSTER_REFUSED),
        (FakeInformer(synced=True, failures=2, status=403), Reason.CLUSTER_REFUSED),
        (FakeInformer(synced=True, failures=2), Reason.NOT_REACHABLE),
    ],
)
def test_why_a_set_up_client_is_unusable_is_read_from_its_watch(jobs: Any, reason: Any):
    reg, cluster = setup(jobs)
    problem = reg.refusal(cluster)  # the cluster has no Rest: a request would fail the test
    assert (problem.reason if problem else None) == reason
