"""A deleting Task cleans up its Job whatever the controller missed: a Job whose creation's
answer was lost and that the Job cache has not shown yet, a Task whose status never recorded its
MPE, a restart long after the deletion began.

Each is an interleaving the chaos run hit, made deterministic: an in-process controller on the
fault suite's control plane with a Rest that can fail chosen requests (:mod:`tests.support.
faults`) and hold the Job watch.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from taskfsm.manager.manager import Manager, Settings
from taskfsm_dev import objects
from taskfsm_dev.waiting import wait_for
from tests.support.faults import Fault, Faults, FaultyRest, RequestLog

HOLD_LIMIT = 30.0
"""Seconds a held watch request waits at most (the test releases it much sooner)."""


class HoldableRest(FaultyRest):
    """A FaultyRest whose Job lists and watches wait while ``hold`` is set: the Job cache freezes
    (a watch that lags, or a connection that stalls) or never fills (a MediaProcessingEntity
    whose client is still being set up); everything else keeps working."""

    def __init__(self, *args: Any, hold: threading.Event, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hold = hold

    def request(self, method: str, res: Any, path: str, **kwargs: Any) -> Any:
        if kwargs.get("verb") in ("WATCH", "LIST") and res.plural == "jobs":
            deadline = time.monotonic() + HOLD_LIMIT
            while self.hold.is_set() and time.monotonic() < deadline:
                time.sleep(0.05)
        return super().request(method, res, path, **kwargs)


def held(
    api: Any, namespace: str, hold: threading.Event, faults: Faults | None = None, **settings: Any
) -> Manager:
    """A started in-process Manager whose every Rest is a HoldableRest on ``hold``."""
    log, faults = RequestLog(), faults or Faults()

    def factory(api: Any) -> HoldableRest:
        return HoldableRest(api, log=log, faults=faults, hold=hold)

    options = {
        "namespace": namespace,
        "metrics_address": None,
        "health_address": None,
        "shutdown_timeout": 5,
        "watch_timeout": 15,
    }
    return Manager(api, Settings(**{**options, **settings}), rest_factory=factory).start()


@pytest.fixture
def held_controller(
    faults_api, faults_namespace
) -> Iterator[tuple[Manager, Faults, threading.Event]]:
    faults, hold = Faults(), threading.Event()
    ctl = held(faults_api, faults_namespace, hold, faults)
    try:
        yield ctl, faults, hold
    finally:
        hold.clear()
        ctl.stop()


def test_deleting_task_finds_a_job_the_cache_has_not_seen(
    fleet, ledger, faults_kubelet, held_controller
):
    """Chaos run, seed 20261130: a Task deleted while its Job's creation had reached the API
    server but not the controller (the POST's answer was lost to a cut connection, and the Job
    watch was behind) lost its finalizer at once, leaving the Job behind for ever with its
    ``job-protection`` finalizer. A deleting Task must look its Job up in the cluster when the
    cache does not show one, and clean it up before the Task goes."""
    ctl, faults, hold = held_controller
    wait_for(
        lambda: any(cl.ready for cl in ctl.registry.clusters()),
        timeout=30,
        what="MPE Job watch synced",
    )
    hold.set()
    for cluster in ctl.registry.clusters():
        cluster.jobs.reconnect()  # the next Job watch waits on `hold`: the Job cache is frozen
    faults.add(Fault("POST", "jobs", after_send=True))  # created, but the answer is lost
    unreachable = faults.add(Fault("POST", "jobs", times=1000))  # and the retries fail

    fleet.add("orphan")
    wait_for(
        lambda: fleet.children()[0].get("orphan"), timeout=30, what="the Job reached the API server"
    )
    fleet.delete("orphan")
    time.sleep(2)  # the deleting Task is reconciled while the cache still shows no Job
    unreachable.times = 0
    hold.clear()
    assert fleet.wait_settled(30, ledger) == []


def test_deleting_task_whose_status_never_recorded_its_mpe_still_cleans_up(
    fleet, ledger, faults_kubelet, held_controller
):
    """Chaos run, seed 6: the pass that selected the MediaProcessingEntity created the Job, but
    the POST's answer and then the status write were lost to a cut connection, so the Task's
    status never named the MPE. Deleting the Task then removed its finalizer without looking
    for a Job anywhere: the Job stayed for ever with its ``job-protection`` finalizer."""
    ctl, faults, hold = held_controller
    wait_for(
        lambda: any(cl.ready for cl in ctl.registry.clusters()),
        timeout=30,
        what="MPE Job watch synced",
    )
    hold.set()
    for cluster in ctl.registry.clusters():
        cluster.jobs.reconnect()  # the Job cache is frozen
    faults.add(Fault("POST", "jobs", after_send=True))  # created, but the answer is lost
    unreachable = [
        faults.add(Fault("POST", "jobs", times=1000)),  # retries cannot reach the server
        faults.add(Fault("PATCH", "tasks/status", times=1000)),  # nor can the status write
    ]

    fleet.add("unrecorded")
    wait_for(
        lambda: fleet.children()[0].get("unrecorded"),
        timeout=30,
        what="the Job reached the API server",
    )
    assert not (fleet.tasks()["unrecorded"].get("status") or {}).get("mediaProcessingEntityRef")
    fleet.delete("unrecorded")
    time.sleep(2)
    for fault in unreachable:
        fault.times = 0
    hold.clear()
    assert fleet.wait_settled(30, ledger) == []


def test_restart_long_after_a_deletion_cleans_up_instead_of_abandoning(
    faults_api, faults_namespace, fleet, ledger, faults_kubelet
):
    """Found while explaining a chaos run: a Task deleted while the controller was down for
    longer than ``cleanup_timeout`` had its Job abandoned by the restarted controller, because
    its first reconcile ran before the MediaProcessingEntity's Job watch had synced and "not set
    up yet" counted as "unreachable for too long". A pending MPE client is waited for, whatever
    the deletion's age."""
    from taskfsm.kube.resources import BY_KIND

    fleet.rest.create(
        BY_KIND["Function"], faults_namespace, objects.function("long", run_seconds=600)
    )
    first = held(faults_api, faults_namespace, threading.Event(), cleanup_timeout=1)
    try:
        fleet.add("slow", function="long")
        wait_for(
            lambda: (fleet.tasks()["slow"].get("status") or {}).get("phase") == "Running",
            timeout=30,
            what="Running",
        )
    finally:
        first.stop()
    fleet.delete("slow")
    time.sleep(2)  # the controller is down for longer than cleanup_timeout

    hold = threading.Event()
    hold.set()  # the restarted controller's Job watch cannot sync for a while
    second = held(faults_api, faults_namespace, hold, cleanup_timeout=1)
    try:
        time.sleep(12)  # Task workers start after at most 10 s without the MPE
        hold.clear()
        assert fleet.wait_settled(30, ledger) == []
    finally:
        hold.clear()
        second.stop()
