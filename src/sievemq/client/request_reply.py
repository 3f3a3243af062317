"""Request-reply on the client side (docs/request-reply.md): the requester's waiting requests, the replier's reply
message, and the reply a broker pushes (PUSH_REPLY_MESSAGE_TO_CLIENT). Pure except for the futures."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping

from sievemq.client.outgoing import Outgoing, new_uniq_id
from sievemq.errors import RemotingError
from sievemq.protocol.compression import CompressionError, decompress, is_compressed
from sievemq.protocol.message import MessageExt, PropertyKey, properties_to_string, string_to_properties
from sievemq.protocol.names import reply_topic
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.headers import get_int, get_str

__all__ = ["REPLY", "ReplyWaiters", "is_reply", "mark_request", "pushed_reply", "reply_outgoing", "send_code"]

REPLY = "reply"
"""``MSG_TYPE`` of a reply message."""


def mark_request(out: Outgoing, client_id: str, timeout: float) -> str:
    """Make ``out`` a request: a fresh ``CORRELATION_ID``, ``REPLY_TO_CLIENT`` and ``TTL`` (ms); the correlation
    id."""
    correlation = uuid.uuid4().hex
    out.properties[PropertyKey.CORRELATION_ID] = correlation
    out.properties[PropertyKey.REPLY_TO_CLIENT] = client_id
    out.properties[PropertyKey.TTL] = str(int(timeout * 1000))
    return correlation


def reply_outgoing(request: MessageExt, body: bytes, properties: Mapping[str, str] | None = None) -> Outgoing:
    """The reply to ``request`` (a message a consumer received from ``Producer.request``); ValueError when
    ``request`` is no request (no ``CORRELATION_ID`` / ``REPLY_TO_CLIENT`` / ``CLUSTER``)."""
    props = request.properties
    cluster = props.get(PropertyKey.CLUSTER)
    correlation = props.get(PropertyKey.CORRELATION_ID)
    requester = props.get(PropertyKey.REPLY_TO_CLIENT)
    if not cluster or not correlation or not requester:
        raise ValueError(f"message {request.msg_id} is not a request (no CORRELATION_ID, REPLY_TO_CLIENT or CLUSTER)")
    out_props = dict(properties or {})
    out_props.update({
        PropertyKey.CORRELATION_ID: correlation,
        PropertyKey.REPLY_TO_CLIENT: requester,
        PropertyKey.MSG_TYPE: REPLY,
        PropertyKey.UNIQ_KEY: new_uniq_id(),
    })  # fmt: skip
    if PropertyKey.TTL in props:
        out_props[PropertyKey.TTL] = props[PropertyKey.TTL]
    properties_to_string(out_props)  # ValueError for separators in user properties
    return Outgoing(reply_topic(cluster), bytes(body), out_props, uniq_ids=[out_props[PropertyKey.UNIQ_KEY]])


def is_reply(out: Outgoing) -> bool:
    """True for a reply message (sent with SEND_REPLY_MESSAGE_V2)."""
    return out.properties.get(PropertyKey.MSG_TYPE) == REPLY


def send_code(out: Outgoing) -> int:
    """The request code that sends ``out``: SEND_REPLY_MESSAGE_V2 for a reply, SEND_BATCH_MESSAGE for a batch, else
    SEND_MESSAGE_V2."""
    if is_reply(out):
        return RequestCode.SEND_REPLY_MESSAGE_V2
    return RequestCode.SEND_BATCH_MESSAGE if out.batch else RequestCode.SEND_MESSAGE_V2


def pushed_reply(fields: Mapping[str, str], body: bytes) -> MessageExt:
    """The reply message of a PUSH_REPLY_MESSAGE_TO_CLIENT (RemotingError for a broken one)."""
    topic = get_str(fields, "topic")
    if not topic:
        raise RemotingError(ResponseCode.SYSTEM_ERROR, "pushed reply without topic")
    sys_flag = get_int(fields, "sysFlag") or 0
    if is_compressed(sys_flag):
        try:
            body = decompress(body, sys_flag)
        except CompressionError as e:
            raise RemotingError(ResponseCode.SYSTEM_ERROR, f"pushed reply cannot be inflated: {e}") from None
    host, _, port = (get_str(fields, "bornHost") or ":0").rpartition(":")
    return MessageExt(
        topic=topic,
        body=body,
        flag=get_int(fields, "flag") or 0,
        properties=string_to_properties(get_str(fields, "properties") or ""),
        queue_id=get_int(fields, "queueId") or 0,
        sys_flag=sys_flag,
        born_timestamp=get_int(fields, "bornTimestamp") or 0,
        born_host=(host, int(port) if port.isdecimal() else 0),
        store_timestamp=get_int(fields, "storeTimestamp") or 0,
    )


class ReplyWaiters:
    """Requests waiting for their replies, by correlation id."""

    def __init__(self) -> None:
        self._waiting: dict[str, asyncio.Future[MessageExt]] = {}

    def expect(self, correlation: str) -> asyncio.Future[MessageExt]:
        """A future the reply with ``correlation`` resolves."""
        fut: asyncio.Future[MessageExt] = asyncio.get_running_loop().create_future()
        self._waiting[correlation] = fut
        return fut

    def forget(self, correlation: str) -> None:
        """The request ended (answered, timed out or failed)."""
        self._waiting.pop(correlation, None)

    def deliver(self, reply: MessageExt) -> bool:
        """Hand a pushed reply to its request; False when nobody waits for it (late, or not ours)."""
        fut = self._waiting.pop(reply.properties.get(PropertyKey.CORRELATION_ID, ""), None)
        if fut is None or fut.done():
            return False
        fut.set_result(reply)
        return True
