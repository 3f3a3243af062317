"""Rates and daily marks of cumulative counters, as RocketMQ's broker reports them in GET_BROKER_RUNTIME_INFO
(``putTps``, ``getTransferredTps``, ``msgPutTotalTodayMorning``...; docs/admin.md §10).

Nothing runs in the background: the owner calls ``tick`` with the counters' values before it changes them and
before it reads a rate, and the samples of the seconds in between (when nothing changed) are filled in then.
"""

from __future__ import annotations

import datetime
import time
from array import array
from collections import deque
from collections.abc import Callable, Sequence

from sievemq.settings.properties import java_double

RATE_WINDOWS_S = (10, 60, 600)
"""The windows of RocketMQ's TPS strings: ``"<10 s> <1 min> <10 min>"``."""


class PerSecond:
    """Samples of some cumulative counters at the start of each second (RocketMQ's StoreStatsService samples its
    counters every second and keeps ten minutes of them)."""

    def __init__(self, width: int, clock: Callable[[], float] = time.time, keep: int = max(RATE_WINDOWS_S) + 1):
        self._width = width
        self._clock = clock
        self._samples: deque[tuple[int, tuple[int, ...]]] = deque(maxlen=keep)

    def tick(self, values: Sequence[int]) -> None:
        """Record ``values`` (the counters now, before a change) for every second since the last sample."""
        now = int(self._clock())
        if not self._samples:
            self._samples.append((now, tuple(values)))
            return
        last = self._samples[-1][0]
        if now <= last:
            return
        first = max(last + 1, now - (self._samples.maxlen or 1) + 1)
        snapshot = tuple(values)
        for second in range(first, now + 1):
            self._samples.append((second, snapshot))

    def tps(self, index: int, window: int) -> float | None:
        """Counter ``index``'s rate per second over the last ``window`` seconds, None before ``window`` seconds of
        samples exist (as RocketMQ, whose rate is then empty)."""
        if len(self._samples) <= window:
            return None
        last_s, last = self._samples[-1]
        before_s, before = self._samples[-1 - window]
        return (last[index] - before[index]) / (last_s - before_s)

    def tps_text(self, index: int) -> str:
        """RocketMQ's form: the 10 s, 1 min and 10 min rates separated by spaces (Java's double text; a rate not
        known yet is empty)."""
        return " ".join("" if (r := self.tps(index, w)) is None else java_double(r) for w in RATE_WINDOWS_S)


class DailyMarks:
    """Counters' values at the two most recent local midnights (RocketMQ's BrokerStats records them each
    midnight; both are 0 before the broker's first midnight)."""

    def __init__(self, width: int, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._day = self._today()
        self._next = _next_midnight(self._day)
        self.today_morning: tuple[int, ...] = (0,) * width
        self.yesterday_morning: tuple[int, ...] = (0,) * width

    def _today(self) -> datetime.date:
        return datetime.datetime.fromtimestamp(self._clock()).date()

    def tick(self, values: Sequence[int]) -> None:
        """Roll the marks over when a midnight has passed (``values``: the counters now, before a change)."""
        if self._clock() < self._next:
            return
        today = self._today()
        now = tuple(values)
        self.yesterday_morning = self.today_morning if (today - self._day).days == 1 else now
        self.today_morning = now
        self._day = today
        self._next = _next_midnight(today)


def _next_midnight(day: datetime.date) -> float:
    """The epoch time of the local midnight after ``day``."""
    return datetime.datetime.combine(day + datetime.timedelta(days=1), datetime.time()).timestamp()


def human_bytes(n: int) -> str:
    """RocketMQ's ``MixAll.humanReadableByteCount(n, false)``: ``512 B``, ``1.5 KiB``, ``252.0 GiB``."""
    if n < 1024:
        return f"{n} B"
    exp = 0
    value = float(n)
    while value >= 1024 and exp < 6:
        value /= 1024
        exp += 1
    return f"{n / 1024**exp:.1f} {'KMGTPE'[exp - 1]}iB"


_SPANS = {"minute": 60, "hour": 3600, "day": 86400}
_STEP = 10
"""Seconds of the open bucket each ``add`` counts into; closed buckets are kept per 10 s for the last minute, then
per minute for the last hour and per hour for the last day."""
_KEPT = ((10, 7), (60, 61), (3600, 25))
_PRUNE_EVERY = 4096
_PRUNE_SECONDS = 3600
"""A sweep for keys nothing was counted under for a day (deleted topics, gone groups) runs after ``_PRUNE_EVERY``
new buckets, at most once every ``_PRUNE_SECONDS``: a sweep walks every key, and a broker with 100,000 topics
opening a bucket for each of them every 10 seconds would otherwise sweep 25 times in those 10 seconds."""


class Windowed:
    """Counts per stats kind and key over the last minute, hour and day (RocketMQ's StatsItem, what
    VIEW_BROKER_STATS_DATA answers): each ``add`` is one call of a number of messages and bytes. ``roll`` (the
    owner calls it at least once a second) moves the open bucket on; ``add`` itself is a few additions."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self.started = clock()
        self._bucket = 0
        self.roll(self.started)
        self._open: dict[tuple[str, str], list[int]] = {}
        """(kind, key) -> [bucket start, messages, bytes, calls] of the open bucket."""
        self._closed: dict[tuple[str, str], tuple[array[int], array[int], array[int]]] = {}
        """(kind, key) -> closed buckets per tier, oldest first, at most ``_KEPT``'s count each, flat: ``start,
        messages, bytes, calls`` of each bucket in turn in one ``array('q')`` per tier (~100 bytes for a bucket,
        where three deques of lists took 2.5 KB: 250 MB at 100,000 topics)."""
        self._adds = 0
        self._pruned_at = self._bucket

    def roll(self, now: float) -> None:
        """The open bucket is the one of ``now``."""
        second = int(now)
        self._bucket = second - second % _STEP

    def add(self, kind: str, key: str, n: int, nbytes: int) -> None:
        """``n`` messages of ``nbytes`` bytes in one call, under ``kind`` (``TOPIC_PUT``, ``GROUP_GET``) and key."""
        k = (kind, key)
        b = self._open.get(k)
        if b is None or b[0] != self._bucket:
            if b is not None:
                self._close(k, b)
            b = self._open[k] = [self._bucket, 0, 0, 0]
            self._adds += 1
            if self._adds % _PRUNE_EVERY == 0 and self._bucket - self._pruned_at >= _PRUNE_SECONDS:
                self._pruned_at = self._bucket
                self._prune()
        b[1] += n
        b[2] += nbytes
        b[3] += 1

    def _close(self, k: tuple[str, str], b: list[int]) -> None:
        tiers = self._closed.get(k)
        if tiers is None:
            tiers = self._closed[k] = (array("q"), array("q"), array("q"))
        for (size, kept), buckets in zip(_KEPT, tiers, strict=True):
            start = b[0] - b[0] % size
            if buckets and buckets[-4] == start:
                buckets[-3] += b[1]
                buckets[-2] += b[2]
                buckets[-1] += b[3]
            else:
                buckets.extend((start, b[1], b[2], b[3]))
                if len(buckets) > 4 * kept:
                    del buckets[:4]

    def _prune(self) -> None:
        cutoff = self._bucket - _SPANS["day"]
        for k, b in list(self._open.items()):
            if b[0] < cutoff:
                del self._open[k]
                self._closed.pop(k, None)

    def knows(self, kind: str, key: str) -> bool:
        """True once ``add`` was called for (``kind``, ``key``)."""
        return (kind, key) in self._open

    def snapshot(self, kind: str, key: str, index: int) -> dict[str, dict[str, float]]:
        """``{"minute"|"hour"|"day": {"sum", "tps", "avgpt"}}`` of value ``index`` (1: messages, 2: bytes) over the
        last 60 s, 3,600 s and 86,400 s (``tps``: the sum per second of the span, or of the time since the start
        when shorter; ``avgpt``: the sum per call)."""
        now = self._clock()
        k = (kind, key)
        current = self._open.get(k)
        closed = self._closed.get(k)
        tiers = closed if closed is not None else (array("q"), array("q"), array("q"))
        out: dict[str, dict[str, float]] = {}
        for (period, span), flat in zip(_SPANS.items(), tiers, strict=True):
            rows: list[Sequence[int]] = [flat[i : i + 4] for i in range(0, len(flat), 4)]
            if current is not None:
                rows.append(current)
            total = sum(r[index] for r in rows if r[0] > now - span)
            calls = sum(r[3] for r in rows if r[0] > now - span)
            seconds = max(1.0, min(float(span), now - self.started))
            out[period] = {"sum": total, "tps": total / seconds, "avgpt": total / calls if calls else 0.0}
        return out
