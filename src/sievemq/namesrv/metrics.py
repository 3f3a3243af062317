"""The name server's metrics: what it knows of the cluster, and the route requests it answered (docs/metrics.md §8)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, Metric

from sievemq.metrics.families import counter, gauge
from sievemq.metrics.process import RoleMetrics
from sievemq.namesrv.processors import NamesrvProcessors

if TYPE_CHECKING:
    from sievemq.namesrv.controller import NamesrvController

__all__ = ["NamesrvCollector", "namesrv_metrics"]


class NamesrvCollector:
    """``sievemq_namesrv_*`` from the route table and the processors' counts."""

    def __init__(self, processors: NamesrvProcessors) -> None:
        self.processors = processors

    def collect(self) -> Iterable[Metric]:
        """Brokers, clusters and topics known; route requests by result; registrations."""
        p = self.processors
        routes = p.routes
        yield gauge("sievemq_namesrv_brokers", "Broker addresses registered and not expired (masters and slaves)",
                    len(routes.live))  # fmt: skip
        yield gauge("sievemq_namesrv_clusters", "Clusters with registered brokers", len(routes.clusters))
        yield gauge("sievemq_namesrv_topics", "Topics with a route", len(routes.topic_queues))
        requests = CounterMetricFamily("sievemq_namesrv_route_requests", "GET_ROUTEINFO_BY_TOPIC requests, by "
                                       "result (found, not_found)", labels=["result"])  # fmt: skip
        requests.add_metric(["found"], p.routes_found)
        requests.add_metric(["not_found"], p.routes_missing)
        yield requests
        yield counter("sievemq_namesrv_registrations", "REGISTER_BROKER requests accepted (every broker registers "
                      "every registerBrokerIntervalSeconds)", p.registrations)  # fmt: skip


def namesrv_metrics(ns: NamesrvController) -> RoleMetrics:
    """The name server's: brokers, clusters, topics, route requests."""
    return RoleMetrics(
        "namesrv", [NamesrvCollector(ns.processors)], lambda: len(ns.server.connections), ns.server.guard.closed.copy
    )
