"""Between apache.rocketmq.v2 messages and sievemq's 4.x records (docs/proxy.md §4). Pure: no I/O."""

from __future__ import annotations

import hashlib

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from sievemq.client.errors import MessageValidationError
from sievemq.client.message import Message, decompress_body
from sievemq.client.outgoing import Outgoing
from sievemq.client.pop_api import PoppedMessage
from sievemq.client.validation import RESERVED_PROPERTIES, validate_topic
from sievemq.errors import RemotingError
from sievemq.protocol.message import PropertyKey, properties_to_string
from sievemq.protocol.route import PERM_READ, PERM_WRITE, TopicRouteData
from sievemq.proxy.v2 import definition_pb2 as pb

__all__ = ["MESSAGE_GROUP_PROPERTY", "ProxyError", "message_of", "outgoing_of", "route_queues"]

ACCEPTED_TYPES = (pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION)
"""Message types this proxy takes (DELAY on the broker's timer messages, docs/timer.md)."""


MESSAGE_GROUP_PROPERTY = "__SHARDINGKEY"
"""Where a FIFO message's group travels in the 4.x record (as RocketMQ's proxy keeps it)."""
_SYSTEM_PROPERTIES = RESERVED_PROPERTIES | {MESSAGE_GROUP_PROPERTY}
TRACE_CONTEXT_PROPERTY = "TRACE_CONTEXT"
"""Where a 5.x client's ``trace_context`` (its OpenTelemetry context) is kept, as RocketMQ's proxy keeps it: stored
with the message and handed back to whoever receives it (docs/traces.md)."""


class ProxyError(Exception):
    """A request the proxy refuses: ``code`` (apache.rocketmq.v2 ``Code``) and a message for people."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _permission(perm: int) -> int:
    readable, writable = bool(perm & PERM_READ), bool(perm & PERM_WRITE)
    if readable and writable:
        return int(pb.READ_WRITE)
    if readable:
        return int(pb.READ)
    return int(pb.WRITE if writable else pb.NONE)


def route_queues(topic: pb.Resource, route: TopicRouteData, endpoint: tuple[str, int]) -> list[pb.MessageQueue]:
    """The message queues of ``route`` as a 5.x client sees them: every broker at the proxy's own ``endpoint``
    (clients talk only to the proxy), queue permissions from the topic's, the message types accepted."""
    host, port = endpoint
    endpoints = pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host=host, port=port)])
    out: list[pb.MessageQueue] = []
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        broker = pb.Broker(name=qd.broker_name, id=0, endpoints=endpoints)
        for qid in range(max(qd.read_queue_nums, qd.write_queue_nums)):
            perm = qd.perm
            if qid >= qd.read_queue_nums:
                perm &= ~PERM_READ
            if qid >= qd.write_queue_nums:
                perm &= ~PERM_WRITE
            out.append(pb.MessageQueue(topic=topic, id=qid, permission=_permission(perm), broker=broker,
                                       accept_message_types=ACCEPTED_TYPES))  # fmt: skip
    return out


def outgoing_of(msg: pb.Message, max_body_size: int) -> tuple[Outgoing, str | None]:
    """The 4.x message to send for a 5.x one, and its sharding key (the FIFO message group, else None).

    Raises ``ProxyError`` with the v2 code a client branches on: an illegal topic, tag, key or property name, a body
    too large, or a message type this proxy does not take yet.
    """
    topic = msg.topic.name
    try:
        validate_topic(topic)
    except MessageValidationError as e:
        raise ProxyError(pb.ILLEGAL_TOPIC, str(e)) from None
    sp = msg.system_properties
    if len(msg.body) > max_body_size:
        raise ProxyError(pb.MESSAGE_BODY_TOO_LARGE, f"body of {len(msg.body)} bytes, more than {max_body_size}")
    if sp.message_type not in ACCEPTED_TYPES:
        raise ProxyError(pb.UNSUPPORTED, f"message type {pb.MessageType.Name(sp.message_type)} is not taken yet")
    if not sp.message_id:
        raise ProxyError(pb.ILLEGAL_MESSAGE_ID, "the message has no message_id")
    props: dict[str, str] = {}
    for k, v in msg.user_properties.items():
        if k in RESERVED_PROPERTIES:
            raise ProxyError(pb.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property name {k!r} is reserved by the system")
        props[k] = v
    if sp.HasField("tag"):
        if not sp.tag or "||" in sp.tag:
            raise ProxyError(pb.ILLEGAL_MESSAGE_TAG, f"tag {sp.tag!r} is empty or contains '||'")
        props[PropertyKey.TAGS] = sp.tag
    keys = [k for k in sp.keys if k]
    if any(" " in k for k in keys):
        raise ProxyError(pb.ILLEGAL_MESSAGE_KEY, "a message key may not contain a space")
    if keys:
        props[PropertyKey.KEYS] = " ".join(keys)
    props[PropertyKey.UNIQ_KEY] = sp.message_id
    if sp.trace_context:
        props[TRACE_CONTEXT_PROPERTY] = sp.trace_context
    group: str | None = None
    if sp.message_type == pb.FIFO:
        if not sp.message_group:
            raise ProxyError(pb.ILLEGAL_MESSAGE_GROUP, "a FIFO message needs a message group")
        group = sp.message_group
        props[MESSAGE_GROUP_PROPERTY] = group
    if sp.message_type == pb.DELAY:
        if not sp.HasField("delivery_timestamp"):
            raise ProxyError(pb.ILLEGAL_DELIVERY_TIME, "a DELAY message needs a delivery_timestamp")
        at = sp.delivery_timestamp.seconds * 1000 + sp.delivery_timestamp.nanos // 1_000_000
        if at < 0:
            raise ProxyError(pb.ILLEGAL_DELIVERY_TIME, f"delivery_timestamp {at} ms is before 1970")
        props[PropertyKey.TIMER_DELIVER_MS] = str(at)
    elif sp.HasField("delivery_timestamp"):
        raise ProxyError(pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "only a DELAY message has a delivery_timestamp")
    try:
        properties_to_string(props)
    except ValueError as e:
        raise ProxyError(pb.ILLEGAL_MESSAGE_PROPERTY_KEY, str(e)) from None
    body = bytes(msg.body)
    source = Message(topic, body)  # what a queue selector is shown (a FIFO group's selector only hashes the group)
    return Outgoing(topic, body, props, uniq_ids=[sp.message_id], source=source), group


def _timestamp(ms: int) -> Timestamp:
    return Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def _host(host: tuple[str, int]) -> str:
    return f"{host[0]}:{host[1]}"


def message_of(popped: PoppedMessage, invisible_ms: int) -> pb.Message:
    """A message handed out by a POP as a 5.x client receives it: user properties apart from the system ones,
    the 4.x message id (``UNIQ_KEY``, else the offset id), an MD5 body digest (the clients check it), the receipt
    handle and the delivery attempt; a FIFO message's group from ``__SHARDINGKEY``; compressed bodies inflated."""
    m = popped.message
    decompress_body(m)
    props = m.properties
    sp = pb.SystemProperties(
        message_id=m.uniq_key or m.offset_msg_id,
        body_digest=pb.Digest(type=pb.MD5, checksum=hashlib.md5(m.body, usedforsecurity=False).hexdigest().upper()),
        body_encoding=pb.IDENTITY,
        message_type=pb.NORMAL,
        born_timestamp=_timestamp(m.born_timestamp),
        born_host=_host(m.born_host),
        store_timestamp=_timestamp(m.store_timestamp),
        store_host=_host(m.store_host),
        queue_id=m.queue_id,
        queue_offset=m.queue_offset,
        receipt_handle=popped.handle,
        delivery_attempt=popped.attempt,
        invisible_duration=Duration(seconds=invisible_ms // 1000, nanos=(invisible_ms % 1000) * 1_000_000),
    )
    if m.tags:
        sp.tag = m.tags
    sp.keys.extend(m.keys)
    trace_context = props.get(TRACE_CONTEXT_PROPERTY)
    if trace_context:
        sp.trace_context = trace_context
    group = props.get(MESSAGE_GROUP_PROPERTY)
    if group:
        sp.message_group = group
        sp.message_type = pb.FIFO
    if props.get(PropertyKey.TRAN_MSG) == "true":
        sp.message_type = pb.TRANSACTION
    timer = props.get(PropertyKey.TIMER_DELIVER_MS) or props.get(PropertyKey.TIMER_OUT_MS)
    if timer and timer.isdecimal() and len(timer) < 19:
        sp.message_type = pb.DELAY
        sp.delivery_timestamp.CopyFrom(_timestamp(int(timer)))
    user = {k: v for k, v in props.items() if k not in _SYSTEM_PROPERTIES}
    return pb.Message(topic=pb.Resource(name=m.topic), user_properties=user, system_properties=sp, body=m.body)


def reasoned(e: RemotingError) -> str:
    """A broker's refusal as a 5.x status message: its stable reason first, in brackets, when it has one (as the
    proxy's own ACL refusals), then the broker's remark word for word, what a 4.x client is told
    (docs/proxy.md §3); without a reason, the response code's name and the remark."""
    return f"[{e.reason}] {e.remark}" if e.reason else str(e)
