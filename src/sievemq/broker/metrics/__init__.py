"""The broker's metrics (docs/metrics.md): one collector per subject, each given the services it reads
(``collectors.py``: traffic, filters, bookkeeping; ``consumers.py``; ``store.py``; ``replication.py``; RocketMQ 5's
own families: ``rocketmq_names.py``), and
``broker_metrics``, which wires them from a running broker."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING

from prometheus_client.registry import Collector

from sievemq.metrics.process import RoleMetrics

if TYPE_CHECKING:
    from sievemq.broker.controller import BrokerController

__all__ = ["broker_metrics"]


def broker_metrics(b: BrokerController) -> RoleMetrics:
    """The broker's: traffic, latency, filters, lag, store, replication and bookkeeping."""
    from sievemq.broker.metrics.collectors import BookkeepingCollector, FilterCollector, TrafficCollector
    from sievemq.broker.metrics.consumers import ConsumerCollector
    from sievemq.broker.metrics.replication import ReplicationCollector
    from sievemq.broker.metrics.store import StoreCollector

    limit = b.config.http_metrics_max_series
    collectors: list[Collector] = [
        TrafficCollector(b.stats, limit),
        FilterCollector(b.filters.counts, limit, b.filter_servers.function_counts.totals),
        ConsumerCollector(b.offsets, b.store, b.pop.book, limit),
        StoreCollector(b.store),
        ReplicationCollector(b.replication),
        BookkeepingCollector(b.topics, b.groups, b.transactions, b.timers, b.pop),
    ]
    if b.config.http_metrics_rocketmq_names:  # RocketMQ 5's families too (docs/metrics-rocketmq.md)
        from sievemq.broker.metrics.rocketmq_names import rocketmq_collector

        collectors.append(rocketmq_collector(b))

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
