"""Prometheus alerts and a Grafana dashboard, generated from the controller's metric definitions.

One module per thing generated: :mod:`~taskfsm.tools.monitoring.series` (the metric families and
how a series is named), :mod:`~taskfsm.tools.monitoring.alerts`,
:mod:`~taskfsm.tools.monitoring.dashboard` and :mod:`~taskfsm.tools.monitoring.doc_tables`
(docs/operations.md's tables); this module writes and checks the files.

The metric families come from ``taskfsm.manager.metrics.Metrics`` itself (names, types, help
texts, label names), so an alert or a panel cannot name a series the controller does not export:
:class:`Series` refuses unknown metrics and labels while the files are generated. Written files
(docs/operations.md "Alerts and dashboard"):

* ``deploy/monitoring/prometheus-rules.yaml``: the rule groups as Prometheus and ``promtool`` read
  them (``rule_files``);
* ``deploy/monitoring/prometheusrule.yaml``: the same groups as a Prometheus Operator
  ``PrometheusRule`` in ``taskfsm-system``;
* ``deploy/monitoring/grafana-dashboard.json``: overview stats, then one panel per metric family;
* ``deploy/chart/files/prometheus-rules.yaml``: the rule groups for the Helm chart, whose
  ``templates/prometheusrule.yaml`` wraps them in a ``PrometheusRule``.

Every alert carries a ``runbook_url`` annotation: its section of docs/runbooks.md (what it
means, how to check, what to do), under :data:`RUNBOOK_URL`. Every dashboard panel has a title in
words (:data:`PANELS`); generation fails for a metric family that has neither a panel nor a
reason in :data:`NOT_PANELLED`.

Every alert selects the controller's scrape job with ``SELECTOR``
(``job="taskfsm-controller-metrics"``: the name of the metrics Service in ``deploy/manager.yaml``,
which is the ``job`` label a ServiceMonitor gives its targets). The alerts' unit tests are
``tests/monitoring/alerts.test.yaml`` (``promtool test rules``).

    python -m taskfsm.tools.monitoring            # rewrite the files
    python -m taskfsm.tools.monitoring --check    # exit 1 when a file is stale
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Final

import yaml

from taskfsm.tools.monitoring.alerts import (
    RULES_HEADER,
    RUNBOOK_URL,
    prometheus_rule,
    rule_groups,
)
from taskfsm.tools.monitoring.dashboard import NOT_PANELLED, PANELS, dashboard
from taskfsm.tools.monitoring.doc_tables import (
    ALERTS_BEGIN,
    ALERTS_END,
    METRICS_BEGIN,
    METRICS_END,
    OPERATIONS,
    operations_page,
)
from taskfsm.tools.monitoring.series import SELECTOR, Series, metric_definitions

__all__ = [
    "ALERTS_BEGIN",
    "ALERTS_END",
    "METRICS_BEGIN",
    "METRICS_END",
    "NOT_PANELLED",
    "PANELS",
    "RUNBOOK_URL",
    "SELECTOR",
    "Series",
    "expected_files",
    "main",
    "metric_definitions",
    "stale_files",
]

ROOT: Final = Path(__file__).resolve().parents[3]


class _Dumper(yaml.SafeDumper):
    """Writes repeated sub-objects out in full instead of as anchors and aliases, and strings of
    several lines (the alerts' expressions) as literal blocks."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _represent_str)


def _yaml(document: Any) -> str:
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True)


def expected_files() -> dict[str, str]:
    """Path relative to the repository -> text of every generated monitoring file (for
    docs/operations.md: the committed page with its metrics table rebuilt)."""
    definitions = metric_definitions()
    groups = rule_groups(Series(definitions))
    rules_text = RULES_HEADER + _yaml(groups)
    return {
        "deploy/monitoring/prometheus-rules.yaml": rules_text,
        "deploy/monitoring/prometheusrule.yaml": RULES_HEADER + _yaml(prometheus_rule(groups)),
        "deploy/monitoring/grafana-dashboard.json": json.dumps(dashboard(definitions), indent=2)
        + "\n",
        "deploy/chart/files/prometheus-rules.yaml": rules_text,
        "deploy/chart/files/grafana-dashboard.json": json.dumps(dashboard(definitions), indent=2)
        + "\n",
        OPERATIONS: operations_page((ROOT / OPERATIONS).read_text(encoding="utf-8"), definitions),
    }


def stale_files(root: Path = ROOT) -> list[str]:
    """The generated files under ``root`` that are missing or differ from what would be written."""
    return sorted(
        path
        for path, text in expected_files().items()
        if not (root / path).is_file() or (root / path).read_text(encoding="utf-8") != text
    )


def main(argv: list[str] | None = None) -> int:
    """Command line: write the files, or with ``--check`` report stale ones (exit 1)."""
    parser = argparse.ArgumentParser(
        prog="python -m taskfsm.tools.monitoring",
        description="Generate taskfsm's Prometheus rules and Grafana dashboard from its metrics.",
    )
    parser.add_argument("--check", action="store_true", help="only report stale files")
    parser.add_argument("--root", type=Path, default=ROOT, help="repository (default: %(default)s)")
    args = parser.parse_args(argv)
    stale = stale_files(args.root)
    if args.check:
        for path in stale:
            print(f"stale: {path} (run `make generate`)", file=sys.stderr)
        return 1 if stale else 0
    for path, text in expected_files().items():
        if path in stale:
            target = args.root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    return 0
