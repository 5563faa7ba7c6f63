"""kube-apiserver restarts in the middle of a run: the controller reconnects and finishes every
Task. The restarted API server is the fault suite's own (``faults_plane``), never the
session's shared one."""

from __future__ import annotations

from taskfsm.kube.rest import DENIAL_HOLD_SECONDS, NAMESPACES, Rest
from taskfsm_dev.waiting import wait_for


def test_restart_apiserver_keeps_objects_port_and_certificate(
    faults_plane, faults_api, faults_namespace
):
    """The helper itself: same URL, same CA, objects kept (etcd stays up)."""
    server, ca = faults_plane.server, faults_plane.ca_file.read_bytes()
    faults_plane.restart_apiserver(kill=True, down_seconds=0.5)
    assert faults_plane.server == server
    assert faults_plane.ca_file.read_bytes() == ca
    with faults_plane.api_client() as fresh:
        assert (
            Rest(fresh).get(NAMESPACES, None, faults_namespace)["metadata"]["name"]
            == faults_namespace
        )


def test_controller_finishes_every_task_across_an_apiserver_restart(
    faults_plane, faults_api, faults_namespace, fleet, ledger, faults_kubelet, controller_process
):
    """30 Tasks in flight, the API server is killed and stays away for 3 s (no graceful close
    of any connection: the harsher case), 10 more Tasks after it is back: all reach their phase
    with one Job each, deletion completes, and the same controller process is still running
    and ready."""
    proc = controller_process().start()
    for i in range(30):
        fleet.add(f"before-{i}", fail=i % 5 == 0)
    faults_plane.restart_apiserver(kill=True, down_seconds=3)
    for i in range(10):
        fleet.add(f"after-{i}", fail=i % 5 == 0)
    assert fleet.wait_settled(120, ledger) == []
    fleet.delete_all()
    assert fleet.wait_settled(60, ledger) == []
    assert proc.running
    # A restarted API server refuses requests while its RBAC caches load; such a refusal stays
    # on /readyz for DENIAL_HOLD_SECONDS unless it recurs (docs/install.md, its opening paragraphs).
    wait_for(
        lambda: proc.probe("/readyz")[0] == 200,
        timeout=DENIAL_HOLD_SECONDS + 60,
        what=lambda: f"ready after the restart ({proc.probe('/readyz')})",
    )
