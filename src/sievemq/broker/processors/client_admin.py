"""What RocketMQ's tools ask a broker about its clients (docs/admin.md §10): GET_PRODUCER_CONNECTION_LIST (204),
GET_ALL_PRODUCER_INFO (328), and GET_CONSUMER_RUNNING_INFO (307), which the broker passes to the consumer itself
(``mqadmin consumerStatus``) and whose answer it returns as it is."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import orjson

from sievemq.broker.clients import ClientChannel, ConsumerManager, ProducerManager
from sievemq.errors import RemotingError, RequestTimeoutError
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.server import ProcessorTable

__all__ = ["CLIENT_ANSWER_TIMEOUT_S", "MAX_ASKING", "ClientAdminProcessor"]

log = logging.getLogger(__name__)

CLIENT_ANSWER_TIMEOUT_S = 10.0
"""How long a client's answer to GET_CONSUMER_RUNNING_INFO is awaited (RocketMQ's Broker2Client waits 10 s)."""
MAX_ASKING = 16
"""GET_CONSUMER_RUNNING_INFO requests waiting for clients at once; more are refused with SYSTEM_BUSY."""


def _addr(ch: ClientChannel) -> str:
    host, port = ch.conn.peer[0], ch.conn.peer[1]
    return f"{host}:{port}"


def _wall_ms(monotonic_s: float) -> int:
    """A ``time.monotonic()`` instant as epoch milliseconds."""
    return int((time.time() - (time.monotonic() - monotonic_s)) * 1000)


@dataclass
class ClientAdminProcessor:
    """Producers' connections, and consumers' own running information."""

    consumers: ConsumerManager
    producers: ProducerManager
    asking: int = 0

    def register(self, table: ProcessorTable) -> None:
        """Put 204, 328 and 307 into ``table``."""
        table.register(RequestCode.GET_PRODUCER_CONNECTION_LIST, self.producer_connections)
        table.register(RequestCode.GET_ALL_PRODUCER_INFO, self.all_producers)
        table.register(RequestCode.GET_CONSUMER_RUNNING_INFO, self.consumer_running_info)

    async def producer_connections(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """204, header ``producerGroup``: ProducerConnection (``{"connectionSet": [{"clientId", "clientAddr",
        "language", "version"}]}``), or SYSTEM_ERROR when no client of the group is connected (as RocketMQ)."""
        group = cmd.ext_fields.get("producerGroup") or ""
        chans = self.producers.groups.get(group)
        if not chans:
            raise RemotingError(ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
        rows = [{"clientAddr": _addr(ch), "clientId": cid, "language": ch.language, "version": ch.version}
                for cid, ch in sorted(chans.items())]  # fmt: skip
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps({"connectionSet": rows}))

    async def all_producers(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """328: ProducerTableInfo, ``{"data": {group: [{"clientId", "remoteIP", "language", "version",
        "lastUpdateTimestamp"}]}}`` (``remoteIP`` as Java prints a socket address: ``/host:port``)."""
        data = {
            group: [{"clientId": cid, "language": ch.language, "lastUpdateTimestamp": _wall_ms(ch.last_update),
                     "remoteIP": f"/{_addr(ch)}", "version": ch.version} for cid, ch in sorted(chans.items())]
            for group, chans in sorted(self.producers.groups.items())
        }  # fmt: skip
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps({"data": data}))

    async def consumer_running_info(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """307, header ``consumerGroup``, ``clientId``, ``jstackEnable``: passed to that client as it came; its
        answer (ConsumerRunningInfo) is returned as it is. SYSTEM_ERROR when the client is not connected here in
        that group or cannot be asked; CONSUME_MSG_TIMEOUT when it does not answer in time (RocketMQ's codes)."""
        f = cmd.ext_fields
        group, client_id = f.get("consumerGroup") or "", f.get("clientId") or ""
        info = self.consumers.get(group)
        channel = info.channels.get(client_id) if info is not None else None
        if channel is None:
            raise RemotingError(ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
        if self.asking >= MAX_ASKING:
            raise RemotingError(ResponseCode.SYSTEM_BUSY, f"{MAX_ASKING} clients are being asked already; try again "
                                "when they answer")  # fmt: skip
        ask = RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, dict(f), body=cmd.body)
        self.asking += 1
        try:
            answer = await channel.conn.request(ask, CLIENT_ANSWER_TIMEOUT_S)
        except RequestTimeoutError:
            raise RemotingError(ResponseCode.CONSUME_MSG_TIMEOUT, f"consumer <{group}> <{client_id}> Timeout: no "
                                f"answer within {CLIENT_ANSWER_TIMEOUT_S:.0f} s") from None  # fmt: skip
        except Exception as e:
            raise RemotingError(ResponseCode.SYSTEM_ERROR, f"invoke consumer <{group}> <{client_id}> Exception: "
                                f"{e}") from None  # fmt: skip
        finally:
            self.asking -= 1
        return cmd.response(answer.code, answer.remark, dict(answer.ext_fields), answer.body)
