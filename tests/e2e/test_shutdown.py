"""Graceful shutdown: on SIGTERM (or ``Controller.stop``) the controller takes no new work,
lets the reconcile in flight finish within the shutdown timeout (abandoning it after), releases
the Lease and exits 0."""

from __future__ import annotations

import threading
import time

import pytest

from taskfsm.api import constants as c
from taskfsm.kube.resources import MEDIA_PROCESSING_ENTITIES
from taskfsm.kube.rest import JOBS, LEASES, Rest
from taskfsm_dev import objects
from taskfsm_dev.objects import kubeconfig_secret, remote_mpe
from taskfsm_dev.proxies import ApiProxy
from taskfsm_dev.waiting import wait_for


class GatedRest(Rest):
    """Holds the first Job creation until ``gate`` opens: a reconcile kept in flight."""

    gate = threading.Event()
    entered = threading.Event()

    def create(self, res, namespace, body, *, dry_run=False):  # type: ignore[override]  # a test double: only the calls under test matter
        if res == JOBS and not GatedRest.entered.is_set():
            GatedRest.entered.set()
            GatedRest.gate.wait(60)
        return super().create(res, namespace, body, dry_run=dry_run)


@pytest.fixture
def gated():
    GatedRest.gate, GatedRest.entered = threading.Event(), threading.Event()
    yield GatedRest
    GatedRest.gate.set()


def setup_objects(cluster) -> None:
    cluster.create(objects.function("fn", run_seconds=0))
    cluster.create(objects.local_mpe("local"))
    for name in ("first", "second"):
        cluster.create(objects.workflow(f"wf-{name}"))


def test_stop_finishes_the_reconcile_in_flight_and_takes_no_new_work(
    cluster, kubelet, make_controller, gated
):
    """stop() lets the reconcile in flight finish and never starts the Task queued behind it."""
    ctl, _requests = make_controller(rest_class=gated, workers=1, shutdown_timeout=30)
    setup_objects(cluster)
    cluster.create(
        objects.task("first", workflow_name="wf-first", function_name="fn", mpe_name="local")
    )
    assert gated.entered.wait(30)
    cluster.create(
        objects.task("second", workflow_name="wf-second", function_name="fn", mpe_name="local")
    )
    wait_for(lambda: len(ctl.queue) >= 1, timeout=10, what="second queued behind first")

    stopper = threading.Thread(target=ctl.stop)
    stopper.start()
    assert ctl.wait(10)  # the stop was requested ...
    time.sleep(1.0)
    assert stopper.is_alive()  # ... and waits for the reconcile in flight
    gated.gate.set()
    stopper.join(20)
    assert not stopper.is_alive()

    first = cluster.task("first")
    assert [j["metadata"]["name"] for j in cluster.jobs()] == [first["status"]["jobRef"]["name"]]
    assert first["status"]["phase"] == "Running"
    second = cluster.task("second")
    assert (second.get("status") or {}).get("phase") in (None, "")
    assert c.FINALIZER_TASK_PROTECTION not in (second["metadata"].get("finalizers") or [])


def test_stop_abandons_a_reconcile_that_outlives_the_timeout(
    cluster, kubelet, make_controller, gated
):
    """stop() abandons a reconcile still blocked when the shutdown timeout ends."""
    ctl, _ = make_controller(rest_class=gated, workers=1, shutdown_timeout=2)
    setup_objects(cluster)
    cluster.create(
        objects.task("first", workflow_name="wf-first", function_name="fn", mpe_name="local")
    )
    assert gated.entered.wait(30)
    stopper = threading.Thread(target=ctl.stop)
    stopper.start()
    stopper.join(15)
    assert not stopper.is_alive()
    assert not gated.gate.is_set()  # stop() returned while the reconcile was still blocked


def test_sigterm_releases_the_lease_and_exits_zero(cluster, kubelet, start_controller, namespace):
    """SIGTERM: the leading process logs its stop, clears the Lease holder and exits 0."""
    proc = start_controller(leader_elect=True, lease_namespace=namespace, identity="only")
    wait_for(lambda: proc.metric("leader_election_master_status") == 1, timeout=20, what="leading")
    lease = cluster.rest.get(LEASES, namespace, "taskfsm-task-controller")
    assert lease["spec"]["holderIdentity"] == "only"

    assert proc.terminate(timeout=30) == 0
    lease = cluster.rest.get(LEASES, namespace, "taskfsm-task-controller")
    assert not lease["spec"].get("holderIdentity")
    log = proc.log_text()
    assert "stopping" in log
    assert "controller stopped" in log
    assert "Traceback" not in log


def test_sigterm_does_not_wait_for_an_unreachable_mpe_cluster(
    cluster, start_controller, control_plane, namespace
):
    """SIGTERM cuts short an MPE reconcile waiting for an unreachable cluster and exits 0 promptly."""
    with ApiProxy(control_plane.server) as proxy:
        proxy.cut()
        kubeconfig = control_plane.kubeconfig_dict(namespace=namespace)
        kubeconfig["clusters"][0]["cluster"]["server"] = proxy.url
        proc = start_controller(args=["--shutdown-timeout=30"])
        cluster.create(kubeconfig_secret("gone-kubeconfig", kubeconfig))
        cluster.create(remote_mpe("gone", "gone-kubeconfig"))
        wait_for(lambda: proxy.accepted, timeout=20, what="the MPE cluster being tried")
        assert proc.terminate(timeout=15) == 0
    assert "abandoning" not in proc.log_text()
    status = cluster.rest.get(MEDIA_PROCESSING_ENTITIES, namespace, "gone").get("status") or {}
    assert "shutting down" not in (status.get("message") or "")
