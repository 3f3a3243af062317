"""Building prometheus_client metric families from what a collector read at scrape time (docs/metrics.md §2)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import cast

from prometheus_client import utils
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from sievemq.metrics.histogram import LatencyHistogram
from sievemq.metrics.series import OTHER, first_n, top_n

__all__ = [
    "FILTER_HELP",
    "counter", "gauge", "histogram", "labelled_counter", "labelled_gauge", "labelled_histogram"]

LabelValues = tuple[str, ...]
FILTER_HELP = ("Messages a consumer group's filter decided on, by kind (tag: the tag hash in the consume queue; "
               "bitmap: the SQL92 group's Bloom bits, skipping the message unread; sql: the SQL92 expression on its "
               "properties; function: a filter server's function, on a broker as its filter servers reported) and "
               "outcome (matched, filtered_out, error: for sql a message the expression could not be evaluated on, "
               "not delivered; for function a batch that failed)")  # fmt: skip
"""The help of ``sievemq_filter_messages``, which the broker and the filter server both export."""

Keep = Callable[[Iterable[tuple[LabelValues, float]], int], tuple[list[tuple[LabelValues, float]], float | None]]


def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    """An unlabelled counter (``name`` without ``_total``: prometheus_client adds it)."""
    return CounterMetricFamily(name, doc, value=value)


def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    """An unlabelled gauge."""
    return GaugeMetricFamily(name, doc, value=value)


def _fill(metric: CounterMetricFamily | GaugeMetricFamily, labels: Sequence[str],
          items: Iterable[tuple[LabelValues, float]], limit: int, keep: Keep) -> None:  # fmt: skip
    kept, rest = keep(items, limit)
    for values, value in kept:
        metric.add_metric(list(values), value)
    if rest is not None:
        metric.add_metric([OTHER] * len(labels), rest)


def labelled_counter(
    name: str, doc: str, labels: Sequence[str], items: Iterable[tuple[LabelValues, float]], limit: int
) -> CounterMetricFamily:
    """A counter with one series per label set, the first ``limit`` in the order given (``series.first_n``)."""
    metric = CounterMetricFamily(name, doc, labels=list(labels))
    _fill(metric, labels, items, limit, first_n)
    return metric


def labelled_gauge(
    name: str, doc: str, labels: Sequence[str], items: Iterable[tuple[LabelValues, float]], limit: int
) -> GaugeMetricFamily:
    """A gauge with one series per label set, the ``limit`` largest values (``series.top_n``)."""
    metric = GaugeMetricFamily(name, doc, labels=list(labels))
    _fill(metric, labels, items, limit, top_n)
    return metric


_go_float = cast(Callable[[float], str], utils.floatToGoString)  # how Prometheus writes an ``le`` bound


def _buckets(h: LatencyHistogram) -> list[tuple[str, float]]:
    return [(_go_float(bound), float(n)) for bound, n in h.cumulative()]


def histogram(name: str, doc: str, h: LatencyHistogram) -> Metric:
    """A histogram family from a ``LatencyHistogram``."""
    return HistogramMetricFamily(name, doc, buckets=_buckets(h), sum_value=h.sum)


def labelled_histogram(name: str, doc: str, label: str, histograms: Mapping[str, LatencyHistogram]) -> Metric:
    """A histogram family with one series per value of ``label`` (a fixed, small set: no bound applied)."""
    metric = HistogramMetricFamily(name, doc, labels=[label])
    for value, h in histograms.items():
        metric.add_metric([value], _buckets(h), h.sum)
    return metric
