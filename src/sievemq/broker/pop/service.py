"""POP consumption on the broker (docs/pop.md): the doing, for what ``book.PopBook`` holds.

- ``pop`` hands out up to N messages of one queue to a group: due leases first (delivered again, attempt + 1),
  then new messages from the cursor through the filter; each under a new lease invisible for the asked time. The
  lease record is in the POP log before the answer leaves. With nothing to hand out, a pop waits (long polling)
  for a matching message or the next lease deadline (``waiters.py``).
- With ``order`` (a FIFO group's POP) a queue hands out nothing while a batch of it is leased and not due, then
  that batch again first (``orderly.py``); a long-polling orderly POP waits for the ack that frees the queue.
- ``ack`` ends a lease, ``change`` moves its deadline (a new token, so a new receipt handle).
- A lease whose last attempt (the group's ``retryMaxTimes`` + 1) expired goes to ``%DLQ%<group>`` with its
  ``dead`` record, in one step (``MessageStore.put_in_order``); a background round does this every second.
- Every few seconds (and at stop) the book is saved to ``config/pop.json`` with the POP log offset it covers; at
  start the book is that snapshot plus the records after it (``journal.py``).

Changes of one queue are serialized by that queue's lock (a pop, an ack and a change of the same queue never
interleave between their record's write and its apply).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sievemq.broker.filters import MessageFilter
from sievemq.broker.groups import SubscriptionGroupManager
from sievemq.broker.long_polling import PullHoldService
from sievemq.broker.offset_rules import PopStart, pop_start
from sievemq.broker.offsets import ConsumerOffsetManager
from sievemq.broker.pop import orderly
from sievemq.broker.pop.book import PopBook, QueueKey, QueueState
from sievemq.broker.pop.journal import load_book
from sievemq.broker.pop.records import POP_LOG_TOPIC, Kind, PopRecord, dead_letter_message, record_message
from sievemq.broker.pop.waiters import LeaseWaiters, wait_for_pop
from sievemq.broker.topics import TopicConfigManager
from sievemq.broker.write_gate import OPEN, WriteGate
from sievemq.errors import RemotingError
from sievemq.protocol.message import MessageExt, decode_record
from sievemq.protocol.names import RETRY_GROUP_TOPIC_PREFIX, dlq_topic
from sievemq.protocol.reasons import Reason
from sievemq.protocol.receipt_handle import ReceiptHandle
from sievemq.protocol.route import PERM_READ, PERM_WRITE
from sievemq.remoting.codes import ResponseCode
from sievemq.store import GetStatus, MessageStore, PutResult, PutStatus
from sievemq.util.tasks import Background

__all__ = ["PopAnswer", "PopRequest", "PopService", "PopSettings", "Popped"]

log = logging.getLogger(__name__)

_QUEUE_OFFSET_AT = struct.Struct(">q")
"""A stored record's QUEUEOFFSET is at byte 20 (docs/protocol/message-format.md)."""
_MAX_HOLD_MS = 25_000
_READ_CHUNK = 256


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class PopSettings:
    """The broker settings POP depends on."""

    inflight_max: int = 20_000
    """Leases one queue of one group may hold; a queue at the limit hands out only due leases."""
    snapshot_seconds: float = 5.0
    round_seconds: float = 1.0
    check_in_memory: bool = True
    """``initPopOffsetByCheckMsgInMem``: a new group starts a young queue at 0 (``offset_rules.pop_start``)."""
    new_group_starts_at_end: bool = False
    memory_limit: int = 1 << 62
    """Bytes behind the commit log's end that count as in memory (``accessMessageInMemoryMaxRatio``)."""


@dataclass(frozen=True, slots=True)
class PopRequest:
    """A POP, checked at the edge (``processors/pop.py``)."""

    group: str
    topic: str
    queue_id: int
    max_nums: int
    invisible_ms: int
    poll_ms: int = 0
    init_latest: bool = True
    """A group's first POP of a topic starts at the queues' ends (else at their oldest messages)."""
    order: bool = False
    """Orderly POP (a FIFO group): one batch of a queue at a time, in queue order (``orderly.py``)."""
    attempt_id: str = ""
    """An orderly POP's attempt id: its retry (the same id) is handed the same batch again."""


@dataclass(frozen=True, slots=True)
class Popped:
    """One message handed out."""

    record: bytes
    handle: ReceiptHandle
    attempt: int


@dataclass(frozen=True, slots=True)
class PopAnswer:
    """What a POP hands out, and where the queue stands."""

    messages: list[Popped]
    deadline: int
    rest: int
    """Messages of the queue past the cursor (not looked at yet)."""


class PopService:
    """See the module docstring."""

    def __init__(
        self,
        store: MessageStore,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        hold: PullHoldService,
        config_dir: Path,
        save: Callable[[Path, Any], None],
        broker_name: str,
        store_host: tuple[str, int],
        settings: PopSettings = PopSettings(),
        gate: WriteGate = OPEN,
    ) -> None:
        self.store, self.topics, self.groups, self.offsets, self.hold = store, topics, groups, offsets, hold
        self.path = config_dir / "pop.json"
        self._save = save
        self.broker_name = broker_name
        self.store_host = store_host
        self.settings = settings
        self.gate = gate
        self.book = PopBook()
        self._locks: weakref.WeakValueDictionary[QueueKey, asyncio.Lock] = weakref.WeakValueDictionary()
        self.waiters = LeaseWaiters()
        self.deadlines = LeaseWaiters()
        """Long-polling POPs (not orderly) woken when a lease of their queue falls due sooner (``waiters.py``)."""
        self._dirty = False
        self._task = Background("pop-rounds")
        self.dead_lettered = 0
        self._rotation = 0

    # ------------------------------------------------------------------------------------------ lifecycle
    def rebuild(self) -> None:
        """The book from ``config/pop.json`` and the POP log records after it (at start)."""
        self.book = load_book(self.store, self.path)

    async def start(self, rounds: bool = True) -> None:
        """Rebuild, and start the background rounds (``rounds``: False on a slave)."""
        self.rebuild()
        if rounds:
            self._task.start(self._loop())

    async def stop(self) -> None:
        """Stop the rounds and save the book."""
        await self._task.stop()
        self.save_snapshot()

    def save_snapshot(self) -> None:
        """Hand the book and the POP log offset it covers to the config writer."""
        doc = self.book.snapshot()
        doc["log"] = self.store.get_max_offset(POP_LOG_TOPIC, 0)
        self._save(self.path, doc)
        self._dirty = False

    async def _loop(self) -> None:
        last_snapshot = time.monotonic()
        while True:
            await asyncio.sleep(self.settings.round_seconds)
            try:
                await self.bury_due()
                if self._dirty and time.monotonic() - last_snapshot >= self.settings.snapshot_seconds:
                    self.save_snapshot()
                    last_snapshot = time.monotonic()
            except Exception:
                log.exception("pop round failed")

    # ------------------------------------------------------------------------------------------ helpers
    def _lock(self, key: QueueKey) -> asyncio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    def max_attempts(self, group: str) -> int:
        """Deliveries a message gets before it is dead-lettered: the group's ``retryMaxTimes`` + 1."""
        gc = self.groups.find(group)
        return (gc.retryMaxTimes if gc is not None else 16) + 1

    async def _write(self, recs: list[PopRecord], what: str, before: list[MessageExt] | None = None) -> None:
        """Store ``recs`` (after ``before``, in one step) or refuse with the reason; apply them once stored."""
        now = _now_ms()
        batches = ([before] if before else []) + [[record_message(r, self.store_host, now)] for r in recs]
        results = await self.store.put_in_order(batches)
        bad = next((r for r in results if r.status not in (PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT)), None)
        if bad is not None or len(results) < len(batches):
            raise _refusal(bad, what)
        for r in recs:
            key = (r.group, r.topic, r.queue_id)
            watched = r.kind in (Kind.ACK, Kind.CHANGE, Kind.DEAD) and self.waiters.watched(key)
            end = self._lock_end(key, now) if watched else None
            timed = r.kind in (Kind.LEASE, Kind.CHANGE) and self.deadlines.watched(key)
            due = self._next_deadline(key) if timed else None
            self.book.apply(r)
            if watched and self._lock_end(key, now) != end:  # free now, or its lock ends at another time
                self.waiters.changed(key)
            if timed and (after := self._next_deadline(key)) is not None and (due is None or after < due):
                self.deadlines.changed(key)  # a lease falls due sooner than its waiting POPs were to look
        self._dirty = True

    def _next_deadline(self, key: QueueKey) -> int | None:
        qs = self.book.queue(*key)
        return qs.next_deadline() if qs is not None else None

    def _lock_end(self, key: QueueKey, now: int) -> int | None:
        qs = self.book.queue(*key)
        return orderly.locked_until(qs, now) if qs is not None else None

    def _commit_floor(self, key: QueueKey, qs: QueueState) -> None:
        group, topic, qid = key
        self.offsets.commit(group, topic, qid, qs.floor())

    async def prepare(self, group: str, topic: str) -> None:
        """A POP consumer of ``group`` subscribed ``topic`` (its heartbeat): a group new to the topic starts at the
        queues' ends now, not at its first POP of each queue (messages sent in between belong to it)."""
        if self.book.knows_topic(group, topic) or self.gate.write_refusal() is not None:
            return
        tc = self.topics.get(topic)
        if tc is None or tc.read_queue_nums <= 0:
            return
        await self._ensure_queue(PopRequest(group, topic, 0, 1, 1000))

    async def _ensure_queue(self, req: PopRequest) -> QueueState:
        """The queue's state, written first as an ``init`` record for a group new to the topic (or queue)."""
        qs = self.book.queue(req.group, req.topic, req.queue_id)
        if qs is not None:
            return qs
        tc = self.topics.get(req.topic)
        qids = range(tc.read_queue_nums) if tc is not None and not self.book.knows_topic(req.group, req.topic) else []
        cursors = {q: self._start_offset(req, q) for q in qids}
        cursors.setdefault(req.queue_id, self._start_offset(req, req.queue_id))
        await self._write([PopRecord(Kind.INIT, req.group, req.topic, cursors=cursors)], "POP start")
        for q, c in cursors.items():
            self.offsets.commit(req.group, req.topic, q, c)
        qs = self.book.queue(req.group, req.topic, req.queue_id)
        assert qs is not None, "an init record creates its queues"
        return qs

    def _start_offset(self, req: PopRequest, qid: int) -> int:
        committed = self.offsets.query(req.group, req.topic, qid)
        if committed >= 0:
            return committed
        head = self.store.read_cq_entries(req.topic, qid, 0, 1)
        facts = PopStart(
            init_latest=req.init_latest,
            retry_topic=req.topic.startswith(RETRY_GROUP_TOPIC_PREFIX),
            group_knows_topic=self.offsets.knows(req.group, req.topic),
            min_offset=self.store.get_min_offset(req.topic, qid),
            max_offset=self.store.get_max_offset(req.topic, qid),
            head_lag=self.store.max_phy_offset - head[0][0] if head and head[0][0] >= 0 else None,
        )
        s = self.settings
        return pop_start(facts, check_in_memory=s.check_in_memory, memory_limit=s.memory_limit,
                         new_group_starts_at_end=s.new_group_starts_at_end)  # fmt: skip

    def _stored(self, topic: str, qid: int, offset: int) -> bytes | None:
        entries = self.store.read_cq_entries(topic, qid, offset, 1)
        if not entries or entries[0][0] < 0:
            return None
        return self.store.look_message_by_offset(entries[0][0])

    # ------------------------------------------------------------------------------------------ pop
    async def pop(self, req: PopRequest, flt: MessageFilter | None) -> PopAnswer:
        """Hand out up to ``req.max_nums`` messages of the queue, or of any queue of the topic for queue id -1
        (waiting up to ``req.poll_ms`` when there are none; an orderly POP waits out locked queues too)."""
        qids = self._queues(req)
        answer = await self._pop_queues(req, qids, flt)
        if answer.messages or req.poll_ms <= 0:
            return answer
        end = _now_ms() + min(req.poll_ms, _MAX_HOLD_MS)
        keys = [(req.group, req.topic, q) for q in qids]
        match = flt.match_code if flt is not None else None
        while True:
            await wait_for_pop(self.book, self.hold, self.waiters, keys, match=match, order=req.order,
                               attempt_id=req.attempt_id, now=_now_ms(), end=end, deadlines=self.deadlines)  # fmt: skip
            answer = await self._pop_queues(req, qids, flt)
            if answer.messages or not req.order or _now_ms() >= end:
                return answer

    def _queues(self, req: PopRequest) -> list[int]:
        """The queue, or for -1 every readable queue of the topic, starting at a rotating one (fairness)."""
        if req.queue_id >= 0:
            return [req.queue_id]
        tc = self.topics.get(req.topic)
        n = tc.read_queue_nums if tc is not None else 0
        self._rotation = (self._rotation + 1) % max(1, n)
        return [(self._rotation + i) % n for i in range(n)]

    async def _pop_queues(self, req: PopRequest, qids: list[int], flt: MessageFilter | None) -> PopAnswer:
        messages: list[Popped] = []
        rest, deadline = 0, _now_ms() + req.invisible_ms
        for qid in qids:
            one = replace(req, queue_id=qid, max_nums=req.max_nums - len(messages))
            key = (req.group, req.topic, qid)
            async with self._lock(key):
                answer = await self._pop_once(key, one, flt)
            messages += answer.messages
            rest += answer.rest
            deadline = answer.deadline
            if len(messages) >= req.max_nums:
                break
        return PopAnswer(messages, deadline, rest)

    async def _pop_once(self, key: QueueKey, req: PopRequest, flt: MessageFilter | None) -> PopAnswer:
        qs = await self._ensure_queue(req)
        now = _now_ms()
        deadline = now + req.invisible_ms
        limit = self.max_attempts(req.group)
        if req.order:
            plan = orderly.plan(qs, now, req.max_nums, limit, req.attempt_id)
            if plan.locked_until is not None:
                return PopAnswer([], deadline, self._rest(req, qs))
            bury, again, complete = list(plan.bury), list(plan.again), plan.complete
        else:
            due = qs.due(now, req.max_nums)
            bury = [o for o in due if qs.leases[o].attempt >= limit]
            again = [(o, qs.leases[o].attempt + 1) for o in due if o not in bury]
            complete = True
        if bury:
            await self._bury(key, bury)
        out: list[Popped] = []
        entries: list[tuple[int, int, int]] = []
        for offset, attempt in again:
            lease = qs.leases.get(offset)
            if lease is None:
                continue
            raw = self._stored(req.topic, req.queue_id, offset)
            if raw is None:  # the message is gone (retention): nothing to deliver again
                await self._write([PopRecord(Kind.ACK, *key, offset=offset, token=lease.token)], "POP ack")
                continue
            token = self.book.new_token(now * 1000)
            entries.append((offset, token, attempt))
            out.append(Popped(raw, ReceiptHandle(self.broker_name, req.topic, req.queue_id, offset, token), attempt))
        room = min(req.max_nums - len(out), self.settings.inflight_max - len(qs.leases)) if complete else 0
        cursor = qs.cursor
        if room > 0:
            result = self.store.get_message(req.topic, req.queue_id, cursor, room, flt)
            if result.status in (GetStatus.FOUND, GetStatus.NO_MATCHED_MESSAGE, GetStatus.OFFSET_TOO_SMALL):
                cursor = max(cursor, result.next_begin_offset)
            for raw in result.records:
                offset = _QUEUE_OFFSET_AT.unpack_from(raw, 20)[0]
                token = self.book.new_token(now * 1000)
                entries.append((offset, token, 1))
                out.append(Popped(bytes(raw), ReceiptHandle(self.broker_name, req.topic, req.queue_id, offset, token),
                                  1))  # fmt: skip
        rec = PopRecord(Kind.LEASE, *key, cursor=cursor, deadline=deadline, entries=tuple(entries),
                        attempt_id=req.attempt_id if req.order else "")  # fmt: skip
        if entries:
            await self._write([rec], "POP lease")
            self._commit_floor(key, qs)
        elif cursor != qs.cursor:
            self.book.apply(rec)  # only filtered-out messages passed: a lost cursor move is re-scanned, harmless
            self._dirty = True
            self._commit_floor(key, qs)
        return PopAnswer(out, deadline, self._rest(req, qs))

    def _rest(self, req: PopRequest, qs: QueueState) -> int:
        return max(0, self.store.get_max_offset(req.topic, req.queue_id) - qs.cursor)

    # ------------------------------------------------------------------------------------------ ack, change
    def _current(self, group: str, handle: ReceiptHandle) -> tuple[QueueKey, int]:
        if handle.broker != self.broker_name:
            raise RemotingError(ResponseCode.SYSTEM_ERROR, f"the receipt handle is of broker {handle.broker}, "
                                f"not {self.broker_name}: ack where the message came from",
                                Reason.RECEIPT_HANDLE_INVALID)  # fmt: skip
        key = (group, handle.topic, handle.queue_id)
        lease = self.book.lease(*key, handle.offset, handle.token)
        if lease is None:
            raise RemotingError(ResponseCode.NO_MESSAGE, f"no lease of group {group} matches the receipt handle "
                                f"(topic {handle.topic}, queue {handle.queue_id}, offset {handle.offset}): it was "
                                "acked already, or delivered again since (its invisible time ran out)",
                                Reason.RECEIPT_HANDLE_EXPIRED)  # fmt: skip
        return key, lease.token

    async def ack(self, group: str, handle: ReceiptHandle, dead_letter: bool = False) -> None:
        """End the lease ``handle`` names (RECEIPT_HANDLE_EXPIRED when it is no longer the message's lease); with
        ``dead_letter`` the message goes to the group's dead-letter topic in the same step."""
        async with self._lock((group, handle.topic, handle.queue_id)):
            key, token = self._current(group, handle)
            if dead_letter:
                await self._bury(key, [handle.offset])
                return
            await self._write([PopRecord(Kind.ACK, *key, offset=handle.offset, token=token)], "ack")
            qs = self.book.queue(*key)
            if qs is not None:
                self._commit_floor(key, qs)

    async def change(self, group: str, handle: ReceiptHandle, invisible_ms: int) -> ReceiptHandle:
        """Make the message invisible for ``invisible_ms`` from now; its new receipt handle."""
        async with self._lock((group, handle.topic, handle.queue_id)):
            key, token = self._current(group, handle)
            now = _now_ms()
            new = self.book.new_token(now * 1000)
            rec = PopRecord(Kind.CHANGE, *key, offset=handle.offset, token=token, new_token=new,
                            deadline=now + invisible_ms)  # fmt: skip
            await self._write([rec], "change of invisible time")
            return ReceiptHandle(handle.broker, handle.topic, handle.queue_id, handle.offset, new)

    # ------------------------------------------------------------------------------------------ dead letters
    async def bury_due(self) -> int:
        """Dead-letter every due lease whose last attempt it was (the background round)."""
        n = 0
        for key, offset in self.book.due(_now_ms(), 1024):
            qs = self.book.queue(*key)
            lease = qs.leases.get(offset) if qs is not None else None
            if lease is None or lease.attempt < self.max_attempts(key[0]):
                continue
            async with self._lock(key):
                n += await self._bury(key, [offset])
        return n

    async def _bury(self, key: QueueKey, offsets: list[int]) -> int:
        group, topic, qid = key
        qs = self.book.queue(*key)
        n = 0
        for offset in offsets:
            lease = qs.leases.get(offset) if qs is not None else None
            if lease is None or qs is None:
                continue
            dead = PopRecord(Kind.DEAD, *key, offset=offset, token=lease.token)
            raw = self._stored(topic, qid, offset)
            if raw is None:
                await self._write([dead], "dead letter")
                continue
            revision = self.topics.revision
            msg = self.dead_letter(group, decode_record(raw)[0], lease.attempt)
            await self._write([dead], "dead letter", before=[msg])
            if self.topics.revision != revision:
                await self.topics.saved_since(revision, "dead letter")
            self._commit_floor(key, qs)
            self.dead_lettered += 1
            n += 1
        return n

    def dead_letter(self, group: str, old: MessageExt, attempts: int) -> MessageExt:
        """``old`` as the message ``%DLQ%<group>`` queue 0 keeps (the topic made when missing)."""
        self.topics.create_system_topic(dlq_topic(group), 1, PERM_READ | PERM_WRITE)
        return dead_letter_message(group, old, attempts, self.store_host)

    # ------------------------------------------------------------------------------------------ administration
    async def reset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """An operator's offset reset (docs/admin.md §4): the queue's cursor moves to ``offset``, its leases end (their
        receipt handles no longer ack), and ``offset`` is the group's committed offset."""
        key = (group, topic, queue_id)
        async with self._lock(key):
            await self._write([PopRecord(Kind.RESET, group, topic, queue_id, cursor=offset)], "offset reset")
            self.offsets.commit(group, topic, queue_id, offset)

    def forget_group(self, group: str) -> bool:
        """A deleted group's POP state goes (saved at once, so that no replay brings it back); True if it had any."""
        if not self.book.forget_group(group):
            return False
        self.save_snapshot()
        return True

    def forget_topic(self, topic: str) -> None:
        """A deleted topic's POP state goes with it."""
        self.book.forget_topic(topic)
        self._dirty = True


def _refusal(result: PutResult | None, what: str) -> RemotingError:
    if result is not None and result.disk_full is not None:
        return RemotingError(ResponseCode.SERVICE_NOT_AVAILABLE, f"{what} not recorded: the store's disk is full "
                             f"({result.disk_full})", Reason.DISK_FULL)  # fmt: skip
    status = result.status.name if result is not None else "not stored"
    return RemotingError(ResponseCode.SYSTEM_ERROR, f"{what} not recorded in the POP log ({status}); nothing changed")
