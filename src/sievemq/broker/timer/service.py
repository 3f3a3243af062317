"""Timer messages on the broker (docs/timer.md): the doing, for what ``book.py`` decides.

- ``park`` (the send processor's step, ``park_for_timer``) checks a message's timer properties and the cap on
  waiting messages, and moves the message to ``rmq_sys_wheel_timer`` queue 0; the send stores it there like any
  message, so an acknowledged timer message is exactly as durable as any other.
- A loop (on a master only) reads new parked entries into the book, and stores each due one, in time order, in its
  real topic and queue with a marker record in queue 1 right after it, in one ``put_in_order``: the last marker
  in the log names the last delivery, and so (deliveries going in time order) every delivery before it.
- Every second, when the book moved (and at stop), its floor and watermark are saved to
  ``config/timerProgress.json``, once the commit log is on disk up to the last delivery they cover. At start the
  book is that snapshot, its watermark moved to the last marker's, and the parked entries from its floor on are
  read again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sievemq.broker.timer.book import (
    DONE_QUEUE,
    PARKED_QUEUE,
    TIMER_TOPIC,
    Due,
    TimerBook,
    deliver_time,
    done_marker,
    due_message,
    has_timer,
    park,
    parked_deliver_ms,
    parse_marker,
    refuse_timer_topic,
    strip_timer,
)
from sievemq.errors import RemotingError
from sievemq.protocol.message import MessageExt, PropertyKey, decode_record
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import ResponseCode
from sievemq.store import MessageStore, PutStatus
from sievemq.store.jsonfile import atomic_write_json, read_json
from sievemq.util.tasks import Background

__all__ = ["TimerService", "TimerSettings", "park_for_timer"]

log = logging.getLogger(__name__)

_READ_CHUNK = 256
_LAST_MARKERS = 16
"""How many of the last markers a start reads for the watermark (the last readable one is enough)."""
_WARN_EVERY = 10.0
_PERMANENT = (PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED)
"""Put refusals a retry cannot cure: the message is dropped (with an ERROR line), not retried forever."""


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class TimerSettings:
    """The broker settings timer messages depend on."""

    max_delay_sec: int = 259_200
    """``timerMaxDelaySec``: the longest wait a message may ask for."""
    max_pending: int = 1_000_000
    """``timerMaxPending``: messages waiting at most; a send beyond is refused."""
    poll_seconds: float = 0.1
    """How often the loop looks for new parked entries (and the most a due message waits past its time)."""
    snapshot_seconds: float = 1.0


class TimerService:
    """See the module docstring."""

    def __init__(
        self,
        store: MessageStore,
        config_dir: Path,
        store_host: tuple[str, int],
        settings: TimerSettings = TimerSettings(),
        save: Callable[[Path, Any], None] = atomic_write_json,
    ) -> None:
        """``save(path, document)`` writes the snapshot (the broker's ``ConfigWriter.save``)."""
        self.store = store
        self.path = config_dir / "timerProgress.json"
        self.store_host = store_host
        self.settings = settings
        self._save = save
        self.book = TimerBook()
        self._rebuilt = False
        self._dirty = False
        self._delivered_end = 0
        """Commit-log end of the last delivery: a snapshot is saved once the log is on disk up to it."""
        self._task = Background("timer-delivery")
        self._saving: asyncio.Task[None] | None = None
        """The snapshot being saved: it waits for the flush beside the loop, which goes on delivering."""
        self._last_warning = 0.0
        self.delivered = 0
        self.lost = 0
        """Parked messages that could not be delivered (their record gone or unreadable; each logged)."""

    # ------------------------------------------------------------------------------------------ send side
    def waiting(self) -> int:
        """Timer messages parked and not delivered yet (0 before ``start``)."""
        if not self._rebuilt:
            return 0
        unscanned = self.store.get_max_offset(TIMER_TOPIC, PARKED_QUEUE) - self.book.scanned
        return self.book.pending + max(0, unscanned)

    def park(self, msg: MessageExt, now_ms: int | None = None) -> bool:
        """Park ``msg`` (in place) if its timer properties ask for a time more than a second ahead; False when it
        is to be delivered at once. RemotingError: MESSAGE_ILLEGAL (``TIMER_INVALID``, ``TIMER_TOO_FAR``), or
        SYSTEM_BUSY (``TOO_MANY_TIMERS``) when ``timerMaxPending`` messages wait already."""
        now = _now_ms() if now_ms is None else now_ms
        at = deliver_time(msg.properties, now, self.settings.max_delay_sec * 1000)
        if at is None:
            return False
        waiting = self.waiting()
        if waiting >= self.settings.max_pending:
            raise RemotingError(
                ResponseCode.SYSTEM_BUSY,
                f"the broker holds {waiting} timer messages waiting, its timerMaxPending; retry later",
                Reason.TOO_MANY_TIMERS,
            )
        park(msg, max(at, self.book.watermark.deliver_ms))  # never before a delivery made (a clock set back)
        return True

    # ------------------------------------------------------------------------------------------ lifecycle
    def rebuild(self) -> None:
        """Read the book back: the snapshot's floor and watermark, the last marker's watermark, the parked entries
        from the floor on (at start, after the store's own recovery)."""
        store = self.store
        parked_min = store.get_min_offset(TIMER_TOPIC, PARKED_QUEUE)
        parked_max = store.get_max_offset(TIMER_TOPIC, PARKED_QUEUE)
        book = TimerBook.from_snapshot(read_json(self.path, None) or {}, parked_min, parked_max)
        done_max = store.get_max_offset(TIMER_TOPIC, DONE_QUEUE)
        first = max(store.get_min_offset(TIMER_TOPIC, DONE_QUEUE), done_max - _LAST_MARKERS)
        for _offset, rec in self._records(DONE_QUEUE, first):
            due = None if rec is None else parse_marker(rec)
            if due is not None:
                book.delivered(due)
        self.book = book
        self._rebuilt = True
        self._scan()
        log.info("timer: %d messages waiting, floor %d", book.pending, book.floor())

    def start(self) -> None:
        """Rebuild and start the delivery loop (on a master only: a slave's copy of the log holds the parked
        messages and markers its master writes)."""
        self.rebuild()
        self._task.start(self._loop())

    async def stop(self) -> None:
        """Stop the loop and save the snapshot."""
        if self._task.task is not None:  # started (a loop that failed still has its snapshot saved)
            await self._task.stop()
            if self._saving is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self._saving
            with contextlib.suppress(Exception):
                await self.save_snapshot()

    def info(self) -> dict[str, str]:
        """Counters for the broker's runtime info."""
        return {"timerWaiting": str(self.waiting()), "timerDelivered": str(self.delivered),
                "timerLost": str(self.lost)}  # fmt: skip

    # ------------------------------------------------------------------------------------------ reading
    def _records(self, queue_id: int, start: int) -> Iterator[tuple[int, MessageExt | None]]:
        """``(offset, record or None when unreadable)`` of a timer queue from ``start`` to its end (no bodies)."""
        offset = start
        while True:
            entries = self.store.read_cq_entries(TIMER_TOPIC, queue_id, offset, _READ_CHUNK)
            if not entries:
                return
            for phy, _size, _tags in entries:
                yield offset, self._record(phy, read_body=False)
                offset += 1

    def _record(self, phy: int, read_body: bool = True) -> MessageExt | None:
        raw = self.store.look_message_by_offset(phy) if phy >= 0 else None
        if raw is None:
            return None
        try:
            return decode_record(raw, read_body=read_body)[0]
        except ValueError:
            return None

    def _scan(self) -> None:
        """Take the parked entries stored since the last scan into the book."""
        book = self.book
        while True:
            start = book.scanned
            entries = self.store.read_cq_entries(TIMER_TOPIC, PARKED_QUEUE, start, _READ_CHUNK)
            if not entries:
                return
            for i, (phy, _size, _tags) in enumerate(entries):
                rec = self._record(phy, read_body=False)
                deliver_ms = None if rec is None else parked_deliver_ms(rec)
                if deliver_ms is None:
                    self._lose(start + i, "its record is unreadable, or no parked timer record")
                book.scan(start + i, deliver_ms)

    def _lose(self, offset: int, why: str) -> None:
        log.error("timer: the parked message at offset %d of %s cannot be delivered: %s", offset, TIMER_TOPIC, why)
        self.lost += 1
        self._dirty = True

    # ------------------------------------------------------------------------------------------ delivering
    async def deliver_due(self, now_ms: int | None = None) -> int:
        """One round: take new parked entries, deliver every due one; how many were delivered."""
        self._scan()
        now = _now_ms() if now_ms is None else now_ms
        moved = 0
        while (due := self.book.peek_due(now)) is not None:
            outcome = await self._deliver(due, now)
            if outcome is None:
                break  # the store refuses for now: the next round tries again
            moved += outcome
        return moved

    async def _deliver(self, due: Due, now_ms: int) -> int | None:
        """Store one due message and its marker: 1 when delivered, 0 when dropped, None when the store refused."""
        entries = self.store.read_cq_entries(TIMER_TOPIC, PARKED_QUEUE, due.offset, 1)
        stored = self._record(entries[0][0]) if entries else None
        marker = done_marker(due, self.store_host, now_ms)
        real: MessageExt | None = None
        if stored is None:
            self._lose(due.offset, "its record is gone (its commit-log segment was deleted before it was due)")
        else:
            try:
                real = due_message(stored, now_ms)
            except ValueError as e:
                self._lose(due.offset, str(e))
        delivered = 0
        if real is not None:
            results = await self.store.put_in_order([[real], [marker]])
            if not results[0].ok and results[0].status not in _PERMANENT:
                self._warn("timer: the store refused a due message (%s); retrying", results[0].status.name)
                return None
            if results[0].ok:
                delivered = 1
            else:
                self._lose(due.offset, f"the store refuses it ({results[0].status.name})")
                results = await self.store.put_in_order([[marker]])
        else:
            results = await self.store.put_in_order([[marker]])
        self.book.settle(due)
        self.delivered += delivered
        self._dirty = True
        last = results[-1]  # the marker; or the real message alone when the marker was refused (a full disk):
        if last.ok:  # then only the snapshot tells of this delivery
            rec = last.msgs[-1]
            self._delivered_end = rec.commit_log_offset + rec.store_size
        return delivered

    async def save_snapshot(self) -> bool:
        """Save the book if it moved, once the commit log is on disk up to the deliveries it covers (a power loss
        cannot leave a snapshot claiming a delivery the log lost); True when saved."""
        if not self._dirty:
            return False
        doc = self.book.snapshot()
        end = self._delivered_end
        self._dirty = False
        if end > 0 and not await self.store.wait_flushed(end):
            self._dirty = True
            return False
        self._save(self.path, doc)
        return True

    def _warn(self, fmt: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._last_warning >= _WARN_EVERY:
            self._last_warning = now
            log.warning(fmt, *args)

    def _sleep_seconds(self) -> float:
        poll = self.settings.poll_seconds
        due = self.book.next_due()
        if due is None:
            return poll
        return min(poll, max(0.0, (due.deliver_ms - _now_ms()) / 1000))

    async def _save_in_background(self) -> None:
        try:
            await self.save_snapshot()
        except Exception:
            log.exception("timer: saving %s failed; the next round tries again", self.path)
            self._dirty = True

    async def _loop(self) -> None:
        last_snapshot = time.monotonic()
        while True:
            try:
                await self.deliver_due()
                idle = self._saving is None or self._saving.done()
                if idle and time.monotonic() - last_snapshot >= self.settings.snapshot_seconds:
                    last_snapshot = time.monotonic()
                    self._saving = asyncio.create_task(self._save_in_background(), name="timer-snapshot")
            except Exception:
                if time.monotonic() - self._last_warning >= _WARN_EVERY:
                    self._last_warning = time.monotonic()
                    log.exception("timer delivery failed; retrying")
            await asyncio.sleep(self._sleep_seconds())


def park_for_timer(msg: MessageExt, timers: TimerService | None) -> None:
    """The send processor's step after ``park_for_delay``: a message with a timer property a second or more ahead
    waits in the timer topic. A DELAY level wins (the timer properties are dropped, as RocketMQ does); no service
    (``timers`` None) refuses timer messages. Sends to the timer topic itself are refused."""
    refuse_timer_topic(msg.topic)
    if not has_timer(msg.properties):
        return
    if PropertyKey.DELAY in msg.properties:
        strip_timer(msg.properties)
        return
    if timers is None:
        raise RemotingError(ResponseCode.MESSAGE_ILLEGAL, "this broker does not take timer messages",
                            Reason.TIMER_INVALID)  # fmt: skip
    timers.park(msg)
