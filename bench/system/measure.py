"""Measuring a phase: the Result of one phase against one system, CPU and memory from /proc, received bytes."""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.system.looplag import PhaseLag

CLK_TCK = os.sysconf("SC_CLK_TCK")
SLOW_MS = 10.0
"""Latency samples above this many milliseconds are counted and shown."""


def proc_cpu(pid: int) -> float:
    """CPU seconds of a process: utime + stime of all its threads, plus cutime + cstime of the children it
    waited for (redis-server's AOF rewrite runs in a forked child)."""
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rpartition(")")[2].split()
    return sum(int(x) for x in rest[11:15]) / CLK_TCK


def proc_mem(pid: int) -> dict[str, int]:
    """VmRSS, RssAnon, RssFile, RssShmem and VmHWM of a process in KiB."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmHWM"):
                out[key] = int(value.split()[0])
    return out


def percentile(xs: list[float], p: float) -> float:
    """Nearest-rank percentile of unsorted ``xs`` (NaN when empty)."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(p / 100 * len(s)) - 1))]


@dataclass
class Result:
    """One phase against one system."""

    messages: int = 0
    seconds: float = 0.0
    wire_bytes: int = 0
    """Bytes the consuming client received (sockets of this process; librdkafka's ``rxbytes`` for Tansu)."""
    server_cpu: float = 0.0
    client_cpu: float = 0.0
    """CPU seconds of this process during the phase, plus a latency consumer child's own."""
    received: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    inflight_mean: float = 0.0
    """Concurrent senders: sends unfinished when one started (itself included), on average."""
    inflight_max: int = 0
    loop_lag: PhaseLag | None = None
    """A sievemq broker's event-loop lag samples taken during the phase (``bench.system.looplag``)."""
    note: str = ""
    startup: float = 0.0
    """Seconds from the start of the consume phase's timing to its first message (included in ``seconds``)."""
    join: float = 0.0
    """Tansu: seconds of the consumer group join, before the timing starts (the partitions' assignment)."""

    @property
    def rate(self) -> float:
        """Messages per second."""
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    def server_us(self) -> float:
        """Server CPU microseconds per message."""
        return self.server_cpu * 1e6 / self.messages if self.messages else 0.0

    def client_us(self) -> float:
        """Client CPU microseconds per message."""
        return self.client_cpu * 1e6 / self.messages if self.messages else 0.0

    def pct(self, p: float) -> float:
        """Latency percentile in ms."""
        return percentile(self.latencies_ms, p)

    def max_ms(self) -> float:
        """Highest latency in ms (NaN without samples)."""
        return max(self.latencies_ms) if self.latencies_ms else float("nan")

    def slow(self, over_ms: float = SLOW_MS) -> int:
        """Samples above ``over_ms``."""
        return sum(1 for x in self.latencies_ms if x > over_ms)


class Wire:
    """Bytes received by this process's asyncio clients, counted where they read their sockets."""

    sieve = 0
    redis = 0


def install_byte_counters() -> None:
    """Count received bytes in sievemq's ``Connection.data_received`` and asyncio's ``StreamReader.feed_data``
    (redis-py reads through asyncio streams; sievemq's client does not use them)."""
    from sievemq.remoting.connection import Connection

    orig_dr = Connection.data_received

    def data_received(self: Connection, data: bytes) -> None:
        Wire.sieve += len(data)
        orig_dr(self, data)

    Connection.data_received = data_received  # type: ignore[method-assign]
    orig_feed = asyncio.StreamReader.feed_data

    def feed_data(self: asyncio.StreamReader, data: bytes) -> None:
        Wire.redis += len(data)
        orig_feed(self, data)

    asyncio.StreamReader.feed_data = feed_data  # type: ignore[method-assign,assignment]


async def measured(pid: int, wire: str | None, fn: Callable[[Result], Awaitable[None]]) -> Result:
    """Run one phase, recording the server's CPU, this process's CPU and (``wire``: a ``Wire`` counter) the
    bytes received. ``fn`` may set ``wire_bytes`` itself and put a child's CPU in ``client_cpu``."""
    r = Result()
    s0 = proc_cpu(pid)
    c0 = time.process_time()
    w0 = getattr(Wire, wire) if wire else 0
    await fn(r)
    r.client_cpu += time.process_time() - c0
    r.server_cpu = proc_cpu(pid) - s0
    if wire:
        r.wire_bytes = getattr(Wire, wire) - w0
    return r
