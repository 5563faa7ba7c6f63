"""Two ``taskfsm run --leader-elect`` replicas share a coordination.k8s.io Lease: only the leader
reconciles; the other takes over when the leader is killed (after the lease expires) or at once
when the leader stops gracefully and releases the Lease; a leader that cannot renew exits."""

from __future__ import annotations

import time

from taskfsm.kube.rest import LEASES
from taskfsm_dev import objects
from taskfsm_dev.proxies import ApiProxy
from taskfsm_dev.waiting import wait_for
from tests.support.cluster import job_audit, write_kubeconfig

LEASE = "taskfsm-task-controller"
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 15, 10, 2


def holder(cluster) -> str | None:
    return (cluster.rest.get(LEASES, cluster.namespace, LEASE).get("spec") or {}).get(
        "holderIdentity"
    )


def replicas(cluster, start_controller, namespace):
    """Start replica a, wait until it leads, then start replica b (ready, following)."""
    a = start_controller(
        leader_elect=True, lease_namespace=namespace, identity="replica-a", name="a"
    )
    wait_for(lambda: a.metric("leader_election_master_status") == 1, timeout=20, what="a leads")
    b = start_controller(
        leader_elect=True, lease_namespace=namespace, identity="replica-b", name="b"
    )
    assert holder(cluster) == "replica-a"
    assert b.metric("leader_election_master_status") == 0
    return a, b


def setup_objects(cluster) -> None:
    cluster.create(objects.function("fn", run_seconds=0.5))
    cluster.create(objects.local_mpe("local"))


def run_task(cluster, name: str) -> None:
    """A Task in a Workflow of its own (a finished Workflow would end later Tasks in it)."""
    cluster.create(objects.workflow(f"wf-{name}"))
    cluster.create(
        objects.task(name, workflow_name=f"wf-{name}", function_name="fn", mpe_name="local")
    )


def test_follower_takes_over_when_the_leader_is_killed(
    cluster, kubelet, start_controller, namespace
):
    """Only the leader reconciles; after its SIGKILL the follower takes the expired Lease and works."""
    setup_objects(cluster)
    a, b = replicas(cluster, start_controller, namespace)
    run_task(cluster, "before")
    wait_for(lambda: cluster.phase("before") == "Succeeded", timeout=30, what="before Succeeded")
    assert a.metric("controller_runtime_reconcile_total") >= 1
    assert b.metric("controller_runtime_reconcile_total") == 0  # the follower only watches

    a.kill()
    killed = time.monotonic()
    wait_for(
        lambda: b.metric("leader_election_master_status") == 1,
        timeout=LEASE_DURATION + 3 * RETRY_PERIOD + 5,
        what="b leads",
    )
    print(f"takeover {time.monotonic() - killed:.1f}s after SIGKILL (lease {LEASE_DURATION}s)")
    assert holder(cluster) == "replica-b"
    run_task(cluster, "after")
    wait_for(lambda: cluster.phase("after") == "Succeeded", timeout=30, what="after Succeeded")
    assert job_audit(cluster.tasks(), cluster.jobs(), cluster.secrets()) == []


def test_graceful_stop_releases_the_lease_for_an_immediate_takeover(
    cluster, kubelet, start_controller, namespace
):
    """A leader stopped by SIGTERM exits 0 and releases the Lease; the follower leads at once."""
    setup_objects(cluster)
    a, b = replicas(cluster, start_controller, namespace)
    stopped = time.monotonic()
    assert a.terminate() == 0
    assert "controller stopped" in a.log_text()
    wait_for(
        lambda: holder(cluster) != "replica-a", timeout=RETRY_PERIOD + 3, what="Lease released"
    )
    wait_for(
        lambda: b.metric("leader_election_master_status") == 1,
        timeout=LEASE_DURATION - 5,
        what="b leads",
    )
    print(f"takeover {time.monotonic() - stopped:.1f}s after SIGTERM (lease {LEASE_DURATION}s)")
    assert holder(cluster) == "replica-b"
    run_task(cluster, "after")
    wait_for(lambda: cluster.phase("after") == "Succeeded", timeout=30, what="after Succeeded")


def test_leader_cut_off_from_the_api_server_gives_up_and_exits(
    cluster, start_controller, control_plane, namespace, tmp_path, installed_token
):
    """A leader that cannot renew the Lease within the renew deadline stops and exits 1."""
    with ApiProxy(control_plane.server) as proxy:
        kubeconfig = control_plane.kubeconfig_dict()
        kubeconfig["clusters"][0]["cluster"]["server"] = proxy.url
        kubeconfig["users"][0]["user"] = {"token": installed_token()}
        path = write_kubeconfig(tmp_path / "via-proxy.kubeconfig", kubeconfig)
        a = start_controller(
            kubeconfig=path,
            leader_elect=True,
            lease_namespace=namespace,
            identity="cut-off",
            name="a",
        )
        wait_for(lambda: a.metric("leader_election_master_status") == 1, timeout=20, what="a leads")
        proxy.cut()
        cut = time.monotonic()
        wait_for(
            lambda: not a.running, timeout=RENEW_DEADLINE + 2 * RETRY_PERIOD + 10, what="a exits"
        )
        print(
            f"leader gave up {time.monotonic() - cut:.1f}s after the cut (renew deadline {RENEW_DEADLINE}s)"
        )
        assert a.returncode == 1
        assert "lost the Lease" in a.log_text()
