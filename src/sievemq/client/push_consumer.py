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
import logging
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TypeVar, Unpack

from sievemq.client.allocate import AllocateStrategy, allocate_averagely
from sievemq.client.consume_directly import consume_directly
from sievemq.client.consume_service import ConsumeParts, ConsumeService, Listener
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
from sievemq.client.process_queue import now_ms
from sievemq.client.producer import Producer
from sievemq.client.push_queues import PushQueues
from sievemq.client.rebalance import Rebalancer
from sievemq.client.running_info import push_properties
from sievemq.client.start_position import StartPosition, pin
from sievemq.client.subscription import SubscriptionEntry, check_client_config, retry_subscription, to_millis
from sievemq.client.tracing import ConsumeTrace, TraceDispatcher
from sievemq.client.validation import validate_group, validate_topic
from sievemq.protocol.consume_directly import ConsumeDirectlyResult
from sievemq.protocol.heartbeat import ConsumerData
from sievemq.protocol.message import MessageExt
from sievemq.protocol.mq_json import QueueKey
from sievemq.protocol.names import CLIENT_INNER_PRODUCER_GROUP, retry_topic
from sievemq.protocol.running_info import ConsumerRunningInfo, ConsumeStatus
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
        self._tracer: TraceDispatcher | None = None
        """Writes the deliveries' traces when ``options.trace`` (docs/traces.md §5)."""
        self._consuming: ConsumeService | None = None
        self._queues: PushQueues | None = None
        """The owned queues and their pull loops, once started (``client/push_queues.py``)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._retry_entry: SubscriptionEntry | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._functions: FunctionFilters | None = None
        self._started_ms = 0
        """When start() began, milliseconds since 1970 (GET_CONSUMER_RUNNING_INFO)."""

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
        return self.owned_queues()

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
        self._started_ms = now_ms()
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
        parts: ConsumeParts = {"inst": inst, "offsets": self._offsets, "inner": self._inner}
        if self.orderly:
            self._consuming = OrderlyConsumeService(self.group, listener, self.consume_options,
                                                    owned_queues=self.owned_queues, **parts)  # fmt: skip
        else:
            self._consuming = ConsumeService(self.group, listener, self.consume_options,
                                             broadcasting=self.broadcasting, **parts)  # fmt: skip
        self._queues = PushQueues(inst, self.group, self._consuming, self._offsets, self._start,
                                  subscription=lambda topic: self._all_subs().get(topic),
                                  functions=lambda: self._functions,
                                  running=lambda: self._state == "running")  # fmt: skip
        await self._inner.start()
        if self.options.trace:
            self._tracer = TraceDispatcher(self.group, "CONSUMER", self.options)
            await self._tracer.start()
            self._consuming.tracer = ConsumeTrace(self.group, self._tracer)
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
        inst, consumer, queues = self._instance, self._consuming, self._queues
        assert inst is not None and consumer is not None and queues is not None
        await consumer.stop()  # no local retry (nor orderly batch) starts from here on
        await cancel_and_wait(*queues.tasks.values(), *self._background)
        if self._functions is not None:
            await self._functions.close()
        await consumer.finish(CLOSE_WAIT)  # let running listeners finish so that their offsets count
        await queues.release_all()  # offsets persisted, orderly queues unlocked
        if self._inner is not None:
            await self._inner.close()
        if self._tracer is not None:
            await self._tracer.close()
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

    def running_info(self) -> ConsumerRunningInfo:
        """GET_CONSUMER_RUNNING_INFO (``mqadmin consumerStatus``): the settings, the subscriptions (the retry topic's
        too), each owned queue, and the messages pulled per topic (``client/running_info.py``)."""
        config = self._instance.config if self._instance is not None else self.config
        props = push_properties(self.group, config, self.consume_options, broadcasting=self.broadcasting,
                                orderly=self.orderly, consume_from=self.consume_from.value,
                                consume_timestamp=self.consume_timestamp, allocate=self.allocate,
                                started_ms=self._started_ms)  # fmt: skip
        subs = [e.to_subscription() for e in self._all_subs().values()]
        queues = self._queues
        infos = queues.infos() if queues is not None else {}
        status = {s.topic: ConsumeStatus(pull_tps=queues.pulled.tps(s.topic) if queues else 0.0) for s in subs}
        return ConsumerRunningInfo(props, subs, {QueueKey(mq.topic, mq.broker_name, mq.queue_id): info
                                                 for mq, info in infos.items()}, status)  # fmt: skip

    async def rebalance(self) -> bool:
        """One rebalance round (called by the client instance)."""
        if self._state != "running" or self._rebalancer is None:
            return True
        return await self._rebalancer.rebalance(self.topics())

    async def persist_offsets(self) -> None:
        """Write the offsets of the owned queues (every 5 s, one-way)."""
        if self._state == "running" and self._offsets is not None and self._queues is not None:
            await self._offsets.persist_all(list(self._queues.pqs), oneway=True)

    # ------------------------------------------------------------------------------------------ queue ownership
    def owned_queues(self) -> set[MessageQueue]:
        """Queues being processed."""
        return set(self._queues.pqs) if self._queues is not None else set()

    async def drop_queue(self, mq: MessageQueue) -> None:
        """Stop processing ``mq``; persist and forget its offset."""
        assert self._queues is not None
        await self._queues.drop(mq)

    async def take_queue(self, mq: MessageQueue) -> bool:
        """Start pulling ``mq`` from its committed offset (or per ``consume_from``)."""
        assert self._queues is not None
        if mq.topic not in self._all_subs():
            return True
        return await self._queues.take(mq)

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
        if self._queues is not None:
            await self._queues.reset(topic, offsets)
