"""Where a consumer starts on a queue its group has no committed offset of (docs/consume-from.md).

A committed offset always wins: a restarted group resumes where it was. Without one, ``consume_from`` decides:

- ``FIRST``: the queue's first stored message;
- ``TIMESTAMP``: the offset stored nearest the timestamp (retry topics: their end);
- ``LAST``: the messages sent after the group started, none before. The end of a queue read when a rebalance
  hands it over would be too late (a rebalance can come seconds after the start, and what was sent meanwhile
  would be skipped), so the consumer fixes the positions when it starts (``pin``): each queue of its subscribed
  topics that the group has no offset of starts at the queue's end at that moment, committed for the group (push
  consumers, and pull consumers with ``auto_commit``; other pull consumers keep it in memory). A member of the
  group that starts later finds the committed offset and keeps it: a group starts once. A queue whose broker did not
  answer at start starts at its end when it is taken; a queue that was in no route at start (a queue, broker or
  topic added later) holds only messages sent after the start, and starts at its first message. Retry topics
  start at 0.

The offset is asked with ``setZeroIfNotFound=false``, so that a broker never answers 0 for "no offset" (RocketMQ's
brokers answer 0 for a young queue, and a new group would read its old messages). Apache RocketMQ 4.x brokers do
not know the field: against them a young queue starts at 0 whatever ``consume_from`` says.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

from sievemq.client import api
from sievemq.client.message import ConsumeFrom, MessageQueue
from sievemq.client.offset_store import OffsetStore
from sievemq.protocol.names import is_retry_topic
from sievemq.remoting.codes import RequestCode
from sievemq.remoting.connection import Connection

if TYPE_CHECKING:
    from sievemq.client.instance import ClientInstance


class Ask(Enum):
    """What to ask the broker when the start is not a known offset."""

    END = "the queue's end (GET_MAX_OFFSET)"
    TIME = "the offset stored at the timestamp (SEARCH_OFFSET_BY_TIMESTAMP)"


@dataclass
class StartPosition:
    """A consumer's rule for queues without a committed offset, and what it fixed at start."""

    consume_from: ConsumeFrom
    timestamp_ms: int
    """``TIMESTAMP``: where to start."""
    pinned: dict[MessageQueue, int] = field(default_factory=dict)
    """``LAST``: the queue ends read at start, for queues the group had no offset of."""
    known: set[MessageQueue] = field(default_factory=set)
    """``LAST``: the queues of the routes at start (pinned or not)."""
    _pinning: dict[str, asyncio.Event] = field(default_factory=dict)

    def hold(self, topics: Iterable[str]) -> None:
        """``LAST``: queues of ``topics`` wait (``settled``) until ``pin`` has fixed them: a rebalance can hand a
        queue over while the consumer is still starting. Call before anything can start a rebalance."""
        if self.consume_from is ConsumeFrom.LAST:
            for topic in topics:
                if not is_retry_topic(topic):
                    self._pinning.setdefault(topic, asyncio.Event())

    def release(self, topics: Iterable[str] | None = None) -> None:
        """Let the queues of ``topics`` (None: all) be taken (``pin`` does it when done, ``close`` in any case)."""
        for topic in list(self._pinning) if topics is None else topics:
            event = self._pinning.pop(topic, None)
            if event is not None:
                event.set()

    async def settled(self, topic: str) -> None:
        """Return once ``topic``'s start is fixed (at once when it is not being pinned)."""
        event = self._pinning.get(topic)
        if event is not None:
            await event.wait()

    def plan(self, mq: MessageQueue) -> int | Ask:
        """Where ``mq`` starts when its group has no committed offset: an offset, or what to ask its broker."""
        retry = is_retry_topic(mq.topic)
        if self.consume_from is ConsumeFrom.FIRST:
            return 0
        if self.consume_from is ConsumeFrom.LAST:
            if retry:
                return 0
            if mq in self.pinned:
                return self.pinned[mq]
            return Ask.END if mq in self.known else 0
        return Ask.END if retry else Ask.TIME


async def start_offset(
    conn: Connection, store: OffsetStore, mq: MessageQueue, position: StartPosition, timeout: float = 3.0
) -> int:
    """Where to start on a newly owned queue: the committed offset, else ``position.plan``. Transport errors
    propagate: the queue is left for the next rebalance round."""
    offset = await store.read_store(mq)
    if offset >= 0:
        return offset
    plan = position.plan(mq)
    if plan is Ask.END:
        return await api.queue_offset(conn, RequestCode.GET_MAX_OFFSET, mq.topic, mq.queue_id, timeout)
    if plan is Ask.TIME:
        return await api.search_offset(conn, mq.topic, mq.queue_id, position.timestamp_ms, timeout)
    assert isinstance(plan, int)
    return plan


async def first_offset(
    inst: ClientInstance,
    store: OffsetStore,
    mq: MessageQueue,
    position: StartPosition,
    logger: logging.Logger,
    *,
    refresh_route: bool = False,
) -> int | None:
    """Where a consumer that just took ``mq`` starts: its in-memory offset forgotten, ``start_offset`` asked of the
    queue's broker. None when no address of the broker is known (``refresh_route``: after fetching the route once)
    or the broker cannot answer now (logged on ``logger``); the rebalance tries again."""
    addr = inst.broker_addr(mq.broker_name)
    if addr is None and refresh_route:
        await inst.update_route(mq.topic)
        addr = inst.broker_addr(mq.broker_name)
    if addr is None:
        return None
    try:
        await position.settled(mq.topic)
        store.remove(mq)
        conn = await inst.conn(addr)
        return await start_offset(conn, store, mq, position, inst.config.request_timeout)
    except Exception as e:
        logger.warning("cannot compute the start offset of %s: %s", mq, e)
        return None


async def pin(
    inst: ClientInstance,
    store: OffsetStore,
    position: StartPosition,
    topics: Iterable[str],
    logger: logging.Logger,
    *,
    commit: bool,
    only: set[MessageQueue] | None = None,
) -> None:
    """``LAST``: fix where the queues of ``topics`` (``only`` these, if given) start, as of now (module doc);
    ``commit`` writes the positions as the group's offsets. Nothing to do for other ``consume_from`` values. The
    queues of ``topics`` are released (``StartPosition.hold``) when done."""
    topics = list(topics)
    try:
        if position.consume_from is ConsumeFrom.LAST:
            await _pin(inst, store, position, topics, logger, commit=commit, only=only)
    finally:
        position.release(topics)


async def _pin(
    inst: ClientInstance,
    store: OffsetStore,
    position: StartPosition,
    topics: list[str],
    logger: logging.Logger,
    *,
    commit: bool,
    only: set[MessageQueue] | None,
) -> None:
    routed = [mq for topic in topics if not is_retry_topic(topic) for mq in (inst.subscribe_queues(topic) or [])]
    position.known.update(routed)
    queues = [mq for mq in routed if only is None or mq in only]

    failed: dict[str, tuple[list[int], str]] = {}  # "topic on broker" -> (queue ids, the first error)

    async def one(mq: MessageQueue) -> None:
        try:
            addr = inst.broker_addr(mq.broker_name)
            if addr is None:
                raise ConnectionError(f"no address of broker {mq.broker_name}")
            if await store.read_store(mq) >= 0:
                return  # the group has an offset: it started before
            conn = await inst.conn(addr)
            end = await api.queue_offset(
                conn, RequestCode.GET_MAX_OFFSET, mq.topic, mq.queue_id, inst.config.request_timeout
            )
            position.pinned[mq] = end
            if commit:
                store.update(mq, end)
                await store.persist(mq)
        except Exception as e:
            failed.setdefault(f"{mq.topic} on broker {mq.broker_name}", ([], str(e)))[0].append(mq.queue_id)

    await asyncio.gather(*(one(mq) for mq in queues))
    for where, (qids, error) in sorted(failed.items()):  # one line per broker, not one per queue
        logger.warning("the start of queues %s of %s was not fixed (%s): each starts at its end when taken",
                       sorted(qids), where, error)  # fmt: skip
