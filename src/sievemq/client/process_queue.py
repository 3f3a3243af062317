"""Per-queue consumption state of a consumer: in-flight messages and the offset that is safe to commit.

Pure bookkeeping, no I/O (Java ``ProcessQueue``). Messages of one queue arrive in offset order from pulls and
finish in any order; the committable offset is the smallest offset still in flight, or the next offset to pull
when nothing is in flight. So a commit never passes a message whose listener has not finished, and runs of
messages the broker or the client filtered out are skipped once nothing older is pending.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterable

from sievemq.protocol.message import MessageExt
from sievemq.protocol.running_info import ProcessQueueInfo

_MIB = 1024 * 1024


def now_ms() -> int:
    """Milliseconds since 1970."""
    return int(time.time() * 1000)


class ProcessQueue:
    """In-flight messages of one message queue."""

    __slots__ = ("_inflight", "_max_seen", "dropped", "last_consume_ms", "last_pull_ms", "next_offset", "size_bytes")

    def __init__(self, next_offset: int) -> None:
        self.next_offset = next_offset
        """The offset the next pull starts from."""
        self._inflight: OrderedDict[int, int] = OrderedDict()  # queue offset -> body size
        self._max_seen = next_offset - 1
        self.size_bytes = 0
        """Bytes of message bodies in flight."""
        self.dropped = False
        """True once the queue was taken away (rebalance) or closed: results are no longer committed."""
        self.last_pull_ms = self.last_consume_ms = now_ms()
        """When a pull of the queue was last answered; since when the queue has not stood still: the last time a
        listener finished messages of it, or messages arrived while none were in flight (RocketMQ's
        ``lastPullTimestamp``, ``lastConsumeTimestamp``; GET_CONSUMER_RUNNING_INFO)."""

    # ---------------------------------------------------------------------------------------- pulls
    def add(self, msgs: Iterable[MessageExt], next_begin_offset: int) -> list[MessageExt]:
        """Messages pulled up to ``next_begin_offset``: track them and return those new to this queue.

        Offsets already seen (a pull raced with a seek or a redelivery) are not tracked twice.
        """
        fresh: list[MessageExt] = []
        idle = not self._inflight
        for m in msgs:
            off = m.queue_offset
            if off <= self._max_seen or off in self._inflight:
                continue
            self._inflight[off] = len(m.body)
            self.size_bytes += len(m.body)
            self._max_seen = off
            fresh.append(m)
        if fresh and idle:
            self.last_consume_ms = now_ms()
        self.advance(next_begin_offset)
        return fresh

    def advance(self, next_begin_offset: int) -> None:
        """The broker said where to pull next (nothing new, everything filtered, or offset moved)."""
        self.next_offset = next_begin_offset
        if next_begin_offset - 1 < self._max_seen and not self._inflight:
            self._max_seen = next_begin_offset - 1

    def reset(self, offset: int) -> None:
        """Forget everything in flight and pull from ``offset`` next (seek)."""
        self._inflight.clear()
        self.size_bytes = 0
        self.next_offset = offset
        self._max_seen = offset - 1

    # ---------------------------------------------------------------------------------------- results
    def complete(self, offsets: Iterable[int]) -> int:
        """Listener finished these offsets; returns the committable offset afterwards."""
        done = False
        for off in offsets:
            size = self._inflight.pop(off, None)
            if size is not None:
                self.size_bytes -= size
                done = True
        if done:
            self.last_consume_ms = now_ms()
        return self.commit_offset

    @property
    def commit_offset(self) -> int:
        """Smallest in-flight offset, else the next offset to pull."""
        if self._inflight:
            return next(iter(self._inflight))
        return self.next_offset

    # ---------------------------------------------------------------------------------------- flow control
    @property
    def count(self) -> int:
        """Messages in flight."""
        return len(self._inflight)

    @property
    def span(self) -> int:
        """Offset distance between the oldest and the newest message in flight (0 when empty)."""
        if not self._inflight:
            return 0
        return self._max_seen - next(iter(self._inflight))

    def is_inflight(self, offset: int) -> bool:
        """True while ``offset`` was delivered and not completed."""
        return offset in self._inflight

    def info(self, commit_offset: int, *, locked: bool = False, last_lock_ms: int = 0) -> ProcessQueueInfo:
        """The queue as GET_CONSUMER_RUNNING_INFO reports it: ``commit_offset`` from the offset store, ``locked`` and
        ``last_lock_ms`` from an orderly consumer (messages being consumed count among the cached ones)."""
        first = next(iter(self._inflight)) if self._inflight else 0
        last = next(reversed(self._inflight)) if self._inflight else 0
        return ProcessQueueInfo(
            commit_offset=commit_offset,
            cached_min_offset=first,
            cached_max_offset=last,
            cached_count=len(self._inflight),
            cached_size_mib=self.size_bytes // _MIB,
            locked=locked,
            last_lock_ms=last_lock_ms,
            dropped=self.dropped,
            last_pull_ms=self.last_pull_ms,
            last_consume_ms=self.last_consume_ms,
        )

    def over_limits(self, max_count: int, max_bytes: int, max_span: int) -> bool:
        """True when pulling must pause (flow control)."""
        return self.count >= max_count or self.size_bytes >= max_bytes or self.span >= max_span
