"""CONSUME_MESSAGE_DIRECTLY (309): pass a stored message to one consumer of a group, which runs its listener on it
and says what it did (docs/admin.md §8; RocketMQ's ``mqadmin consumeMessage`` and its dashboard's "resend to
consumer"). Nothing about the group's offsets changes; the client's answer is returned as it is.

The message is found by its offsetMsgId's commit-log offset and accepted only when the consume queue of its topic
and queue points at that very offset (a record forged inside another message's body is never passed on). The
client must be connected here in that group. At most ``MAX_IN_FLIGHT`` such requests wait for clients at once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sievemq.broker.clients import ConsumerManager
from sievemq.broker.records import queued_record
from sievemq.errors import RemotingError, RequestTimeoutError
from sievemq.protocol.consume_directly import DirectlyHeader
from sievemq.protocol.message import MessageExt
from sievemq.protocol.msgid import parse_offset_msg_id
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.server import ProcessorTable
from sievemq.store import MessageStore

__all__ = ["MAX_IN_FLIGHT", "ConsumeDirectlyProcessor"]

log = logging.getLogger(__name__)

MAX_IN_FLIGHT = 16
"""Requests waiting for a client's answer at once; more are refused with SYSTEM_BUSY."""


@dataclass
class ConsumeDirectlyProcessor:
    """Finds the record and the client, and relays."""

    store: MessageStore
    consumers: ConsumerManager
    broker_name: str
    in_flight: int = 0

    def register(self, table: ProcessorTable) -> None:
        """Put 309 into ``table``."""
        table.register(RequestCode.CONSUME_MESSAGE_DIRECTLY, self.consume_directly)

    def _record(self, msg_id: str) -> tuple[bytes, MessageExt]:
        """The stored record an offsetMsgId names, checked against its consume queue."""
        try:
            _host, _port, phy = parse_offset_msg_id(msg_id)
        except ValueError:
            raise RemotingError(ResponseCode.SYSTEM_ERROR, f"{msg_id!r} is not an offsetMsgId (`sievemq message "
                                "show` gives a message's)", Reason.INVALID_HEADER) from None  # fmt: skip
        found = queued_record(self.store, phy)
        if found is None:
            raise RemotingError(ResponseCode.SYSTEM_ERROR, f"no message at commit-log offset {phy} of this broker "
                                f"({msg_id})")  # fmt: skip
        return found

    async def consume_directly(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """309: header ``consumerGroup``, ``clientId``, ``msgId`` (an offsetMsgId of this broker), ``timeoutMillis``
        (sievemq's; 10 s when absent); the client's answer, or why there is none."""
        try:
            h = DirectlyHeader.parse(cmd.ext_fields)
        except ValueError as e:
            raise RemotingError(ResponseCode.SYSTEM_ERROR, str(e), Reason.INVALID_HEADER) from None
        raw, msg = self._record(h.msg_id)
        info = self.consumers.get(h.group)
        channel = info.channels.get(h.client_id) if info is not None else None
        if channel is None:
            online = sorted(info.channels) if info is not None else []
            raise RemotingError(ResponseCode.SYSTEM_ERROR, f"consumer {h.client_id} of group {h.group} is not "
                                f"connected to this broker (online: {', '.join(online) or 'none'})",
                                Reason.CONSUMER_NOT_ONLINE)  # fmt: skip
        if self.in_flight >= MAX_IN_FLIGHT:
            raise RemotingError(ResponseCode.SYSTEM_BUSY, f"{MAX_IN_FLIGHT} messages are being consumed directly "
                                "already; try again when they are answered")  # fmt: skip
        fields = {**h.to_fields(), "brokerName": self.broker_name}
        ask = RemotingCommand.request(RequestCode.CONSUME_MESSAGE_DIRECTLY, fields, body=raw)
        self.in_flight += 1
        try:
            answer = await channel.conn.request(ask, h.timeout_ms / 1000)
        except RequestTimeoutError:
            raise RemotingError(ResponseCode.SYSTEM_ERROR, f"consumer {h.client_id} did not answer within "
                                f"{h.timeout_ms} ms", Reason.CLIENT_NO_ANSWER) from None  # fmt: skip
        except Exception as e:
            raise RemotingError(ResponseCode.SYSTEM_ERROR, f"consumer {h.client_id} could not be asked: {e}",
                                Reason.CLIENT_NO_ANSWER) from None  # fmt: skip
        finally:
            self.in_flight -= 1
        log.info("message %s of %s consumed directly by %s (group %s): [%d] %s", h.msg_id, msg.topic, h.client_id,
                 h.group, answer.code, answer.remark or "")  # fmt: skip
        return cmd.response(answer.code, answer.remark, dict(answer.ext_fields), answer.body)
