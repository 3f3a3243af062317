"""What every sievemq process exports, whatever its roles, and the registry of a process (docs/metrics.md §1).

A process runs one role (``sievemq broker``) or several (``sievemq dev``: name server, broker and proxy); its
``/metrics`` is one ``CollectorRegistry`` of its own (never prometheus_client's global one) holding each role's
collectors, plus what belongs to the process: its event loop's lag, its connections per role, its version, and
prometheus_client's process, platform and GC collectors (CPU seconds, resident memory, open file descriptors).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from sievemq.metrics.families import counter, gauge, histogram
from sievemq.metrics.loop_lag import LagStats
from sievemq.protocol import accel
from sievemq.version import __version__

__all__ = ["LoopLagCollector", "ProcessInfoCollector", "RoleMetrics", "build_registry"]


@dataclass
class RoleMetrics:
    """What one role adds to its process's ``/metrics``."""

    role: str
    """``namesrv``, ``broker``, ``proxy`` or ``filtersrv``: the ``role`` label of ``sievemq_connections``."""
    collectors: Sequence[Collector] = ()
    connections: Callable[[], int] | None = None
    """Open client connections of the role (None: it cannot tell, as the gRPC proxy)."""
    closed: Callable[[], Mapping[str, int]] | None = None
    """Connections its remoting servers closed or refused since start, by limit (``ServerGuard.closed``)."""
    health: Callable[[], dict[str, str]] = field(default=lambda: {})
    """Problems worth an operator's look (``/healthz`` lists them; empty: none)."""


class LoopLagCollector:
    """``sievemq_event_loop_*`` from the process's ``LagStats`` (sievemq/metrics/loop_lag.py)."""

    def __init__(self, stats: LagStats) -> None:
        self.stats = stats

    def collect(self) -> Iterable[Metric]:
        """The lag histogram, the recent 99th percentile and maximum, the stalls."""
        s = self.stats
        yield histogram("sievemq_event_loop_lag_seconds", "How late the event loop ran a timer that asked to wake "
                        "every 50 ms: time the loop was busy or blocked, which every request waited too",
                        s.histogram)  # fmt: skip
        yield gauge("sievemq_event_loop_lag_p99_seconds", "99th percentile of the event-loop lag over the last "
                    "minute (the last 1,200 samples)", s.percentile(99))  # fmt: skip
        yield gauge("sievemq_event_loop_lag_max_seconds", "Largest event-loop lag since the process started", s.max_s)
        yield counter("sievemq_event_loop_stalls", "Event-loop lag samples of 10 ms or more", s.stalls)
        yield counter("sievemq_event_loop_stalled_seconds", "Lag of those stalls, added up", s.stalled_s)


class ProcessInfoCollector:
    """``sievemq_build_info``, ``sievemq_connections{role}`` and ``sievemq_connections_closed_total{role,reason}``."""

    def __init__(self, roles: Sequence[RoleMetrics]) -> None:
        self.roles = roles

    def collect(self) -> Iterable[Metric]:
        """Version and codec, and each role's open connections."""
        info = GaugeMetricFamily("sievemq_build_info", "Always 1: the sievemq version, its codec (compiled or "
                                 "pure-python) and the roles this process runs",
                                 labels=["version", "codec", "roles"])  # fmt: skip
        info.add_metric([__version__, accel.implementation(), ",".join(r.role for r in self.roles)], 1)
        yield info
        conns = GaugeMetricFamily("sievemq_connections", "Open client connections per role (remoting TCP; "
                                  "the gRPC proxy's are not counted)", labels=["role"])  # fmt: skip
        for r in self.roles:
            if r.connections is not None:
                conns.add_metric([r.role], r.connections())
        yield conns
        closed = CounterMetricFamily("sievemq_connections_closed", "Connections a role's remoting servers closed or "
                                     "refused to protect the others, by the limit that did (docs/server-limits.md "
                                     "§6)", labels=["role", "reason"])  # fmt: skip
        for r in self.roles:
            if r.closed is not None:
                for reason, n in sorted(r.closed().items()):
                    closed.add_metric([r.role, reason], n)
        yield closed


def build_registry(roles: Sequence[RoleMetrics], loop_lag: LagStats) -> CollectorRegistry:
    """The ``CollectorRegistry`` of a process running ``roles``, its event loop measured by ``loop_lag``."""
    registry = CollectorRegistry(auto_describe=True)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    registry.register(ProcessInfoCollector(roles))
    registry.register(LoopLagCollector(loop_lag))
    for role in roles:
        for collector in role.collectors:
            registry.register(collector)
    return registry
