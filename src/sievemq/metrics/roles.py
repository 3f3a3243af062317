"""Which collectors each role has: ``RoleMetrics`` wired from a running role's services (docs/metrics.md §1)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING

from prometheus_client.registry import Collector

from sievemq.metrics.process import RoleMetrics

if TYPE_CHECKING:
    from sievemq.broker.controller import BrokerController
    from sievemq.filtersrv.controller import FiltersrvController
    from sievemq.namesrv.controller import NamesrvController
    from sievemq.proxy.server import ProxyServer

__all__ = ["broker_metrics", "filtersrv_metrics", "namesrv_metrics", "proxy_metrics"]


def namesrv_metrics(ns: NamesrvController) -> RoleMetrics:
    """The name server's: brokers, clusters, topics, route requests."""
    from sievemq.metrics.namesrv import NamesrvCollector

    return RoleMetrics(
        "namesrv", [NamesrvCollector(ns.processors)], lambda: len(ns.server.connections), ns.server.guard.closed.copy
    )


def broker_metrics(b: BrokerController) -> RoleMetrics:
    """The broker's: traffic, latency, filters, lag, store, replication and bookkeeping."""
    from sievemq.metrics.broker import BookkeepingCollector, FilterCollector, TrafficCollector
    from sievemq.metrics.consumers import ConsumerCollector
    from sievemq.metrics.replication import ReplicationCollector
    from sievemq.metrics.store import StoreCollector

    limit = b.config.http_metrics_max_series
    collectors: list[Collector] = [
        TrafficCollector(b.stats, limit),
        FilterCollector(b.filters.counts, limit, b.filter_servers.function_counts.totals),
        ConsumerCollector(b.offsets, b.store, b.pop.book, limit),
        StoreCollector(b.store),
        ReplicationCollector(b.replication),
        BookkeepingCollector(b.topics, b.groups, b.transactions, b.timers, b.pop),
    ]

    def connections() -> int:
        return len(b.server.connections) + (len(b.vip_server.connections) if b.vip_server is not None else 0)

    def closed() -> Mapping[str, int]:
        return b.server.guard.closed + (b.vip_server.guard.closed if b.vip_server is not None else Counter())

    def health() -> dict[str, str]:
        problems = []
        disk = b.store.disk
        if disk.read_only is not None:
            problems.append(f"store read-only: {disk.read_only}")
        elif disk.full is not None:
            problems.append(f"store disk full: {disk.full.remark()}")
        if b.replication.behind:
            problems.append(f"refusing writes: {b.replication.behind}")
        if b.replication.is_slave and (b.replication.client is None or not b.replication.client.connected_to):
            problems.append("this slave is not following its master")
        return {"broker": "; ".join(problems)} if problems else {}

    return RoleMetrics("broker", collectors, connections, closed, health)


def proxy_metrics(p: ProxyServer) -> RoleMetrics:
    """The proxy's (after ``start``): gRPC calls, 5.x clients."""
    from sievemq.metrics.proxy import ProxyCollector

    service = p.service
    assert service is not None, "the proxy's metrics are wired after it started"
    return RoleMetrics("proxy", [ProxyCollector(p.grpc_stats, service.clients.clients, p.transactions.streams)])


def filtersrv_metrics(f: FiltersrvController) -> RoleMetrics:
    """The filter server's: functions' decisions, workers."""
    from sievemq.metrics.filtersrv import FiltersrvCollector

    collector = FiltersrvCollector(f.registry, f.workers, f.config.http_metrics_max_series)
    return RoleMetrics("filtersrv", [collector], lambda: len(f.server.connections), f.server.guard.closed.copy)
