"""Send processors: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320, or 10/310 with the batch
flag) and CONSUMER_SEND_MSG_BACK (36): validation, auto-creation, delay, retry and dead-letter routing."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from sievemq.broker.topics import validate_topic_name
from sievemq.errors import RemotingError
from sievemq.protocol.batch import decode_batch
from sievemq.protocol.message import MessageExt, PropertyKey, decode_record, string_to_properties
from sievemq.protocol.names import (
    AUTO_CREATE_TOPIC_KEY,
    NOT_ALLOWED_SEND_TOPICS,
    SCHEDULE_TOPIC,
    VERSION_SEND_BACK_MAX_RECONSUME,
    dlq_topic,
    group_of_retry_topic,
    is_retry_topic,
    retry_topic,
)
from sievemq.protocol.route import PERM_READ, PERM_WRITE, TopicConfig
from sievemq.protocol.send_header import SendMessageHeader
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.headers import get_int, get_str, int_or, require_int, require_str
from sievemq.remoting.server import ProcessorTable
from sievemq.store.message_store import PutResult, PutStatus

if TYPE_CHECKING:
    from sievemq.broker.controller import BrokerController

MAX_PROPERTIES_BYTES = 32767
_PUT_CODES = {
    PutStatus.PUT_OK: ResponseCode.SUCCESS,
    PutStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutStatus.MESSAGE_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.SERVICE_NOT_AVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE,
}


def born_host(conn: Connection) -> tuple[str, int]:
    """The producer's address as an IPv4 host (C and JS clients cannot decode IPv6 hosts)."""
    host, port = conn.peer
    if ":" in host:
        host = host.removeprefix("::ffff:") if host.startswith("::ffff:") and "." in host else "0.0.0.0"
    return host, port


class SendProcessor:
    """Stores what producers send."""

    def __init__(self, broker: BrokerController) -> None:
        self.b = broker

    def register(self, table: ProcessorTable) -> None:
        """Put the send codes into ``table``."""
        table.register(RequestCode.SEND_MESSAGE, self.send)
        table.register(RequestCode.SEND_MESSAGE_V2, self.send)
        table.register(RequestCode.SEND_BATCH_MESSAGE, self.send)
        table.register(RequestCode.CONSUMER_SEND_MSG_BACK, self.send_back)

    # ----------------------------------------------------------------------------------------- checks
    def _check_topic(self, h: SendMessageHeader) -> TopicConfig:
        validate_topic_name(h.topic)
        if h.topic == AUTO_CREATE_TOPIC_KEY:
            raise RemotingError(ResponseCode.SYSTEM_ERROR, f"the topic [{h.topic}] is conflict with default topic")
        if h.topic in NOT_ALLOWED_SEND_TOPICS:
            raise RemotingError(ResponseCode.NO_PERMISSION, f"sending to the system topic [{h.topic}] is forbidden")
        tc = self.b.topics.get(h.topic)
        if tc is None:
            group = group_of_retry_topic(h.topic)
            if group is not None:
                gc = self.b.groups.find(group)
                if gc is None:
                    raise RemotingError(
                        ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{group}] does not exist"
                    )
                tc = self.b.topics.create_system_topic(h.topic, gc.retryQueueNums)
            elif self.b.config.auto_create_topic_enable or self.b.topics.get(h.default_topic) is not None:
                tc = self.b.topics.create_in_send(h.topic, h.default_topic, h.default_topic_queue_nums)
            if tc is None:
                raise RemotingError(
                    ResponseCode.TOPIC_NOT_EXIST,
                    f"topic [{h.topic}] not exist on broker {self.b.config.broker_name} and auto-create is off; "
                    "create it first (sievemq topic create)",
                )
        if not tc.perm & PERM_WRITE:
            raise RemotingError(
                ResponseCode.NO_PERMISSION, f"the broker[{self.b.config.broker_name}] sending message is forbidden"
            )
        return tc

    def _queue_id(self, h: SendMessageHeader, tc: TopicConfig) -> int:
        if h.queue_id < 0:
            return random.randrange(max(1, tc.write_queue_nums))
        if h.queue_id >= tc.write_queue_nums:
            raise RemotingError(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{h.queue_id}] is illegal, topic {tc.topic_name} has {tc.write_queue_nums} "
                "write queues",
            )
        return h.queue_id

    def _check_sizes(self, body: bytes, props: str) -> None:
        limit = self.b.config.max_message_size
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
    def _max_reconsume(self, group: str, header_value: int | None, version: int) -> int:
        if header_value is not None and version >= VERSION_SEND_BACK_MAX_RECONSUME:
            return header_value
        gc = self.b.groups.find(group)
        return gc.retryMaxTimes if gc else self.b.config.max_reconsume_times

    def _route_special(self, msg: MessageExt, h: SendMessageHeader, version: int) -> None:
        """Dead-letter an exhausted retry message; park a delayed one in the schedule topic."""
        group = group_of_retry_topic(msg.topic)
        if group is not None and msg.reconsume_times >= self._max_reconsume(group, h.max_reconsume_times, version):
            msg.topic = dlq_topic(group)
            msg.queue_id = 0
            msg.properties.pop(PropertyKey.DELAY, None)
            self.b.topics.create_system_topic(msg.topic, 1, PERM_READ | PERM_WRITE)
            return
        self.delay(msg)

    def delay(self, msg: MessageExt) -> None:
        """If the message has a DELAY level, move it to the schedule topic (queue = level - 1)."""
        raw = msg.properties.get(PropertyKey.DELAY)
        if not raw:
            return
        try:
            level = int(raw)
        except ValueError:
            raise RemotingError(
                ResponseCode.MESSAGE_ILLEGAL, f"DELAY property must be a level number, got {raw!r}"
            ) from None
        if level <= 0:
            msg.properties.pop(PropertyKey.DELAY, None)
            return
        level = min(level, self.b.schedule.max_level)
        msg.properties[PropertyKey.DELAY] = str(level)
        msg.properties[PropertyKey.REAL_TOPIC] = msg.topic
        msg.properties[PropertyKey.REAL_QID] = str(msg.queue_id)
        msg.topic = SCHEDULE_TOPIC
        msg.queue_id = level - 1

    # ----------------------------------------------------------------------------------------- send
    async def send(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """10 / 310 / 320: store one message or a batch."""
        h = SendMessageHeader.parse(cmd.ext_fields, v2=cmd.code != RequestCode.SEND_MESSAGE)
        tc = self._check_topic(h)
        queue_id = self._queue_id(h, tc)
        base_props = string_to_properties(h.properties) if h.properties else {}
        base_props.pop(PropertyKey.WAIT, None)
        base_props[PropertyKey.CLUSTER] = self.b.config.broker_cluster_name
        sys_flag = h.sys_flag | (2 if tc.topic_filter_type == "MULTI_TAG" else 0)
        peer = born_host(conn)

        def make(body: bytes, flag: int, props: dict[str, str]) -> MessageExt:
            return MessageExt(
                topic=h.topic,
                body=body,
                flag=flag,
                properties=props,
                queue_id=queue_id,
                sys_flag=sys_flag,
                born_timestamp=h.born_timestamp,
                born_host=peer,
                store_host=self.b.store_host,
                reconsume_times=h.reconsume_times,
            )

        if cmd.code == RequestCode.SEND_BATCH_MESSAGE or h.batch:
            if is_retry_topic(h.topic):
                raise RemotingError(ResponseCode.MESSAGE_ILLEGAL, "batch messages cannot be sent to a retry topic")
            try:
                entries = decode_batch(cmd.body)
            except ValueError as err:
                raise RemotingError(ResponseCode.MESSAGE_ILLEGAL, f"malformed batch body: {err}") from None
            if not entries:
                raise RemotingError(ResponseCode.MESSAGE_ILLEGAL, "empty batch")
            msgs = []
            limit = self.b.config.max_message_size
            for entry in entries:
                props = entry.properties  # this request's own dict: updated in place
                props.pop(PropertyKey.WAIT, None)
                if PropertyKey.DELAY in props:
                    raise RemotingError(ResponseCode.MESSAGE_ILLEGAL, "batch messages cannot carry a DELAY level")
                props.update(base_props)
                if len(entry.body) > limit:
                    self._check_sizes(entry.body, "")
                msgs.append(make(entry.body, entry.flag, props))
            result = await self.b.store.put_messages(msgs)
        else:
            self._check_sizes(cmd.body, h.properties)
            msg = make(cmd.body, h.flag, base_props)
            self._route_special(msg, h, cmd.version)
            result = await self.b.store.put_message(msg)
        return self._respond(cmd, result, queue_id)

    def _respond(self, cmd: RemotingCommand, result: PutResult, queue_id: int) -> RemotingCommand:
        code = _PUT_CODES.get(result.status, ResponseCode.SYSTEM_ERROR)
        if code not in (ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT):
            raise RemotingError(code, f"store refused the message: {result.status.name}")
        first = result.msgs[0]
        self.b.stats.put(first.topic, len(result.msgs))
        return cmd.response(
            code,
            None if code == ResponseCode.SUCCESS else "flush to disk timed out; the message is stored in memory",
            {
                "msgId": ",".join(result.message_ids),
                "queueId": queue_id,
                "queueOffset": first.queue_offset,
                "MSG_REGION": "DefaultRegion",
                "TRACE_ON": "true",
            },
        )

    # ----------------------------------------------------------------------------------------- retry
    async def send_back(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """36 CONSUMER_SEND_MSG_BACK: a consumer failed a message; schedule a retry or dead-letter it."""
        f = cmd.ext_fields
        group = require_str(f, "group")
        offset = require_int(f, "offset")
        delay_level = int_or(f, "delayLevel", 0)
        gc = self.b.groups.find(group)
        if gc is None:
            raise RemotingError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{group}] not exist")
        raw = self.b.store.look_message_by_offset(offset)
        if raw is None:
            raise RemotingError(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}")
        old, _ = decode_record(raw)
        props = dict(old.properties)
        props.setdefault(PropertyKey.RETRY_TOPIC, old.topic)
        origin = get_str(f, "originMsgId") or old.uniq_key or old.offset_msg_id
        props.setdefault(PropertyKey.ORIGIN_MESSAGE_ID, origin)
        props.pop(PropertyKey.DELAY, None)
        max_times = get_int(f, "maxReconsumeTimes") if cmd.version >= VERSION_SEND_BACK_MAX_RECONSUME else None
        if max_times is None:
            max_times = gc.retryMaxTimes
        reconsume = old.reconsume_times
        if reconsume >= max_times or delay_level < 0:
            topic = dlq_topic(group)
            self.b.topics.create_system_topic(topic, 1, PERM_READ | PERM_WRITE)
            queue_id = 0
        else:
            topic = retry_topic(group)
            tc = self.b.topics.create_system_topic(topic, gc.retryQueueNums)
            queue_id = random.randrange(max(1, tc.write_queue_nums))
            props[PropertyKey.DELAY] = str(delay_level if delay_level > 0 else 3 + reconsume)
        msg = MessageExt(
            topic=topic,
            body=old.body,
            flag=old.flag,
            properties=props,
            queue_id=queue_id,
            sys_flag=old.sys_flag,
            born_timestamp=old.born_timestamp,
            born_host=old.born_host,
            store_host=self.b.store_host,
            reconsume_times=reconsume + 1,
        )
        self.delay(msg)
        result = await self.b.store.put_message(msg)
        code = _PUT_CODES.get(result.status, ResponseCode.SYSTEM_ERROR)
        if code not in (ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT):
            raise RemotingError(code, f"store refused the retry message: {result.status.name}")
        return cmd.response(ResponseCode.SUCCESS)
