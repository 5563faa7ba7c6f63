"""Metric labels name no tenant's remote server or namespace unless the admin opts in
(``taskfsm run --metrics-tenant-labels``), and ``taskfsm_build_info`` carries the version."""

from __future__ import annotations

from prometheus_client import generate_latest

from taskfsm import __version__
from taskfsm.cli import build_parser
from taskfsm.manager.metrics import Metrics, job_watch_health, remote_host_label

WATCHES = [
    ("jobs@main/tenant-a", False, True),
    ("jobs@main/tenant-b", False, False),
    ("jobs@https://cluster.tenant-c.example:6443/media", True, True),
]


def test_job_watches_are_grouped_without_tenant_names_by_default():
    """Without the opt-in: one series for this cluster's Job watches and one for remote ones,
    each 0 while any of its watches fails; no tenant namespace or server in any label."""
    rows = job_watch_health(WATCHES, tenant_labels=False)
    assert rows == [("jobs@main", 0.0), ("jobs@remote", 1.0)]
    text = " ".join(name for name, _ in rows)
    assert "tenant" not in text
    assert "example" not in text
    assert job_watch_health([], tenant_labels=False) == []


def test_job_watches_are_named_each_with_the_opt_in():
    rows = job_watch_health(WATCHES, tenant_labels=True)
    assert rows == [
        ("jobs@main/tenant-a", 1.0),
        ("jobs@main/tenant-b", 0.0),
        ("jobs@https://cluster.tenant-c.example:6443/media", 1.0),
    ]


def test_remote_hosts_are_one_label_value_unless_opted_in():
    host = "https://cluster.tenant-c.example:6443"
    assert remote_host_label(host, tenant_labels=False) == "remote"
    assert remote_host_label(host, tenant_labels=True) == host


def test_the_opt_in_flag_is_off_by_default():
    run = ["run"]
    assert build_parser().parse_args(run).metrics_tenant_labels is False
    opted = build_parser().parse_args([*run, "--metrics-tenant-labels"])
    assert opted.metrics_tenant_labels is True


def test_build_info_carries_the_version():
    text = generate_latest(Metrics().registry).decode()
    assert f'taskfsm_build_info{{version="{__version__}"}} 1.0' in text
