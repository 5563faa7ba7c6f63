"""`taskfsm run --job-ttl-seconds` and `--cleanup-timeout` reach what they set
(docs/operations.md, "Flags"): each test starts the real command line with a value far from the
default, so a flag that did nothing fails it."""

from __future__ import annotations

import time

from kubernetes import client

from taskfsm_dev import objects
from taskfsm_dev.waiting import wait_for


def test_job_ttl_seconds_is_the_jobs_ttl_after_finished(start_controller, cluster, kubelet):
    """With `--job-ttl-seconds=77` the Job the controller creates has
    `ttlSecondsAfterFinished: 77` (the default is 86400)."""
    start_controller(args=["--job-ttl-seconds=77"])
    cluster.create(objects.workflow("wf"))
    cluster.create(objects.function("fn", run_seconds=0))
    cluster.create(objects.local_mpe("local"))
    cluster.create(objects.task("t", workflow_name="wf", function_name="fn", mpe_name="local"))
    wait_for(lambda: cluster.phase("t") == "Succeeded", timeout=60, what="Task Succeeded")
    [job] = cluster.jobs()
    assert job["spec"]["ttlSecondsAfterFinished"] == 77


def test_cleanup_timeout_bounds_the_wait_for_an_unready_mpe(
    start_controller, cluster, api_client, namespace
):
    """With `--cleanup-timeout=3` a deleted Task whose MediaProcessingEntity never became ready
    is let go within seconds, with a JobAbandoned Warning Event (the default bound is 120 s,
    beyond this test's wait)."""
    start_controller(args=["--cleanup-timeout=3"])
    cluster.create(objects.workflow("wf"))
    cluster.create(objects.function("fn"))
    cluster.create(objects.remote_mpe("remote", secret_name="absent"))
    cluster.create(objects.task("t", workflow_name="wf", function_name="fn", mpe_name="remote"))
    wait_for(
        lambda: (
            "MediaProcessingEntity does not exist or is not ready"
            in ((cluster.task("t") or {}).get("status") or {}).get("message", "")
        ),
        timeout=30,
        what="Task waits for its MPE",
    )
    start = time.monotonic()
    cluster.delete_task("t")
    wait_for(lambda: cluster.task("t") is None, timeout=40, what="Task released")
    assert time.monotonic() - start < 40
    events = client.CoreV1Api(api_client).list_namespaced_event(
        namespace, field_selector="involvedObject.name=t"
    )
    assert "JobAbandoned" in {e.reason for e in events.items}
