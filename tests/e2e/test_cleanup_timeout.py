"""``--cleanup-timeout`` counts only the time a MediaProcessingEntity does not answer, not the
time a deletion waited in the queue (docs/operations.md, "Request timeouts and retries").

Regression: the bound was measured from each Task's deletionTimestamp, so when deletions queued
behind each other (one worker, a slow API server), every pass after the bound read the Job again
with an uncached GET although the MPE answered, and the deletions slowed further.
"""

from __future__ import annotations

import time

import pytest

from taskfsm.kube.rest import CORE_EVENTS
from taskfsm_dev import objects
from taskfsm_dev.proxies import HttpApiProxy
from taskfsm_dev.waiting import wait_for
from tests.support.cluster import write_kubeconfig

pytestmark = pytest.mark.timeout(600)

TASKS = 20


def test_queued_deletions_do_not_count_as_waiting_for_an_unreachable_mpe(
    cluster, kubelet, start_controller, control_plane, tmp_path, installed_token
):
    cluster.create(objects.workflow("wf"))
    cluster.create(objects.function("long", run_seconds=600))
    cluster.create(objects.local_mpe("local"))
    with HttpApiProxy(control_plane.server, control_plane.ca_file, delay=0.25) as proxy:
        path = write_kubeconfig(tmp_path / "slow.kubeconfig", proxy.kubeconfig(installed_token()))
        start_controller(kubeconfig=path, args=["--workers=1", "--cleanup-timeout=3"])
        names = [f"t{i:02d}" for i in range(TASKS)]
        for name in names:
            cluster.create(
                objects.task(name, workflow_name="wf", function_name="long", mpe_name="local")
            )
        wait_for(
            lambda: all(cluster.phase(n) == "Running" for n in names),
            timeout=240,
            what="every Task Running",
        )
        before = len(proxy.requests(_job_get))
        started = time.monotonic()
        for name in names:
            cluster.delete_task(name)
        wait_for(lambda: cluster.tasks() == [], timeout=300, what="every Task deleted")
        took = time.monotonic() - started
        gets = len(proxy.requests(_job_get)) - before
    print(f"{TASKS} deletions took {took:.1f}s with one worker; {gets} uncached Job GETs")
    assert took > 3  # the deletions did queue past the bound
    reasons = {e.get("reason") for e in cluster.rest.list(CORE_EVENTS, cluster.namespace)["items"]}
    assert "JobAbandoned" not in reasons
    assert gets <= TASKS, f"{gets} uncached Job GETs for {TASKS} deletions"
    assert cluster.jobs() == []


def _job_get(request) -> bool:
    path = request.path.split("?")[0]
    return request.method == "GET" and "/jobs/" in path and "watch=" not in request.path
