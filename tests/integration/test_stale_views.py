"""A write computed from a view that is no longer current does not land (F7): the status
patch carries the resourceVersion it was computed from, gets 409, and the Task keeps what it
has; the conflict raises no Warning Event. (Leadership's half of this is in
tests/e2e/test_leader_faults.py.)
"""

from __future__ import annotations

import copy
import threading
import time
from typing import Any

from taskfsm.manifests import jobs
from taskfsm_dev import objects
from taskfsm_dev.waiting import wait_for
from tests.support.faults import Faults, FaultyRest, ReconcileTap, RequestLog
from tests.support.probes import conditions_of, warnings, world


def test_a_status_computed_from_a_stale_view_does_not_land(
    controller_factory, engine, kubelet, probe, namespace
):
    """A pass that starts from an old version of a Succeeded Task (Running, as a paused
    replica or a lagging cache would have it) and finds the Job gone would write Failed/JobLost;
    the status write carries the resourceVersion it was computed from, gets 409 and does not
    land: the Task stays Succeeded, and the conflict raises no Warning Event."""
    world(engine, objects.function("f"))
    log = RequestLog()
    ctl = controller_factory(
        rest_factory=lambda api: FaultyRest(api, log=log, faults=Faults()), start=False
    )
    tap = ReconcileTap(ctl)
    ctl.start()
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="m"))
    running = probe.wait_phase("t", "Running")
    done = probe.wait_phase("t", "Succeeded")
    name = jobs.job_name(done)
    wait_for(
        lambda: not (probe.job(name) or {"metadata": {}})["metadata"].get("finalizers"), timeout=30
    )
    probe.delete_job(name)
    wait_for(lambda: probe.job(name) is None, timeout=30, what="Job gone")
    wait_for(lambda: "jobRef" not in probe.status("t"), timeout=30, what="jobRef cleared")

    stale = copy.deepcopy(running)  # the Running version, with its old resourceVersion
    real_read = ctl.reconciler.read_task
    used = threading.Event()

    def stale_read(ns: str, task_name: str) -> dict[str, Any] | None:
        if task_name == "t" and not used.is_set():
            used.set()
            return copy.deepcopy(stale)
        return real_read(ns, task_name)

    ctl.reconciler.read_task = stale_read
    log.clear()
    tap.settle(f"{namespace}/t")
    assert used.is_set()
    conflicts = [r for r in log.select(verb="PATCH", resource="tasks/status") if r.code == 409]
    assert conflicts, "the stale pass's status write was not refused"
    assert (
        conflicts[0].body["metadata"]["resourceVersion"] == running["metadata"]["resourceVersion"]
    )
    after = probe.task("t")
    assert after["status"]["phase"] == "Succeeded"
    assert "Failed" not in conditions_of(after)
    time.sleep(0.5)
    assert [w for w in warnings(probe, "t") if "conflict" in w.lower()] == []
