"""Transactions on the broker (docs/transactions.md): half messages in, END_TRANSACTION, check-backs, restart.

``TransactionService`` does what ``TransactionBook`` decides, and keeps the decisions durable as records in the
commit log (``records.py``):

- ``prepare`` stores a producer's ``TRAN_MSG`` message as a half message; no consumer sees it.
- ``end`` (END_TRANSACTION, or a producer's answer to a check) writes the op record, and for a commit the commit
  record right after it, in one step no other put can come between. The op record is the decision: once it is
  stored, the transaction is settled (a second END_TRANSACTION of it changes nothing), and a commit record that
  could not be written yet (a full disk) is written by a later round or after a restart.
- Every ``tick`` seconds a round sends CHECK_TRANSACTION_STATE for due halves to one producer of their group (an op
  record ``checked`` each), and rolls back halves checked ``transactionCheckMax`` times (a copy in
  ``TRANS_CHECK_MAX_TIME_TOPIC``, then op ``expired``).
- ``start`` rebuilds the book from the op and half queues, from the floors saved as offsets of the system group
  ``CID_RMQ_SYS_TRANS`` (so a slave's copy has them too), and writes the commit records an op promised.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import NoReturn

from sievemq.broker.clients import ProducerManager
from sievemq.broker.offsets import ConsumerOffsetManager
from sievemq.broker.schedule import park_for_delay
from sievemq.broker.topics import TopicConfigManager
from sievemq.broker.transactions.book import Check, CheckSettings, Expire, TransactionBook
from sievemq.broker.transactions.records import (
    OpKind,
    OpRecord,
    commit_message,
    half_message,
    op_message,
    parse_op,
    set_aside_message,
)
from sievemq.broker.write_gate import OPEN, WriteGate
from sievemq.errors import RemotingError
from sievemq.protocol.message import MessageExt, PropertyKey, decode_record, encode_record
from sievemq.protocol.names import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from sievemq.protocol.reasons import Reason
from sievemq.protocol.sysflag import TRANSACTION_COMMIT_TYPE, transaction_value
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.store import MessageStore, PutResult
from sievemq.util.tasks import Background

__all__ = ["SYSTEM_GROUP", "EndRequest", "TransactionService"]

log = logging.getLogger(__name__)

SYSTEM_GROUP = "CID_RMQ_SYS_TRANS"
"""Offsets of this group in the half and op topics are the book's floors."""
_READ_CHUNK = 256


@dataclass(frozen=True, slots=True)
class EndRequest:
    """An END_TRANSACTION, checked at the edge (``processors/transaction.py``)."""

    producer_group: str
    half_offset: int
    """``tranStateTableOffset``."""
    half_phy: int
    """``commitLogOffset``."""
    commit: bool
    from_check: bool
    msg_id: str


class EndRefused(Exception):
    """END_TRANSACTION names no half message this broker holds open (``why`` for the remark)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class TransactionService:
    """See the module docstring."""

    def __init__(
        self,
        store: MessageStore,
        topics: TopicConfigManager,
        producers: ProducerManager,
        offsets: ConsumerOffsetManager,
        settings: CheckSettings,
        store_host: tuple[str, int],
        max_delay_level: int,
        gate: WriteGate = OPEN,
        tick: float = 1.0,
    ) -> None:
        self.store, self.topics, self.producers, self.offsets = store, topics, producers, offsets
        self.settings = settings
        self.store_host = store_host
        self.max_delay_level = max_delay_level
        self.gate = gate
        self.tick = min(tick, settings.interval_ms / 1000)
        self.book = TransactionBook(settings)
        self._owed: dict[int, int] = {}
        """Half offset -> half phy: committed by an op record, its commit record not written yet (held in the book:
        the floors stay below it until it is written)."""
        self._task = Background("transaction-checks")
        self.checks_sent = 0
        self.expired = 0

    # ------------------------------------------------------------------------------------------ lifecycle
    def rebuild(self) -> None:
        """Read the book back from the store (at start, after the store's own recovery)."""
        half_floor = max(0, self.offsets.query(SYSTEM_GROUP, TRANS_HALF_TOPIC, 0))
        op_floor = max(0, self.offsets.query(SYSTEM_GROUP, TRANS_OP_HALF_TOPIC, 0))
        book = TransactionBook(self.settings, half_floor, op_floor)
        book.skip_to(self.store.get_min_offset(TRANS_HALF_TOPIC, 0))
        committed: dict[int, list[int]] = {}  # half offset -> ends of its commit op records
        ops: list[tuple[int, OpRecord]] = []
        first_op = max(op_floor, self.store.get_min_offset(TRANS_OP_HALF_TOPIC, 0))
        for op_offset, phy, size, rec in self._records(TRANS_OP_HALF_TOPIC, first_op):
            op = parse_op(rec)
            if op is None:
                continue
            ops.append((op_offset, op))
            if op.kind is OpKind.COMMIT:
                committed.setdefault(op.half_offset, []).append(phy + size)
        self._owed = {}
        for half_offset, ends in committed.items():
            if half_offset < half_floor:
                continue
            half = self._half_at_offset(half_offset)
            if half is not None and not any(self._commit_follows(end, half.commit_log_offset) for end in ends):
                self._owed[half_offset] = half.commit_log_offset
                book.hold(half_offset)
        for op_offset, op in ops:
            book.note_op(op_offset, op)
        book.op_end = max(book.op_end, self.store.get_max_offset(TRANS_OP_HALF_TOPIC, 0))
        for offset, phy, _size, rec in self._records(TRANS_HALF_TOPIC, book.half_floor):
            if not book.is_resolved(offset):
                book.add_half(offset, phy, rec.properties.get(PropertyKey.PGROUP, ""), rec.store_timestamp,
                              _immunity(rec))  # fmt: skip
        self.book = book
        if self._owed:
            log.warning("transactions: %d committed half messages lack their commit record (an unclean stop "
                        "between the two writes, or a full disk): writing them now", len(self._owed))  # fmt: skip
        log.info("transactions: %d open, floor %d", len(book.pending), book.half_floor)

    async def start(self, checks: bool = True) -> None:
        """Rebuild, write owed commit records, and start the check rounds (``checks``: False on a slave, whose
        master checks and whose copy of the records follows)."""
        self.rebuild()
        if checks:
            await self._pay_owed()
            self._task.start(self._loop())

    async def stop(self) -> None:
        """Stop the rounds and save the floors."""
        await self._task.stop()
        self._save_floors()

    # ------------------------------------------------------------------------------------------ reading
    def _records(self, topic: str, start: int) -> list[tuple[int, int, int, MessageExt]]:
        out: list[tuple[int, int, int, MessageExt]] = []
        offset = start
        while True:
            entries = self.store.read_cq_entries(topic, 0, offset, _READ_CHUNK)
            if not entries:
                return out
            for phy, size, _tags in entries:
                raw = self.store.look_message_by_offset(phy) if phy >= 0 else None
                if raw is not None:
                    with contextlib.suppress(ValueError):
                        rec, _ = decode_record(raw)
                        out.append((offset, phy, size, rec))
                offset += 1

    def _half_at_offset(self, half_offset: int) -> MessageExt | None:
        entries = self.store.read_cq_entries(TRANS_HALF_TOPIC, 0, half_offset, 1)
        return self._half_at_phy(entries[0][0]) if entries and entries[0][0] >= 0 else None

    def _half_at_phy(self, phy: int) -> MessageExt | None:
        raw = self.store.look_message_by_offset(phy)
        if raw is None:
            return None
        try:
            rec, _ = decode_record(raw)
        except ValueError:
            return None
        return rec if rec.topic == TRANS_HALF_TOPIC else None

    def _commit_follows(self, end: int, half_phy: int) -> bool:
        """True when the record at ``end`` (right after a commit op record) is the commit of the half at
        ``half_phy``."""
        raw = self.store.record_from(end)
        if raw is None:
            return False
        try:
            rec, _ = decode_record(raw)
        except ValueError:
            return False
        is_commit = transaction_value(rec.sys_flag) == TRANSACTION_COMMIT_TYPE
        return is_commit and rec.prepared_transaction_offset == half_phy

    # ------------------------------------------------------------------------------------------ requests
    async def prepare(self, msg: MessageExt) -> PutResult:
        """Store ``msg`` as a half message (the send processor's part for ``TRAN_MSG=true``); RemotingError for a
        DELAY level that is no number (it is applied at the commit, which must not fail on it)."""
        park_for_delay(replace(msg, properties=dict(msg.properties)), self.max_delay_level)
        if len(self.book.pending) >= self.settings.open_max:
            raise RemotingError(
                ResponseCode.SYSTEM_BUSY,
                f"the broker holds {len(self.book.pending)} open transactions (transactionOpenMax): end some "
                "(commit or roll back) or retry later; this half message was not stored",
                Reason.TOO_MANY_OPEN_TRANSACTIONS,
            )
        self.topics.create_system_topic(TRANS_HALF_TOPIC, 1)
        result = await self.store.put_message(half_message(msg))
        if result.ok:
            self.book.add_half(msg.queue_offset, msg.commit_log_offset, msg.properties.get(PropertyKey.PGROUP, ""),
                               msg.store_timestamp, _immunity(msg))  # fmt: skip
        return result

    async def end(
        self, req: EndRequest, may_publish: Callable[[str], None] | None = None
    ) -> tuple[PutResult | None, str]:
        """Commit or roll back; the put result of the records written (None: nothing to write) and a remark.

        Raises ``EndRefused`` when the request names no half message of this broker, or one of another group;
        ``may_publish(topic)`` (the ACL) raises when the sender may not publish to the half message's topic.
        """
        half = self._half_at_offset(req.half_offset)  # found through the half topic's queue, which only we write:
        if half is None or half.commit_log_offset != req.half_phy:  # a forged record inside a body is no half
            raise EndRefused(
                f"no half message at commit-log offset {req.half_phy} with queue offset {req.half_offset} "
                "(tranStateTableOffset): find prepared transaction message failed"
            )
        group = half.properties.get(PropertyKey.PGROUP, "")
        if group != req.producer_group:
            raise EndRefused(f"the half message belongs to producer group {group!r}, not {req.producer_group!r}")
        if may_publish is not None:
            may_publish(half.properties.get(PropertyKey.REAL_TOPIC, half.topic))
        offset = req.half_offset
        if self.book.is_resolved(offset) or offset in self._owed:
            return None, "the transaction was already settled: nothing changed"
        if not req.commit:
            result = await self._write_ops([op_message(offset, OpKind.ROLLBACK, self.store_host, _now())])
            if result.ok:
                self._settled(offset)
            return result, "rolled back"
        pending = self.book.pending.get(offset)
        checks = pending.checks if pending is not None and req.from_check else 0
        return await self._commit(half, OpKind.COMMIT, checks), "committed"

    async def _commit(self, half: MessageExt, kind: OpKind, checks: int = 0) -> PutResult:
        offset = half.queue_offset
        real = commit_message(half, checks)
        park_for_delay(real, self.max_delay_level)
        op = op_message(offset, kind, self.store_host, _now())
        self.topics.create_system_topic(TRANS_OP_HALF_TOPIC, 1)
        results = await self.store.put_in_order([[op], [real]])
        if not results[0].ok:
            return results[0]
        self.book.note_op(op.queue_offset, parse_op(op) or _never(), replay=False)
        if len(results) < 2 or not results[1].ok:
            self._owed[offset] = half.commit_log_offset  # decided: a later round writes it
            self.book.hold(offset)
            self.book.resolve(offset)
            return results[-1]
        self._settled(offset)
        return results[1]

    async def _write_ops(self, ops: list[MessageExt]) -> PutResult:
        self.topics.create_system_topic(TRANS_OP_HALF_TOPIC, 1)
        results = await self.store.put_in_order([[op] for op in ops])
        for op, result in zip(ops, results, strict=False):
            parsed = parse_op(op)
            if result.ok and parsed is not None:
                self.book.note_op(op.queue_offset, parsed, replay=False)
        return results[-1]

    def _settled(self, offset: int) -> None:
        self.book.resolve(offset)
        if self._owed.pop(offset, None) is not None:
            self.book.release(offset)

    # ------------------------------------------------------------------------------------------ rounds
    async def check_round(self, now_ms: int | None = None) -> int:
        """One round: checks and expiries due now, owed commit records; returns the steps taken."""
        now_ms = _now() if now_ms is None else now_ms
        await self._pay_owed()
        steps = 0
        for step in self.book.due(now_ms):
            half = self._half_at_phy(step.half.phy)
            if half is None:  # deleted by retention under us
                self.book.resolve(step.half.offset)
                continue
            if isinstance(step, Expire):
                log.warning("transaction of message %s (producer group %s) rolled back: %d checks unanswered; a copy "
                            "is in %s", half.uniq_key, step.half.group, step.half.checks, TRANS_CHECK_MAX_TIME_TOPIC)
                self.topics.create_system_topic(TRANS_CHECK_MAX_TIME_TOPIC, 1)
                aside = await self.store.put_message(set_aside_message(half, step.half.checks))
                if not aside.ok:  # a full disk: the next round tries again
                    continue
                result = await self._write_ops([op_message(step.half.offset, OpKind.EXPIRED, self.store_host, now_ms)])
                if result.ok:
                    self._settled(step.half.offset)
                    self.expired += 1
            elif isinstance(step, Check):
                times = step.half.checks + 1  # this check's number, counted before the await
                result = await self._write_ops([op_message(step.half.offset, OpKind.CHECKED, self.store_host, now_ms)])
                self.book.checked(step.half.offset, now_ms)
                if result.ok:
                    self._send_check(half, times)
            steps += 1
        self._save_floors()
        return steps

    def _send_check(self, half: MessageExt, times: int) -> None:
        """CHECK_TRANSACTION_STATE for ``half`` to one producer of its group, its ``times``-th check: the body is the
        half message with ``TRANSACTION_CHECK_TIMES`` = ``times``, as RocketMQ's broker sends it (docs/transactions.md
        §1)."""
        group = half.properties.get(PropertyKey.PGROUP, "")
        channels = list((self.producers.groups.get(group) or {}).values())
        if not channels:
            log.debug("no producer of group %s connected to check message %s", group, half.uniq_key)
            return
        qid = half.properties.get(PropertyKey.REAL_QID, "0")
        uniq = half.uniq_key or half.offset_msg_id
        # As RocketMQ's broker shows it: WAIT false (it sends the copy it re-stored without waiting).
        props = {**half.properties, PropertyKey.TRANSACTION_CHECK_TIMES: str(times), PropertyKey.WAIT: "false"}
        shown = replace(half, topic=half.properties.get(PropertyKey.REAL_TOPIC, half.topic),
                        queue_id=int(qid) if qid.isdecimal() else 0, properties=props)  # fmt: skip
        fields = {
            "tranStateTableOffset": half.queue_offset,
            "commitLogOffset": half.commit_log_offset,
            "msgId": uniq,
            "transactionId": uniq,
            "offsetMsgId": half.offset_msg_id,
        }
        cmd = RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, fields, body=encode_record(shown))
        random.choice(channels).conn.send_oneway(cmd)
        self.checks_sent += 1

    async def _pay_owed(self) -> None:
        """Write the commit records that op records promised, each right after a fresh commit op (so that a later
        restart finds the pair, and does not write it again)."""
        for offset, phy in list(self._owed.items()):
            half = self._half_at_phy(phy)
            if half is None:  # deleted by retention meanwhile
                self._settled(offset)
                continue
            try:
                await self._commit(half, OpKind.COMMIT)
            except Exception:
                log.exception("writing the owed commit of half message %d failed; retrying next round", offset)

    def _save_floors(self) -> None:
        self.offsets.commit(SYSTEM_GROUP, TRANS_HALF_TOPIC, 0, self.book.half_floor)
        self.offsets.commit(SYSTEM_GROUP, TRANS_OP_HALF_TOPIC, 0, self.book.op_floor)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.tick)
            try:
                await self.check_round()
            except Exception:
                log.exception("transaction check round failed; next round in %.1fs", self.tick)


def _immunity(msg: MessageExt) -> int | None:
    raw = msg.properties.get(PropertyKey.CHECK_IMMUNITY_TIME_IN_SECONDS)
    return int(raw) if raw and raw.isdecimal() else None


def _now() -> int:
    return int(time.time() * 1000)


def _never() -> NoReturn:
    raise AssertionError("an op record we wrote does not parse")
