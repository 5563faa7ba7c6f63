"""The Grafana dashboard: overview stats, then one panel per metric family, each with a title in
words (:data:`PANELS`); a family that has neither a panel nor a reason in :data:`NOT_PANELLED`
fails the generation.
"""

from __future__ import annotations

from typing import Any, Final

from taskfsm.tools.monitoring.series import MetricDefinition, Series, metric_definitions

DASHBOARD_UID: Final = "taskfsm"

_DASHBOARD_SELECTOR = 'job=~"$job"'
TASK_QUEUE = 'name="task"'
_DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def _panel_queries(d: MetricDefinition, s: Series) -> list[dict[str, str]]:
    """The queries of one family's panel: rates of counters by their labels, quantiles of
    histograms, gauges as they are (per replica)."""
    labels = [label for label in d.labels if label != "le"]
    if d.type == "counter" and not labels:
        labels = ["instance"]  # a process's own counters (CPU seconds): per replica
    legend = " ".join(f"{{{{{label}}}}}" for label in labels)
    if d.type == "counter":
        by = s.by(d.series, *labels) if labels else ""
        expr = f"sum {by} (rate({s(d.series, selector=_DASHBOARD_SELECTOR)}[$__rate_interval]))"
        return [{"expr": " ".join(expr.split()), "legendFormat": legend or d.name}]
    if d.type == "histogram":
        by = s.by(d.series, "le", *labels)
        bucket = s(f"{d.series}_bucket", selector=_DASHBOARD_SELECTOR)
        return [
            {
                "expr": f"histogram_quantile({q}, sum {by} (rate({bucket}[$__rate_interval])))",
                "legendFormat": f"p{round(q * 100)} {legend}".strip(),
            }
            for q in (0.5, 0.9, 0.99)
        ]
    return [
        {
            "expr": s(d.series, selector=_DASHBOARD_SELECTOR),
            "legendFormat": " ".join(["{{instance}}", legend]).strip(),
        }
    ]


PANELS: Final[dict[str, tuple[str, str]]] = {
    # family: (title, unit); the panels follow in this order
    "controller_runtime_reconcile": ("Reconciles per second, by controller and result", "short"),
    "controller_runtime_reconcile_errors": ("Failed reconciles per second", "short"),
    "controller_runtime_reconcile_time_seconds": ("How long a reconcile takes", "s"),
    "controller_runtime_active_workers": ("Workers busy reconciling", "short"),
    "controller_runtime_max_concurrent_reconciles": ("Workers per controller", "short"),
    "controller_runtime_reconcile_panics": ("Reconciles raising an exception per second", "short"),
    "controller_runtime_terminal_reconcile_errors": ("Errors not retried per second", "short"),
    "workqueue_depth": ("Keys waiting for a worker", "short"),
    "taskfsm_workqueue_namespace_depth": ("Keys waiting, by namespace (the deepest)", "short"),
    "workqueue_adds": ("Keys added to the work queues per second", "short"),
    "workqueue_retries": ("Retries after an error per second", "short"),
    "workqueue_queue_duration_seconds": ("How long a key waits for a worker", "s"),
    "workqueue_work_duration_seconds": ("How long a worker spends on a key", "s"),
    "workqueue_unfinished_work_seconds": ("Work in progress: seconds, summed", "s"),
    "workqueue_longest_running_processor_seconds": ("Longest-running reconcile now", "s"),
    "rest_client_requests": ("API requests per second, by status code", "short"),
    "rest_client_request_duration_seconds": ("How long an API request takes", "s"),
    "leader_election_master_status": ("Leases held, per replica", "short"),
    "taskfsm_buckets_held": ("Bucket Leases held, per replica", "short"),
    "taskfsm_bucket_handovers": ("Bucket handovers per second", "short"),
    "taskfsm_tasks": ("Tasks by phase", "short"),
    "taskfsm_task_job_creation_seconds": ("From Task created to Job created", "s"),
    "taskfsm_watch_healthy": ("Watches connected (1) or not (0)", "short"),
    "process_cpu_seconds": ("CPU used, in cores", "short"),
    "process_resident_memory_bytes": ("Memory in use (resident)", "bytes"),
    "taskfsm_memory_limit_bytes": ("Memory limit of the container", "bytes"),
    "process_virtual_memory_bytes": ("Address space reserved (virtual memory)", "bytes"),
    "process_open_fds": ("Open files and connections", "short"),
    "python_gc_collections": ("Garbage collections per second, by generation", "short"),
    "python_gc_objects_collected": ("Objects freed by the garbage collector per second", "short"),
    "python_gc_objects_uncollectable": ("Uncollectable objects found per second", "short"),
}
"""The dashboard's time-series panels: one per metric family, titled in words."""

NOT_PANELLED: Final[dict[str, str]] = {
    "python_info": "a constant 1 whose labels name the interpreter",
    "taskfsm_build_info": "a constant 1 whose label names taskfsm's version",
    "process_start_time_seconds": "a timestamp; restarts show as gaps and resets in the others",
    "process_max_fds": "the file descriptor limit, a constant",
}
"""Metric families without a panel, and why."""


def dashboard(definitions: list[MetricDefinition] | None = None) -> dict[str, Any]:
    """The Grafana dashboard: four overview stats, then one time-series panel per family."""
    definitions = definitions if definitions is not None else metric_definitions()
    s = Series(definitions)
    sel = _DASHBOARD_SELECTOR
    leader, healthy = "leader_election_master_status", "taskfsm_watch_healthy"
    errors, passes = (
        "controller_runtime_reconcile_errors_total",
        "controller_runtime_reconcile_total",
    )
    stats = [
        ("Leading replicas", f"sum({s(leader, selector=sel)})", "none", "1 is right"),
        (
            "Watches disconnected",
            f"count({s(healthy, selector=sel)} == 0) or vector(0)",
            "none",
            "watches not connected now (any replica)",
        ),
        (
            "Task queue depth",
            f"sum({s('workqueue_depth', TASK_QUEUE, selector=sel)})",
            "none",
            "Task keys waiting for a worker",
        ),
        (
            "Reconcile errors",
            f"sum(rate({s(errors, selector=sel)}[$__rate_interval]))"
            f" / sum(rate({s(passes, selector=sel)}[$__rate_interval]))",
            "percentunit",
            "share of reconcile passes ending in an error",
        ),
    ]
    panels: list[dict[str, Any]] = []
    for index, (title, expr, unit, description) in enumerate(stats):
        panels.append(
            {
                "id": index + 1,
                "type": "stat",
                "title": title,
                "description": description,
                "datasource": _DATASOURCE,
                "gridPos": {"h": 4, "w": 6, "x": 6 * index, "y": 0},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "options": {"reduceOptions": {"calcs": ["lastNotNull"]}},
                "targets": [{"refId": "A", "expr": expr, "datasource": _DATASOURCE}],
            }
        )
    by_name = {d.name: d for d in definitions}
    unknown = sorted(set(by_name) - set(PANELS) - set(NOT_PANELLED))
    if unknown:
        raise KeyError(f"no dashboard panel (PANELS) or reason (NOT_PANELLED) for {unknown}")
    panelled = [(by_name[name], *PANELS[name]) for name in PANELS if name in by_name]
    for index, (d, title, unit) in enumerate(panelled):
        queries = _panel_queries(d, s)
        panels.append(
            {
                "id": len(stats) + index + 1,
                "type": "timeseries",
                "title": title,
                "description": f"{d.help} ({d.type} {d.series})",
                "datasource": _DATASOURCE,
                "gridPos": {"h": 8, "w": 12, "x": 12 * (index % 2), "y": 4 + 8 * (index // 2)},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "targets": [
                    {"refId": chr(ord("A") + n), **query, "datasource": _DATASOURCE}
                    for n, query in enumerate(queries)
                ],
            }
        )
    return {
        "uid": DASHBOARD_UID,
        "title": "taskfsm",
        "description": (
            "Generated by `python -m taskfsm.tools.monitoring` from taskfsm/manager/metrics.py;"
            " do not edit. docs/operations.md (Metrics) explains every series."
        ),
        "tags": ["taskfsm", "kubernetes", "nagare"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "editable": False,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Data source",
                    "type": "datasource",
                    "query": "prometheus",
                },
                {
                    "name": "job",
                    "label": "Job",
                    "type": "query",
                    "datasource": _DATASOURCE,
                    "query": {"query": f"label_values({healthy}, job)", "refId": "job"},
                    "definition": f"label_values({healthy}, job)",
                    "refresh": 2,
                    "includeAll": True,
                    "multi": True,
                    "current": {"text": "All", "value": "$__all"},
                },
            ]
        },
        "panels": panels,
    }
