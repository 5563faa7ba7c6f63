"""The controller's metric families as data, and the one way alerts and panels name a series.

:func:`metric_definitions` reads the families from :class:`taskfsm.manager.metrics.Metrics`
itself (names, types, help texts, label names); :class:`Series` writes a PromQL series with the
scrape job's selector and refuses a metric or label the controller does not export, so a
generated alert or panel cannot name a series that does not exist.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from prometheus_client.metrics import MetricWrapperBase

from taskfsm.manager.metrics import Metrics
from taskfsm.manager.queue import WorkQueue

SELECTOR: Final = 'job="taskfsm-controller-metrics"'
"""Label matcher of the controller's scrape job in every alert."""


@dataclass(frozen=True)
class MetricDefinition:
    """One metric family the controller exports."""

    name: str
    """The family name; a counter's series add ``_total``, a histogram's ``_bucket`` etc."""
    type: str
    """``counter``, ``gauge`` or ``histogram``."""
    help: str
    labels: tuple[str, ...]

    @property
    def series(self) -> str:
        """The name of the series to query (``<name>_total`` for counters)."""
        return f"{self.name}_total" if self.type == "counter" else self.name


def metric_definitions() -> list[MetricDefinition]:
    """The families of a fresh ``Metrics()`` (with its scrape-time gauges), in definition order.

    Label names are the metric objects' own (``prometheus_client`` keeps them in
    ``_labelnames``); a scrape-time gauge's label is read from one probe sample.
    """
    metrics = Metrics()
    metrics.watch_tasks_by_phase(lambda: [("probe", 0.0)])
    metrics.watch_health(lambda: [("probe", 0.0)])
    # The work-in-progress gauges have a sample per queue, the depth by namespace one per
    # namespace waiting.
    WorkQueue(metrics=metrics.queue("probe")).add("probe/probe")
    declared = {
        value._name: tuple(value._labelnames)
        for value in vars(metrics).values()
        if isinstance(value, MetricWrapperBase)
    }
    definitions = []
    for family in metrics.registry.collect():
        labels = declared.get(family.name)
        if labels is None:
            labels = tuple(dict.fromkeys(key for s in family.samples for key in s.labels))
        definitions.append(MetricDefinition(family.name, family.type, family.documentation, labels))
    return definitions


_MATCHER = re.compile(r'^([a-zA-Z_][a-zA-Z0-9_]*)(=~|!~|!=|=)"[^"]*"$')


class Series:
    """Builds PromQL selectors of the controller's series, refusing what it does not export."""

    def __init__(self, definitions: Iterable[MetricDefinition], selector: str = SELECTOR):
        self.by_series = {d.series: d for d in definitions}
        self.selector = selector

    def definition(self, series: str) -> MetricDefinition:
        base = series.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count")
        definition = self.by_series.get(series) or self.by_series.get(base)
        if definition is None or (base != series and definition.type != "histogram"):
            raise KeyError(f"taskfsm exports no series {series!r}")
        return definition

    def __call__(self, series: str, *matchers: str, selector: str | None = None) -> str:
        """``series{<selector>,<matchers>}``; raises ``KeyError`` for an unknown series or label."""
        definition = self.definition(series)
        for matcher in matchers:
            found = _MATCHER.match(matcher)
            if not found or found.group(1) not in (*definition.labels, "le"):
                raise KeyError(f"{series} has no label for matcher {matcher!r}")
        parts = [selector if selector is not None else self.selector, *matchers]
        return f"{series}{{{','.join(p for p in parts if p)}}}"

    def by(self, series: str, *labels: str) -> str:
        """``by (...)`` over ``labels``, each checked against ``series``' labels."""
        definition = self.definition(series)
        for label in labels:
            if label not in (*definition.labels, "job", "instance", "le"):
                raise KeyError(f"{series} has no label {label!r}")
        return f"by ({', '.join(labels)})"
