"""Running a push consumer's listener over pulled messages (Java ``ConsumeMessageConcurrentlyService``).

Pulled messages go to the listener in batches of ``consume_batch_size``, at most ``concurrency`` batches at a time
(an ``async def`` listener runs on the event loop, a plain function in a thread pool). A batch whose listener
returns RECONSUME_LATER (or raises) is sent back (CONSUMER_SEND_MSG_BACK, docs/protocol/requests.md §11; when that
fails, a normal send to ``%RETRY%<group>``, Java's fallback); a message neither path took is consumed again here
after ``LOCAL_RETRY_DELAY``. Broadcasting consumers do not retry. Every finished message completes its offset in
the queue's ProcessQueue, and the committable offset goes to the offset store.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypedDict, Unpack

from sievemq.client import api
from sievemq.client.instance import ClientInstance
from sievemq.client.message import ConsumeResult, MessageQueue, restore_retry_topic
from sievemq.client.offset_store import OffsetStore
from sievemq.client.options import ConsumeOptions
from sievemq.client.outgoing import Outgoing
from sievemq.client.process_queue import ProcessQueue
from sievemq.client.producer import Producer
from sievemq.client.tracing import ConsumeTrace
from sievemq.protocol.message import MessageExt, PropertyKey
from sievemq.protocol.names import is_retry_topic, retry_topic
from sievemq.util.tasks import cancel_and_wait, spawn

log = logging.getLogger("sievemq.client.push_consumer")  # the consumer's records, as before the split

Listener = Callable[[list[MessageExt]], Any]
"""A push consumer's listener: gets a list of messages, returns a ConsumeResult (or None, True, False)."""

LOCAL_RETRY_DELAY = 5.0
"""Seconds before a message that could not be sent back is consumed again locally."""
_CLIENT_ONLY_PROPS = (PropertyKey.MIN_OFFSET, PropertyKey.MAX_OFFSET, PropertyKey.CONSUME_START_TIME)


class ConsumeParts(TypedDict):
    """The services a consume service (concurrent or orderly) works with, keyword arguments of both."""

    inst: ClientInstance
    """The client instance (brokers' addresses and connections)."""
    offsets: OffsetStore
    """Where consumed offsets go."""
    inner: Producer
    """The consumer's inner producer (sends to the retry topic)."""


class ConsumeService:
    """The consuming half of a started PushConsumer: runs ``listener`` over the messages its queues pulled, with the
    consumer's group and ``ConsumeOptions``; sends failures back through ``inner`` (the consumer's inner producer)
    and moves offsets in ``offsets``. ``state``: ``running``, ``closing`` once ``stop()`` began, ``closed`` after
    ``shutdown()``."""

    def __init__(
        self,
        group: str,
        listener: Listener,
        options: ConsumeOptions,
        *,
        broadcasting: bool = False,
        **parts: Unpack[ConsumeParts],
    ) -> None:
        self.group = group
        self.listener = listener
        """Called with each batch (``PushConsumer.listener`` replaces it on a running consumer)."""
        self.options = options
        self.broadcasting = broadcasting
        """Broadcasting consumers do not retry failed messages."""
        self.inst = parts["inst"]
        self.offsets = parts["offsets"]
        self.inner = parts["inner"]
        self.state = "running"
        self.sem = asyncio.Semaphore(options.concurrency)
        self.executor = ThreadPoolExecutor(options.concurrency, thread_name_prefix=f"sievemq-{group}")
        self.consume_tasks: set[asyncio.Task[None]] = set()
        """Batches being consumed (close() lets them finish, for a while)."""
        self.retry_tasks: set[asyncio.Task[None]] = set()
        """Batches waiting to be consumed again locally (``stop()`` cancels them)."""
        self.tracer: ConsumeTrace | None = None
        """Writes SubBefore/SubAfter trace records around each listener call (``ClientOptions.trace``)."""

    def start(self) -> None:
        """Start the background work of the service (none here; the orderly service renews its locks)."""

    async def stop(self) -> None:
        """The consumer closes: the local retries are cancelled (batches already handed out still run, until
        ``shutdown()``)."""
        self.state = "closing"
        await cancel_and_wait(*self.retry_tasks)

    async def finish(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the batches being consumed, so that their offsets count."""
        if self.consume_tasks:
            await asyncio.wait(list(self.consume_tasks), timeout=timeout)

    def dispatch(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """Consume freshly pulled messages of ``mq`` in batches of ``consume_batch_size``."""
        size = self.options.consume_batch_size
        for i in range(0, len(msgs), size):
            spawn(self.consume(mq, pq, msgs[i : i + size]), self.consume_tasks, "consume")

    def shutdown(self) -> None:
        """Closed: stop the listener threads (those still running are not waited for)."""
        self.state = "closed"
        self.executor.shutdown(wait=False, cancel_futures=True)

    async def run_listener(self, msgs: list[MessageExt]) -> Any:
        """What the listener returns for a batch (an ``async def`` on the loop, a plain function in the pool);
        whatever it raises is raised."""
        fn = self.listener
        if inspect.iscoroutinefunction(fn):
            return await fn(msgs)
        result = await asyncio.get_running_loop().run_in_executor(self.executor, fn, msgs)
        if inspect.isawaitable(result):
            result = await result
        return result

    async def call_listener(self, msgs: list[MessageExt]) -> ConsumeResult:
        """The listener's verdict on a batch (an exception or an unknown answer counts as RECONSUME_LATER); traced
        when ``tracer`` is set."""
        tracer = self.tracer
        if tracer is None:
            return (await self._listener_verdict(msgs))[0]
        context = tracer.before(msgs)
        answer, code = await self._listener_verdict(msgs)
        tracer.after(context, answer is ConsumeResult.SUCCESS, code)
        return answer

    async def _listener_verdict(self, msgs: list[MessageExt]) -> tuple[ConsumeResult, int]:
        """The verdict and RocketMQ's ``ConsumeReturnType`` ordinal (0 SUCCESS, 2 EXCEPTION, 4 FAILED)."""
        try:
            result = await self.run_listener(msgs)
        except Exception:
            log.exception("listener of group %s raised; the messages will be consumed again later", self.group)
            return ConsumeResult.RECONSUME_LATER, 2
        if result is None:
            return ConsumeResult.SUCCESS, 0
        answer = ConsumeResult.of(result)
        if answer is not None:
            return answer, 0 if answer is ConsumeResult.SUCCESS else 4
        log.warning("listener returned %r, not a ConsumeResult; treating it as RECONSUME_LATER", result)
        return ConsumeResult.RECONSUME_LATER, 4

    async def consume(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """Run the listener on one batch, send failures back, and move the queue's committable offset."""
        async with self.sem:
            if pq.dropped or self.state == "closed":
                return
            now = str(int(time.time() * 1000))
            retried = is_retry_topic(mq.topic)
            for m in msgs:
                if retried:
                    restore_retry_topic(m, self.group)
                m.properties[PropertyKey.CONSUME_START_TIME] = now
            status = await self.call_listener(msgs)
            if pq.dropped:
                return
            done = msgs
            if status is ConsumeResult.RECONSUME_LATER:
                if self.broadcasting:
                    for m in msgs:
                        log.warning("broadcasting: message %s failed and is dropped (no retry)", m.msg_id)
                else:
                    failed = [m for m in msgs if not await self.send_back(m, mq)]
                    if failed:
                        done = [m for m in msgs if m not in failed]
                        self._retry_locally(mq, pq, failed)
            offset = pq.complete(m.queue_offset for m in done)
            if not pq.dropped:
                self.offsets.update(mq, offset, increase_only=True)

    def _retry_locally(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        async def later() -> None:
            await asyncio.sleep(LOCAL_RETRY_DELAY)
            if not pq.dropped and self.state == "running":
                await self.consume(mq, pq, msgs)

        spawn(later(), self.retry_tasks, "consume-again")

    async def send_back(self, msg: MessageExt, mq: MessageQueue) -> bool:
        """CONSUMER_SEND_MSG_BACK; on failure a normal send to ``%RETRY%<group>`` (Java's fallback)."""
        inst, options = self.inst, self.options
        addr = inst.broker_addr(mq.broker_name, master_only=True) or f"{msg.store_host[0]}:{msg.store_host[1]}"
        try:
            conn = await inst.conn(addr)
            await api.send_back(
                conn,
                offset=msg.commit_log_offset,
                group=self.group,
                delay_level=options.retry_delay_level,
                origin_msg_id=msg.msg_id,
                origin_topic=msg.topic,
                max_reconsume_times=options.max_reconsume_times,
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

    def retry_outgoing(self, msg: MessageExt, reconsume_times: int, delay_level: int | None) -> Outgoing:
        """``msg`` as a normal send to ``%RETRY%<group>`` counted ``reconsume_times`` (the broker dead-letters it once
        that reaches the group's limit), delivered after ``delay_level`` (None: no delay)."""
        limit = self.options.max_reconsume_times
        props = dict(msg.properties)
        for k in (*_CLIENT_ONLY_PROPS, PropertyKey.DELAY, PropertyKey.TRAN_MSG):
            props.pop(k, None)
        props.setdefault(PropertyKey.ORIGIN_MESSAGE_ID, msg.msg_id)
        props[PropertyKey.RETRY_TOPIC] = msg.topic
        props[PropertyKey.RECONSUME_TIME] = str(reconsume_times)
        props[PropertyKey.MAX_RECONSUME_TIMES] = str(limit)
        if delay_level is not None:
            props[PropertyKey.DELAY] = str(delay_level)
        return Outgoing(retry_topic(self.group), msg.body, props, msg.flag, 0, False, [msg.msg_id],
                        reconsume_times=reconsume_times, max_reconsume_times=limit)  # fmt: skip

    async def _send_to_retry_topic(self, msg: MessageExt) -> None:
        delay = self.options.retry_delay_level
        level = delay if delay > 0 else 3 + msg.reconsume_times
        await self.inner.send_outgoing(self.retry_outgoing(msg, msg.reconsume_times + 1, level))
