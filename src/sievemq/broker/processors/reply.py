"""Request-reply (RocketMQ 4.6+): SEND_REPLY_MESSAGE (324) / SEND_REPLY_MESSAGE_V2 (325) from a replier, pushed to
the requester with PUSH_REPLY_MESSAGE_TO_CLIENT (326) (docs/request-reply.md).

The reply goes to ``<cluster>_REPLY_TOPIC`` and names its requester in ``REPLY_TO_CLIENT``. The broker stores it (so
it can be looked up like any message) and pushes it on the requester's connection, found among its producers'
heartbeats. The replier's answer says whether the push reached the requester (``pushed``: ``true``/``false``;
RocketMQ's broker answers the same whether it did or not). Its properties are the replier's with ``MSG_REGION`` and
``TRACE_ON`` laid over, and the pushed copy has ``PUSH_REPLY_TIME`` too, as RocketMQ 5's broker sends them.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from sievemq.broker.clients import ProducerManager
from sievemq.broker.processors.send import REGION, born_host, stored_code
from sievemq.broker.stats import BrokerStats
from sievemq.broker.write_gate import OPEN, WriteGate
from sievemq.errors import RemotingError
from sievemq.protocol.message import MessageExt, PropertyKey, properties_to_string, string_to_properties
from sievemq.protocol.names import REPLY_TOPIC_SUFFIX
from sievemq.protocol.send_header import SendMessageHeader
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.server import ProcessorTable
from sievemq.store import MessageStore

__all__ = ["ReplyProcessor"]

log = logging.getLogger(__name__)

PUSH_TIMEOUT = 3.0
PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
"""When the broker pushed the reply, ms (RocketMQ's ``MessageConst.PROPERTY_PUSH_REPLY_TIME``)."""


@dataclass
class ReplyProcessor:
    """Stores replies and pushes them to their requesters."""

    store: MessageStore
    producers: ProducerManager
    stats: BrokerStats
    cluster_name: str
    store_host: tuple[str, int]
    max_message_size: int
    gate: WriteGate = OPEN

    def register(self, table: ProcessorTable) -> None:
        """Put 324 and 325 into ``table``."""
        table.register(RequestCode.SEND_REPLY_MESSAGE, self.reply)
        table.register(RequestCode.SEND_REPLY_MESSAGE_V2, self.reply)

    async def reply(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """324 / 325: store the reply, push it to ``REPLY_TO_CLIENT``."""
        h = SendMessageHeader.parse(cmd.ext_fields, v2=cmd.code == RequestCode.SEND_REPLY_MESSAGE_V2)
        refusal = self.gate.write_refusal()
        if refusal is not None:
            raise refusal
        if not h.topic.endswith(REPLY_TOPIC_SUFFIX):
            why = f"a reply goes to <cluster>{REPLY_TOPIC_SUFFIX}, not {h.topic}"
            raise RemotingError(ResponseCode.MESSAGE_ILLEGAL, why)
        if len(cmd.body) > self.max_message_size:
            raise RemotingError(ResponseCode.MESSAGE_ILLEGAL, f"reply body of {len(cmd.body)} bytes is too large")
        props = string_to_properties(h.properties) if h.properties else {}
        requester = props.get(PropertyKey.REPLY_TO_CLIENT, "")
        if not requester or not props.get(PropertyKey.CORRELATION_ID):
            raise RemotingError(ResponseCode.MESSAGE_ILLEGAL, "a reply needs REPLY_TO_CLIENT and CORRELATION_ID")
        props[PropertyKey.MSG_REGION] = REGION
        props[PropertyKey.TRACE_ON] = "true"
        msg = MessageExt(topic=h.topic, body=cmd.body, flag=h.flag, properties=props, queue_id=max(0, h.queue_id),
                         sys_flag=h.sys_flag, born_timestamp=h.born_timestamp, born_host=born_host(conn),
                         store_host=self.store_host)  # fmt: skip
        result = await self.store.put_message(msg)
        code = stored_code(result, "reply")
        self.stats.put(msg.topic, 1, msg.store_size)
        pushed = await self._push(requester, h, msg)
        fields = {"msgId": ",".join(result.message_ids), "queueId": msg.queue_id, "queueOffset": msg.queue_offset}
        fields["pushed"] = pushed
        remark = None if pushed else f"stored, but requester {requester} is not connected to this broker"
        return cmd.response(code, remark, fields)

    async def _push(self, requester: str, h: SendMessageHeader, msg: MessageExt) -> bool:
        channel = self.producers.find_channel(requester)
        if channel is None:
            log.info("reply %s: requester %s not connected", msg.properties.get(PropertyKey.CORRELATION_ID), requester)
            return False
        fields = {
            **h.to_fields(v2=False),
            "queueId": msg.queue_id,
            "bornHost": f"{msg.born_host[0]}:{msg.born_host[1]}",
            "storeHost": f"{self.store_host[0]}:{self.store_host[1]}",
            "storeTimestamp": msg.store_timestamp,
        }
        props = {**msg.properties, PUSH_REPLY_TIME: str(int(time.time() * 1000))}
        fields["properties"] = properties_to_string(props)
        push = RemotingCommand.request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, fields, body=msg.body)
        try:
            resp = await channel.conn.request(push, PUSH_TIMEOUT)
        except Exception as e:
            log.info("pushing a reply to %s failed: %s", requester, e)
            return False
        return resp.code == ResponseCode.SUCCESS
