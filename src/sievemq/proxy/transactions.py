"""Transactional messages of 5.x producers through the proxy (docs/proxy.md §6), on the brokers' transactions
(docs/transactions.md).

- A TRANSACTION message is sent as a 4.x half message under the proxy's producer group ``PROXY_TX_GROUP``; the
  send receipt's ``transaction_id`` is ``1 <broker host:port> <half queue offset> <half commit-log offset>``,
  everything EndTransaction needs, so the proxy keeps no state per transaction and a restarted proxy (or another
  one) ends it just as well.
- EndTransaction becomes END_TRANSACTION at that broker (which must be a master the proxy knows: the id is hostile
  input, it never makes the proxy connect elsewhere).
- A broker's check-back (CHECK_TRANSACTION_STATE to the proxy's group) is passed to a 5.x producer that publishes
  the message's topic, on its Telemetry stream, as a RecoverOrphanedTransactionCommand; its answer comes back as
  an EndTransaction with source SERVER_CHECK. No such producer connected: nothing is answered, and the broker
  checks again later (up to ``transactionCheckMax`` times).
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from typing import Any

from sievemq.client import api
from sievemq.client.message import SendStatus
from sievemq.client.outgoing import Outgoing
from sievemq.client.pop_api import PoppedMessage
from sievemq.client.transaction_producer import TransactionProducer, TransactionState
from sievemq.errors import RemotingError, SieveError
from sievemq.protocol.message import MessageExt, PropertyKey
from sievemq.protocol.msgid import parse_offset_msg_id
from sievemq.protocol.sysflag import TRANSACTION_PREPARED_TYPE
from sievemq.proxy.convert import message_of
from sievemq.proxy.v2 import definition_pb2 as pb
from sievemq.proxy.v2 import service_pb2 as svc

__all__ = ["PROXY_TX_GROUP", "ProxyTransactions", "TransactionId"]

log = logging.getLogger(__name__)

PROXY_TX_GROUP = "SIEVEMQ_PROXY_TX_PRODUCER"


@dataclass(frozen=True, slots=True)
class TransactionId:
    """Where a half message is: what a 5.x transaction id carries."""

    broker: str
    half_offset: int
    half_phy: int

    def encode(self) -> str:
        """The id's text."""
        return f"1 {self.broker} {self.half_offset} {self.half_phy}"

    @classmethod
    def parse(cls, text: str) -> TransactionId:
        """Read an id (ValueError unless it is exactly what ``encode`` makes)."""
        parts = text.split(" ") if len(text) <= 200 else []
        if len(parts) != 4 or parts[0] != "1":
            raise ValueError("not a transaction id of this proxy")
        host, sep, port = parts[1].rpartition(":")
        numbers = (port, parts[2], parts[3])
        if not sep or not host or not all(n.isascii() and n.isdigit() and len(n) <= 19 for n in numbers):
            raise ValueError("not a transaction id of this proxy")
        return cls(parts[1], int(parts[2]), int(parts[3]))


@dataclass
class _Stream:
    topics: frozenset[str]
    queue: asyncio.Queue[svc.TelemetryCommand | None]


class ProxyTransactions:
    """See the module docstring."""

    def __init__(self, producer: TransactionProducer | None, timeout: float) -> None:
        self.producer = producer
        self.timeout = timeout
        self.streams: dict[str, _Stream] = {}
        self.checks_passed = 0

    @staticmethod
    def make_producer(
        namesrv: list[str],
        timeout: float,
        access_key: str = "",
        secret_key: str = "",
        tls: dict[str, Any] | None = None,
    ) -> TransactionProducer:
        """The proxy's 4.x transaction producer (its check listener is bound by ``ProxyTransactions``), signing
        with the proxy's account when given, over TLS with ``tls`` (``ProxyConfig.client_tls``)."""

        async def unset(msg: MessageExt) -> TransactionState:
            return TransactionState.UNKNOWN

        return TransactionProducer(namesrv, PROXY_TX_GROUP, check_listener=unset, send_timeout=timeout,
                                   request_timeout=timeout, access_key=access_key, secret_key=secret_key,
                                   **(tls or {}))  # fmt: skip

    def bind(self) -> None:
        """Route the broker's check-backs to the 5.x producers."""
        if self.producer is not None:
            self.producer.check_listener = self._check

    # ------------------------------------------------------------------------------------------ streams
    def attach(self, client_id: str, topics: list[str], queue: asyncio.Queue[svc.TelemetryCommand | None]) -> None:
        """A 5.x producer's Telemetry stream (its settings name the topics it publishes)."""
        self.streams[client_id] = _Stream(frozenset(topics), queue)

    def detach(self, client_id: str) -> None:
        """Its stream ended."""
        self.streams.pop(client_id, None)

    async def _check(self, msg: MessageExt) -> TransactionState:
        streams = [s for s in self.streams.values() if msg.topic in s.topics and not s.queue.full()]
        if not streams:
            log.info("check of transaction %s (topic %s): no 5.x producer of the topic is connected; the broker "
                     "asks again later", msg.uniq_key, msg.topic)  # fmt: skip
            return TransactionState.UNKNOWN
        tid = TransactionId(f"{msg.store_host[0]}:{msg.store_host[1]}", msg.queue_offset, msg.commit_log_offset)
        message = message_of(PoppedMessage(msg, "", 1), 1000)
        message.system_properties.ClearField("receipt_handle")
        cmd = svc.TelemetryCommand(recover_orphaned_transaction_command=svc.RecoverOrphanedTransactionCommand(
            message=message, transaction_id=tid.encode()))  # fmt: skip
        random.choice(streams).queue.put_nowait(cmd)
        self.checks_passed += 1
        return TransactionState.UNKNOWN  # the producer answers with EndTransaction (source SERVER_CHECK)

    # ------------------------------------------------------------------------------------------ send, end
    async def send_half(self, out: Outgoing) -> svc.SendResultEntry:
        """Send ``out`` as a half message; the entry carries the transaction id."""
        if self.producer is None:
            return svc.SendResultEntry(status=pb.Status(code=pb.UNSUPPORTED, message="no transactions here"))
        out.properties[PropertyKey.TRAN_MSG] = "true"
        out.properties[PropertyKey.PGROUP] = PROXY_TX_GROUP
        out.sys_flag |= TRANSACTION_PREPARED_TYPE
        r = await self.producer.send_outgoing(out, timeout=self.timeout)
        if r.status != SendStatus.SEND_OK:
            return svc.SendResultEntry(status=pb.Status(code=pb.INTERNAL_SERVER_ERROR, message=r.status.name))
        addr = await self.producer.master_addr(r.message_queue)
        _, _, phy = parse_offset_msg_id(r.offset_msg_id)
        tid = TransactionId(addr, r.queue_offset, phy)
        return svc.SendResultEntry(status=pb.Status(code=pb.OK, message="OK"), message_id=r.msg_id,
                                   transaction_id=tid.encode(), offset=r.queue_offset)  # fmt: skip

    async def end(self, request: svc.EndTransactionRequest) -> pb.Status:
        """EndTransaction: commit or roll back at the broker the id names."""
        try:
            tid = TransactionId.parse(request.transaction_id)
        except ValueError as e:
            return pb.Status(code=pb.INVALID_TRANSACTION_ID, message=str(e))
        if self.producer is None:
            return pb.Status(code=pb.UNSUPPORTED, message="no transactions here")
        inst = self.producer.instance
        if tid.broker not in inst.all_broker_addrs(include_slaves=False):
            return pb.Status(code=pb.INVALID_TRANSACTION_ID, message=f"{tid.broker} is not a broker of this cluster")
        if request.resolution == pb.COMMIT:
            state = TransactionState.COMMIT
        elif request.resolution == pb.ROLLBACK:
            state = TransactionState.ROLLBACK
        else:
            return pb.Status(code=pb.BAD_REQUEST, message="resolution must be COMMIT or ROLLBACK")
        try:
            conn = await inst.conn(tid.broker)
            await api.end_transaction(conn, PROXY_TX_GROUP, tid.half_offset, tid.half_phy, int(state),
                                      request.message_id, from_check=request.source == pb.SOURCE_SERVER_CHECK,
                                      timeout=self.timeout)  # fmt: skip
        except RemotingError as e:
            return pb.Status(
                code=pb.INVALID_TRANSACTION_ID if e.code == 1 else pb.INTERNAL_SERVER_ERROR, message=str(e)
            )
        except (SieveError, OSError) as e:
            return pb.Status(code=pb.INTERNAL_SERVER_ERROR, message=str(e))
        return pb.Status(code=pb.OK, message="OK")
