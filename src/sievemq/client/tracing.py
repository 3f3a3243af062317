"""Message trace written by sievemq's own clients (``ClientOptions(trace=True)``; docs/traces.md §5), in RocketMQ's
format: a producer writes a Pub record per message sent (with an answer), a push consumer a SubBefore record per
message handed to its listener and a SubAfter record when the listener returned, as the Java 4.x client's
``enableMsgTrace`` does.

Records are queued (at most ``QUEUE_LIMIT``: more are dropped, counted and logged, never blocking a send or a
listener) and written in the background by a producer of their own, in group ``_INNER_TRACE_PRODUCER-<group>``, to
the trace topic: one trace message per traced topic and batch of up to ``BATCH_RECORDS`` records, its KEYS the
traced ids and keys. A failed trace send is logged and dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from sievemq.client.message import Message, SendResult, SendStatus
from sievemq.protocol.message import MessageExt, PropertyKey
from sievemq.protocol.msgid import UniqIdGenerator
from sievemq.protocol.trace_records import TRACE_PRODUCER_GROUP_PREFIX, TraceRecord, TraceType, encode, keys_of

if TYPE_CHECKING:
    from sievemq.client.options import ClientOptions
    from sievemq.client.outgoing import Outgoing
    from sievemq.client.producer import Producer

__all__ = ["BATCH_RECORDS", "QUEUE_LIMIT", "ConsumeTrace", "TraceDispatcher", "trace_end_transaction", "trace_send"]

log = logging.getLogger(__name__)

QUEUE_LIMIT = 2048
"""Records waiting to be written, at most (RocketMQ's ``queueSize``)."""
BATCH_RECORDS = 100
"""Records per trace message, at most (RocketMQ's ``batchSize``)."""
_LINGER = 0.05
"""Seconds a batch waits for more records."""
_IDS = UniqIdGenerator()


class TraceDispatcher:
    """Writes one client's trace records to the trace topic in the background."""

    def __init__(self, group: str, kind: str, options: ClientOptions) -> None:
        """``group`` and ``kind`` (``PRODUCER``, ``CONSUMER``) name the trace producer; ``options`` is the client's
        (its ``trace_topic``; the trace producer connects as the client does)."""
        self.topic = options.trace_topic
        self.group = f"{TRACE_PRODUCER_GROUP_PREFIX}-{group}-{kind}"
        self._options = replace(options, trace=False)
        self._queue: asyncio.Queue[TraceRecord] = asyncio.Queue(QUEUE_LIMIT)
        self._task: asyncio.Task[None] | None = None
        self._producer: Producer | None = None
        self._busy = False
        self.dropped = 0
        """Records dropped because the queue was full."""
        self.written = 0
        """Records written to the trace topic."""

    def append(self, record: TraceRecord) -> None:
        """Queue a record (dropped, and counted, when the queue is full)."""
        try:
            self._queue.put_nowait(record)
        except asyncio.QueueFull:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.warning("trace queue of %s full: %d record(s) dropped so far", self.group, self.dropped)

    async def start(self) -> None:
        """Start the trace producer and the writer."""
        from sievemq.client.producer import Producer

        if self._task is not None:
            return
        self._producer = Producer(group=self.group, options=self._options)
        await self._producer.start()
        self._task = asyncio.create_task(self._run(), name=f"trace-{self.group}")

    async def close(self, timeout: float = 3.0) -> None:
        """Write what is queued (for up to ``timeout`` seconds), then stop."""
        task, self._task = self._task, None
        if task is not None:
            deadline = time.monotonic() + timeout
            while (self._busy or not self._queue.empty()) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await self._flush_queued()
        if self._producer is not None:
            await self._producer.close()
            self._producer = None

    async def _run(self) -> None:
        while True:
            self._busy = False
            batch = [await self._queue.get()]
            self._busy = True  # records taken: close() waits for their write
            deadline = time.monotonic() + _LINGER
            while len(batch) < BATCH_RECORDS:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    batch.append(await asyncio.wait_for(self._queue.get(), left))
                except TimeoutError:
                    break
            await self._write(batch)

    async def _flush_queued(self) -> None:
        batch: list[TraceRecord] = []
        while not self._queue.empty():
            batch.append(self._queue.get_nowait())
        if batch:
            await self._write(batch)

    async def _write(self, records: Sequence[TraceRecord]) -> None:
        """One trace message per traced topic (as RocketMQ groups them)."""
        by_topic: dict[str, list[TraceRecord]] = {}
        for r in records:
            by_topic.setdefault(r.topic, []).append(r)
        for group in by_topic.values():
            body = "".join(encode(r) for r in group).encode()
            msg = Message(self.topic, body, keys=keys_of(group))
            try:
                assert self._producer is not None
                await self._producer.send(msg)
                self.written += len(group)
            except Exception as e:  # a trace is never worth an error of the client
                log.warning("trace of %d record(s) not written to %s: %s", len(group), self.topic, e)


class ConsumeTrace:
    """A push consumer's trace: SubBefore when its listener gets a batch, SubAfter when it returned."""

    def __init__(self, group: str, dispatcher: TraceDispatcher) -> None:
        self.group = group
        self.dispatcher = dispatcher

    def before(self, msgs: Sequence[MessageExt]) -> tuple[str, int, list[MessageExt]]:
        """SubBefore records of a batch (a message whose TRACE_ON is ``false`` is not traced); the context for
        ``after``."""
        request_id = _IDS.next()
        now = int(time.time() * 1000)
        traced = [m for m in msgs if m.properties.get(PropertyKey.TRACE_ON) != "false"]
        for m in traced:
            self.dispatcher.append(TraceRecord(
                TraceType.SUB_BEFORE, m.msg_id, now, m.properties.get(PropertyKey.MSG_REGION, "DefaultRegion"),
                self.group, m.topic, keys=" ".join(m.keys), request_id=request_id, retry_times=m.reconsume_times,
            ))  # fmt: skip
        return request_id, now, traced

    def after(self, context: tuple[str, int, list[MessageExt]], success: bool, context_code: int) -> None:
        """SubAfter records: the listener's cost per message and its answer (``context_code``: RocketMQ's
        ``ConsumeReturnType`` ordinal)."""
        request_id, started, traced = context
        if not traced:
            return
        now = int(time.time() * 1000)
        cost = (now - started) // len(traced)
        for m in traced:
            self.dispatcher.append(TraceRecord(
                TraceType.SUB_AFTER, m.msg_id, now, group=self.group, topic=m.topic, keys=" ".join(m.keys),
                cost_ms=cost, success=success, request_id=request_id, context_code=context_code,
            ))  # fmt: skip


def _msg_type(props: dict[str, str]) -> int:
    if props.get(PropertyKey.TRAN_MSG) == "true":
        return 1  # Trans_Msg_Half
    if props.get(PropertyKey.DELAY) or props.get(PropertyKey.TIMER_DELIVER_MS):
        return 3  # Delay_Msg
    return 0  # Normal_Msg


async def trace_send(
    tracer: TraceDispatcher, producer: Producer, out: Outgoing, result: SendResult, started: int
) -> None:
    """Pub records of a send the broker answered (none when the broker's answer says its trace is off)."""
    if not result.trace_on:
        return
    try:
        store_host = await producer.master_addr(result.message_queue)
    except Exception:  # the route is gone already: the trace says so
        store_host = ""
    ids = result.msg_ids or out.uniq_ids
    offset_ids = result.offset_msg_id.split(",")
    cost = int(time.time() * 1000) - started
    props = out.properties
    tags = "" if out.batch else props.get(PropertyKey.TAGS, "")
    keys = "" if out.batch else props.get(PropertyKey.KEYS, "")
    for i, msg_id in enumerate(ids):
        tracer.append(TraceRecord(
            TraceType.PUB, msg_id, started, result.region_id, producer.group, out.topic, tags, keys, store_host,
            len(out.body) // max(1, len(ids)), cost, _msg_type(props),
            offset_msg_id=offset_ids[i] if i < len(offset_ids) else "", success=result.status is SendStatus.SEND_OK,
        ))  # fmt: skip


_JAVA_STATES = {8: "COMMIT_MESSAGE", 12: "ROLLBACK_MESSAGE", 0: "UNKNOW"}
"""A transaction's end (the wire's ``commitOrRollback``) as RocketMQ's ``LocalTransactionState`` names it."""


def trace_end_transaction(
    tracer: TraceDispatcher,
    group: str,
    msg: MessageExt | Outgoing,
    msg_id: str,
    store_host: str,
    state: int,
    transaction_id: str,
    from_check: bool,
) -> None:
    """An EndTransaction record: ``msg`` (the half message sent, or the one a check-back named) ended in
    ``state`` (8 commit, 12 rollback, 0 unknown)."""
    props = msg.properties
    tracer.append(TraceRecord(
        TraceType.END_TRANSACTION, msg_id, int(time.time() * 1000),
        props.get(PropertyKey.MSG_REGION, "DefaultRegion"), group, msg.topic, props.get(PropertyKey.TAGS, ""),
        props.get(PropertyKey.KEYS, ""), store_host, msg_type=2, transaction_id=transaction_id,
        transaction_state=_JAVA_STATES.get(state, str(state)), from_transaction_check=from_check,
    ))  # fmt: skip
