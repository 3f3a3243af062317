"""Timer messages, the pure part (docs/timer.md): what a timer property asks for, how a message is parked and
brought back, the marker records, and ``TimerBook``, which holds what is waiting and what was delivered.

No I/O here: ``service.py`` reads the store and writes records for what this module decides.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sievemq.errors import RemotingError
from sievemq.protocol.message import MessageExt, PropertyKey
from sievemq.protocol.names import TIMER_TOPIC
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import ResponseCode

__all__ = [
    "DONE_KEY",
    "DONE_QUEUE",
    "IMMEDIATE_WITHIN_MS",
    "NOTHING",
    "PARKED_QUEUE",
    "TIMER_KEYS",
    "TIMER_TOPIC",
    "Due",
    "TimerBook",
    "deliver_time",
    "done_marker",
    "due_message",
    "has_timer",
    "park",
    "parked_deliver_ms",
    "parse_marker",
    "refuse_timer_in_batch",
    "refuse_timer_in_transaction",
    "refuse_timer_topic",
    "strip_timer",
]

PARKED_QUEUE = 0
"""Queue of ``TIMER_TOPIC`` holding the parked messages (``TIMER_OUT_MS``, ``REAL_TOPIC``, ``REAL_QID`` set)."""
DONE_QUEUE = 1
"""Queue of ``TIMER_TOPIC`` holding one marker per delivered message, written right after its real copy."""
DONE_KEY = "TIMER_DONE"
"""Property of a marker: the queue offset (in ``PARKED_QUEUE``) of the message it delivered."""
IMMEDIATE_WITHIN_MS = 1000
"""A delivery time at most this far ahead (or in the past) is delivered at once, never parked (the timer's
precision, as RocketMQ's ``timerPrecisionMs``)."""
TIMER_KEYS = (PropertyKey.TIMER_DELAY_SEC, PropertyKey.TIMER_DELAY_MS, PropertyKey.TIMER_DELIVER_MS)
"""The timer properties, in the order they are read when several are set (RocketMQ's order)."""
_NUMBER = re.compile(r"-?[0-9]{1,19}")
_OFFSET_BITS = 40
"""A by-time heap entry is one int: ``deliver_ms << 40 | queue_offset`` (~44 bytes, against ~120 for a tuple)."""
_OFFSET_MASK = (1 << _OFFSET_BITS) - 1
_TIME_BITS = 48
"""The by-offset heap's entry: ``queue_offset << 48 | deliver_ms`` (epoch ms fit 48 bits until the year 10889)."""
_TIME_MASK = (1 << _TIME_BITS) - 1


_TIMER_KEY_SET = frozenset(TIMER_KEYS)


def has_timer(props: Mapping[str, str]) -> bool:
    """True when any timer property is set."""
    return not _TIMER_KEY_SET.isdisjoint(props)


def strip_timer(props: dict[str, str]) -> None:
    """Drop every timer property (a DELAY level wins over them, as in RocketMQ; a dead letter waits for nothing)."""
    for k in TIMER_KEYS:
        props.pop(k, None)


def _illegal(remark: str, reason: Reason = Reason.TIMER_INVALID) -> RemotingError:
    return RemotingError(ResponseCode.MESSAGE_ILLEGAL, remark, reason)


def deliver_time(props: Mapping[str, str], now_ms: int, max_delay_ms: int) -> int | None:
    """The epoch ms at which a message with timer properties is due, or None to deliver it at once (no timer
    property, or a time at most ``IMMEDIATE_WITHIN_MS`` ahead).

    ``TIMER_DELAY_SEC`` is read first, then ``TIMER_DELAY_MS``, then ``TIMER_DELIVER_MS`` (the first set one
    counts). MESSAGE_ILLEGAL (reason ``TIMER_INVALID``) for a value that is not a whole number >= 0, reason
    ``TIMER_TOO_FAR`` for a time more than ``max_delay_ms`` ahead.
    """
    for key in TIMER_KEYS:
        raw = props.get(key)
        if raw is None:
            continue
        if not _NUMBER.fullmatch(raw):
            raise _illegal(f"{key} must be a whole number, got {raw[:40]!r}")
        value = int(raw)
        if value < 0:
            raise _illegal(f"{key} must not be negative, got {value}")
        if key == PropertyKey.TIMER_DELAY_SEC:
            at = now_ms + value * 1000
        elif key == PropertyKey.TIMER_DELAY_MS:
            at = now_ms + value
        else:
            at = value
        if at - now_ms <= IMMEDIATE_WITHIN_MS:
            return None
        if at - now_ms > max_delay_ms:
            raise _illegal(
                f"{key}={value} asks for delivery in {(at - now_ms) / 1000:.0f} s, more than this broker's "
                f"timerMaxDelaySec {max_delay_ms // 1000}",
                Reason.TIMER_TOO_FAR,
            )
        return at
    return None


def refuse_timer_topic(topic: str) -> None:
    """NO_PERMISSION for a client's send to the timer topic (only the broker writes there)."""
    if topic == TIMER_TOPIC:
        raise RemotingError(ResponseCode.NO_PERMISSION, f"sending to the system topic [{topic}] is forbidden")


def refuse_timer_in_batch(msgs: Iterable[MessageExt]) -> None:
    """MESSAGE_ILLEGAL (reason ``TIMER_INVALID``) when a message of a batch carries a timer property;
    NO_PERMISSION for a batch to the timer topic."""
    for m in msgs:
        if m.topic == TIMER_TOPIC:
            refuse_timer_topic(m.topic)
        if not _TIMER_KEY_SET.isdisjoint(m.properties):
            raise _illegal("batch messages cannot carry a timer (TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS)")


def refuse_timer_in_transaction(msg: MessageExt) -> None:
    """MESSAGE_ILLEGAL (reason ``TIMER_INVALID``) for a transactional message with a timer property; NO_PERMISSION
    for one to the timer topic."""
    refuse_timer_topic(msg.topic)
    if has_timer(msg.properties):
        raise _illegal("a transactional message cannot carry a timer (TIMER_DELIVER_MS, TIMER_DELAY_SEC, "
                       "TIMER_DELAY_MS)")  # fmt: skip


def park(msg: MessageExt, deliver_ms: int) -> None:
    """Move ``msg`` (in place) to the timer topic: due at ``deliver_ms``, its real topic and queue kept."""
    msg.properties[PropertyKey.TIMER_OUT_MS] = str(deliver_ms)
    msg.properties[PropertyKey.REAL_TOPIC] = msg.topic
    msg.properties[PropertyKey.REAL_QID] = str(msg.queue_id)
    msg.topic = TIMER_TOPIC
    msg.queue_id = PARKED_QUEUE


def parked_deliver_ms(stored: MessageExt) -> int | None:
    """When a parked record is due (None: not a parked timer record)."""
    raw = stored.properties.get(PropertyKey.TIMER_OUT_MS, "")
    if stored.topic != TIMER_TOPIC or not _NUMBER.fullmatch(raw):
        return None
    return max(0, int(raw))


def due_message(stored: MessageExt, now_ms: int) -> MessageExt:
    """The message to store for a due parked record: its real topic and queue, with the properties RocketMQ 5's
    timer gives a delivered message: those it was sent with, the broker's ``TIMER_OUT_MS``, ``REAL_TOPIC`` and
    ``REAL_QID``, ``TIMER_ENQUEUE_MS`` (when it was parked) and ``TIMER_DEQUEUE_MS`` (``now_ms``). ValueError when the
    record names no usable real topic and queue."""
    props = dict(stored.properties)
    topic = props.get(PropertyKey.REAL_TOPIC, "")
    qid = props.get(PropertyKey.REAL_QID, "")
    props[PropertyKey.TIMER_ENQUEUE_MS] = str(stored.store_timestamp)
    props[PropertyKey.TIMER_DEQUEUE_MS] = str(now_ms)
    if not topic or not qid.isdecimal():
        raise ValueError(f"parked timer record at {stored.commit_log_offset} names no real topic and queue")
    return MessageExt(
        topic=topic,
        body=stored.body,
        flag=stored.flag,
        properties=props,
        queue_id=int(qid),
        sys_flag=stored.sys_flag,
        born_timestamp=stored.born_timestamp,
        born_host=stored.born_host,
        store_host=stored.store_host,
        reconsume_times=stored.reconsume_times,
    )


def done_marker(due: Due, store_host: tuple[str, int], now_ms: int) -> MessageExt:
    """The marker record saying the parked message ``due`` names was delivered (its offset and time)."""
    return MessageExt(
        topic=TIMER_TOPIC,
        body=str(due.offset).encode(),
        properties={DONE_KEY: str(due.offset), PropertyKey.TIMER_OUT_MS: str(due.deliver_ms)},
        queue_id=DONE_QUEUE,
        born_timestamp=now_ms,
        born_host=store_host,
        store_host=store_host,
    )


def parse_marker(stored: MessageExt) -> Due | None:
    """The delivery a marker record names (None: not a marker)."""
    offset = stored.properties.get(DONE_KEY, "")
    at = stored.properties.get(PropertyKey.TIMER_OUT_MS, "")
    if stored.topic != TIMER_TOPIC or not offset.isdecimal() or not at.isdecimal():
        return None
    return Due(int(at), int(offset))


@dataclass(frozen=True, slots=True, order=True)
class Due:
    """A parked message, by when it is due (then by offset: the order of delivery)."""

    deliver_ms: int
    offset: int
    """Its queue offset in ``PARKED_QUEUE``."""


NOTHING = Due(-1, -1)
"""The watermark of a book that delivered nothing yet."""


class TimerBook:
    """What waits, by queue offset of ``PARKED_QUEUE``, and what was delivered, as one watermark.

    Messages are delivered in ``Due`` order (time, then offset), and a message is parked at least
    ``IMMEDIATE_WITHIN_MS`` before its time, so it is in the book before it is due (the service reads new parked
    entries before each round); ``service.py`` also parks nothing earlier than the watermark (a clock set back).
    So what was delivered is exactly what was scanned with a ``Due`` up to ``watermark``: the book needs no set of
    delivered offsets, and a restart needs only the watermark (the last marker's) and a floor to read from.

    Offsets below ``scanned`` that are not delivered wait in two heaps (~90 bytes each): by time for delivery, by
    offset for ``floor``, the first offset that still waits.
    """

    def __init__(self, floor: int = 0, watermark: Due = NOTHING) -> None:
        self.scanned = floor
        """The next parked offset not looked at yet."""
        self.watermark = watermark
        """The last delivered (or dropped) message: every scanned one up to it is done."""
        self._by_time: list[int] = []
        self._by_offset: list[int] = []

    @property
    def pending(self) -> int:
        """Messages scanned and not delivered."""
        return len(self._by_time)

    def is_done(self, due: Due) -> bool:
        """True for a scanned message that was delivered."""
        return due <= self.watermark

    def scan(self, offset: int, deliver_ms: int | None) -> bool:
        """Take the parked entry at ``offset`` (== ``scanned``): it waits until ``deliver_ms`` unless it was
        delivered already; None (not a readable timer record) skips it. True when it waits."""
        if offset != self.scanned:
            raise ValueError(f"scan of offset {offset}, expected {self.scanned}")
        if offset > _OFFSET_MASK:
            raise ValueError(f"parked offset {offset} beyond {_OFFSET_MASK}")
        self.scanned = offset + 1
        if deliver_ms is None:
            return False
        due = Due(min(max(0, deliver_ms), _TIME_MASK), offset)
        if self.is_done(due):
            return False
        heapq.heappush(self._by_time, due.deliver_ms << _OFFSET_BITS | offset)
        heapq.heappush(self._by_offset, offset << _TIME_BITS | due.deliver_ms)
        return True

    def next_due(self) -> Due | None:
        """The message to deliver next (None: nothing waits)."""
        if not self._by_time:
            return None
        key = self._by_time[0]
        return Due(key >> _OFFSET_BITS, key & _OFFSET_MASK)

    def peek_due(self, now_ms: int) -> Due | None:
        """The message to deliver next if it is due at ``now_ms``; it stays until ``settle``."""
        due = self.next_due()
        return due if due is not None and due.deliver_ms <= now_ms else None

    def settle(self, due: Due) -> None:
        """``due`` (the ``next_due``) was delivered, or dropped: the watermark moves to it."""
        if self.next_due() != due:
            raise ValueError(f"settle of {due}, not the next due {self.next_due()}")
        heapq.heappop(self._by_time)
        self.watermark = max(self.watermark, due)

    def delivered(self, due: Due) -> None:
        """A delivery read back at start (the last marker): the watermark moves to it (before any scan)."""
        if self._by_time:
            raise ValueError("delivered() on a book with waiting messages")
        self.watermark = max(self.watermark, due)

    def floor(self) -> int:
        """The first parked offset that still waits (``scanned`` when none does): a restart reads from here."""
        heap = self._by_offset
        while heap:
            key = heap[0]
            if not self.is_done(Due(key & _TIME_MASK, key >> _TIME_BITS)):
                return key >> _TIME_BITS
            heapq.heappop(heap)
        return self.scanned

    # ------------------------------------------------------------------------------------------ snapshot
    def snapshot(self) -> dict[str, int]:
        """The document saved to ``config/timerProgress.json``."""
        return {"floor": self.floor(), "deliveredMs": self.watermark.deliver_ms,
                "deliveredOffset": self.watermark.offset}  # fmt: skip

    @classmethod
    def from_snapshot(cls, doc: Any, parked_min: int, parked_max: int) -> TimerBook:
        """A book from a saved document, its floor kept within the parked queue's offsets (a store that lost its
        tail, or deleted old segments). Anything unreadable gives the floor ``parked_min`` and no watermark."""
        try:
            floor = int(doc["floor"])
            watermark = Due(int(doc["deliveredMs"]), int(doc["deliveredOffset"]))
        except (TypeError, KeyError, ValueError):
            floor, watermark = parked_min, NOTHING
        if floor < 0 or watermark.offset < -1:
            floor, watermark = parked_min, NOTHING
        return cls(min(max(floor, parked_min), parked_max), watermark)
