"""The filter server's metrics: its functions' decisions and its workers (docs/metrics.md §10)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from sievemq.filtersrv.pools import WorkerPools
from sievemq.filtersrv.registry import FilterRegistry
from sievemq.metrics.families import FILTER_HELP, gauge
from sievemq.metrics.process import RoleMetrics
from sievemq.metrics.series import OTHER

if TYPE_CHECKING:
    from sievemq.filtersrv.controller import FiltersrvController

__all__ = ["FiltersrvCollector", "filtersrv_metrics"]


class FiltersrvCollector:
    """``sievemq_filter_messages_total{kind="function"}`` per (group, topic), functions, workers and restarts."""

    def __init__(self, registry: FilterRegistry, workers: WorkerPools, limit: int) -> None:
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
        yield gauge("sievemq_filtersrv_workers", "Worker processes running named filter functions", len(w.pids()))
        yield gauge("sievemq_filtersrv_upload_workers", "Worker processes of uploaded filter functions, each its "
                    "tenant's own", len(w.upload_pids()))  # fmt: skip
        yield gauge("sievemq_filtersrv_upload_tenants", "Uploaded filter functions holding workers of their own",
                    len(w.book))  # fmt: skip
        refused = CounterMetricFamily("sievemq_filtersrv_upload_refusals", "Uploaded functions refused workers "
                                      "(maxUploadWorkers reached: FILTER_WORKERS_FULL)")  # fmt: skip
        refused.add_metric([], w.refused)
        yield refused
        restarts = CounterMetricFamily("sievemq_filtersrv_worker_restarts", "Workers killed and replaced, by reason "
                                       "(recycled: CPU or batch budget; timeout, crash, memory, protocol ...)",
                                       labels=["reason"])  # fmt: skip
        for reason, n in sorted(w.replaced.items()):
            restarts.add_metric([reason], n)
        yield restarts


def filtersrv_metrics(f: FiltersrvController) -> RoleMetrics:
    """The filter server's: functions' decisions, workers."""
    collector = FiltersrvCollector(f.registry, f.workers, f.config.http_metrics_max_series)
    return RoleMetrics("filtersrv", [collector], lambda: len(f.server.connections), f.server.guard.closed.copy)
