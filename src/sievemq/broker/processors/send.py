"""Send processor: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320, or 10/310 with the batch
flag): validation, auto-creation of topics, delay, and dead-lettering of exhausted retries sent by clients."""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import NoReturn

from sievemq.broker.groups import SubscriptionGroupManager
from sievemq.broker.metrics.rocketmq_counts import message_type
from sievemq.broker.retry import client_retry_limit, decide
from sievemq.broker.schedule import park_for_delay
from sievemq.broker.stats import BrokerStats
from sievemq.broker.timer.book import refuse_timer_in_batch, refuse_timer_in_transaction, strip_timer
from sievemq.broker.timer.service import TimerService, park_for_timer
from sievemq.broker.topics import TopicConfigManager, validate_topic_name
from sievemq.broker.transactions.service import TransactionService
from sievemq.broker.write_gate import OPEN, WriteGate
from sievemq.errors import RemotingError
from sievemq.protocol.batch import batch_messages, decode_batch
from sievemq.protocol.compression import CompressionError, decompress, is_compressed
from sievemq.protocol.message import MessageExt, PropertyKey, string_to_properties
from sievemq.protocol.msgid import UniqIdGenerator
from sievemq.protocol.names import (
    AUTO_CREATE_TOPIC_KEY,
    NOT_ALLOWED_SEND_TOPICS,
    dlq_topic,
    group_of_retry_topic,
    is_retry_topic,
)
from sievemq.protocol.reasons import Reason
from sievemq.protocol.route import PERM_READ, PERM_WRITE, TopicConfig
from sievemq.protocol.send_header import SendMessageHeader
from sievemq.protocol.sysflag import COMPRESSED_FLAG, COMPRESSION_TYPE_MASK, MULTI_TAGS_FLAG
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import FLAG_RESPONSE, MAX_FRAME_LENGTH, RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.server import ProcessorTable
from sievemq.store import MessageStore, PutResult, PutStatus

MAX_PROPERTIES_BYTES = 32767
REGION = "DefaultRegion"
"""The ``MSG_REGION`` of every stored message and send answer (RocketMQ's ``regionId`` default)."""
_PUT_CODES = {
    PutStatus.PUT_OK: ResponseCode.SUCCESS,
    PutStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutStatus.MESSAGE_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.SERVICE_NOT_AVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE,
}


_REMARKS = {
    ResponseCode.FLUSH_DISK_TIMEOUT: "flush to disk timed out; the message is stored in memory",
    ResponseCode.SLAVE_NOT_AVAILABLE: "stored on the master, but no slave is connected and caught up to copy it",
    ResponseCode.FLUSH_SLAVE_TIMEOUT: "stored on the master; the slave did not confirm its copy in time",
}


def stored_code(result: PutResult, what: str = "message") -> ResponseCode:
    """SUCCESS or FLUSH_DISK_TIMEOUT for a stored put; RemotingError with the store's status otherwise.

    A put refused for lack of disk space is SERVICE_NOT_AVAILABLE with reason DISK_FULL and a remark naming the
    store folder, its free bytes and what to do.
    """
    code = _PUT_CODES.get(result.status, ResponseCode.SYSTEM_ERROR)
    if code not in (ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT):
        if result.disk_full is not None:
            raise RemotingError(code, f"store refused the {what}: {result.disk_full.remark()}", Reason.DISK_FULL)
        raise RemotingError(code, f"store refused the {what}: {result.status.name}")
    return code


def born_host(conn: Connection) -> tuple[str, int]:
    """The producer's address as an IPv4 host (C and JS clients cannot decode IPv6 hosts)."""
    host, port = conn.peer
    if ":" in host:
        host = host.removeprefix("::ffff:") if host.startswith("::ffff:") and "." in host else "0.0.0.0"
    return host, port


@dataclass(frozen=True, slots=True)
class SendSettings:
    """The broker settings a send depends on."""

    broker_name: str
    cluster_name: str
    store_host: tuple[str, int]
    max_message_size: int
    auto_create_topic: bool
    max_reconsume_times: int
    """The retry limit of a group the broker does not know."""
    max_delay_level: int


@dataclass
class SendProcessor:
    """Stores what producers send."""

    store: MessageStore
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    stats: BrokerStats
    settings: SendSettings
    gate: WriteGate = OPEN
    """The broker's role: a slave refuses sends; SYNC_MASTER answers after a slave has them."""
    transactions: TransactionService | None = None
    """Takes messages with ``TRAN_MSG=true`` as half messages (None: refused)."""
    timers: TimerService | None = None
    """Parks messages with a timer property until their time (None: refused; docs/timer.md)."""
    ids: UniqIdGenerator = field(default_factory=UniqIdGenerator)
    """Makes the ``UNIQ_KEY`` of a message sent without one (RocketMQ 5's broker does the same)."""

    def register(self, table: ProcessorTable) -> None:
        """Put the send codes into ``table``."""
        table.register(RequestCode.SEND_MESSAGE, self.send)
        table.register(RequestCode.SEND_MESSAGE_V2, self.send)
        table.register(RequestCode.SEND_BATCH_MESSAGE, self.send)

    # ----------------------------------------------------------------------------------------- checks
    def _check_topic(self, h: SendMessageHeader) -> TopicConfig:
        validate_topic_name(h.topic, ResponseCode.INVALID_PARAMETER)
        if h.topic == AUTO_CREATE_TOPIC_KEY:  # RocketMQ's broker stores it; its clients refuse it (docs/compat.md)
            raise RemotingError(ResponseCode.INVALID_PARAMETER, f"the topic [{h.topic}] is conflict with default topic",
                                Reason.INVALID_NAME)  # fmt: skip
        if h.topic in NOT_ALLOWED_SEND_TOPICS:
            raise RemotingError(ResponseCode.NO_PERMISSION, f"sending to the system topic [{h.topic}] is forbidden")
        broker = self.settings.broker_name
        tc = self.topics.get(h.topic)
        if tc is None:
            group = group_of_retry_topic(h.topic)
            if group is not None:
                gc = self.groups.find(group)
                if gc is None:
                    raise RemotingError(
                        ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{group}] does not exist"
                    )
                tc = self.topics.create_system_topic(h.topic, gc.retryQueueNums)
            elif self.settings.auto_create_topic or self.topics.get(h.default_topic) is not None:
                tc = self.topics.create_in_send(h.topic, h.default_topic, h.default_topic_queue_nums)
            if tc is None:
                raise RemotingError(
                    ResponseCode.TOPIC_NOT_EXIST,
                    f"topic [{h.topic}] not exist on broker {broker} and auto-create is off; "
                    "create it first (sievemq topic create)",
                )
        if not tc.perm & PERM_WRITE:
            raise RemotingError(ResponseCode.NO_PERMISSION, f"the broker[{broker}] sending message is forbidden")
        return tc

    @staticmethod
    def _queue_id(h: SendMessageHeader, tc: TopicConfig) -> int:
        if h.queue_id < 0:
            return random.randrange(max(1, tc.write_queue_nums))
        if h.queue_id >= tc.write_queue_nums:
            raise RemotingError(
                ResponseCode.INVALID_PARAMETER,
                f"request queueId[{h.queue_id}] is illegal, topic {tc.topic_name} has {tc.write_queue_nums} "
                "write queues",
                Reason.INVALID_HEADER,
            )
        return h.queue_id

    def _check_sizes(self, body: bytes, props: str) -> None:
        limit = self.settings.max_message_size
        if not body:  # RocketMQ's clients refuse it with this code (its broker fails on it)
            raise RemotingError(ResponseCode.MESSAGE_ILLEGAL, "the message body is empty")
        if len(body) > limit:
            raise RemotingError(
                ResponseCode.MESSAGE_ILLEGAL, f"message body is {len(body)} bytes, larger than maxMessageSize {limit}"
            )
        if len(props.encode()) > MAX_PROPERTIES_BYTES:
            raise RemotingError(
                ResponseCode.MESSAGE_ILLEGAL,
                f"message properties are {len(props.encode())} bytes, more than {MAX_PROPERTIES_BYTES}",
            )

    # ----------------------------------------------------------------------------------------- routing
    def _route_special(self, msg: MessageExt, h: SendMessageHeader, version: int) -> None:
        """Dead-letter an exhausted retry message (a client's own fallback send to the retry topic); park a
        delayed one in the schedule topic, a timer message in the timer topic (docs/timer.md)."""
        group = group_of_retry_topic(msg.topic)
        if group is not None:
            limit = client_retry_limit(h.max_reconsume_times, version)
            if limit is None:
                gc = self.groups.find(group)
                limit = gc.retryMaxTimes if gc else self.settings.max_reconsume_times
            if decide(msg.reconsume_times, limit).dead_letter:
                msg.topic = dlq_topic(group)
                msg.queue_id = 0
                msg.properties.pop(PropertyKey.DELAY, None)
                strip_timer(msg.properties)
                self.topics.create_system_topic(msg.topic, 1, PERM_READ | PERM_WRITE)
                return
        park_for_delay(msg, self.settings.max_delay_level)
        park_for_timer(msg, self.timers)

    # ----------------------------------------------------------------------------------------- send
    def _batch_body(self, body: bytes, sys_flag: int) -> bytes:
        """The batch body, inflated when the client compressed the whole batch (the C++ core does past 4 KiB).

        RocketMQ's broker cannot read such a batch; sievemq inflates it, to at most a frame's worth of bytes.
        """
        if not is_compressed(sys_flag):
            return body
        try:
            return decompress(body, sys_flag, MAX_FRAME_LENGTH)
        except CompressionError as e:
            why = f"compressed batch body cannot be inflated: {e}"
            raise RemotingError(ResponseCode.MESSAGE_ILLEGAL, why) from None

    def send(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | Awaitable[RemotingCommand]:
        """10 / 310 / 320: store one message or a batch; answered at once unless the answer waits (a flush under
        SYNC_FLUSH, replicas, a half message, a topic made for it being saved). Every answer, a refusal too, is
        timed in ``stats.send_latency``."""
        started = time.perf_counter()
        try:
            answer = self._send(conn, cmd)
        except BaseException:
            self.stats.send_latency.observe(time.perf_counter() - started)
            raise
        if isinstance(answer, RemotingCommand):
            self.stats.send_latency.observe(time.perf_counter() - started)
            return answer
        return self._timed(answer, started)

    async def _timed(self, answer: Awaitable[RemotingCommand], started: float) -> RemotingCommand:
        try:
            return await answer
        finally:
            self.stats.send_latency.observe(time.perf_counter() - started)

    def _send(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | Awaitable[RemotingCommand]:
        h = SendMessageHeader.parse(cmd.ext_fields, v2=cmd.code != RequestCode.SEND_MESSAGE)
        refusal = self.gate.write_refusal()
        if refusal is not None:
            raise refusal
        revision = self.topics.revision
        tc = self._check_topic(h)
        queue_id = self._queue_id(h, tc)
        base_props = string_to_properties(h.properties) if h.properties else {}
        sys_flag = h.sys_flag | (MULTI_TAGS_FLAG if tc.topic_filter_type == "MULTI_TAG" else 0)
        peer = born_host(conn)
        if cmd.code == RequestCode.SEND_BATCH_MESSAGE or h.batch:
            if is_retry_topic(h.topic):
                raise RemotingError(ResponseCode.MESSAGE_ILLEGAL, "batch messages cannot be sent to a retry topic")
            body = self._batch_body(cmd.body, h.sys_flag)
            sys_flag &= ~(COMPRESSED_FLAG | COMPRESSION_TYPE_MASK)  # the entries are stored as sent, inflated
            # Each entry is stored with its own properties only, as RocketMQ stores them (no CLUSTER).
            msgs = batch_messages(body, h.topic, queue_id, sys_flag, h.born_timestamp, peer, self.settings.store_host,
                                  h.reconsume_times, {}, self.settings.max_message_size)  # fmt: skip
            if msgs is None:
                self._refuse_batch(body)
            if any(PropertyKey.TRAN_MSG in m.properties for m in msgs):
                raise RemotingError(ResponseCode.MESSAGE_ILLEGAL, "batch messages cannot be transactional")
            refuse_timer_in_batch(msgs)
            return self._stored(cmd, self.store.put_now(msgs), queue_id, h.topic, revision)
        self._check_sizes(cmd.body, h.properties)
        msg = MessageExt(
            topic=h.topic,
            body=cmd.body,
            flag=h.flag,
            properties=self._stored_properties(base_props),
            queue_id=queue_id,
            sys_flag=sys_flag,
            born_timestamp=h.born_timestamp,
            born_host=peer,
            store_host=self.settings.store_host,
            reconsume_times=h.reconsume_times,
        )
        if base_props.get(PropertyKey.TRAN_MSG) == "true":
            return self._answer_later(cmd, self._prepare(msg), queue_id, h.topic, revision)
        self._route_special(msg, h, cmd.version)
        return self._stored(cmd, self.store.put_now([msg]), queue_id, h.topic, revision)

    def _stored(
        self, cmd: RemotingCommand, result: PutResult, queue_id: int, topic: str, revision: int
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        """The answer to a put, at once when nothing is left to wait for (a flush, replicas, a topic's save)."""
        if (result.ok and self.store.waits_for_flush) or self.topics.revision != revision:
            return self._answer_later(cmd, self.store.flushed(result), queue_id, topic, revision)
        code = stored_code(result)
        if code == ResponseCode.SUCCESS:
            last = result.msgs[-1]
            now = self.gate.replicated_now(last.commit_log_offset + last.store_size)
            if now is None:
                return self._answer_later(cmd, self.store.flushed(result), queue_id, topic, revision)
            if now != code:
                code = ResponseCode(now)
        return self._respond(cmd, result, queue_id, code, topic)

    async def _answer_later(
        self, cmd: RemotingCommand, put: Awaitable[PutResult], queue_id: int, topic: str, revision: int
    ) -> RemotingCommand:
        """The answer once the put is flushed (SYNC_FLUSH), its replicas have it, and a topic made for it is saved."""
        result = await put
        code = stored_code(result)
        if code == ResponseCode.SUCCESS:
            last = result.msgs[-1]
            code = ResponseCode(await self.gate.replicated(last.commit_log_offset + last.store_size))
        if self.topics.revision != revision:  # a topic made for this send is on disk before the answer
            await self.topics.saved_since(revision)
        return self._respond(cmd, result, queue_id, code, topic)

    def _stored_properties(self, props: dict[str, str]) -> dict[str, str]:
        """A single message's properties as RocketMQ 5's broker stores them: ``WAIT`` kept as sent, the broker's
        ``CLUSTER``, ``MSG_REGION`` and ``TRACE_ON`` laid over, and a ``UNIQ_KEY`` made when the client sent none
        (docs/protocol/message-format.md §6)."""
        props[PropertyKey.CLUSTER] = self.settings.cluster_name
        props[PropertyKey.MSG_REGION] = REGION
        props[PropertyKey.TRACE_ON] = "true"
        if not props.get(PropertyKey.UNIQ_KEY):
            props[PropertyKey.UNIQ_KEY] = self.ids.next()
        return props

    async def _prepare(self, msg: MessageExt) -> PutResult:
        """A transaction's half message: stored where no consumer reads until END_TRANSACTION commits it."""
        if self.transactions is None:
            raise RemotingError(ResponseCode.NO_PERMISSION, "this broker takes no transactional messages")
        refuse_timer_in_transaction(msg)
        if is_retry_topic(msg.topic):
            raise RemotingError(ResponseCode.MESSAGE_ILLEGAL, "a transactional message cannot go to a retry topic")
        if not msg.properties.get(PropertyKey.PGROUP):
            raise RemotingError(
                ResponseCode.MESSAGE_ILLEGAL, "a transactional message needs its producer group (property PGROUP)"
            )
        return await self.transactions.prepare(msg)

    def _refuse_batch(self, body: bytes) -> NoReturn:
        """Why ``batch_messages`` would not take a batch, as the answer to send."""
        try:
            entries = decode_batch(body)
        except ValueError as err:
            raise RemotingError(ResponseCode.MESSAGE_ILLEGAL, f"malformed batch body: {err}") from None
        if not entries:
            raise RemotingError(ResponseCode.MESSAGE_ILLEGAL, "empty batch")
        for entry in entries:
            entry.properties.pop(PropertyKey.WAIT, None)
            if PropertyKey.DELAY in entry.properties:
                raise RemotingError(ResponseCode.MESSAGE_ILLEGAL, "batch messages cannot carry a DELAY level")
            self._check_sizes(entry.body, "")
        raise AssertionError("batch_messages refused a batch that has no problem")

    def _respond(
        self, cmd: RemotingCommand, result: PutResult, queue_id: int, code: ResponseCode, topic: str
    ) -> RemotingCommand:
        """The answer to a stored send; the messages count for ``topic``, the one the producer named (a delayed,
        timer or half message is stored elsewhere first)."""
        msgs = result.msgs
        first = msgs[0]
        self.stats.put(topic, len(msgs), sum(m.store_size for m in msgs), message_type(first.properties))
        fields = {
            "msgId": ",".join(result.message_ids),
            "queueId": str(queue_id),
            "queueOffset": str(first.queue_offset),
            "MSG_REGION": REGION,
            "TRACE_ON": "true",
        }
        if len(msgs) == 1 and (uniq := first.properties.get(PropertyKey.UNIQ_KEY)):
            fields["transactionId"] = uniq
        return RemotingCommand(int(code), cmd.opaque, FLAG_RESPONSE, remark=_REMARKS.get(code), ext_fields=fields,
                               serialize_type=cmd.serialize_type)  # fmt: skip
