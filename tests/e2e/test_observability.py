"""The operator's view of a running ``taskfsm run`` process: Prometheus series on /metrics, and
/healthz and /readyz following cache sync and watch health."""

from __future__ import annotations

from taskfsm_dev import objects
from taskfsm_dev.proxies import ApiProxy
from taskfsm_dev.waiting import wait_for
from tests.support.cluster import write_kubeconfig

EXPECTED_SERIES = (
    "controller_runtime_reconcile_total",
    "controller_runtime_reconcile_errors_total",
    "controller_runtime_reconcile_time_seconds_bucket",
    "controller_runtime_reconcile_time_seconds_count",
    "controller_runtime_active_workers",
    "controller_runtime_max_concurrent_reconciles",
    "controller_runtime_reconcile_panics_total",
    "controller_runtime_terminal_reconcile_errors_total",
    "workqueue_depth",
    "workqueue_adds_total",
    "workqueue_retries_total",
    "workqueue_queue_duration_seconds_bucket",
    "workqueue_work_duration_seconds_count",
    "workqueue_unfinished_work_seconds",
    "workqueue_longest_running_processor_seconds",
    "rest_client_requests_total",
    "rest_client_request_duration_seconds_bucket",
    "leader_election_master_status",
    "taskfsm_tasks",
    "taskfsm_task_job_creation_seconds_bucket",
    "taskfsm_task_job_creation_seconds_count",
    "taskfsm_watch_healthy",
    "taskfsm_build_info",
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "python_gc_collections_total",
)


def test_metrics_endpoint_shows_the_expected_series(cluster, kubelet, start_controller):
    """/metrics carries every documented series with values matching one Succeeded and one Failed Task."""
    proc = start_controller()
    cluster.create(objects.function("ok", run_seconds=0))
    cluster.create(objects.function("bad", exit_code=2))
    cluster.create(objects.local_mpe("local"))
    for name, fn in (
        ("good", "ok"),
        ("broken", "bad"),
    ):  # own Workflows: a failure ends its Workflow
        cluster.create(objects.workflow(f"wf-{name}"))
        cluster.create(
            objects.task(name, workflow_name=f"wf-{name}", function_name=fn, mpe_name="local")
        )
    wait_for(
        lambda: cluster.phase("good") == "Succeeded" and cluster.phase("broken") == "Failed",
        timeout=60,
        what="done",
    )

    wait_for(
        lambda: proc.metric("taskfsm_tasks", phase="Succeeded") == 1, timeout=10, what="phase gauge"
    )
    names = {name for name, _ in proc.samples()}
    assert [s for s in EXPECTED_SERIES if s not in names] == []
    assert proc.metric("controller_runtime_reconcile_total", controller="task") >= 4
    assert proc.metric("controller_runtime_reconcile_time_seconds_count", controller="task") >= 4
    assert proc.metric("workqueue_adds_total", name="task") >= 2
    assert proc.metric("workqueue_depth", name="task") == 0
    for controller in ("task", "workflow", "mediaprocessingentity"):
        labels = {"name": controller, "controller": controller}
        assert proc.metric("workqueue_queue_duration_seconds_count", **labels) >= 1
        assert proc.metric("workqueue_work_duration_seconds_count", **labels) >= 1
    assert proc.metric("workqueue_longest_running_processor_seconds", name="task") >= 0
    assert proc.metric("process_resident_memory_bytes") > 10 * 2**20
    assert (
        proc.metric("rest_client_requests_total", code="201", method="POST") >= 4
    )  # 2 Jobs + 2 Secrets
    assert proc.metric("rest_client_requests_total", method="GET") >= 1
    assert proc.metric("rest_client_request_duration_seconds_count", verb="POST") >= 4
    for controller in ("workflow", "mediaprocessingentity"):
        assert (
            proc.metric("controller_runtime_max_concurrent_reconciles", controller=controller) == 1
        )
    assert proc.metric("controller_runtime_reconcile_panics_total") == 0
    assert proc.metric("controller_runtime_terminal_reconcile_errors_total") == 0
    assert proc.metric("leader_election_master_status") == 1  # no election: this replica works
    assert proc.metric("taskfsm_tasks", phase="Failed") == 1
    assert proc.metric("taskfsm_tasks", phase="Running") == 0
    assert proc.metric("taskfsm_task_job_creation_seconds_count") == 2
    assert proc.metric("taskfsm_watch_healthy", resource="tasks") == 1
    # the local MPE's Job watch, without its namespace (no --metrics-tenant-labels)
    assert proc.metric("taskfsm_watch_healthy", resource="jobs@main") == 1
    resources = {
        dict(labels)["resource"]
        for (name, labels), _ in proc.samples().items()
        if name == "taskfsm_watch_healthy"
    }
    assert not [r for r in resources if r.startswith("jobs@") and r != "jobs@main"], resources
    assert proc.metric("taskfsm_build_info") == 1
    assert proc.probe("/healthz")[0] == 200
    assert proc.probe("/readyz") == (200, "ok\n")


def test_readyz_follows_cache_sync_and_watch_health(
    control_plane, cluster, start_controller, tmp_path, installed_token
):
    """/readyz is 503 until the caches sync and while watches are broken, else 200; /healthz stays 200."""
    with ApiProxy(control_plane.server) as proxy:
        kubeconfig = control_plane.kubeconfig_dict()
        kubeconfig["clusters"][0]["cluster"]["server"] = proxy.url
        kubeconfig["users"][0]["user"] = {"token": installed_token()}
        path = write_kubeconfig(tmp_path / "via-proxy.kubeconfig", kubeconfig)
        proxy.cut()
        proc = start_controller(kubeconfig=path, wait_ready=False)
        wait_for(
            lambda: proc.probe("/healthz")[0] == 200, timeout=30, what="process serving probes"
        )
        code, body = proc.probe("/readyz")
        assert (code, body.strip()) == (503, "caches not synced")

        proxy.restore()
        wait_for(lambda: proc.probe("/readyz")[0] == 200, timeout=30, what="ready after sync")

        proxy.cut()
        code, body = wait_for(
            lambda: (r := proc.probe("/readyz"))[0] == 503 and r, timeout=10, what="not ready"
        )
        assert body.startswith("watches failing")
        assert proc.probe("/healthz")[0] == 200
        assert proc.metric("taskfsm_watch_healthy", resource="tasks") == 0

        proxy.restore()
        wait_for(lambda: proc.probe("/readyz")[0] == 200, timeout=30, what="ready again")
        assert proc.running
