"""Message counters of a broker (puts and gets, total and per topic, messages and bytes) and the latency histograms
of sends and pulls. The processors update them per request; ``/metrics`` reads them when scraped
(``sievemq.broker.metrics.collectors``, docs/metrics.md §3), GET_BROKER_RUNTIME_INFO with the rates and daily marks
RocketMQ's tools show (``runtime_table``, docs/admin.md §10)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from sievemq.broker.metrics.rocketmq_counts import RocketMQCounts
from sievemq.broker.rates import DailyMarks, PerSecond, Windowed
from sievemq.metrics.histogram import LatencyHistogram
from sievemq.settings.properties import java_double

STATS_NAMES = {
    "TOPIC_PUT_NUMS": ("TOPIC_PUT", 1),
    "TOPIC_PUT_SIZE": ("TOPIC_PUT", 2),
    "GROUP_GET_NUMS": ("GROUP_GET", 1),
    "GROUP_GET_SIZE": ("GROUP_GET", 2),
}
"""RocketMQ's stats names (BrokerStatsManager) that VIEW_BROKER_STATS_DATA answers: (kind, value: 1 messages,
2 bytes) of ``BrokerStats.windows``."""

_PUT, _GOT, _FOUND = 0, 1, 2
"""The sampled counters: messages stored, messages delivered, gets that delivered messages."""


class BrokerStats:
    """Counts messages stored and delivered, and times sends and pulls."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.boot_ms = int(clock() * 1000)
        """When the broker started (epoch ms): RocketMQ's ``bootTimestamp``."""
        self._clock = clock
        self.put_total = 0
        self.get_total = 0
        self.found_total = 0
        """Gets (pulls, pops) that delivered at least one message."""
        self.put_by_topic: Counter[str] = Counter()
        self.get_by_topic: Counter[str] = Counter()
        self.put_bytes_by_topic: Counter[str] = Counter()
        """Bytes of the stored records (body, properties and header, as in the commit log)."""
        self.get_bytes_by_topic: Counter[str] = Counter()
        self.put_bytes_total = 0
        """The sum of ``put_bytes_by_topic`` (``put_total`` and ``get_total`` are the other two tables' sums): a scrape
        reads the first ``httpMetricsMaxSeries`` topics and takes the ``(other)`` series from the totals."""
        self.get_bytes_total = 0
        self.send_latency = LatencyHistogram()
        """Seconds from a send's arrival at its processor to its answer (SYNC_FLUSH and SYNC_MASTER waits included)."""
        self.pull_latency = LatencyHistogram()
        """Seconds from a pull's arrival at its processor to its answer, less the time it was held (long polling)."""
        self.rocketmq = RocketMQCounts()
        """The same traffic split as RocketMQ 5's metrics are (docs/metrics-rocketmq.md)."""
        self.windows = Windowed(clock)
        """Messages and bytes per topic (kind ``TOPIC_PUT``) and per ``topic@group`` (``GROUP_GET``) over the last
        minute, hour and day: VIEW_BROKER_STATS_DATA (``mqadmin statsAll``; ``stats_data``)."""
        self._rates = PerSecond(3, clock)
        self._days = DailyMarks(3, clock)
        self._next_tick = 0.0
        self._tick()  # the rates' windows count from the start, as RocketMQ's samples do

    def _tick(self) -> None:
        """Sample the counters when a new second began (before they change): a clock read on the hot path."""
        now = self._clock()
        if now < self._next_tick:
            return
        self._next_tick = float(int(now) + 1)
        values = (self.put_total, self.get_total, self.found_total)
        self._rates.tick(values)
        self._days.tick(values)
        self.windows.roll(now)

    def put(self, topic: str, n: int, nbytes: int = 0, message_type: str = "normal") -> None:
        """``n`` messages of ``nbytes`` record bytes stored to ``topic`` (``message_type``: RocketMQ's label)."""
        self._tick()
        self.rocketmq.put(topic, message_type, n, nbytes)
        self.put_total += n
        self.put_by_topic[topic] += n
        self.put_bytes_by_topic[topic] += nbytes
        self.put_bytes_total += nbytes
        self.windows.add("TOPIC_PUT", topic, n, nbytes)

    def get(self, topic: str, n: int, nbytes: int = 0, group: str | None = None) -> None:
        """``n`` messages of ``nbytes`` record bytes delivered from ``topic`` (to ``group`` when the caller says:
        the per-group windows count only those)."""
        self._tick()
        if group is not None and n > 0:
            self.windows.add("GROUP_GET", f"{topic}@{group}", n, nbytes)
            self.rocketmq.get(topic, group, n, nbytes)
        self.get_total += n
        if n > 0:
            self.found_total += 1
        self.get_by_topic[topic] += n
        self.get_bytes_by_topic[topic] += nbytes
        self.get_bytes_total += nbytes

    def stats_data(self, name: str, key: str) -> dict[str, dict[str, float]] | None:
        """RocketMQ's stats ``name`` (``TOPIC_PUT_NUMS``...) of ``key`` over the last minute, hour and day, None when
        nothing was counted under it."""
        kind, index = STATS_NAMES.get(name, ("", 0))
        if not index or not self.windows.knows(kind, key):
            return None
        self._tick()
        return self.windows.snapshot(kind, key, index)

    def runtime_table(self) -> dict[str, str]:
        """The counters under RocketMQ's GET_BROKER_RUNTIME_INFO names: totals now and at the last two midnights,
        rates (``"<10 s> <1 min> <10 min>"`` messages per second, a window not covered yet empty), stored sizes,
        send latency percentiles (ms, the upper bound of the histogram bucket), boot time and uptime."""
        self._tick()
        put_bytes = self.put_bytes_total
        times = max(1, self.put_total)  # RocketMQ's putMessageTimesTotal is at least 1
        now_ms = int(self._clock() * 1000)
        return {
            "bootTimestamp": str(self.boot_ms),
            "runtime": uptime_text(now_ms - self.boot_ms),
            "msgPutTotalTodayNow": str(self.put_total),
            "msgPutTotalTodayMorning": str(self._days.today_morning[_PUT]),
            "msgPutTotalYesterdayMorning": str(self._days.yesterday_morning[_PUT]),
            "msgGetTotalTodayNow": str(self.get_total),
            "msgGetTotalTodayMorning": str(self._days.today_morning[_GOT]),
            "msgGetTotalYesterdayMorning": str(self._days.yesterday_morning[_GOT]),
            "putTps": self._rates.tps_text(_PUT),
            "getTransferredTps": self._rates.tps_text(_GOT),
            "getFoundTps": self._rates.tps_text(_FOUND),
            "putMessageTimesTotal": str(times),
            "putMessageSizeTotal": str(put_bytes),
            "putMessageAverageSize": java_double(put_bytes / times),
            "putLatency99": f"{latency_ms(self.send_latency, 0.99):.2f}",
            "putLatency999": f"{latency_ms(self.send_latency, 0.999):.2f}",
        }


def latency_ms(h: LatencyHistogram, q: float) -> float:
    """The upper bound (ms) of the bucket holding quantile ``q`` of ``h`` (0 when empty; the last bound when the
    quantile is above every bound): RocketMQ's putLatency99 is a bucket bound too."""
    total = h.count
    if total == 0:
        return 0.0
    running = 0
    for bound, n in zip(h.bounds, h.counts, strict=False):
        running += n
        if running >= q * total:
            return bound * 1000
    return h.bounds[-1] * 1000


def uptime_text(ms: int) -> str:
    """RocketMQ's ``runtime``: ``[ 0 days, 1 hours, 2 minutes, 3 seconds ]``."""
    s = max(0, ms) // 1000
    return f"[ {s // 86400} days, {s % 86400 // 3600} hours, {s % 3600 // 60} minutes, {s % 60} seconds ]"
