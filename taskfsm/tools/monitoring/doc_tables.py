"""The metrics and alerts tables of docs/operations.md, rebuilt between their markers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from taskfsm.tools.monitoring.alerts import alert_rules
from taskfsm.tools.monitoring.series import MetricDefinition, Series

METRICS_BEGIN: Final = "<!-- BEGIN GENERATED: metrics (python -m taskfsm.tools.monitoring) -->"
METRICS_END: Final = "<!-- END GENERATED: metrics -->"
OPERATIONS: Final = "docs/operations.md"


def metrics_table(definitions: Iterable[MetricDefinition]) -> str:
    """The Markdown table of every exported family (docs/operations.md, "Metrics"), with the
    markers around it: series and labels, type, help text."""
    rows = [METRICS_BEGIN, "| Series | Type | Meaning |", "|---|---|---|"]
    for d in definitions:
        labels = f"{{{','.join(d.labels)}}}" if d.labels else ""
        meaning = d.help.replace("|", "\\|")
        rows.append(f"| `{d.series}{labels}` | {d.type} | {meaning} |")
    return "\n".join([*rows, METRICS_END])


ALERTS_BEGIN: Final = "<!-- BEGIN GENERATED: alerts (python -m taskfsm.tools.monitoring) -->"
ALERTS_END: Final = "<!-- END GENERATED: alerts -->"


def alerts_table(definitions: list[MetricDefinition]) -> str:
    """The Markdown table of the alerts (docs/operations.md, "Alerts and dashboard"), with the
    markers around it: each alert linked to its runbook, its expression without the job
    selector, how long it must hold, its severity."""
    rows = [
        ALERTS_BEGIN,
        "| Alert (runbook) | Expression (`{job=…}` left out) | For | Severity |",
        "|---|---|---|---|",
    ]
    for rule in alert_rules(Series(definitions, selector="")):
        expr = " ".join(rule["expr"].split()).replace("{}", "").replace("|", "\\|")
        link = f"[`{rule['alert']}`](runbooks.md#{rule['alert'].lower()})"
        rows.append(f"| {link} | `{expr}` | {rule['for']} | {rule['labels']['severity']} |")
    return "\n".join([*rows, ALERTS_END])


def _replace_block(text: str, begin: str, end: str, block: str) -> str:
    if text.count(begin) != 1 or text.count(end) != 1:
        raise ValueError(f"{OPERATIONS}: expected one {begin} ... {end} block")
    head, rest = text.split(begin, 1)
    return head + block + rest.split(end, 1)[1]


def operations_page(text: str, definitions: list[MetricDefinition]) -> str:
    """``text`` (docs/operations.md) with its metrics and alerts tables rebuilt."""
    text = _replace_block(text, METRICS_BEGIN, METRICS_END, metrics_table(definitions))
    return _replace_block(text, ALERTS_BEGIN, ALERTS_END, alerts_table(definitions))
