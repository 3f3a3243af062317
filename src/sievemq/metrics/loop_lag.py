"""How long an event loop was kept from running: a ticker's lateness, as statistics an operator can read.

A task asks to wake every ``interval`` seconds; when it wakes later than asked, the loop was busy (or blocked: an
fsync, a large copy, a GC pause) for that long, and every request that arrived meanwhile waited as much.
``LagStats`` is the pure part (samples in, figures out); ``LoopLagMonitor`` runs the ticker. The broker reports
the figures in GET_BROKER_RUNTIME_INFO (``eventLoopLag*``); every role's ``/metrics`` has them as
``sievemq_event_loop_*`` (docs/metrics.md).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable

from sievemq.metrics.histogram import LatencyHistogram
from sievemq.util.tasks import Background

__all__ = ["LagStats", "LoopLagMonitor"]

log = logging.getLogger(__name__)

STALL_S = 0.010
"""Lateness counted as a stall (10 ms: a request delayed this long shows in a p99)."""
WARN_S = 0.200
"""Lateness logged as a WARNING (at most once a minute)."""
LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
"""Bucket bounds of ``LagStats.histogram``, seconds."""


class LagStats:
    """Lateness samples of one loop: the recent ones for percentiles, all-time maximum, stall count and time."""

    def __init__(self, window: int = 1200) -> None:
        self.recent: deque[float] = deque(maxlen=window)
        """The last ``window`` samples, seconds (1,200 at 50 ms: the last minute)."""
        self.samples = 0
        self.max_s = 0.0
        self.stalls = 0
        """Samples of at least ``STALL_S``."""
        self.stalled_s = 0.0
        """Total lateness of those samples."""
        self.histogram = LatencyHistogram(LAG_BUCKETS)
        """Every sample since the start, in buckets (``sievemq_event_loop_lag_seconds``)."""

    def record(self, lag_s: float) -> None:
        """One wake-up ``lag_s`` seconds late (negative values count as 0)."""
        lag = max(0.0, lag_s)
        self.recent.append(lag)
        self.samples += 1
        self.histogram.observe(lag)
        if lag > self.max_s:
            self.max_s = lag
        if lag >= STALL_S:
            self.stalls += 1
            self.stalled_s += lag

    def percentile(self, p: float) -> float:
        """The ``p``-th percentile (nearest rank) of the recent samples, seconds; 0 without samples."""
        xs = sorted(self.recent)
        if not xs:
            return 0.0
        rank = max(1, min(len(xs), -int(-p * len(xs) // 100)))  # ceil(p/100 * n)
        return xs[rank - 1]

    def table(self) -> dict[str, str]:
        """The figures as GET_BROKER_RUNTIME_INFO entries (milliseconds, three decimals)."""
        return {
            "eventLoopLagP50Ms": f"{self.percentile(50) * 1000:.3f}",
            "eventLoopLagP99Ms": f"{self.percentile(99) * 1000:.3f}",
            "eventLoopLagMaxMs": f"{self.max_s * 1000:.3f}",
            "eventLoopStalls": str(self.stalls),
            "eventLoopStalledMs": f"{self.stalled_s * 1000:.1f}",
        }


class LoopLagMonitor:
    """Wakes every ``interval`` seconds on the running loop and records how late each wake-up came."""

    def __init__(self, interval: float = 0.05, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self.stats = LagStats()
        self._clock = clock
        self._task = Background("loop-lag")
        self._warned_at = -60.0

    def start(self) -> None:
        """Start ticking on the running loop."""
        self._task.start(self._run())

    async def stop(self) -> None:
        """Stop ticking."""
        await self._task.stop()

    async def _run(self) -> None:
        clock = self._clock
        while True:
            due = clock() + self.interval
            await asyncio.sleep(self.interval)
            lag = clock() - due
            self.stats.record(lag)
            if lag >= WARN_S and clock() - self._warned_at >= 60.0:
                self._warned_at = clock()
                log.warning("the event loop was blocked for %.0f ms (see eventLoopLag* in the runtime info)",
                            lag * 1000)  # fmt: skip
