"""Per-queue consumption state of a consumer: in-flight messages and the offset that is safe to commit.

Pure bookkeeping, no I/O (Java ``ProcessQueue``). Messages of one queue arrive in offset order from pulls and
finish in any order; the committable offset is the smallest offset still in flight, or the next offset to pull
when nothing is in flight. So a commit never passes a message whose listener has not finished, and runs of
messages the broker or the client filtered out are skipped once nothing older is pending.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from sievemq.protocol.message import MessageExt


class ProcessQueue:
    """In-flight messages of one message queue."""

    __slots__ = ("_inflight", "_max_seen", "dropped", "next_offset", "size_bytes")

    def __init__(self, next_offset: int) -> None:
        self.next_offset = next_offset
        """The offset the next pull starts from."""
        self._inflight: OrderedDict[int, int] = OrderedDict()  # queue offset -> body size
        self._max_seen = next_offset - 1
        self.size_bytes = 0
        """Bytes of message bodies in flight."""
        self.dropped = False
        """True once the queue was taken away (rebalance) or closed: results are no longer committed."""

    # ---------------------------------------------------------------------------------------- pulls
    def add(self, msgs: Iterable[MessageExt], next_begin_offset: int) -> list[MessageExt]:
        """Messages pulled up to ``next_begin_offset``: track them and return those new to this queue.

        Offsets already seen (a pull raced with a seek or a redelivery) are not tracked twice.
        """
        fresh: list[MessageExt] = []
        for m in msgs:
            off = m.queue_offset
            if off <= self._max_seen or off in self._inflight:
                continue
            self._inflight[off] = len(m.body)
            self.size_bytes += len(m.body)
            self._max_seen = off
            fresh.append(m)
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
        for off in offsets:
            size = self._inflight.pop(off, None)
            if size is not None:
                self.size_bytes -= size
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

    def over_limits(self, max_count: int, max_bytes: int, max_span: int) -> bool:
        """True when pulling must pause (flow control)."""
        return self.count >= max_count or self.size_bytes >= max_bytes or self.span >= max_span
