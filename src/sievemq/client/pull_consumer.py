"""The pull consumer, for code that drives consumption itself.

``assign([MessageQueue, ...])`` takes queues explicitly; ``subscribe(topic, expr)`` joins the group and shares
queues with its other clients like a push consumer. Background long-poll loops fill a buffer per queue (paused at
``max_cached_messages``); ``await poll(timeout)`` hands out buffered messages in queue order and advances each
queue's position; ``seek(mq, offset)`` moves a position; ``await commit()`` stores the positions on the brokers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Unpack

from sievemq.client.allocate import AllocateStrategy, allocate_averagely
from sievemq.client.errors import ClientStateError, MessageValidationError
from sievemq.client.instance import ClientConfig, ClientInstance
from sievemq.client.lifecycle import ClientLifecycle, go_live, join, leave, refused_error
from sievemq.client.message import ConsumeFrom, MessageQueue, Selector
from sievemq.client.offset_store import RemoteOffsetStore
from sievemq.client.options import ClientKwargs, ClientOptions, client_options, refuse_unknown
from sievemq.client.process_queue import now_ms
from sievemq.client.pull_queues import PullQueues
from sievemq.client.queue_puller import PULL_RETRY_DELAY
from sievemq.client.rebalance import Rebalancer
from sievemq.client.running_info import pull_properties
from sievemq.client.start_position import StartPosition, first_offset, pin
from sievemq.client.subscription import SubscriptionEntry, check_client_config, to_millis
from sievemq.client.validation import validate_group, validate_topic
from sievemq.protocol.heartbeat import ConsumerData
from sievemq.protocol.message import MessageExt
from sievemq.protocol.mq_json import QueueKey
from sievemq.protocol.running_info import ConsumerRunningInfo, ConsumeStatus
from sievemq.util.tasks import cancel_and_wait, spawn

log = logging.getLogger(__name__)


class PullConsumer(ClientLifecycle):
    """Fetches messages for you to ``poll()``; you decide when to ``commit()``."""

    _kind = "consumer"

    def __init__(
        self,
        namesrv: str | Sequence[str] | None = None,
        group: str = "DEFAULT_PULL_CONSUMER",
        *,
        options: ClientOptions | None = None,
        consume_from: ConsumeFrom | str = ConsumeFrom.LAST,
        consume_timestamp: int | float | datetime | None = None,
        pull_batch_size: int = 32,
        max_cached_messages: int = 1000,
        max_poll_records: int = 256,
        pull_suspend: float = 20.0,
        pull_timeout: float = 30.0,
        auto_commit: bool = False,
        allocate: AllocateStrategy = allocate_averagely,
        **settings: Unpack[ClientKwargs],
    ) -> None:
        """``options``: how to connect (``ClientOptions``); ``namesrv`` and the keyword arguments named like its
        fields (``request_timeout=``, ``access_key=``, ``tls=``, ...) replace those fields."""
        refuse_unknown(type(self).__name__, settings)
        validate_group(group)
        self.group = group
        self.options = client_options(options, namesrv, settings)
        """How this consumer connects (shareable: ``PullConsumer(group=..., options=other.options)``)."""
        self.config = ClientConfig.of(self.options)
        self.consume_from = ConsumeFrom.parse(consume_from)
        self.consume_timestamp = to_millis(consume_timestamp)
        self._start = StartPosition(self.consume_from, self.consume_timestamp)
        """Where queues without a committed offset start (``client/start_position.py``; committed at start only
        with ``auto_commit``)."""
        self.pull_batch_size = max(1, pull_batch_size)
        self.max_cached_messages = max_cached_messages
        self.max_poll_records = max(1, max_poll_records)
        self.pull_suspend = pull_suspend
        self.pull_timeout = pull_timeout
        self.auto_commit = auto_commit
        self.allocate = allocate
        self._subs: dict[str, SubscriptionEntry] = {}
        self._assigned: list[MessageQueue] | None = None
        self._fetched = PullQueues(group, self, lambda: self._state == "running")
        """The queues fetched, their positions and the buffer ``poll()`` reads (``client/pull_queues.py``)."""
        self._state = "new"
        self._instance: ClientInstance | None = None
        self._offsets: RemoteOffsetStore | None = None
        self._rebalancer: Rebalancer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._started_ms = 0
        """When start() began, milliseconds since 1970 (GET_CONSUMER_RUNNING_INFO)."""

    # ------------------------------------------------------------------------------------------ configuration
    def assign(self, mqs: Iterable[MessageQueue]) -> None:
        """Consume exactly these queues (no group rebalancing); replaces an earlier assignment. On a running consumer
        it is applied in the background: a queue new to the group starts where its ``consume_from`` says at that
        moment, and ``assignment()`` lists the queues once they are fetched (docs/consume-from.md)."""
        if self._subs:
            raise ClientStateError("this consumer subscribes topics; assign() and subscribe() do not mix")
        mqs = sorted(set(mqs))
        for mq in mqs:
            if not isinstance(mq, MessageQueue):
                raise TypeError(f"assign() takes MessageQueue objects, not {type(mq).__name__}")
        self._assigned = mqs
        if self._state == "running" and self._loop is not None:
            spawn(self._apply_assignment(), self._background, "assign")

    def subscribe(self, topic: str, expression: Selector | str | None = "*") -> None:
        """Consume ``topic`` as a member of the group (queues shared with the group's other clients)."""
        if self._assigned is not None:
            raise ClientStateError("this consumer has assigned queues; assign() and subscribe() do not mix")
        validate_topic(topic, for_send=False)
        if isinstance(expression, Selector) and expression.is_function:
            raise MessageValidationError(
                "filter functions (Selector.function/function_source) are supported by PushConsumer only"
            )
        try:
            self._subs[topic] = SubscriptionEntry.create(topic, expression)
        except ValueError as e:
            raise MessageValidationError(f"bad subscription expression {expression!r}: {e}") from None
        if self._state == "running" and self._instance is not None and self._loop is not None:
            inst = self._instance
            self._start.hold([topic])

            async def changed() -> None:
                try:
                    await inst.update_route(topic)
                    if self._offsets is not None:  # a topic subscribed now starts now
                        await pin(inst, self._offsets, self._start, [topic], log, commit=self.auto_commit)
                finally:
                    self._start.release([topic])
                await inst.heartbeat_all()
                inst.rebalance_now()

            spawn(changed(), self._background, "subscribe")

    def assignment(self) -> set[MessageQueue]:
        """Queues currently fetched."""
        return set(self._fetched.states)

    async def fetch_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic`` (from the name servers)."""
        inst = self._running()
        await inst.update_route(topic)
        return inst.subscribe_queues(topic) or []

    # ------------------------------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Connect; start fetching the assigned queues, or join the group for subscribed topics."""
        if not self._startable():
            return
        self._loop = asyncio.get_running_loop()
        self._started_ms = now_ms()
        self._start.hold(self._subs)  # until pin() below: a rebalance may come as soon as we heartbeat
        inst = await join(self.config, lambda i: i.register_consumer(self.group, self))
        self._instance = inst
        self._offsets = RemoteOffsetStore(inst, self.group)
        self._rebalancer = Rebalancer(inst, self.group, self, strategy=self.allocate)
        self._state = "running"
        async with self._closed_on_failure():
            refused = await go_live(inst, self.group, self.topics(),
                                    lambda: check_client_config(inst, self.group, list(self._subs.values())))
            if refused:
                raise refused_error(refused)
            if self._subs:
                await pin(inst, self._offsets, self._start, list(self._subs), log, commit=self.auto_commit)
            if self._assigned is not None:
                await self._apply_assignment()
        if self._subs:
            inst.rebalance_now()

    async def close(self) -> None:
        """Stop fetching; with ``auto_commit``, commit positions; leave the group."""
        if not self._closable():
            return
        self._state = "closing"
        self._start.release()
        inst = self._instance
        assert inst is not None
        if self.auto_commit:
            with contextlib.suppress(Exception):
                await self.commit()
        await cancel_and_wait(*self._background)
        await self._fetched.remove_all()
        await leave(inst, consumer_group=self.group)
        self._state = "closed"

    # ------------------------------------------------------------------------------------------ instance hooks
    def topics(self) -> list[str]:
        """Topics in use."""
        if self._assigned is not None:
            return sorted({mq.topic for mq in self._assigned})
        return list(self._subs)

    def consumer_data(self) -> ConsumerData | None:
        """Heartbeat entry; None with assigned queues (not a member of the group's rebalancing)."""
        if not self._subs:
            return None
        return ConsumerData(
            group=self.group,
            consume_type="CONSUME_ACTIVELY",
            message_model="CLUSTERING",
            consume_from_where=self.consume_from.value,
            subscriptions=[e.to_subscription() for e in self._subs.values()],
        )

    def running_info(self) -> ConsumerRunningInfo:
        """GET_CONSUMER_RUNNING_INFO (``mqadmin consumerStatus``): the settings, the subscriptions, and each fetched
        queue with the messages buffered for ``poll()`` (``client/running_info.py``)."""
        config = self._instance.config if self._instance is not None else self.config
        props = pull_properties(self.group, config, consume_from=self.consume_from.value,
                                consume_timestamp=self.consume_timestamp, allocate=self.allocate,
                                pull_batch_size=self.pull_batch_size, max_cached_messages=self.max_cached_messages,
                                pull_suspend=self.pull_suspend, pull_timeout=self.pull_timeout,
                                auto_commit=self.auto_commit, started_ms=self._started_ms)  # fmt: skip
        entries = self._subs or {st.mq.topic: st.entry for st in self._fetched.states.values() if st.entry}
        subs = [e.to_subscription() for e in entries.values()]
        offsets = self._offsets
        queues = {
            QueueKey(mq.topic, mq.broker_name, mq.queue_id): info
            for mq, info in self._fetched.infos(offsets.read_memory if offsets else lambda _: -1).items()
        }
        return ConsumerRunningInfo(props, subs, queues, {s.topic: ConsumeStatus() for s in subs})  # fmt: skip

    async def rebalance(self) -> bool:
        """One rebalance round (subscribe mode only)."""
        if self._state != "running" or self._rebalancer is None or not self._subs:
            return True
        return await self._rebalancer.rebalance(list(self._subs))

    async def persist_offsets(self) -> None:
        """With ``auto_commit``, commit positions every 5 s (one-way)."""
        if self._state == "running" and self.auto_commit and self._offsets is not None:
            for st in self._fetched.states.values():
                self._offsets.update(st.mq, st.position)
            await self._offsets.persist_all(list(self._fetched.states), oneway=True)

    def owned_queues(self) -> set[MessageQueue]:
        """Queues being fetched."""
        return set(self._fetched.states)

    async def drop_queue(self, mq: MessageQueue) -> None:
        """Stop fetching ``mq`` (a rebalance took it); its position is committed if ``auto_commit``."""
        st = await self._fetched.remove(mq)
        if st is None:
            return
        assert self._offsets is not None
        if self.auto_commit:
            self._offsets.update(mq, st.position)
            with contextlib.suppress(Exception):
                await self._offsets.persist(mq)
        self._offsets.remove(mq)

    async def take_queue(self, mq: MessageQueue) -> bool:
        """Start fetching ``mq`` from its committed offset (or per ``consume_from``)."""
        inst = self._running()
        assert self._offsets is not None
        offset = await first_offset(inst, self._offsets, mq, self._start, log, refresh_route=True)
        if offset is None:
            return False
        if self._state != "running" or mq in self._fetched.states:
            return True
        self._fetched.add(inst, mq, offset, self._subs.get(mq.topic) or SubscriptionEntry.create(mq.topic, "*"))
        return True

    async def _apply_assignment(self) -> None:
        assert self._assigned is not None
        wanted = set(self._assigned)
        for mq in [q for q in self._fetched.states if q not in wanted]:
            await self.drop_queue(mq)
        inst = self._running()
        for topic in {mq.topic for mq in wanted}:
            if inst.route(topic) is None:
                await inst.update_route(topic)
        fresh = {mq for mq in wanted if mq not in self._fetched.states and mq not in self._start.known}
        if fresh and self._offsets is not None:  # a queue assigned now starts now
            topics = sorted({mq.topic for mq in fresh})
            await pin(inst, self._offsets, self._start, topics, log, commit=self.auto_commit, only=fresh)
        for mq in sorted(wanted - set(self._fetched.states)):
            if not await self.take_queue(mq):
                log.warning("assigned queue %s could not be started; retrying in %.0fs", mq, PULL_RETRY_DELAY)

                async def retry(q: MessageQueue = mq) -> None:
                    await asyncio.sleep(PULL_RETRY_DELAY)
                    wanted_still = self._state == "running" and self._assigned and q in self._assigned
                    if wanted_still and q not in self._fetched.states:
                        await self._apply_assignment()

                spawn(retry(), self._background, "assign-retry")

    # ------------------------------------------------------------------------------------------ user calls
    async def poll(self, timeout: float = 1.0, max_records: int | None = None) -> list[MessageExt]:
        """Buffered messages (waiting up to ``timeout`` seconds for some); positions move past them."""
        self._running()
        return await self._fetched.poll(timeout, max_records or self.max_poll_records)

    def seek(self, mq: MessageQueue, offset: int) -> None:
        """Hand out ``mq``'s messages from ``offset`` next (buffered ones are discarded)."""
        self._fetched.seek(mq, offset, self._instance if self._state == "running" else None)

    async def reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """A broker reset this group's offsets of ``topic`` (RESET_CONSUMER_CLIENT_OFFSET, docs/admin.md §4): every
        owned queue of it seeks there (buffered messages are dropped)."""
        for mq, offset in sorted(offsets.items()):
            st = self._fetched.states.get(mq)
            if st is not None and st.moved_back == offset:
                continue  # a sievemq broker's pull answer told this queue first (docs/admin.md §4): it moved already
            if mq.topic == topic and st is not None and offset >= 0:
                log.info("group %s: offset of %s reset to %d by the broker", self.group, mq, offset)
                self.seek(mq, offset)
                if self._offsets is not None:
                    self._offsets.update(mq, offset)

    def position(self, mq: MessageQueue) -> int:
        """The next offset ``poll()`` hands out for ``mq``."""
        return self._fetched.state(mq).position

    async def committed(self, mq: MessageQueue) -> int:
        """The offset the broker stores for this group and queue (-1 when none)."""
        self._running()
        assert self._offsets is not None
        return await self._offsets.read_store(mq)

    async def commit(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        """Store positions (or the given offsets) on the brokers and wait for their answers."""
        self._running()
        assert self._offsets is not None
        if offsets is None:
            offsets = {mq: st.position for mq, st in self._fetched.states.items()}
        for mq, off in offsets.items():
            self._offsets.update(mq, off)
        first_error: Exception | None = None
        for mq in offsets:
            try:
                await self._offsets.persist(mq, oneway=False)
            except Exception as e:
                log.warning("commit of %s failed: %s", mq, e)
                first_error = first_error or e
        if first_error is not None:
            raise first_error
