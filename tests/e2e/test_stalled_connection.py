"""A pooled connection that went silent costs one short read timeout, not a minute.
``taskfsm run`` reaches a MediaProcessingEntity's cluster (the main API server again)
through a TCP proxy, :class:`taskfsm_dev.proxies.ApiProxy`, whose open connections are then
stalled (nothing relayed, no FIN or RST) while new ones are relayed normally; the Task watch
talks to the main cluster directly, so the controller sees new Tasks at once."""

from __future__ import annotations

import time

import pytest

from taskfsm.kube.rest import DEFAULT_TIMEOUT, EVENTS
from taskfsm_dev import objects
from taskfsm_dev.objects import kubeconfig_secret, remote_mpe
from taskfsm_dev.proxies import ApiProxy
from taskfsm_dev.waiting import wait_for
from tests.support.cluster import job_audit


@pytest.fixture
def proxy(control_plane):
    with ApiProxy(control_plane.server) as p:
        yield p


def create_task(cluster, name: str) -> None:
    cluster.create(objects.workflow(f"wf-{name}"))
    cluster.create(
        objects.task(name, workflow_name=f"wf-{name}", function_name="fn", mpe_name="via-proxy")
    )


def notes_about(cluster, name: str) -> list[str]:
    events = cluster.rest.list(EVENTS, cluster.namespace)["items"]
    return [e.get("note") or "" for e in events if (e.get("regarding") or {}).get("name") == name]


def test_a_stalled_pooled_connection_costs_one_read_timeout(
    cluster, kubelet, start_controller, control_plane, proxy, namespace
):
    """After the MPE cluster's connections stall, the reconcile that takes a dead pooled
    connection for its first write fails after one read timeout of 10 s (not 30 s; the request
    is not sent again on another dead one), and the reconcile retried at once succeeds on a
    fresh connection: the Task gets its one Job and succeeds."""
    proc = start_controller()  # watch timeout 20 s + 5 s margin: the stalled Job watch stays
    kubeconfig = control_plane.kubeconfig_dict(namespace=namespace)
    kubeconfig["clusters"][0]["cluster"]["server"] = proxy.url
    cluster.create(kubeconfig_secret("via-proxy-kubeconfig", kubeconfig))
    cluster.create(remote_mpe("via-proxy", "via-proxy-kubeconfig"))
    cluster.create(objects.function("fn", run_seconds=0.2))
    warm = [f"warm-{i}" for i in range(4)]
    for name in warm:  # Job and Secret creates leave connections idle in the MPE client's pool
        create_task(cluster, name)
    wait_for(
        lambda: all(cluster.phase(n) == "Succeeded" for n in warm), timeout=45, what="warm-up Tasks"
    )
    # A remote cluster is host="remote" in the metrics unless tenant labels are opted in.
    unanswered = proc.metric("rest_client_requests_total", code="0", host="remote")
    stalled = time.monotonic()
    proxy.stall()  # open connections go silent; new ones are relayed
    create_task(cluster, "after")
    wait_for(
        lambda: cluster.phase("after") == "Succeeded",
        timeout=90,
        what="the Task created after the stall",
    )
    print(
        f"Task after the stall Succeeded {time.monotonic() - stalled:.1f}s after the stall "
        "(the stalled Job watch is replaced after watch timeout + margin, 25 s)"
    )
    task = cluster.task("after")
    job = next(
        j for j in cluster.jobs() if j["metadata"]["name"] == task["status"]["jobRef"]["name"]
    )
    print(
        f"its Job: created {job['metadata']['creationTimestamp']}, "
        f"the Task {task['metadata']['creationTimestamp']}"
    )
    failed = proc.metric("rest_client_requests_total", code="0", host="remote") - unanswered
    timed_out = [n for n in notes_about(cluster, "after") if "Read timed out" in n]
    print(f"{failed:.0f} MPE requests unanswered; notes: {timed_out}")
    assert failed >= 1, "no request met a dead connection: the test did not test anything"
    assert timed_out, "the reconcile that met the dead connection did not fail by its read timeout"
    assert all(f"read timeout={DEFAULT_TIMEOUT[1]}" in n for n in timed_out)
    assert DEFAULT_TIMEOUT[1] <= 10.0
    assert proxy.accepted_since(stalled) >= 1  # the retry went over a fresh connection
    assert job_audit([cluster.task("after")], cluster.jobs(), cluster.secrets()) == []
