"""The push consumer: the client pulls (long polling) and calls your listener.

Clustering (default): the group's clients share the queues (averaged allocation, rebalanced every 20 s and at
once on NOTIFY_CONSUMER_IDS_CHANGED); offsets live on the brokers. Broadcasting: every client gets every
message; offsets live in a local JSON file. One pull loop per owned queue; listeners run concurrently; the
committed offset of a queue never passes a message whose listener has not finished. A listener that returns
``ConsumeResult.RECONSUME_LATER`` (or raises) sends its messages back (CONSUMER_SEND_MSG_BACK): they come back
through ``%RETRY%<group>`` later, and go to ``%DLQ%<group>`` after ``max_reconsume_times`` tries.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TypeVar, Unpack

from sievemq.client.consume_directly import consume_directly
from sievemq.client.consume_service import ConsumeService, Listener
from sievemq.client.errors import ClientStateError, MessageValidationError, SubscriptionError
from sievemq.client.filter_functions import FunctionFilters, FunctionStatus
from sievemq.client.instance import ClientConfig, ClientInstance
from sievemq.client.lifecycle import ClientLifecycle, go_live, join, leave, refused_error
from sievemq.client.message import ConsumeFrom, MessageQueue, Selector
from sievemq.client.offset_store import LocalFileOffsetStore, OffsetStore, RemoteOffsetStore
from sievemq.client.options import (
    ClientKwargs,
    ClientOptions,
    ConsumeKwargs,
    ConsumeOptions,
    client_options,
    consume_options,
    refuse_unknown,
)
from sievemq.client.orderly import OrderlyConsumeService
from sievemq.client.process_queue import ProcessQueue
from sievemq.client.producer import Producer
from sievemq.client.queue_puller import QueuePuller, fetch_for
from sievemq.client.rebalance import AllocateStrategy, Rebalancer, allocate_averagely
from sievemq.client.start_position import StartPosition, first_offset, pin
from sievemq.client.subscription import SubscriptionEntry, check_client_config, retry_subscription, to_millis
from sievemq.client.validation import validate_group, validate_topic
from sievemq.protocol.consume_directly import ConsumeDirectlyResult
from sievemq.protocol.heartbeat import ConsumerData
from sievemq.protocol.message import MessageExt
from sievemq.protocol.names import CLIENT_INNER_PRODUCER_GROUP, retry_topic
from sievemq.util.tasks import cancel_and_wait, spawn

__all__ = ["Listener", "PushConsumer", "PushConsumerKwargs", "to_millis"]

log = logging.getLogger(__name__)

L = TypeVar("L", bound=Listener)

CLOSE_WAIT = 5.0
"""Seconds close() lets running listeners finish, so that their offsets count."""


class PushConsumerKwargs(ClientKwargs, ConsumeKwargs, total=False):
    """The keyword arguments of a ``PushConsumer`` named like the fields of ``ClientOptions`` and ``ConsumeOptions``."""


class PushConsumer(ClientLifecycle):
    """Calls a listener with the messages of its subscriptions.

    ``consumer.subscribe("orders", "TagA || TagB")`` (or a ``Selector``), register ``@consumer.listener``
    (an ``async def`` runs on the event loop, a plain function in a thread pool), then ``await consumer.start()``.
    """

    _kind = "consumer"

    def __init__(
        self,
        namesrv: str | Sequence[str] | None = None,
        group: str = "DEFAULT_CONSUMER",
        *,
        options: ClientOptions | None = None,
        consume: ConsumeOptions | None = None,
        broadcasting: bool = False,
        orderly: bool = False,
        consume_from: ConsumeFrom | str = ConsumeFrom.LAST,
        consume_timestamp: int | float | datetime | None = None,
        standby: bool = False,
        allocate: AllocateStrategy = allocate_averagely,
        offset_store_dir: str | Path | None = None,
        **settings: Unpack[PushConsumerKwargs],
    ) -> None:
        """``options``: how to connect (``ClientOptions``); ``consume``: how to consume (``ConsumeOptions``:
        concurrency, batch sizes, flow control, retries). ``namesrv`` and the keyword arguments named like their
        fields (``request_timeout=``, ``tls=``, ``concurrency=``, ``max_reconsume_times=``, ...) replace those
        fields."""
        refuse_unknown(type(self).__name__, settings, consume=True)
        validate_group(group)
        if orderly and broadcasting:
            raise ClientStateError("orderly consumption needs clustering (queue locks): broadcasting=False")
        self.group = group
        self.options = client_options(options, namesrv, settings)
        """How this consumer connects (shareable: ``Producer(group=..., options=consumer.options)``)."""
        self.consume_options = consume_options(consume, settings)
        """How this consumer consumes (read when it starts)."""
        self.config = ClientConfig.of(self.options)
        self.broadcasting = broadcasting
        self.consume_from = ConsumeFrom.parse(consume_from)
        self.consume_timestamp = to_millis(consume_timestamp)
        self._start = StartPosition(self.consume_from, self.consume_timestamp)
        """Where queues without a committed offset start (``client/start_position.py``)."""
        self.offset_store_dir = Path(offset_store_dir) if offset_store_dir else Path.home() / ".sievemq_offsets"
        self.allocate = allocate
        # When the broker says this consumer subscribes a topic differently from its group, start() raises;
        # with standby=True it logs the error and waits instead, taking the queues over once its expression
        # becomes the group's (a rolling change of a group's expression).
        self.standby = standby
        self.orderly = orderly
        """Per queue one batch at a time, in order, under the broker's queue lock (``client/orderly.py``)."""
        self._subs: dict[str, SubscriptionEntry] = {}
        self._listener: Listener | None = None
        self._state = "new"
        self._instance: ClientInstance | None = None
        self._offsets: OffsetStore | None = None
        self._rebalancer: Rebalancer | None = None
        self._inner: Producer | None = None
        self._consuming: ConsumeService | None = None
        self._pqs: dict[MessageQueue, ProcessQueue] = {}
        self._pull_tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._retry_entry: SubscriptionEntry | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._functions: FunctionFilters | None = None
        self._moved_back: dict[MessageQueue, tuple[ProcessQueue, int]] = {}
        """Queues a pull answer moved back (PULL_OFFSET_MOVED): the queue's process queue then, and the offset."""

    # ------------------------------------------------------------------------------------------ configuration
    @property
    def client_id(self) -> str:
        """``ip@instanceName``."""
        return self._instance.client_id if self._instance else self.config.client_id

    def subscribe(self, topic: str, expression: Selector | str | None = "*") -> None:
        """Subscribe ``topic`` with a tag expression (``"TagA || TagB"``, ``"*"``) or a ``Selector``."""
        validate_topic(topic, for_send=False)
        try:
            entry = SubscriptionEntry.create(topic, expression)
        except ValueError as e:
            raise MessageValidationError(f"bad subscription expression {expression!r}: {e}") from None
        self._subs[topic] = entry
        if self._state == "running" and self._loop is not None:
            self._start.hold([topic])
            spawn(self._after_subscription_change([entry]), self._background, "subscribe")

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic`` (its queues are released at the next rebalance, which runs at once)."""
        self._subs.pop(topic, None)
        if self._state == "running" and self._loop is not None:
            spawn(self._after_subscription_change([]), self._background, "unsubscribe")

    def listener(self, fn: L) -> L:
        """Register the listener (usable as a decorator). It gets a list of messages and returns a ConsumeResult.

        Returning None counts as SUCCESS; raising counts as RECONSUME_LATER.
        """
        if not callable(fn):
            raise TypeError("the listener must be callable")
        self._listener = fn
        if self._consuming is not None:  # a running consumer calls the new one from its next batch on
            self._consuming.listener = fn
        return fn

    register_listener = listener

    def assignment(self) -> set[MessageQueue]:
        """The queues this client processes now."""
        return set(self._pqs)

    def subscriptions(self) -> dict[str, SubscriptionEntry]:
        """Topic -> subscription (without the retry topic)."""
        return dict(self._subs)

    # ------------------------------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Join the group: routes, CHECK_CLIENT_CONFIG for SQL92 selectors, heartbeats, first rebalance."""
        if not self._startable():
            return
        listener = self._listener
        if listener is None:
            raise ClientStateError("register a listener before start() (@consumer.listener)")
        if not self._subs:
            raise ClientStateError("subscribe to at least one topic before start()")
        self._loop = asyncio.get_running_loop()
        self._start.hold(self._subs)  # until pin() below: a rebalance may come as soon as we heartbeat
        inst = await join(self.config, lambda i: i.register_consumer(self.group, self))
        self._instance = inst
        if self.broadcasting:
            self._offsets = LocalFileOffsetStore(self.offset_store_dir / inst.client_id / self.group / "offsets.json")
        else:
            self._offsets = RemoteOffsetStore(inst, self.group)
        self._rebalancer = Rebalancer(inst, self.group, self, broadcasting=self.broadcasting, strategy=self.allocate)
        self._inner = Producer(group=CLIENT_INNER_PRODUCER_GROUP, options=self.options, _instance=inst,
                               send_timeout=self.config.request_timeout)  # fmt: skip
        if self.orderly:
            self._consuming = OrderlyConsumeService(self.group, listener, self.consume_options, inst=inst,
                                                    offsets=self._offsets, inner=self._inner,
                                                    owned_queues=self.owned_queues)  # fmt: skip
        else:
            self._consuming = ConsumeService(self.group, listener, self.consume_options, inst=inst,
                                             offsets=self._offsets, inner=self._inner,
                                             broadcasting=self.broadcasting)  # fmt: skip
        await self._inner.start()
        self._state = "running"
        async with self._closed_on_failure():
            self._consuming.start()
            refused = await go_live(
                inst,
                self.group,
                self.topics(),
                lambda: check_client_config(inst, self.group, list(self._subs.values())),
            )
            if refused and not self.standby:
                raise refused_error(refused)
            for remark in refused:
                log.error("standing by: %s", remark)
            await self._start_functions(inst)
            await pin(inst, self._offsets, self._start, list(self._subs), log, commit=True)
        inst.rebalance_now()

    async def close(self) -> None:
        """Stop pulling, persist offsets, unregister from the brokers (the group rebalances without us)."""
        if not self._closable():
            return
        self._state = "closing"
        self._start.release()
        inst, consumer = self._instance, self._consuming
        assert inst is not None and self._offsets is not None and consumer is not None
        await consumer.stop()  # no local retry (nor orderly batch) starts from here on
        await cancel_and_wait(*self._pull_tasks.values(), *self._background)
        if self._functions is not None:
            await self._functions.close()
        await consumer.finish(CLOSE_WAIT)  # let running listeners finish so that their offsets count
        for pq in self._pqs.values():
            pq.dropped = True
        await self._offsets.persist_all(list(self._pqs), oneway=False)
        if isinstance(consumer, OrderlyConsumeService):
            for mq in list(self._pqs):
                await consumer.unlock(mq)
        self._pqs.clear()
        self._pull_tasks.clear()
        if self._inner is not None:
            await self._inner.close()
        await leave(inst, consumer_group=self.group)
        consumer.shutdown()
        self._state = "closed"

    async def _after_subscription_change(self, added: list[SubscriptionEntry]) -> None:
        inst = self._instance
        if inst is None:
            return
        try:
            for entry in added:
                await inst.update_route(entry.topic)
            if self._offsets is not None:  # a topic subscribed now starts now
                await pin(inst, self._offsets, self._start, [e.topic for e in added], log, commit=True)
            await check_client_config(inst, self.group, added)
            await inst.heartbeat_all()
            if self._functions is not None:
                await self._functions.register_all(added)  # refusals are logged
        except Exception as e:
            log.warning("subscription change of group %s: %s", self.group, e)
        finally:
            self._start.release([e.topic for e in added])
        inst.rebalance_now()

    async def _start_functions(self, inst: ClientInstance) -> None:
        """Register the filter functions with the filter servers (a refusal fails start()); then every heartbeat
        interval."""
        self._functions = FunctionFilters(inst, self.group)
        refused = await self._functions.register_all(list(self._subs.values()), complete=True)
        if refused:
            raise SubscriptionError(refused[0].code, "\n".join(r.text for r in refused), refused[0].reason)
        self._functions.start(lambda: list(self._subs.values()), self.config.heartbeat_interval)

    def function_status(self) -> dict[str, FunctionStatus]:
        """Topic -> the state of its filter function (``Selector.function``/``function_source`` subscriptions):
        the filter servers holding it, and the last error (None while pulls through a filter server succeed)."""
        return self._functions.status() if self._functions is not None else {}

    # ------------------------------------------------------------------------------------------ instance hooks
    def _all_subs(self) -> dict[str, SubscriptionEntry]:
        subs = dict(self._subs)
        if not self.broadcasting:
            rt = retry_topic(self.group)
            if rt not in subs:
                subs[rt] = self._retry_sub()
        return subs

    def _retry_sub(self) -> SubscriptionEntry:
        if self._retry_entry is None:
            self._retry_entry = retry_subscription(self.group)
        return self._retry_entry

    def topics(self) -> list[str]:
        """Subscribed topics, with ``%RETRY%<group>`` in clustering mode."""
        return list(self._all_subs())

    def consumer_data(self) -> ConsumerData | None:
        """The heartbeat entry of this group."""
        return ConsumerData(
            group=self.group,
            consume_type="CONSUME_PASSIVELY",
            message_model="BROADCASTING" if self.broadcasting else "CLUSTERING",
            consume_from_where=self.consume_from.value,
            subscriptions=[e.to_subscription() for e in self._all_subs().values()],
        )

    async def rebalance(self) -> bool:
        """One rebalance round (called by the client instance)."""
        if self._state != "running" or self._rebalancer is None:
            return True
        return await self._rebalancer.rebalance(self.topics())

    async def persist_offsets(self) -> None:
        """Write the offsets of the owned queues (every 5 s, one-way)."""
        if self._state == "running" and self._offsets is not None:
            await self._offsets.persist_all(list(self._pqs), oneway=True)

    # ------------------------------------------------------------------------------------------ queue ownership
    def owned_queues(self) -> set[MessageQueue]:
        """Queues being processed."""
        return set(self._pqs)

    async def drop_queue(self, mq: MessageQueue) -> None:
        """Stop processing ``mq``; persist and forget its offset."""
        pq = self._pqs.pop(mq, None)
        task = self._pull_tasks.pop(mq, None)
        self._moved_back.pop(mq, None)
        if pq is not None:
            pq.dropped = True
        await cancel_and_wait(task)
        orderly = self._consuming if isinstance(self._consuming, OrderlyConsumeService) else None
        if orderly is not None:
            await orderly.release(mq)  # its running batch ends first: its offset counts
        assert self._offsets is not None
        if not self.broadcasting:
            try:
                await self._offsets.persist(mq, oneway=False)
            except Exception as e:
                log.warning("persisting the offset of released queue %s failed: %s", mq, e)
        else:
            await self._offsets.persist_all([mq])
        self._offsets.remove(mq)
        if orderly is not None:
            await orderly.unlock(mq)  # the next holder starts after what was consumed here

    async def take_queue(self, mq: MessageQueue) -> bool:
        """Start pulling ``mq`` from its committed offset (or per ``consume_from``)."""
        inst = self._instance
        assert inst is not None and self._offsets is not None
        if mq.topic not in self._all_subs():
            return True
        orderly = self._consuming if isinstance(self._consuming, OrderlyConsumeService) else None
        if orderly is not None and mq not in await orderly.lock([mq]):
            return False  # another client still holds it: the next round tries again
        offset = await first_offset(inst, self._offsets, mq, self._start, log)
        if offset is None:
            return False
        if self._state != "running" or mq in self._pqs:
            return True
        self._start_pulling(inst, mq, offset)
        return True

    def _start_pulling(self, inst: ClientInstance, mq: MessageQueue, offset: int) -> None:
        assert self._offsets is not None and self._consuming is not None
        pq = ProcessQueue(offset)
        self._offsets.update(mq, offset)
        self._pqs[mq] = pq
        service = self._consuming
        fetch = fetch_for(inst, mq, self.group, service.options, lambda: self._functions)
        target = _PushQueue(mq, pq, self._offsets, service, lambda topic: self._all_subs().get(topic), self._moved_back)
        puller = QueuePuller(inst, mq, target, fetch, logger=log)
        self._pull_tasks[mq] = asyncio.get_running_loop().create_task(puller.run(), name=f"pull {mq}")

    async def consume_directly(self, msg: MessageExt) -> ConsumeDirectlyResult:
        """An operator's CONSUME_MESSAGE_DIRECTLY: the listener's verdict on ``msg`` alone, offsets untouched
        (``client/consume_directly.py``)."""
        if self._consuming is None or self._state != "running":
            raise ClientStateError(f"consumer of group {self.group} is not running")
        return await consume_directly(self._consuming, msg, self.orderly)

    async def reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """A broker reset this group's offsets of ``topic`` (RESET_CONSUMER_CLIENT_OFFSET, docs/admin.md §4): each
        owned queue starts over from its new offset; what was fetched from it and not consumed yet is dropped, and
        listeners still running on it commit nothing."""
        inst = self._instance
        for mq, offset in sorted(offsets.items()):
            pq = self._pqs.get(mq)
            if mq.topic != topic or pq is None or inst is None or self._state != "running":
                continue
            moved = self._moved_back.get(mq)
            if moved is not None and moved[0] is pq and moved[1] == offset:
                continue  # a sievemq broker's pull answer told this queue first (docs/admin.md §4): it moved already
            pq.dropped = True
            await cancel_and_wait(self._pull_tasks.pop(mq, None))
            if isinstance(self._consuming, OrderlyConsumeService):
                await self._consuming.release(mq)  # its running batch ends first (and commits nothing)
            if self._pqs.get(mq) is not pq or self._state != "running":
                continue  # released meanwhile (a rebalance)
            log.info("group %s: offset of %s reset to %d by the broker", self.group, mq, offset)
            self._start_pulling(inst, mq, offset)


class _PushQueue:
    """One queue of a push consumer as its ``QueuePuller`` sees it: messages go to the consume service, offsets to the
    offset store (the committable offset rides on pulls to the master); ``subscription(topic)`` is the consumer's
    subscription of a topic now; a pull answer that moves the queue back is noted in ``moved_back``."""

    def __init__(
        self,
        mq: MessageQueue,
        pq: ProcessQueue,
        offsets: OffsetStore,
        service: ConsumeService,
        subscription: Callable[[str], SubscriptionEntry | None],
        moved_back: dict[MessageQueue, tuple[ProcessQueue, int]],
    ) -> None:
        self.mq = mq
        self.pq = pq
        self.offsets = offsets
        self.service = service
        self._subscription = subscription
        self.moved_back = moved_back

    def running(self) -> bool:
        return self.service.state == "running"

    def dropped(self) -> bool:
        return self.pq.dropped

    def subscription(self) -> SubscriptionEntry | None:
        return self._subscription(self.mq.topic)

    def next_offset(self) -> int:
        return self.pq.next_offset

    def flow_controlled(self) -> bool:
        o = self.service.options
        return self.pq.over_limits(o.max_cached_messages, o.max_cached_bytes, o.max_span)

    def commit_offset(self) -> int | None:
        commit = self.offsets.read_memory(self.mq) if not self.service.broadcasting else -1
        return commit if commit > 0 else None

    def on_messages(self, kept: list[MessageExt], next_offset: int) -> None:
        fresh = self.pq.add(kept, next_offset)
        if not fresh:
            self.offsets.update(self.mq, self.pq.commit_offset, increase_only=True)
        self.service.dispatch(self.mq, self.pq, fresh)

    def on_advance(self, next_offset: int) -> None:
        self.pq.advance(next_offset)
        self.offsets.update(self.mq, self.pq.commit_offset, increase_only=True)

    async def on_offset_moved(self, next_offset: int) -> None:
        if next_offset < self.pq.next_offset:  # moved back (an operator's reset): what is in flight no longer counts
            self.pq.reset(next_offset)
            self.moved_back[self.mq] = (self.pq, next_offset)
        else:
            self.pq.advance(next_offset)
        self.offsets.update(self.mq, next_offset)
        with contextlib.suppress(Exception):
            await self.offsets.persist(self.mq, oneway=True)
