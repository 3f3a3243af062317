"""``sievemq message verify ID --group G [--client C]``: have a consumer's listener run on one stored message and
say what it did (CONSUME_MESSAGE_DIRECTLY 309; docs/admin.md §8). Offsets do not move; the message is not
delivered to the group again. A 5.x client is asked through its proxy (a Telemetry VerifyMessageCommand).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from sievemq.admin.api import AdminClient, BrokerInfo
from sievemq.admin.errors import GroupNotFound
from sievemq.admin.message_view import MessageView
from sievemq.admin.messages import show
from sievemq.admin.progress import consumer_connection, known_groups
from sievemq.errors import RemotingError, SieveError
from sievemq.protocol.consume_directly import CMResult, ConsumeDirectlyResult, DirectlyHeader
from sievemq.protocol.names import is_retry_topic
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand

__all__ = ["Verified", "verify"]


@dataclass(frozen=True, slots=True)
class Verified:
    """What the client said (``result``), or why it said nothing (``error``: a RemotingError's code and reason)."""

    msg_id: str
    offset_msg_id: str
    topic: str
    broker: str
    group: str
    client_id: str
    result: ConsumeDirectlyResult | None = None
    error: RemotingError | None = None

    @property
    def ok(self) -> bool:
        """True when the listener consumed it (CR_SUCCESS)."""
        return self.result is not None and self.result.consume_result is CMResult.CR_SUCCESS

    def to_json(self) -> dict[str, Any]:
        """The stable JSON form (docs/admin.md §8)."""
        doc: dict[str, Any] = {"msgId": self.msg_id, "offsetMsgId": self.offset_msg_id, "topic": self.topic,
                               "broker": self.broker, "group": self.group, "clientId": self.client_id,
                               "ok": self.ok}  # fmt: skip
        if self.result is not None:
            doc["result"] = self.result.to_json()
        if self.error is not None:
            doc["error"] = {"code": self.error.code, "reason": self.error.reason, "message": self.error.remark}
        return doc


def _original(found: list[MessageView], topic: str | None) -> MessageView:
    """The record of the message itself (not a retry or dead-letter copy), unless ``topic`` says otherwise."""
    for v in found:
        if v.msg.topic == topic or (topic is None and not is_retry_topic(v.msg.topic)
                                    and not v.msg.topic.startswith("%DLQ%")):  # fmt: skip
            return v
    return found[0]


def _addr(brokers: list[BrokerInfo], name: str) -> str:
    for b in brokers:
        if b.name == name and b.read_addr:
            return b.read_addr
    raise SieveError(f"broker {name} is not registered with the name servers now")


async def _client_of(admin: AdminClient, addr: str, group: str, client_id: str | None) -> str:
    """``client_id``, else the group's first consumer online at ``addr`` (GroupNotFound, or why none is online)."""
    if client_id is not None:
        return client_id  # the broker says so when it is not online
    cc = await consumer_connection(admin, addr, group)
    online = sorted(c.client_id for c in cc.connections) if cc is not None else []
    if online:
        return online[0]
    if group not in await known_groups(admin):
        raise GroupNotFound(group)
    raise SieveError(f"consumer group {group} has no consumer online at the message's broker: start one, then verify")


async def verify(
    admin: AdminClient, msg_id: str, group: str, client_id: str | None = None, topic: str | None = None,
    timeout_ms: int = 10_000,
) -> Verified:
    """Find ``msg_id`` (a message id or an offsetMsgId), pick ``client_id`` (default: the group's first consumer
    online at that broker) and have it consume the message directly; what it said."""
    found = (await show(admin, msg_id, topic)).messages
    view = _original(found, topic)
    brokers = await admin.brokers()
    addr = _addr(brokers, view.broker)
    client = await _client_of(admin, addr, group, client_id)
    header = DirectlyHeader(group, client, view.msg.offset_msg_id, timeout_ms)
    ask = RemotingCommand.request(RequestCode.CONSUME_MESSAGE_DIRECTLY, header.to_fields())
    resp = await admin.pool.request(addr, ask, timeout_ms / 1000 + 2.0)
    base = Verified(view.msg.uniq_key or view.msg.offset_msg_id, view.msg.offset_msg_id, view.msg.topic, view.broker,
                    group, client)  # fmt: skip
    if resp.code != ResponseCode.SUCCESS:
        return replace(base, error=RemotingError.from_response(resp.code, resp.remark, resp.ext_fields))
    try:
        return replace(base, result=ConsumeDirectlyResult.decode(resp.body))
    except ValueError as e:
        return replace(base, error=RemotingError(ResponseCode.SYSTEM_ERROR, f"the client's answer: {e}"))
