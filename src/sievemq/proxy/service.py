"""The apache.rocketmq.v2 MessagingService on top of sievemq's 4.x client (docs/proxy.md §3).

So far: QueryRoute (every queue at the proxy's endpoint), Heartbeat, NotifyClientTermination, the Telemetry settings
handshake (the server's settings answer the client's: backoff policy, body size limit), and SendMessage of normal
and FIFO messages (the message group is the sharding key). The other methods answer gRPC UNIMPLEMENTED.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

from google.protobuf.duration_pb2 import Duration

from sievemq.client.errors import NoRouteError
from sievemq.client.message import SendStatus
from sievemq.client.producer import Producer, shard_selector
from sievemq.errors import RemotingError, RequestTimeoutError, SieveError
from sievemq.proxy.config import ProxyConfig
from sievemq.proxy.convert import ProxyError, outgoing_of, route_queues
from sievemq.proxy.v2 import definition_pb2 as pb
from sievemq.proxy.v2 import service_pb2 as svc
from sievemq.proxy.v2 import service_pb2_grpc as rpc
from sievemq.remoting.codes import ResponseCode

__all__ = ["MessagingService"]

log = logging.getLogger(__name__)

_SEND_STATUS = {
    SendStatus.SEND_OK: pb.OK,
    SendStatus.FLUSH_DISK_TIMEOUT: pb.MASTER_PERSISTENCE_TIMEOUT,
    SendStatus.FLUSH_SLAVE_TIMEOUT: pb.SLAVE_PERSISTENCE_TIMEOUT,
    SendStatus.SLAVE_NOT_AVAILABLE: pb.HA_NOT_AVAILABLE,
}
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

    def __init__(self, config: ProxyConfig, producer: Producer) -> None:
        self.config = config
        self.producer = producer
        self.endpoint = (config.advertised_ip, config.listen_port)

    # ------------------------------------------------------------------------------------------ routes
    async def QueryRoute(self, request: svc.QueryRouteRequest, context: Any) -> svc.QueryRouteResponse:
        """The topic's queues, every one at this proxy's endpoint."""
        inst = self.producer._running()
        try:
            route = await inst.fetch_route(request.topic.name)
        except (SieveError, OSError) as e:
            return svc.QueryRouteResponse(status=_status(pb.INTERNAL_SERVER_ERROR, f"name server: {e}"))
        if route is None or not route.queue_datas:
            return svc.QueryRouteResponse(status=_status(pb.TOPIC_NOT_FOUND, f"topic {request.topic.name} not found"))
        return svc.QueryRouteResponse(status=_status(pb.OK), message_queues=route_queues(request.topic, route,
                                                                                          self.endpoint))  # fmt: skip

    async def Heartbeat(self, request: svc.HeartbeatRequest, context: Any) -> svc.HeartbeatResponse:
        """Clients of this proxy are known by their Telemetry stream; a heartbeat is answered OK."""
        return svc.HeartbeatResponse(status=_status(pb.OK))

    async def NotifyClientTermination(
        self, request: svc.NotifyClientTerminationRequest, context: Any
    ) -> svc.NotifyClientTerminationResponse:
        """A client says goodbye."""
        return svc.NotifyClientTerminationResponse(status=_status(pb.OK))

    # ------------------------------------------------------------------------------------------ telemetry
    def _settings(self, theirs: pb.Settings) -> pb.Settings:
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
        return ours

    async def Telemetry(
        self, request_iterator: AsyncIterator[svc.TelemetryCommand], context: Any
    ) -> AsyncIterator[svc.TelemetryCommand]:
        """Answer each of the client's settings with the server's."""
        async for cmd in request_iterator:
            if cmd.WhichOneof("command") == "settings":
                yield svc.TelemetryCommand(status=_status(pb.OK), settings=self._settings(cmd.settings))

    # ------------------------------------------------------------------------------------------ sending
    async def _send_one(self, msg: pb.Message) -> svc.SendResultEntry:
        try:
            out, group = outgoing_of(msg, self.config.max_body_size)
            selector = shard_selector(group) if group is not None else None
            r = await self.producer.send_outgoing(out, selector=selector, timeout=self.config.request_timeout_seconds)
        except ProxyError as e:
            return svc.SendResultEntry(status=_status(e.code, e.message))
        except NoRouteError as e:
            return svc.SendResultEntry(status=_status(pb.TOPIC_NOT_FOUND, str(e)))
        except RequestTimeoutError as e:
            return svc.SendResultEntry(status=_status(pb.PROXY_TIMEOUT, str(e)))
        except RemotingError as e:
            return svc.SendResultEntry(status=_status(_REMOTING.get(e.code, pb.INTERNAL_SERVER_ERROR), str(e)))
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
