"""The filter server's metrics: its functions' decisions and its workers (docs/metrics.md §10)."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from sievemq.filtersrv.registry import FilterRegistry
from sievemq.filtersrv.workers import WorkerPool
from sievemq.metrics.broker import FILTER_HELP
from sievemq.metrics.families import gauge
from sievemq.metrics.series import OTHER

__all__ = ["FiltersrvCollector"]


class FiltersrvCollector:
    """``sievemq_filter_messages_total{kind="function"}`` per (group, topic), functions, workers and restarts."""

    def __init__(self, registry: FilterRegistry, workers: WorkerPool, limit: int) -> None:
        """``limit``: (group, topic) pairs with their own series, in the order registered; the rest add up."""
        self.registry = registry
        self.workers = workers
        self.limit = limit

    def collect(self) -> Iterable[Metric]:
        """Counts as they are (a function registered anew starts its counts again, as a counter reset)."""
        decided = CounterMetricFamily("sievemq_filter_messages", FILTER_HELP, labels=["kind", "outcome", "group",
                                                                                      "topic"])  # fmt: skip
        state = GaugeMetricFamily("sievemq_filtersrv_functions", "Filter functions registered, by state (enabled, "
                                  "disabled after maxConsecutiveFailures)", labels=["state"])  # fmt: skip
        rest = {"matched": 0, "filtered_out": 0, "error": 0}
        enabled = 0
        regs = self.registry.registrations()
        for i, reg in enumerate(regs):
            s = reg.stats
            enabled += reg.enabled
            rows = {"matched": s.matched, "filtered_out": s.filtered_out, "error": s.errors}
            for outcome, n in rows.items():
                if i < self.limit:
                    decided.add_metric(["function", outcome, reg.group, reg.topic], n)
                else:
                    rest[outcome] += n
        if len(regs) > self.limit:
            for outcome, n in rest.items():
                decided.add_metric(["function", outcome, OTHER, OTHER], n)
        yield decided
        state.add_metric(["enabled"], enabled)
        state.add_metric(["disabled"], len(regs) - enabled)
        yield state
        w = self.workers
        yield gauge("sievemq_filtersrv_workers", "Worker processes running filter functions", len(w.pids()))
        restarts = CounterMetricFamily("sievemq_filtersrv_worker_restarts", "Workers killed and replaced, by reason "
                                       "(recycled: CPU or batch budget; timeout, crash, memory, protocol ...)",
                                       labels=["reason"])  # fmt: skip
        for reason, n in sorted(w.replaced.items()):
            restarts.add_metric([reason], n)
        yield restarts
