"""The generated alerts and dashboard (``taskfsm.tools.monitoring``): fresh, built only from series
the controller exports, accepted by ``promtool check rules``, and each alert behaving as its
``promtool test rules`` unit tests in ``tests/monitoring/alerts.test.yaml`` say.

promtool is built from the Go module proxy by ``tools/promtool/build.sh`` (cached; ``make setup-test``
builds it); a failed build fails these tests.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from taskfsm.tools import monitoring

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "tools" / "promtool" / "build.sh"
RULES = ROOT / "deploy" / "monitoring" / "prometheus-rules.yaml"
ALERT_TESTS = ROOT / "tests" / "monitoring" / "alerts.test.yaml"
CHART_TEMPLATE = ROOT / "deploy" / "chart" / "templates" / "prometheusrule.yaml"


@pytest.fixture(scope="session")
def promtool() -> Path:
    """The promtool binary (built on first use, then cached)."""
    proc = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"tools/promtool/build.sh failed:\n{proc.stderr}"
    return Path(proc.stdout.strip().splitlines()[-1])


def run(promtool: Path, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool), *args], capture_output=True, text=True, cwd=cwd, check=False
    )


def alert_names() -> list[str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule["alert"] for group in groups for rule in group["rules"]]


def test_generated_files_are_fresh() -> None:
    """The committed rules, PrometheusRule, dashboard and chart file equal what the generator
    writes from the current metric definitions (`python -m taskfsm.tools.monitoring`)."""
    assert monitoring.stale_files() == [], "stale: run `make generate`"
    assert monitoring.main(["--check"]) == 0


def test_stale_files_are_reported(tmp_path: Path) -> None:
    """`--check` on a tree without the files names every one of them and exits 1."""
    assert monitoring.main(["--check", "--root", str(tmp_path)]) == 1
    assert monitoring.stale_files(tmp_path) == sorted(monitoring.expected_files())


def test_series_outside_the_metric_definitions_are_refused() -> None:
    """Alerts and panels can only name series and labels `taskfsm.manager.metrics` defines."""
    series = monitoring.Series(monitoring.metric_definitions())
    assert series("workqueue_depth", 'name="task"') == (
        'workqueue_depth{job="taskfsm-controller-metrics",name="task"}'
    )
    assert series("workqueue_longest_running_processor_seconds", 'controller="task"')
    assert series("taskfsm_task_job_creation_seconds_bucket").startswith(
        "taskfsm_task_job_creation_seconds_bucket{"
    )
    with pytest.raises(KeyError, match="no series"):
        series("workqueue_longest_running_processor_seconds_total")
    with pytest.raises(KeyError, match="no series"):
        series("workqueue_depth_bucket")  # a gauge has no buckets
    with pytest.raises(KeyError, match="no label"):
        series("workqueue_depth", 'queue="task"')
    with pytest.raises(KeyError, match="no label"):
        series.by("taskfsm_tasks", "resource")


def test_metric_definitions_are_the_controllers() -> None:
    """Every family of a controller's registry, with its type and labels."""
    definitions = {d.series: (d.type, d.labels) for d in monitoring.metric_definitions()}
    assert definitions == {
        "controller_runtime_reconcile_total": ("counter", ("controller", "result")),
        "controller_runtime_reconcile_errors_total": ("counter", ("controller",)),
        "controller_runtime_reconcile_time_seconds": ("histogram", ("controller",)),
        "controller_runtime_active_workers": ("gauge", ("controller",)),
        "controller_runtime_max_concurrent_reconciles": ("gauge", ("controller",)),
        "controller_runtime_reconcile_panics_total": ("counter", ("controller",)),
        "controller_runtime_terminal_reconcile_errors_total": ("counter", ("controller",)),
        "workqueue_depth": ("gauge", ("name", "controller")),
        "workqueue_adds_total": ("counter", ("name", "controller")),
        "workqueue_retries_total": ("counter", ("name", "controller")),
        "workqueue_queue_duration_seconds": ("histogram", ("name", "controller")),
        "workqueue_work_duration_seconds": ("histogram", ("name", "controller")),
        "workqueue_unfinished_work_seconds": ("gauge", ("name", "controller")),
        "workqueue_longest_running_processor_seconds": ("gauge", ("name", "controller")),
        "taskfsm_workqueue_namespace_depth": ("gauge", ("controller", "namespace")),
        "rest_client_requests_total": ("counter", ("code", "method", "host")),
        "rest_client_request_duration_seconds": ("histogram", ("verb", "host")),
        "leader_election_master_status": ("gauge", ("name",)),
        "taskfsm_buckets_held": ("gauge", ()),
        "taskfsm_bucket_handovers_total": ("counter", ("event",)),
        "taskfsm_task_job_creation_seconds": ("histogram", ()),
        "taskfsm_tasks": ("gauge", ("phase",)),
        "taskfsm_watch_healthy": ("gauge", ("resource",)),
        "taskfsm_build_info": ("gauge", ("version",)),
        # prometheus-client's process, garbage-collector and platform collectors
        "process_virtual_memory_bytes": ("gauge", ()),
        "process_resident_memory_bytes": ("gauge", ()),
        "taskfsm_memory_limit_bytes": ("gauge", ()),
        "process_start_time_seconds": ("gauge", ()),
        "process_cpu_seconds_total": ("counter", ()),
        "process_open_fds": ("gauge", ()),
        "process_max_fds": ("gauge", ()),
        "python_gc_objects_collected_total": ("counter", ("generation",)),
        "python_gc_objects_uncollectable_total": ("counter", ("generation",)),
        "python_gc_collections_total": ("counter", ("generation",)),
        "python_info": ("gauge", ("version", "implementation", "major", "minor", "patchlevel")),
    }


def test_promtool_accepts_the_rules(promtool: Path, tmp_path: Path) -> None:
    """`promtool check rules` accepts the rule file, and the groups of the PrometheusRule."""
    proc = run(promtool, "check", "rules", str(RULES))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(alert_names())} rules found" in proc.stdout
    operator = yaml.safe_load((ROOT / "deploy" / "monitoring" / "prometheusrule.yaml").read_text())
    assert operator["kind"] == "PrometheusRule"
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(operator["spec"]))
    proc = run(promtool, "check", "rules", str(spec))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_promtool_unit_tests_of_the_alerts_pass(promtool: Path) -> None:
    """`promtool test rules`: every alert fires on its series (labels, annotations) and stays
    silent on the look-alikes."""
    proc = run(promtool, "test", "rules", ALERT_TESTS.name, cwd=ALERT_TESTS.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout + proc.stderr


def test_promtool_unit_tests_catch_a_broken_alert(promtool: Path, tmp_path: Path) -> None:
    """The unit tests are not vacuous: with one alert's threshold changed they fail."""
    broken = RULES.read_text().replace("> 0.1", "> 0.5")
    assert broken != RULES.read_text()
    (tmp_path / "deploy" / "monitoring").mkdir(parents=True)
    (tmp_path / "deploy" / "monitoring" / RULES.name).write_text(broken)
    (tmp_path / "tests" / "monitoring").mkdir(parents=True)
    (tmp_path / "tests" / "monitoring" / ALERT_TESTS.name).write_text(ALERT_TESTS.read_text())
    proc = run(promtool, "test", "rules", ALERT_TESTS.name, cwd=tmp_path / "tests" / "monitoring")
    assert proc.returncode == 1
    assert "TaskfsmReconcileErrors" in proc.stdout + proc.stderr


def test_every_alert_has_a_firing_and_a_silent_unit_test() -> None:
    """Each alert is tested both ways: some evaluation expects it, and some expects nothing."""
    cases = [
        case for test in yaml.safe_load(ALERT_TESTS.read_text())["tests"]
        for case in test["alert_rule_test"]
    ]  # fmt: skip
    for name in alert_names():
        expectations = [case["exp_alerts"] for case in cases if case["alertname"] == name]
        assert any(expectations), f"{name}: no test where it fires"
        assert [] in expectations, f"{name}: no test where it stays silent"


def test_dashboard_has_a_panel_per_metric_family_and_valid_queries(
    promtool: Path, tmp_path: Path
) -> None:
    """One panel per exported family but those NOT_PANELLED says why not, each titled in words
    (no metric names); every query parses as PromQL (checked by promtool as recording rules,
    Grafana's variables filled in)."""
    board = json.loads((ROOT / "deploy" / "monitoring" / "grafana-dashboard.json").read_text())
    panels = [panel for panel in board["panels"] if panel["type"] == "timeseries"]
    families = {d.name for d in monitoring.metric_definitions()}
    assert set(monitoring.PANELS) | set(monitoring.NOT_PANELLED) == families
    assert not set(monitoring.PANELS) & set(monitoring.NOT_PANELLED)
    assert [panel["title"] for panel in panels] == [t for t, _ in monitoring.PANELS.values()]
    for panel in board["panels"]:
        assert "_" not in panel["title"], panel["title"]
        assert panel["title"][0].isupper(), panel["title"]
    assert len({panel["title"] for panel in board["panels"]}) == len(board["panels"])
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))
    queries = [target["expr"] for panel in board["panels"] for target in panel["targets"]]
    filled = [
        re.sub(r"\$__rate_interval", "5m", query).replace('"$job"', '".+"') for query in queries
    ]
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"taskfsm:panel_{n}", "expr": q} for n, q in enumerate(filled)
                ],
            }
        ]
    }
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump(rules))
    proc = run(promtool, "check", "rules", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(queries)} rules found" in proc.stdout


def test_chart_template_wraps_the_generated_rule_file() -> None:
    """The chart's PrometheusRule template renders the generated rule file (the same text as
    deploy/monitoring's) only when metrics.prometheusRule.enabled."""
    template = CHART_TEMPLATE.read_text()
    assert '.Files.Get "files/prometheus-rules.yaml"' in template
    assert "{{- $rule := .Values.metrics.prometheusRule }}" in template
    assert "{{- if $rule.enabled }}" in template
    assert template.rstrip().endswith("{{- end }}")
    chart_rules = ROOT / "deploy" / "chart" / "files" / "prometheus-rules.yaml"
    assert chart_rules.read_text() == RULES.read_text()
    # metrics.prometheusRule.jobSelector replaces the generator's selector, named in the template.
    assert monitoring.SELECTOR.replace('"', '\\"') in template


def test_every_alert_links_its_runbook_section() -> None:
    """Every alert's runbook_url is docs/runbooks.md's section of that alert, which says what
    it means, how to check and what to do; the page has no section for an alert that is gone."""
    runbooks = (ROOT / "docs" / "runbooks.md").read_text()
    sections = dict(re.findall(r"^## (\S+)\n(.*?)(?=^## |\Z)", runbooks, re.M | re.S))
    rules = [
        rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]
    ]
    assert sorted(sections) == sorted(rule["alert"] for rule in rules)
    for rule in rules:
        url = rule["annotations"]["runbook_url"]
        assert url == f"{monitoring.RUNBOOK_URL}#{rule['alert'].lower()}"
        assert monitoring.RUNBOOK_URL.endswith("/docs/runbooks.md")
        body = sections[rule["alert"]]
        for part in ("**What it means.**", "**How to check.**", "**What to do.**"):
            assert part in body, f"{rule['alert']}: no {part}"


def test_operations_tables_are_generated_from_the_definitions() -> None:
    """docs/operations.md lists every exported series (with its labels and help text) and every
    alert (linked to its runbook) in the blocks the generator writes."""
    text = (ROOT / "docs" / "operations.md").read_text()
    metrics = text.split(monitoring.METRICS_BEGIN, 1)[1].split(monitoring.METRICS_END, 1)[0]
    for d in monitoring.metric_definitions():
        labels = f"{{{','.join(d.labels)}}}" if d.labels else ""
        assert f"| `{d.series}{labels}` | {d.type} |" in metrics
    alerts = text.split(monitoring.ALERTS_BEGIN, 1)[1].split(monitoring.ALERTS_END, 1)[0]
    for name in alert_names():
        assert f"[`{name}`](runbooks.md#{name.lower()})" in alerts


def test_chart_can_point_the_runbooks_elsewhere() -> None:
    """The chart's template replaces the generated runbook base with
    metrics.prometheusRule.runbookUrl when set."""
    template = CHART_TEMPLATE.read_text()
    assert f'$runbooks := "{monitoring.RUNBOOK_URL}"' in template
    assert "replace $runbooks" in template
    assert "$rule.runbookUrl" in template
