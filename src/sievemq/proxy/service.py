"""The apache.rocketmq.v2 MessagingService on top of sievemq's 4.x client (docs/proxy.md §3, §5).

QueryRoute (every queue at the proxy's endpoint), Heartbeat, NotifyClientTermination, the Telemetry settings
handshake (the server's settings answer the client's: backoff policy, body size limit; a consumer's settings
register it with its brokers, ``clients.py``), SendMessage of normal and FIFO messages (the message group is the
sharding key), and the consumer side in ``consume.py`` (ReceiveMessage, AckMessage, ChangeInvisibleDuration,
ForwardMessageToDeadLetterQueue, QueryAssignment), transactions in ``transactions.py``, message verification
(Telemetry VerifyMessageCommand for a broker's CONSUME_MESSAGE_DIRECTLY) in ``verify.py``. The other methods
answer gRPC UNIMPLEMENTED.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from google.protobuf.duration_pb2 import Duration

from sievemq.client.errors import NoRouteError
from sievemq.client.message import SendStatus
from sievemq.client.producer import Producer, shard_selector
from sievemq.errors import RemotingError, RequestTimeoutError, SieveError
from sievemq.protocol.reasons import Reason
from sievemq.protocol.route import TopicRouteData
from sievemq.proxy.clients import ClientRegistry
from sievemq.proxy.config import ProxyConfig
from sievemq.proxy.consume import ConsumeService, client_id_of
from sievemq.proxy.convert import ProxyError, outgoing_of, reasoned, route_queues
from sievemq.proxy.groups import GroupView
from sievemq.proxy.transactions import ProxyTransactions
from sievemq.proxy.v2 import definition_pb2 as pb
from sievemq.proxy.v2 import service_pb2 as svc
from sievemq.proxy.v2 import service_pb2_grpc as rpc
from sievemq.proxy.verify import VerifyRelay
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.connection import Connection

__all__ = ["MessagingService"]

log = logging.getLogger(__name__)

ROUTE_TTL_S = 5.0
MAX_CACHED_ROUTES = 4096
TELEMETRY_BACKLOG = 64
"""Commands one Telemetry stream holds for a client that does not read them: then its own commands wait and
transaction checks go to another producer (or are asked again later)."""

_SEND_STATUS = {
    SendStatus.SEND_OK: pb.OK,
    SendStatus.FLUSH_DISK_TIMEOUT: pb.MASTER_PERSISTENCE_TIMEOUT,
    SendStatus.FLUSH_SLAVE_TIMEOUT: pb.SLAVE_PERSISTENCE_TIMEOUT,
    SendStatus.SLAVE_NOT_AVAILABLE: pb.HA_NOT_AVAILABLE,
}
_REASONS: dict[str, int] = {
    Reason.TIMER_INVALID: pb.ILLEGAL_DELIVERY_TIME,
    Reason.TIMER_TOO_FAR: pb.ILLEGAL_DELIVERY_TIME,
    Reason.TOO_MANY_TIMERS: pb.TOO_MANY_REQUESTS,
    Reason.INVALID_NAME: pb.ILLEGAL_TOPIC,
    Reason.DISK_FULL: pb.INTERNAL_SERVER_ERROR,
}
CONSUMER_BACKOFF_S = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
"""The invisible times a 5.x PushConsumer sets after failed attempts 1, 2, ... (RocketMQ's retry delays)."""

_REMOTING: dict[int, int] = {
    ResponseCode.TOPIC_NOT_EXIST: pb.TOPIC_NOT_FOUND,
    ResponseCode.MESSAGE_ILLEGAL: pb.BAD_REQUEST,
    ResponseCode.NO_PERMISSION: pb.FORBIDDEN,
    ResponseCode.SYSTEM_BUSY: pb.TOO_MANY_REQUESTS,
    ResponseCode.SERVICE_NOT_AVAILABLE: pb.INTERNAL_SERVER_ERROR,
}


def _status(code: int, message: str = "OK") -> pb.Status:
    return pb.Status(code=code, message=message)  # type: ignore[arg-type]


class MessagingService(rpc.MessagingServiceServicer):  # type: ignore[misc]
    """One proxy's service; ``producer`` is the 4.x producer that carries sends to the brokers."""

    def __init__(
        self,
        config: ProxyConfig,
        producer: Producer,
        endpoint: tuple[str, int] | None = None,
        transactions: ProxyTransactions | None = None,
    ) -> None:
        """``transactions``: the transactional side (None: transactional messages are refused as UNSUPPORTED)."""
        self.config = config
        self.producer = producer
        self.transactions = transactions or ProxyTransactions(None, config.request_timeout_seconds)
        self.endpoint = endpoint or (config.advertised_ip, config.listen_port)
        self._routes: dict[str, tuple[float, TopicRouteData | None]] = {}
        timeout = config.request_timeout_seconds
        self.clients = ClientRegistry(self.route, self.broker_conn, timeout)
        self.consume = ConsumeService(config, self.clients, self.route, self.broker_conn, self.endpoint)
        self.verify = VerifyRelay()
        """Brokers' CONSUME_MESSAGE_DIRECTLY for 5.x clients, over their Telemetry streams (``verify.py``)."""

    async def route(self, topic: str) -> TopicRouteData | None:
        """The topic's route from the name servers, cached for ``ROUTE_TTL_S``."""
        now = time.monotonic()
        cached = self._routes.get(topic)
        if cached is not None and now - cached[0] < ROUTE_TTL_S:
            return cached[1]
        route = await self.producer.instance.fetch_route(topic)
        if len(self._routes) >= MAX_CACHED_ROUTES:
            self._routes.clear()
        self._routes[topic] = (now, route)
        return route

    async def broker_conn(self, addr: str) -> Connection:
        """The pooled connection to a broker."""
        return await self.producer.instance.pool.get(addr)

    # ------------------------------------------------------------------------------------------ routes
    async def QueryRoute(self, request: svc.QueryRouteRequest, context: Any) -> svc.QueryRouteResponse:
        """The topic's queues, every one at this proxy's endpoint."""
        try:
            route = await self.route(request.topic.name)
        except (SieveError, OSError) as e:
            return svc.QueryRouteResponse(status=_status(pb.INTERNAL_SERVER_ERROR, f"name server: {e}"))
        if route is None or not route.queue_datas:
            return svc.QueryRouteResponse(status=_status(pb.TOPIC_NOT_FOUND, f"topic {request.topic.name} not found"))
        return svc.QueryRouteResponse(status=_status(pb.OK), message_queues=route_queues(request.topic, route,
                                                                                          self.endpoint))  # fmt: skip

    async def Heartbeat(self, request: svc.HeartbeatRequest, context: Any) -> svc.HeartbeatResponse:
        """A consumer's heartbeat refreshes its registration at its brokers."""
        await self.clients.seen(client_id_of(context))
        for gone in self.clients.expire():
            self.consume.renewals.forget_client(gone)
        return svc.HeartbeatResponse(status=_status(pb.OK))

    async def NotifyClientTermination(
        self, request: svc.NotifyClientTerminationRequest, context: Any
    ) -> svc.NotifyClientTerminationResponse:
        """A client says goodbye: a consumer is unregistered at its brokers."""
        await self.clients.forget(client_id_of(context))
        self.consume.renewals.forget_client(client_id_of(context))
        return svc.NotifyClientTerminationResponse(status=_status(pb.OK))

    # ------------------------------------------------------------------------------------------ telemetry
    def _settings(self, theirs: pb.Settings, group: GroupView | None = None) -> pb.Settings:
        """The server's answer to a client's settings (``group``: a consumer's group, as its brokers hold it)."""
        ours = pb.Settings()
        ours.CopyFrom(theirs)
        ours.backoff_policy.CopyFrom(pb.RetryPolicy(
            max_attempts=3,
            exponential_backoff=pb.ExponentialBackoff(initial=Duration(seconds=1), max=Duration(seconds=10),
                                                      multiplier=2.0),
        ))  # fmt: skip
        ours.request_timeout.CopyFrom(Duration(seconds=int(self.config.request_timeout_seconds)))
        if theirs.WhichOneof("pub_sub") == "publishing":
            ours.publishing.max_body_size = self.config.max_body_size
            ours.publishing.validate_message_type = False
        elif theirs.WhichOneof("pub_sub") == "subscription":
            fifo = group is not None and group.orderly
            ours.backoff_policy.CopyFrom(pb.RetryPolicy(
                max_attempts=group.max_attempts if fifo and group else self.config.max_delivery_attempts,
                customized_backoff=pb.CustomizedBackoff(next=[Duration(seconds=s) for s in CONSUMER_BACKOFF_S]),
            ))  # fmt: skip
            ours.subscription.fifo = fifo  # a FIFO client retries a failed message itself, then dead-letters it
            if not theirs.subscription.HasField("receive_batch_size"):
                ours.subscription.receive_batch_size = 32
            if not theirs.subscription.HasField("long_polling_timeout"):
                ours.subscription.long_polling_timeout.CopyFrom(Duration(seconds=20))
        return ours

    async def Telemetry(
        self, request_iterator: AsyncIterator[svc.TelemetryCommand], context: Any
    ) -> AsyncIterator[svc.TelemetryCommand]:
        """Answer each of the client's settings with the server's (a consumer's register it with its brokers)."""
        client_id = client_id_of(context)
        # Bounded: a client that writes settings and never reads its answers stops being read (gRPC's flow control
        # then holds it back) instead of growing the proxy's memory.
        out: asyncio.Queue[svc.TelemetryCommand | None] = asyncio.Queue(TELEMETRY_BACKLOG)

        async def read() -> None:
            try:
                async for cmd in request_iterator:
                    if cmd.WhichOneof("command") != "settings":
                        self.verify.answered(client_id, cmd)  # verification answers; others are not asked for
                        continue
                    try:
                        await self.clients.settle(client_id, cmd.settings)
                    except RuntimeError as e:
                        await out.put(svc.TelemetryCommand(status=_status(pb.TOO_MANY_REQUESTS, str(e))))
                        continue
                    group = None
                    if cmd.settings.WhichOneof("pub_sub") == "publishing" and client_id:
                        topics = [t.name for t in cmd.settings.publishing.topics]
                        self.transactions.attach(client_id, topics, out)  # it may be asked to check transactions
                    elif cmd.settings.WhichOneof("pub_sub") == "subscription":
                        sub = cmd.settings.subscription
                        topics = [e.topic.name for e in sub.subscriptions][:16]
                        group = await self.consume.group_view(sub.group.name, topics)
                    answer = self._settings(cmd.settings, group)
                    await out.put(svc.TelemetryCommand(status=_status(pb.OK), settings=answer))
            finally:
                while out.full():  # the writer has stopped: make room for the end marker
                    out.get_nowait()
                out.put_nowait(None)

        self.verify.attach(client_id, out)
        reader = asyncio.create_task(read(), name="telemetry-read")
        try:
            while (item := await out.get()) is not None:
                yield item
        finally:
            reader.cancel()
            self.verify.detach(client_id, out)
            if self.transactions.streams.get(client_id, None) is not None:
                self.transactions.detach(client_id)

    # ------------------------------------------------------------------------------------------ sending
    async def _send_one(self, msg: pb.Message) -> svc.SendResultEntry:
        try:
            out, group = outgoing_of(msg, self.config.max_body_size)
            if msg.system_properties.message_type == pb.TRANSACTION:
                return await self.transactions.send_half(out)
            selector = shard_selector(group) if group is not None else None
            r = await self.producer.send_outgoing(out, selector=selector, timeout=self.config.request_timeout_seconds)
        except ProxyError as e:
            return svc.SendResultEntry(status=_status(e.code, e.message))
        except NoRouteError as e:
            return svc.SendResultEntry(status=_status(pb.TOPIC_NOT_FOUND, str(e)))
        except RequestTimeoutError as e:
            return svc.SendResultEntry(status=_status(pb.PROXY_TIMEOUT, str(e)))
        except RemotingError as e:
            code = _REASONS.get(e.reason or "", _REMOTING.get(e.code, pb.INTERNAL_SERVER_ERROR))
            return svc.SendResultEntry(status=_status(code, reasoned(e)))
        except (SieveError, OSError) as e:
            return svc.SendResultEntry(status=_status(pb.INTERNAL_SERVER_ERROR, str(e)))
        code = _SEND_STATUS.get(r.status, pb.INTERNAL_SERVER_ERROR)
        return svc.SendResultEntry(status=_status(code, r.status.name), message_id=r.msg_id, offset=r.queue_offset)

    async def SendMessage(self, request: svc.SendMessageRequest, context: Any) -> svc.SendMessageResponse:
        """Send each message through the 4.x producer; one status for all, or MULTIPLE_RESULTS."""
        if not request.messages:
            return svc.SendMessageResponse(status=_status(pb.BAD_REQUEST, "no messages"))
        entries = [await self._send_one(m) for m in request.messages]
        codes = {e.status.code for e in entries}
        if len(codes) == 1:
            status = entries[0].status
        else:
            status = _status(pb.MULTIPLE_RESULTS, "the messages ended differently: see each entry")
        return svc.SendMessageResponse(status=status, entries=entries)

    # ------------------------------------------------------------------------------------------ consuming
    async def ReceiveMessage(
        self, request: svc.ReceiveMessageRequest, context: Any
    ) -> AsyncIterator[svc.ReceiveMessageResponse]:
        """One POP of the named queue (``consume.py``); grpc.aio wants the handler itself to be the generator."""
        async for response in self.consume.receive(request, context):
            yield response

    async def AckMessage(self, request: svc.AckMessageRequest, context: Any) -> svc.AckMessageResponse:
        """Ack received messages (``consume.py``)."""
        return await self.consume.ack(request, context)

    async def ChangeInvisibleDuration(
        self, request: svc.ChangeInvisibleDurationRequest, context: Any
    ) -> svc.ChangeInvisibleDurationResponse:
        """Move a received message's deadline (``consume.py``)."""
        return await self.consume.change(request, context)

    async def ForwardMessageToDeadLetterQueue(
        self, request: svc.ForwardMessageToDeadLetterQueueRequest, context: Any
    ) -> svc.ForwardMessageToDeadLetterQueueResponse:
        """Dead-letter a received message now (``consume.py``)."""
        return await self.consume.forward_to_dlq(request, context)

    async def QueryAssignment(self, request: svc.QueryAssignmentRequest, context: Any) -> svc.QueryAssignmentResponse:
        """The queues a PushConsumer receives from (``consume.py``)."""
        return await self.consume.assignment(request, context)

    # ------------------------------------------------------------------------------------------ transactions
    async def EndTransaction(self, request: svc.EndTransactionRequest, context: Any) -> svc.EndTransactionResponse:
        """Commit or roll back a transactional message (``transactions.py``)."""
        return svc.EndTransactionResponse(status=await self.transactions.end(request))
