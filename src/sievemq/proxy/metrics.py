"""The gRPC proxy's metrics: calls by method and answer code, unary call latency, 5.x clients (docs/metrics.md §9).

``GrpcMetricsInterceptor`` wraps every MessagingService handler: when a call ends it counts ``(method, code)``, the
code being the name of the apache.rocketmq.v2 ``Code`` in the answer's status (the last one for a streaming
call), ``GRPC_CANCELLED`` when the client went away first, ``GRPC_ERROR`` when the handler failed. A method name
outside the service (anyone can send any path) counts as ``(other)``, so hostile paths add no series.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

import grpc
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from sievemq.metrics.families import gauge, labelled_histogram
from sievemq.metrics.histogram import LatencyHistogram
from sievemq.metrics.process import RoleMetrics
from sievemq.metrics.series import OTHER
from sievemq.proxy.v2 import definition_pb2 as pb
from sievemq.proxy.v2 import service_pb2 as svc

if TYPE_CHECKING:
    from sievemq.proxy.server import ProxyServer

__all__ = ["GrpcMetricsInterceptor", "GrpcStats", "ProxyCollector", "proxy_metrics", "proxy_up"]

SERVICE = "apache.rocketmq.v2.MessagingService"
METHODS = frozenset(m.name for m in svc.DESCRIPTOR.services_by_name["MessagingService"].methods)


def method_label(path: str) -> str:
    """``/apache.rocketmq.v2.MessagingService/SendMessage`` -> ``SendMessage``; any other path -> ``(other)``."""
    service, _, method = path.lstrip("/").partition("/")
    return method if service == SERVICE and method in METHODS else OTHER


def code_label(message: Any) -> str | None:
    """The v2 ``Code`` name of an answer's status, or None when it has none."""
    try:
        if not message.HasField("status"):
            return None
        code = int(message.status.code)
    except (AttributeError, ValueError):
        return None
    try:
        return str(pb.Code.Name(code))  # type: ignore[attr-defined]
    except ValueError:
        return OTHER


class GrpcStats:
    """Calls per (method, code) and unary latency per method, updated by the interceptor."""

    def __init__(self) -> None:
        self.calls: dict[tuple[str, str], int] = {}
        self.latency: dict[str, LatencyHistogram] = {}

    def ended(self, method: str, code: str, seconds: float | None = None) -> None:
        """A call of ``method`` ended with ``code`` (``seconds``: a unary call's duration)."""
        key = (method, code)
        self.calls[key] = self.calls.get(key, 0) + 1
        if seconds is not None:
            h = self.latency.get(method)
            if h is None:
                h = self.latency[method] = LatencyHistogram()
            h.observe(seconds)


def _failure(e: BaseException) -> str:
    return "GRPC_CANCELLED" if isinstance(e, asyncio.CancelledError) else "GRPC_ERROR"


class GrpcMetricsInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Counts every call into ``stats`` (see the module docstring)."""

    def __init__(self, stats: GrpcStats) -> None:
        self.stats = stats

    async def intercept_service(
        self, continuation: Callable[[Any], Awaitable[Any]], handler_call_details: Any
    ) -> Any:
        """Wrap the method's handler; an unknown method is left to gRPC (UNIMPLEMENTED) and counted as such."""
        handler = await continuation(handler_call_details)
        method = method_label(handler_call_details.method)
        if handler is None:
            self.stats.ended(method, "GRPC_UNIMPLEMENTED")
            return None
        codec = (handler.request_deserializer, handler.response_serializer)
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(self._unary(method, handler.unary_unary), *codec)
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(self._streaming(method, handler.unary_stream), *codec)
        if handler.stream_stream is not None:
            return grpc.stream_stream_rpc_method_handler(self._streaming(method, handler.stream_stream), *codec)
        return handler  # stream-unary: MessagingService has none

    def _unary(self, method: str, behavior: Callable[[Any, Any], Awaitable[Any]]) -> Callable[[Any, Any], Any]:
        stats = self.stats

        async def timed(request: Any, context: Any) -> Any:
            started = time.perf_counter()
            try:
                response = await behavior(request, context)
            except BaseException as e:
                stats.ended(method, _failure(e), time.perf_counter() - started)
                raise
            stats.ended(method, code_label(response) or "OK", time.perf_counter() - started)
            return response

        return timed

    def _streaming(self, method: str, behavior: Callable[[Any, Any], AsyncIterator[Any]]) -> Callable[[Any, Any], Any]:
        stats = self.stats

        async def counted(request: Any, context: Any) -> AsyncIterator[Any]:
            code = "OK"
            try:
                async for response in behavior(request, context):
                    code = code_label(response) or code
                    yield response
            except BaseException as e:
                stats.ended(method, _failure(e))
                raise
            stats.ended(method, code)

        return counted


class ProxyCollector:
    """``sievemq_proxy_*``: gRPC calls, unary latency, 5.x consumers registered, producers' telemetry streams."""

    def __init__(self, stats: GrpcStats, consumers: dict[str, Any], producer_streams: dict[str, Any]) -> None:
        self.stats = stats
        self.consumers = consumers
        self.producer_streams = producer_streams

    def collect(self) -> Iterable[Metric]:
        """Counts as they are."""
        calls = CounterMetricFamily("sievemq_proxy_grpc_requests", "gRPC calls of 5.x clients when they end, by "
                                    "method and answer code (the apache.rocketmq.v2 Code name of the status; "
                                    "GRPC_CANCELLED, GRPC_ERROR or GRPC_UNIMPLEMENTED when there was none)",
                                    labels=["method", "code"])  # fmt: skip
        for (method, code), n in list(self.stats.calls.items()):
            calls.add_metric([method, code], n)
        yield calls
        yield labelled_histogram("sievemq_proxy_grpc_latency_seconds", "Duration of unary gRPC calls (every method "
                                 "but ReceiveMessage and Telemetry, which stream)", "method",
                                 self.stats.latency)  # fmt: skip
        yield gauge("sievemq_proxy_consumers", "5.x consumers registered through this proxy", len(self.consumers))
        yield gauge("sievemq_proxy_producer_streams", "Telemetry streams of 5.x producers (which receive "
                    "transaction checks)", len(self.producer_streams))  # fmt: skip
        yield proxy_up()


def proxy_up(cluster: str = "DefaultCluster", node_id: str | None = None) -> Metric:
    """RocketMQ 5's ``rocketmq_proxy_up`` (docs/metrics-rocketmq.md): always 1, labelled as RocketMQ's proxy labels it
    with its default settings (``proxyClusterName`` DefaultCluster, ``proxyName`` the host's name); the proxy runs
    apart from its brokers: ``proxy_mode`` cluster."""
    up = GaugeMetricFamily("rocketmq_proxy_up", "proxy status", labels=["cluster", "node_type", "node_id",
                                                                          "proxy_mode"])  # fmt: skip
    up.add_metric([cluster, "proxy", node_id or socket.gethostname() or "DEFAULT_PROXY", "cluster"], 1)
    return up


def proxy_metrics(p: ProxyServer) -> RoleMetrics:
    """The proxy's (after ``start``): gRPC calls, 5.x clients."""
    service = p.service
    assert service is not None, "the proxy's metrics are wired after it started"
    return RoleMetrics("proxy", [ProxyCollector(p.grpc_stats, service.clients.clients, p.transactions.streams)])
