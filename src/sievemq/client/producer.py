"""The producer: send, send_batch, send_async, send_oneway over SEND_MESSAGE_V2 (310) / SEND_BATCH_MESSAGE (320).

Queue selection is round robin over the writable queues of the topic's route, skipping brokers that failed
lately; a ``queue_selector`` or a ``shard_key`` picks the queue instead (ordered messages: no retry elsewhere).
Failed sends are retried on another broker (``retry_times``, default 2) for the codes Java retries (17, 14, 1,
16, 204, 205) and for transport errors, all within ``send_timeout``. A topic without a route is sent through the
route of ``TBW102`` so that the broker creates it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Unpack

from sievemq.client import api
from sievemq.client.errors import MessageValidationError
from sievemq.client.instance import ClientConfig, ClientInstance
from sievemq.client.lifecycle import ClientLifecycle, go_live, join, leave
from sievemq.client.message import Message, MessageQueue, SendResult, SendStatus
from sievemq.client.options import ClientKwargs, ClientOptions, client_options, refuse_unknown
from sievemq.client.outgoing import Outgoing, new_uniq_id, prepare, prepare_batch, send_header
from sievemq.client.publish_routes import PublishInfo, PublishRoutes, master_addr
from sievemq.client.request_reply import mark_request, reply_outgoing, send_code
from sievemq.client.tracing import TraceDispatcher, trace_send
from sievemq.client.validation import MAX_MESSAGE_SIZE, validate_group, validate_message
from sievemq.errors import ConnectionClosedError, RemotingError, RequestTimeoutError
from sievemq.filter.tags import java_string_hash
from sievemq.protocol.message import MessageExt
from sievemq.protocol.reasons import Reason
from sievemq.protocol.route import TopicRouteData
from sievemq.protocol.send_header import SendMessageHeader
from sievemq.remoting.codes import ResponseCode

__all__ = ["Outgoing", "Producer", "ProducerKwargs", "PublishInfo", "QueueSelector", "new_uniq_id", "shard_selector"]

log = logging.getLogger(__name__)

QueueSelector = Callable[[list[MessageQueue], Message], MessageQueue]
"""``(writable queues of the topic, message) -> the queue to use``."""

RETRY_CODES = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.NO_PERMISSION,
        ResponseCode.NO_BUYER_ID,
        ResponseCode.NOT_IN_CURRENT_UNIT,
    }
)


def shard_selector(key: object) -> QueueSelector:
    """A selector sending every message with the same ``key`` to the same queue (Java hash of ``str(key)``)."""
    h = abs(java_string_hash(str(key)))

    def select(queues: list[MessageQueue], msg: Message) -> MessageQueue:
        return queues[h % len(queues)]

    return select


_MOVED_REASONS = frozenset({Reason.BROKER_IS_SLAVE, Reason.HA_MASTER_FENCED})


def _master_moved(e: Exception) -> bool:
    """True for a failed send that a set's new master explains: the old one unreachable, or no master any more."""
    if isinstance(e, RemotingError):
        return e.reason in _MOVED_REASONS
    return isinstance(e, ConnectionClosedError | OSError)


class ProducerKwargs(ClientKwargs, total=False):
    """The keyword arguments of a ``Producer`` besides ``options`` (for classes that pass them on)."""

    send_timeout: float
    retry_times: int
    compress_over: int
    max_message_size: int
    queue_selector: QueueSelector | None
    default_topic_queue_nums: int
    fault_backoff: float


class Producer(ClientLifecycle):
    """Sends messages. Use ``async with Producer(namesrv=..., group=...) as p`` or ``start()``/``close()``."""

    _kind = "producer"

    def __init__(
        self,
        namesrv: str | Sequence[str] | None = None,
        group: str = "DEFAULT_PRODUCER",
        *,
        options: ClientOptions | None = None,
        send_timeout: float = 3.0,
        retry_times: int = 2,
        compress_over: int = 4096,
        max_message_size: int = MAX_MESSAGE_SIZE,
        queue_selector: QueueSelector | None = None,
        default_topic_queue_nums: int = 4,
        fault_backoff: float = 10.0,
        _instance: ClientInstance | None = None,
        **settings: Unpack[ClientKwargs],
    ) -> None:
        """``options``: how to connect (``ClientOptions``); ``namesrv`` and the keyword arguments named like its
        fields (``request_timeout=``, ``access_key=``, ``tls=``, ...) replace those fields."""
        refuse_unknown(type(self).__name__, settings)
        validate_group(group)
        self.group = group
        self.options = client_options(options, namesrv, settings)
        """How this producer connects (shareable: ``Producer(group=..., options=other.options)``)."""
        self.config = ClientConfig.of(self.options)
        self.send_timeout = send_timeout
        self.retry_times = max(0, retry_times)
        self.compress_over = compress_over
        self.max_message_size = max_message_size
        self.queue_selector = queue_selector
        self.default_topic_queue_nums = default_topic_queue_nums
        self.fault_backoff = fault_backoff
        self._routes = PublishRoutes()
        """The queues of the topics sent to, and the brokers sends avoid for now (``client/publish_routes.py``)."""
        self._instance: ClientInstance | None = _instance
        self._inner = _instance is not None
        self._state = "new"
        self._pending: set[asyncio.Task[Any]] = set()
        self._tracer: TraceDispatcher | None = None
        """Writes the sends' traces when ``options.trace`` (not for a consumer's inner producer)."""

    # ------------------------------------------------------------------------------------------ lifecycle
    @property
    def client_id(self) -> str:
        """``ip@instanceName`` of the underlying client instance."""
        return self._instance.client_id if self._instance else self.config.client_id

    async def start(self) -> None:
        """Join the client instance and send the first heartbeats (an inner producer shares its consumer's)."""
        if not self._startable():
            return
        if not self._inner:
            self._instance = await join(self.config, lambda inst: inst.register_producer(self.group, self))
            await go_live(self._instance, self.group, self.topics())
        if self.options.trace and not self._inner:
            self._tracer = TraceDispatcher(self.group, "PRODUCER", self.options)
            await self._tracer.start()
        self._state = "running"

    async def close(self) -> None:
        """Wait briefly for one-way/async sends, unregister from the brokers and leave the client instance."""
        if not self._closable():
            return
        self._state = "closed"
        if self._pending:
            await asyncio.wait(list(self._pending), timeout=self.send_timeout)
        if self._tracer is not None:
            await self._tracer.close()
        inst = self._instance
        if inst is not None and not self._inner:
            await leave(inst, producer_group=self.group)

    # ------------------------------------------------------------------------------------------ routes
    def topics(self) -> list[str]:
        """Topics this producer sent to (their routes are refreshed)."""
        return self._routes.topics()

    def on_route(self, topic: str, route: TopicRouteData) -> None:
        """A fresh route: rebuild the topic's queue list (keeps the round-robin position)."""
        if self._instance is not None:
            self._routes.on_route(self._instance, topic, route)

    async def publish_info(self, topic: str) -> PublishInfo:
        """The topic's writable queues; from TBW102's route when the name servers know no route (auto-create)."""
        return await self._routes.info(self._running(), topic, self.default_topic_queue_nums)

    # ------------------------------------------------------------------------------------------ preparing
    def prepare(self, msg: Message) -> Outgoing:
        """Validate one message; add UNIQ_KEY and compress a large body."""
        return prepare(msg, self.max_message_size, self.compress_over)

    def prepare_batch(self, msgs: Sequence[Message]) -> Outgoing:
        """Validate a batch and encode its body (never compressed)."""
        return prepare_batch(msgs, self.max_message_size)

    def _header(self, out: Outgoing, mq: MessageQueue) -> SendMessageHeader:
        return send_header(out, mq, self.group, self.default_topic_queue_nums)

    # ------------------------------------------------------------------------------------------ sending
    async def master_addr(self, mq: MessageQueue) -> str:
        """The address of ``mq``'s master broker (the route is fetched when unknown)."""
        return await master_addr(self._running(), mq)

    async def _send_once(self, out: Outgoing, mq: MessageQueue, timeout: float) -> SendResult:
        inst = self._running()
        addr = await self.master_addr(mq)
        try:
            conn = await inst.conn(addr)
            r = await api.send_request(conn, self._header(out, mq), out.body, code=send_code(out), timeout=timeout)
        except RemotingError as e:
            if e.remark:
                raise
            raise RemotingError(e.code, f"send to {mq} failed", e.reason) from None
        except ConnectionClosedError as e:  # name the broker, not only its address
            raise ConnectionClosedError(f"broker {mq.broker_name} is unreachable: {e}") from None
        except RequestTimeoutError as e:
            raise RequestTimeoutError(f"broker {mq.broker_name} did not answer: {e}") from None
        return SendResult(
            status=SendStatus(r.code),
            msg_id=",".join(out.uniq_ids),
            offset_msg_id=r.msg_id,
            message_queue=MessageQueue(mq.topic, mq.broker_name, r.queue_id),
            queue_offset=r.queue_offset,
            region_id=r.region_id,
            trace_on=r.trace_on,
        )

    async def send_outgoing(
        self, out: Outgoing, *, selector: QueueSelector | None = None, timeout: float | None = None
    ) -> SendResult:
        """Send a prepared message with retries (none with a selector); traced when ``options.trace``."""
        tracer = self._tracer
        if tracer is None:
            return await self._send_outgoing(out, selector=selector, timeout=timeout)
        started = int(time.time() * 1000)
        result = await self._send_outgoing(out, selector=selector, timeout=timeout)
        await trace_send(tracer, self, out, result, started)
        return result

    async def _send_outgoing(
        self, out: Outgoing, *, selector: QueueSelector | None = None, timeout: float | None = None
    ) -> SendResult:
        timeout = self.send_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        info = await self.publish_info(out.topic)
        if selector is not None:
            assert out.source is not None
            mq = selector(list(info.queues), out.source)
            if not isinstance(mq, MessageQueue):
                raise MessageValidationError(f"the queue selector returned {mq!r}, not a MessageQueue")
            try:
                return await self._send_once(out, mq, max(0.001, deadline - time.monotonic()))
            except (RemotingError, ConnectionClosedError, OSError) as e:
                if _master_moved(e):
                    await self._routes.after_failure(self._running(), out.topic)
                raise
        last_error: Exception | None = None
        last_broker: str | None = None
        for attempt in range(1 + self.retry_times):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            if attempt:
                info = await self.publish_info(out.topic)
            mq = info.select(self._routes.avoid(), last_broker)
            try:
                result = await self._send_once(out, mq, remaining)
            except RemotingError as e:
                if e.code not in RETRY_CODES:
                    raise
                last_error = e
            except (ConnectionClosedError, RequestTimeoutError, OSError) as e:
                last_error = e
            else:
                self._routes.mark(mq.broker_name, False, self.fault_backoff)
                return result
            log.info("send to %s failed (attempt %d): %s", mq, attempt + 1, last_error)
            self._routes.mark(mq.broker_name, True, self.fault_backoff)
            if _master_moved(last_error):
                with contextlib.suppress(Exception):
                    await self._routes.after_failure(self._running(), out.topic)
            last_broker = mq.broker_name
        if last_error is None:
            raise RequestTimeoutError(f"send to topic {out.topic} timed out after {timeout:.1f}s")
        raise last_error

    async def send(
        self,
        msg: Message,
        *,
        queue_selector: QueueSelector | None = None,
        shard_key: object | None = None,
        delay_level: int | None = None,
        timeout: float | None = None,
    ) -> SendResult:
        """Send one message and wait for the broker's answer.

        ``shard_key`` sends every message with the same key to the same queue (ordered per key);
        ``queue_selector(queues, msg)`` picks the queue itself; ``delay_level`` (1..18) delays delivery.
        """
        self._running()
        if delay_level is not None:
            msg = replace(msg, delay_level=delay_level)
        out = self.prepare(msg)
        selector = queue_selector or (shard_selector(shard_key) if shard_key is not None else self.queue_selector)
        return await self.send_outgoing(out, selector=selector, timeout=timeout)

    async def request(self, msg: Message, timeout: float = 3.0, *, shard_key: object | None = None) -> MessageExt:
        """Send ``msg`` and wait for the reply a consumer sends with ``Producer.reply``; RequestTimeoutError
        when none arrives within ``timeout`` seconds (RocketMQ 4.6+ request-reply)."""
        inst = self._running()
        out = self.prepare(msg)
        correlation = mark_request(out, inst.client_id, timeout)
        await self._routes.know_reply_brokers(inst, msg.topic, self.default_topic_queue_nums)
        waiting = inst.replies.expect(correlation)
        deadline = time.monotonic() + timeout
        try:
            selector = shard_selector(shard_key) if shard_key is not None else self.queue_selector
            await self.send_outgoing(out, selector=selector, timeout=timeout)
            return await asyncio.wait_for(waiting, max(0.001, deadline - time.monotonic()))
        except TimeoutError:
            raise RequestTimeoutError(
                f"no reply to the request to {msg.topic} within {timeout:.1f}s (correlation id {correlation})"
            ) from None
        finally:
            inst.replies.forget(correlation)

    async def reply(
        self,
        request: MessageExt,
        body: bytes,
        *,
        properties: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> SendResult:
        """Answer ``request`` (a message sent with ``Producer.request``) with ``body``: the broker pushes the reply
        to the requester. MessageValidationError when ``request`` is no request."""
        self._running()
        try:
            out = reply_outgoing(request, body, properties)
        except ValueError as e:
            raise MessageValidationError(str(e)) from None
        return await self.send_outgoing(out, timeout=timeout)

    async def send_batch(
        self,
        msgs: Sequence[Message],
        *,
        queue_selector: QueueSelector | None = None,
        shard_key: object | None = None,
        timeout: float | None = None,
    ) -> SendResult:
        """Send messages of one topic as one SEND_BATCH_MESSAGE; they land on one queue, in order."""
        self._running()
        out = self.prepare_batch(msgs)
        selector = queue_selector or (shard_selector(shard_key) if shard_key is not None else self.queue_selector)
        return await self.send_outgoing(out, selector=selector, timeout=timeout)

    def send_async(
        self,
        msg: Message,
        callback: Callable[[SendResult | None, BaseException | None], None] | None = None,
        **kwargs: Any,
    ) -> asyncio.Task[SendResult]:
        """Start a send and return its task at once; ``callback(result, error)`` runs when it ends."""
        self._running()
        if kwargs.get("delay_level") is not None:
            msg = replace(msg, delay_level=kwargs.pop("delay_level"))
        validate_message(msg, self.max_message_size)  # raise in the caller, not in the task
        task = asyncio.get_running_loop().create_task(self.send(msg, **kwargs))
        self._track(task)
        if callback is not None:

            def done(t: asyncio.Task[SendResult]) -> None:
                if t.cancelled():
                    callback(None, asyncio.CancelledError())
                elif (e := t.exception()) is not None:
                    callback(None, e)
                else:
                    callback(t.result(), None)

            task.add_done_callback(done)
        return task

    def send_oneway(
        self, msg: Message, *, queue_selector: QueueSelector | None = None, shard_key: object | None = None
    ) -> None:
        """Send without waiting for (or getting) an answer; validation errors still raise here."""
        self._running()
        out = self.prepare(msg)
        selector = queue_selector or (shard_selector(shard_key) if shard_key is not None else self.queue_selector)
        task = asyncio.get_running_loop().create_task(self._oneway(out, selector))
        self._track(task)

    async def _oneway(self, out: Outgoing, selector: QueueSelector | None) -> None:
        try:
            info = await self.publish_info(out.topic)
            if selector is not None:
                assert out.source is not None
                mq = selector(list(info.queues), out.source)
            else:
                mq = info.select(self._routes.avoid(), None)
            conn = await self._running().conn(await self.master_addr(mq))
            api.send_oneway_request(conn, self._header(out, mq), out.body, code=send_code(out))
        except Exception as e:
            log.warning("one-way send to %s failed: %s", out.topic, e)

    def _track(self, task: asyncio.Task[Any]) -> None:
        self._pending.add(task)

        def forget(t: asyncio.Task[Any]) -> None:
            self._pending.discard(t)
            if not t.cancelled():
                with contextlib.suppress(BaseException):
                    t.exception()

        task.add_done_callback(forget)
