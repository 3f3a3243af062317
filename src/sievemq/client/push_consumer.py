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
import inspect
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from sievemq.client import api
from sievemq.client.errors import ClientStateError, FilterFunctionError, MessageValidationError, SubscriptionError
from sievemq.client.filter_functions import FunctionFilters, FunctionStatus
from sievemq.client.instance import ClientConfig, ClientInstance
from sievemq.client.message import (
    ConsumeFrom,
    ConsumeResult,
    MessageQueue,
    Selector,
    restore_retry_topic,
)
from sievemq.client.offset_store import LocalFileOffsetStore, OffsetStore, RemoteOffsetStore
from sievemq.client.process_queue import ProcessQueue
from sievemq.client.producer import Outgoing, Producer
from sievemq.client.rebalance import AllocateStrategy, Rebalancer, allocate_averagely
from sievemq.client.subscription import SubscriptionEntry, refusals_for, retry_subscription, start_offset
from sievemq.client.tasks import cancel_and_wait, spawn
from sievemq.client.validation import validate_group, validate_topic
from sievemq.protocol.heartbeat import ConsumerData
from sievemq.protocol.message import MessageExt, PropertyKey
from sievemq.protocol.names import CLIENT_INNER_PRODUCER_GROUP, is_retry_topic, retry_topic
from sievemq.remoting.codes import ResponseCode

log = logging.getLogger(__name__)

Listener = Callable[[list[MessageExt]], Any]
L = TypeVar("L", bound=Listener)

PULL_RETRY_DELAY = 3.0
FLOW_CONTROL_DELAY = 0.05
LOCAL_RETRY_DELAY = 5.0
CLOSE_WAIT = 5.0
_CLIENT_ONLY_PROPS = (PropertyKey.MIN_OFFSET, PropertyKey.MAX_OFFSET, PropertyKey.CONSUME_START_TIME)


def to_millis(value: int | float | datetime | None, default_ago: float = 1800.0) -> int:
    """A timestamp in ms from ms, a datetime, or None (``default_ago`` seconds ago, Java's half hour)."""
    if value is None:
        return int((time.time() - default_ago) * 1000)
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return int(value)


class PushConsumer:
    """Calls a listener with the messages of its subscriptions.

    ``consumer.subscribe("orders", "TagA || TagB")`` (or a ``Selector``), register ``@consumer.listener``
    (an ``async def`` runs on the event loop, a plain function in a thread pool), then ``await consumer.start()``.
    """

    def __init__(
        self,
        namesrv: str | Sequence[str] | None = None,
        group: str = "DEFAULT_CONSUMER",
        *,
        broadcasting: bool = False,
        consume_from: ConsumeFrom | str = ConsumeFrom.LAST,
        consume_timestamp: int | float | datetime | None = None,
        instance_name: str | None = None,
        max_reconsume_times: int = 16,
        retry_delay_level: int = 0,
        consume_batch_size: int = 1,
        pull_batch_size: int = 32,
        concurrency: int = 20,
        max_cached_messages: int = 1000,
        max_cached_mib: int = 100,
        max_span: int = 2000,
        pull_suspend: float = 15.0,
        pull_timeout: float = 30.0,
        offset_store_dir: str | Path | None = None,
        allocate: AllocateStrategy = allocate_averagely,
        request_timeout: float = 3.0,
        heartbeat_interval: float = 30.0,
        poll_namesrv_interval: float = 30.0,
        rebalance_interval: float = 20.0,
        persist_interval: float = 5.0,
        standby: bool = False,
    ) -> None:
        validate_group(group)
        self.group = group
        self.config = ClientConfig.create(
            namesrv,
            instance_name,
            request_timeout=request_timeout,
            heartbeat_interval=heartbeat_interval,
            poll_namesrv_interval=poll_namesrv_interval,
            rebalance_interval=rebalance_interval,
            persist_offsets_interval=persist_interval,
        )
        self.broadcasting = broadcasting
        self.consume_from = ConsumeFrom.parse(consume_from)
        self.consume_timestamp = to_millis(consume_timestamp)
        self.max_reconsume_times = max_reconsume_times
        self.retry_delay_level = retry_delay_level
        self.consume_batch_size = max(1, consume_batch_size)
        self.pull_batch_size = max(1, pull_batch_size)
        self.concurrency = max(1, concurrency)
        self.max_cached_messages = max_cached_messages
        self.max_cached_bytes = max_cached_mib * 1024 * 1024
        self.max_span = max_span
        self.pull_suspend = pull_suspend
        self.pull_timeout = pull_timeout
        self.offset_store_dir = Path(offset_store_dir) if offset_store_dir else Path.home() / ".sievemq_offsets"
        self.allocate = allocate
        # When the broker says this consumer subscribes a topic differently from its group, start() raises;
        # with standby=True it logs the error and waits instead, taking the queues over once its expression
        # becomes the group's (a rolling change of a group's expression).
        self.standby = standby
        self._subs: dict[str, SubscriptionEntry] = {}
        self._listener: Listener | None = None
        self._state = "new"
        self._instance: ClientInstance | None = None
        self._offsets: OffsetStore | None = None
        self._rebalancer: Rebalancer | None = None
        self._inner: Producer | None = None
        self._pqs: dict[MessageQueue, ProcessQueue] = {}
        self._pull_tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self._consume_tasks: set[asyncio.Task[None]] = set()
        self._sem: asyncio.Semaphore | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._retry_entry: SubscriptionEntry | None = None
        self._retry_tasks: set[asyncio.Task[None]] = set()
        self._background: set[asyncio.Task[None]] = set()
        self._functions: FunctionFilters | None = None

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
        if self._state == "running":
            return
        if self._state != "new":
            raise ClientStateError("this consumer was closed; create a new one")
        if self._listener is None:
            raise ClientStateError("register a listener before start() (@consumer.listener)")
        if not self._subs:
            raise ClientStateError("subscribe to at least one topic before start()")
        self._loop = asyncio.get_running_loop()
        inst = ClientInstance.acquire(self.config)
        try:
            inst.register_consumer(self.group, self)
        except ValueError as e:
            await inst.release()
            raise ClientStateError(str(e)) from None
        self._instance = inst
        self._sem = asyncio.Semaphore(self.concurrency)
        self._executor = ThreadPoolExecutor(self.concurrency, thread_name_prefix=f"sievemq-{self.group}")
        if self.broadcasting:
            self._offsets = LocalFileOffsetStore(self.offset_store_dir / inst.client_id / self.group / "offsets.json")
        else:
            self._offsets = RemoteOffsetStore(inst, self.group)
        self._rebalancer = Rebalancer(inst, self.group, self, broadcasting=self.broadcasting, strategy=self.allocate)
        self._inner = Producer(
            group=CLIENT_INNER_PRODUCER_GROUP, _instance=inst, send_timeout=self.config.request_timeout
        )
        await self._inner.start()
        self._state = "running"
        try:
            await inst.start()
            for topic in self.topics():
                await inst.update_route(topic)
            await self._check_client_config(list(self._subs.values()))
            refused = refusals_for(self.group, await inst.heartbeat_all())
            if refused and not self.standby:
                raise SubscriptionError(ResponseCode.SUBSCRIPTION_NOT_EXIST, "\n".join(refused))
            for remark in refused:
                log.error("standing by: %s", remark)
            await self._start_functions(inst)
        except BaseException:
            await self.close()
            raise
        inst.rebalance_now()

    async def close(self) -> None:
        """Stop pulling, persist offsets, unregister from the brokers (the group rebalances without us)."""
        if self._state != "running":
            self._state = "closed"
            return
        self._state = "closing"
        inst = self._instance
        assert inst is not None and self._offsets is not None
        await cancel_and_wait(*self._pull_tasks.values(), *self._retry_tasks, *self._background)
        if self._functions is not None:
            await self._functions.close()
        if self._consume_tasks:  # let running listeners finish so that their offsets count
            await asyncio.wait(list(self._consume_tasks), timeout=CLOSE_WAIT)
        for pq in self._pqs.values():
            pq.dropped = True
        await self._offsets.persist_all(list(self._pqs), oneway=False)
        self._pqs.clear()
        self._pull_tasks.clear()
        await inst.unregister(consumer_group=self.group)
        if self._inner is not None:
            await self._inner.close()
        await inst.release()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        self._state = "closed"

    async def __aenter__(self) -> PushConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _after_subscription_change(self, added: list[SubscriptionEntry]) -> None:
        inst = self._instance
        if inst is None:
            return
        try:
            for entry in added:
                await inst.update_route(entry.topic)
            await self._check_client_config(added)
            await inst.heartbeat_all()
            if self._functions is not None:
                await self._functions.register_all(added)  # refusals are logged
        except Exception as e:
            log.warning("subscription change of group %s: %s", self.group, e)
        inst.rebalance_now()

    async def _check_client_config(self, entries: list[SubscriptionEntry]) -> None:
        inst = self._instance
        assert inst is not None
        for entry in entries:
            if entry.selector.is_tag or entry.selector.is_function:
                continue
            for addr in inst.all_broker_addrs(include_slaves=True):
                conn = await inst.conn(addr)
                resp = await api.check_client_config(
                    conn, inst.client_id, self.group, entry.to_subscription(), inst.config.request_timeout
                )
                if resp.code != ResponseCode.SUCCESS:
                    raise SubscriptionError(
                        resp.code,
                        f"broker {addr} refused the {entry.selector.expression_type} subscription of {entry.topic!r} "
                        f"({entry.selector.expression!r}): {resp.remark or 'no reason given'}",
                    )

    async def _start_functions(self, inst: ClientInstance) -> None:
        """Register the filter functions with the filter servers (a refusal fails start()); then every heartbeat
        interval."""
        self._functions = FunctionFilters(inst, self.group)
        refused = await self._functions.register_all(list(self._subs.values()), complete=True)
        if refused:
            raise SubscriptionError(refused[0].code, "\n".join(r.text for r in refused))
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
        if pq is not None:
            pq.dropped = True
        await cancel_and_wait(task)
        assert self._offsets is not None
        if not self.broadcasting:
            try:
                await self._offsets.persist(mq, oneway=False)
            except Exception as e:
                log.warning("persisting the offset of released queue %s failed: %s", mq, e)
        else:
            await self._offsets.persist_all([mq])
        self._offsets.remove(mq)

    async def take_queue(self, mq: MessageQueue) -> bool:
        """Start pulling ``mq`` from its committed offset (or per ``consume_from``)."""
        inst = self._instance
        assert inst is not None and self._offsets is not None
        if mq.topic not in self._all_subs():
            return True
        addr = inst.broker_addr(mq.broker_name)
        if addr is None:
            return False
        try:
            self._offsets.remove(mq)
            conn = await inst.conn(addr)
            offset = await start_offset(
                conn, self._offsets, mq, self.consume_from, self.consume_timestamp, inst.config.request_timeout
            )
        except Exception as e:
            log.warning("cannot compute the start offset of %s: %s", mq, e)
            return False
        if self._state != "running" or mq in self._pqs:
            return True
        pq = ProcessQueue(offset)
        self._offsets.update(mq, offset)
        self._pqs[mq] = pq
        self._pull_tasks[mq] = asyncio.get_running_loop().create_task(self._pull_loop(mq, pq), name=f"pull {mq}")
        return True

    # ------------------------------------------------------------------------------------------ pulling
    async def _pull_loop(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        inst = self._instance
        assert inst is not None and self._offsets is not None
        while not pq.dropped and self._state == "running":
            entry = self._all_subs().get(mq.topic)
            if entry is None:
                return
            if pq.over_limits(self.max_cached_messages, self.max_cached_bytes, self.max_span):
                await asyncio.sleep(FLOW_CONTROL_DELAY)
                continue
            addr = inst.broker_addr(mq.broker_name)
            try:
                if addr is None:
                    await inst.update_route(mq.topic)
                    raise ConnectionError(f"no address known for broker {mq.broker_name}")
                commit = self._offsets.read_memory(mq) if not self.broadcasting else -1
                is_master = inst.broker_addr(mq.broker_name, master_only=True) == addr
                if entry.selector.is_function:  # through a filter server
                    assert self._functions is not None
                    r = await self._functions.pull(
                        mq,
                        addr,
                        entry,
                        pq.next_offset,
                        max_nums=self.pull_batch_size,
                        suspend_ms=int(self.pull_suspend * 1000),
                        commit_offset=commit if commit > 0 and is_master else None,
                        timeout=self.pull_timeout,
                    )
                else:
                    conn = await inst.conn(addr)
                    r = await entry.pull(
                        conn,
                        self.group,
                        mq,
                        pq.next_offset,
                        max_nums=self.pull_batch_size,
                        suspend_ms=int(self.pull_suspend * 1000),
                        commit_offset=commit if commit > 0 and is_master else None,
                        timeout=self.pull_timeout,
                    )
            except asyncio.CancelledError:
                raise
            except FilterFunctionError:  # logged (rate-limited) and kept in function_status()
                if pq.dropped or self._state != "running":
                    return
                await asyncio.sleep(PULL_RETRY_DELAY)
                continue
            except Exception as e:
                if pq.dropped or self._state != "running":
                    return
                log.warning("pull %s@%d failed: %s; retrying in %.0fs", mq, pq.next_offset, e, PULL_RETRY_DELAY)
                await asyncio.sleep(PULL_RETRY_DELAY)
                continue
            if pq.dropped:
                return
            if r.code == ResponseCode.SUCCESS:
                kept = entry.accept(r.messages, r.min_offset, r.max_offset)
                fresh = pq.add(kept, r.next_begin_offset)
                if not fresh:
                    self._offsets.update(mq, pq.commit_offset, increase_only=True)
                self._dispatch(mq, pq, fresh)
            elif r.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY):
                pq.advance(r.next_begin_offset)
                self._offsets.update(mq, pq.commit_offset, increase_only=True)
            elif r.code == ResponseCode.PULL_OFFSET_MOVED:
                log.warning("offset of %s moved from %d to %d", mq, pq.next_offset, r.next_begin_offset)
                pq.advance(r.next_begin_offset)
                self._offsets.update(mq, r.next_begin_offset)
                with contextlib.suppress(Exception):
                    await self._offsets.persist(mq, oneway=True)
            else:
                log.warning("pull %s@%d: [%d] %s", mq, pq.next_offset, r.code, r.remark)
                await asyncio.sleep(PULL_RETRY_DELAY)

    # ------------------------------------------------------------------------------------------ consuming
    def _dispatch(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        for i in range(0, len(msgs), self.consume_batch_size):
            spawn(self._consume(mq, pq, msgs[i : i + self.consume_batch_size]), self._consume_tasks, "consume")

    async def _call_listener(self, msgs: list[MessageExt]) -> ConsumeResult:
        fn = self._listener
        assert fn is not None and self._executor is not None
        try:
            if inspect.iscoroutinefunction(fn):
                result = await fn(msgs)
            else:
                result = await asyncio.get_running_loop().run_in_executor(self._executor, fn, msgs)
                if inspect.isawaitable(result):
                    result = await result
        except Exception:
            log.exception("listener of group %s raised; the messages will be consumed again later", self.group)
            return ConsumeResult.RECONSUME_LATER
        if result is None or result is True or result == ConsumeResult.SUCCESS:
            return ConsumeResult.SUCCESS
        if result is False or result == ConsumeResult.RECONSUME_LATER:
            return ConsumeResult.RECONSUME_LATER
        log.warning("listener returned %r, not a ConsumeResult; treating it as RECONSUME_LATER", result)
        return ConsumeResult.RECONSUME_LATER

    async def _consume(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        assert self._sem is not None and self._offsets is not None
        async with self._sem:
            if pq.dropped or self._state == "closed":
                return
            now = str(int(time.time() * 1000))
            retried = is_retry_topic(mq.topic)
            for m in msgs:
                if retried:
                    restore_retry_topic(m, self.group)
                m.properties[PropertyKey.CONSUME_START_TIME] = now
            status = await self._call_listener(msgs)
            if pq.dropped:
                return
            done = msgs
            if status is ConsumeResult.RECONSUME_LATER:
                if self.broadcasting:
                    for m in msgs:
                        log.warning("broadcasting: message %s failed and is dropped (no retry)", m.msg_id)
                else:
                    failed = [m for m in msgs if not await self._send_back(m, mq)]
                    if failed:
                        done = [m for m in msgs if m not in failed]
                        self._retry_locally(mq, pq, failed)
            offset = pq.complete(m.queue_offset for m in done)
            if not pq.dropped:
                self._offsets.update(mq, offset, increase_only=True)

    def _retry_locally(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        async def later() -> None:
            await asyncio.sleep(LOCAL_RETRY_DELAY)
            if not pq.dropped and self._state == "running":
                await self._consume(mq, pq, msgs)

        spawn(later(), self._retry_tasks, "consume-again")

    async def _send_back(self, msg: MessageExt, mq: MessageQueue) -> bool:
        """CONSUMER_SEND_MSG_BACK; on failure a normal send to ``%RETRY%<group>`` (Java's fallback)."""
        inst = self._instance
        assert inst is not None
        addr = inst.broker_addr(mq.broker_name, master_only=True) or f"{msg.store_host[0]}:{msg.store_host[1]}"
        try:
            conn = await inst.conn(addr)
            await api.send_back(
                conn,
                offset=msg.commit_log_offset,
                group=self.group,
                delay_level=self.retry_delay_level,
                origin_msg_id=msg.msg_id,
                origin_topic=msg.topic,
                max_reconsume_times=self.max_reconsume_times,
                timeout=inst.config.request_timeout,
            )
            return True
        except Exception as e:
            log.warning("send-back of %s failed (%s); sending it to the retry topic instead", msg.msg_id, e)
        try:
            await self._send_to_retry_topic(msg)
            return True
        except Exception as e:
            log.warning("sending %s to the retry topic failed: %s; it will be consumed again locally", msg.msg_id, e)
            return False

    async def _send_to_retry_topic(self, msg: MessageExt) -> None:
        assert self._inner is not None
        props = dict(msg.properties)
        for k in _CLIENT_ONLY_PROPS:
            props.pop(k, None)
        props.setdefault(PropertyKey.ORIGIN_MESSAGE_ID, msg.msg_id)
        props[PropertyKey.RETRY_TOPIC] = msg.topic
        props[PropertyKey.RECONSUME_TIME] = str(msg.reconsume_times + 1)
        props[PropertyKey.MAX_RECONSUME_TIMES] = str(self.max_reconsume_times)
        level = self.retry_delay_level if self.retry_delay_level > 0 else 3 + msg.reconsume_times
        props[PropertyKey.DELAY] = str(level)
        props.pop("TRAN_MSG", None)
        out = Outgoing(retry_topic(self.group), msg.body, props, msg.flag, 0, False, [msg.msg_id])
        await self._inner.send_outgoing(out)
