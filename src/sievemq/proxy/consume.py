"""The consumer side of the proxy (docs/proxy.md §5): ReceiveMessage, AckMessage, ChangeInvisibleDuration,
ForwardMessageToDeadLetterQueue and QueryAssignment, on top of the brokers' POP (docs/pop.md).

A receive names a queue (broker and queue id, from the route or the assignment): it becomes one POP_MESSAGE of any
queue of the topic on that broker's master (queue id -1, as RocketMQ's proxy does), with the client's filter,
invisible time and long-polling time, and for a FIFO group (``groups.py``) ``order`` and the client's attempt id;
the answer streams as a status, the messages, and the delivery timestamp. A receipt handle names its broker, so
acks and changes go where the message came from. A client whose subscription a broker refused (subscription
consistency) is refused its receives of that topic with the broker's remark.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from google.protobuf.timestamp_pb2 import Timestamp

from sievemq.client import pop_api
from sievemq.errors import RemotingError, RequestTimeoutError, SieveError
from sievemq.protocol.names import group_problem, topic_problem
from sievemq.protocol.reasons import Reason
from sievemq.protocol.receipt_handle import HandleError, ReceiptHandle
from sievemq.protocol.route import PERM_READ, TopicRouteData
from sievemq.proxy.clients import ClientRegistry, subscription_of
from sievemq.proxy.config import ProxyConfig
from sievemq.proxy.convert import message_of, reasoned
from sievemq.proxy.groups import GroupSettings, GroupView
from sievemq.proxy.renewal import Renewals
from sievemq.proxy.v2 import definition_pb2 as pb
from sievemq.proxy.v2 import service_pb2 as svc
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.connection import Connection

__all__ = ["ConsumeService", "client_id_of", "status"]

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_BATCH = 64
MIN_INVISIBLE_MS = 1_000
MAX_INVISIBLE_MS = 12 * 3600 * 1000
MAX_POLL_MS = 20_000

_REMOTING: dict[int, int] = {
    ResponseCode.TOPIC_NOT_EXIST: pb.TOPIC_NOT_FOUND,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: pb.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: pb.ILLEGAL_FILTER_EXPRESSION,
    ResponseCode.NO_PERMISSION: pb.FORBIDDEN,
    ResponseCode.SYSTEM_BUSY: pb.TOO_MANY_REQUESTS,
    ResponseCode.NO_MESSAGE: pb.INVALID_RECEIPT_HANDLE,
}
_REASONS: dict[str, int] = {
    Reason.SUBSCRIPTION_INCONSISTENT: pb.FORBIDDEN,
    Reason.RECEIPT_HANDLE_INVALID: pb.INVALID_RECEIPT_HANDLE,
    Reason.RECEIPT_HANDLE_EXPIRED: pb.INVALID_RECEIPT_HANDLE,
    Reason.INVALID_HEADER: pb.BAD_REQUEST,
    Reason.SQL92_DISABLED: pb.ILLEGAL_FILTER_EXPRESSION,
    Reason.BROKER_IS_SLAVE: pb.FORBIDDEN,
}


def status(code: int, message: str = "OK") -> pb.Status:
    """A v2 status."""
    return pb.Status(code=code, message=message)  # type: ignore[arg-type]


def client_id_of(context: Any) -> str:
    """The caller's ``x-mq-client-id`` ("" when it sent none)."""
    for key, value in context.invocation_metadata() or ():
        if key == "x-mq-client-id":
            return str(value)[:256]
    return ""


def _refusal(e: Exception) -> pb.Status:
    if isinstance(e, RemotingError):
        code = _REASONS.get(e.reason or "", _REMOTING.get(e.code, pb.INTERNAL_SERVER_ERROR))
        return status(code, reasoned(e))
    if isinstance(e, RequestTimeoutError):
        return status(pb.PROXY_TIMEOUT, str(e))
    return status(pb.INTERNAL_SERVER_ERROR, str(e))


def _ms(d: Any) -> int:
    return int(d.seconds) * 1000 + int(d.nanos) // 1_000_000


class _Refused(Exception):
    def __init__(self, st: pb.Status) -> None:
        super().__init__(st.message)
        self.status = st


class ConsumeService:
    """See the module docstring. ``route`` finds a topic's route, ``conn`` opens a broker connection."""

    def __init__(
        self,
        config: ProxyConfig,
        clients: ClientRegistry,
        route: Callable[[str], Awaitable[TopicRouteData | None]],
        conn: Callable[[str], Awaitable[Connection]],
        endpoint: tuple[str, int],
    ) -> None:
        self.config, self.clients, self._route, self._conn = config, clients, route, conn
        self.endpoint = endpoint
        self.renewals = Renewals(self._renew)
        self.groups = GroupSettings(conn, config.request_timeout_seconds)

    async def _broker_addr(self, topic: str, broker: str) -> str:
        try:
            route = await self._route(topic)
        except (SieveError, OSError) as e:
            raise _Refused(status(pb.INTERNAL_SERVER_ERROR, f"name server: {e}")) from None
        if route is None:
            raise _Refused(status(pb.TOPIC_NOT_FOUND, f"topic {topic} not found"))
        for bd in route.broker_datas:
            if bd.broker_name == broker and bd.broker_addrs.get(0):
                return bd.broker_addrs[0]
        raise _Refused(status(pb.NOT_FOUND, f"broker {broker} of topic {topic} has no master in the route"))

    async def _broker_conn(self, topic: str, broker: str) -> Connection:
        return await self._conn(await self._broker_addr(topic, broker))

    async def group_view(self, group: str, topics: list[str]) -> GroupView | None:
        """The group's settings at a master of its first topic with a route (for a consumer's Telemetry settings);
        None when there is none or it does not answer."""
        for topic in topics:
            try:
                route = await self._route(topic)
                masters = sorted((bd.broker_name, bd.broker_addrs[0]) for bd in route.broker_datas
                                 if bd.broker_addrs.get(0)) if route is not None else []  # fmt: skip
                if masters:
                    return await self.groups.get(masters[0][1], group)
            except (RemotingError, SieveError, OSError) as e:
                log.warning("settings of group %s from the brokers of %s: %s (its consumers are told it is not "
                            "FIFO)", group, topic, e)  # fmt: skip
                return None
        return None

    @staticmethod
    def _names(group: str, topic: str) -> None:
        if problem := group_problem(group):
            raise _Refused(status(pb.ILLEGAL_CONSUMER_GROUP, problem))
        if problem := topic_problem(topic):
            raise _Refused(status(pb.ILLEGAL_TOPIC, problem))

    # ------------------------------------------------------------------------------------------ receive
    async def receive(
        self, request: svc.ReceiveMessageRequest, context: Any
    ) -> AsyncIterator[svc.ReceiveMessageResponse]:
        """ReceiveMessage: one POP of the named queue; a status, the messages, the delivery timestamp."""
        try:
            popped, invisible = await self._pop(request, client_id_of(context))
        except _Refused as r:
            yield svc.ReceiveMessageResponse(status=r.status)
            return
        except (RemotingError, SieveError, OSError) as e:
            yield svc.ReceiveMessageResponse(status=_refusal(e))
            return
        if not popped:
            yield svc.ReceiveMessageResponse(status=status(pb.MESSAGE_NOT_FOUND, "no new message"))
            return
        yield svc.ReceiveMessageResponse(status=status(pb.OK))
        client_id = client_id_of(context)
        for p in popped:
            if request.auto_renew:
                self.renewals.track(
                    request.group.name, request.message_queue.topic.name, client_id, p.handle, invisible
                )
            yield svc.ReceiveMessageResponse(message=message_of(p, invisible))
        now = int(time.time() * 1000)
        yield svc.ReceiveMessageResponse(delivery_timestamp=Timestamp(seconds=now // 1000, nanos=(now % 1000) * 10**6))

    async def _pop(self, request: svc.ReceiveMessageRequest, client_id: str) -> tuple[list[pop_api.PoppedMessage], int]:
        group, mq = request.group.name, request.message_queue
        topic = mq.topic.name
        self._names(group, topic)
        if not 1 <= request.batch_size <= MAX_BATCH:
            raise _Refused(status(pb.BAD_REQUEST, f"batch_size must be 1 to {MAX_BATCH}, got {request.batch_size}"))
        if request.HasField("invisible_duration"):
            invisible = _ms(request.invisible_duration)
        else:
            invisible = self.config.default_invisible_seconds * 1000
        least = (
            MIN_INVISIBLE_MS
            if request.auto_renew
            else max(MIN_INVISIBLE_MS, self.config.min_invisible_time_mills_for_recv)
        )
        if not least <= invisible <= MAX_INVISIBLE_MS:
            raise _Refused(status(pb.ILLEGAL_INVISIBLE_TIME, f"invisible duration must be {least} ms to 12 h, got "
                                  f"{invisible} ms (minInvisibleTimeMillsForRecv)"))  # fmt: skip
        poll = _ms(request.long_polling_timeout) if request.HasField("long_polling_timeout") else 0
        if poll < 0:
            raise _Refused(status(pb.ILLEGAL_POLLING_TIME, f"long polling timeout must not be negative, got {poll} ms"))
        poll = min(poll, MAX_POLL_MS)  # longer asks (the Node.js client's default is 30 s) are held 20 s
        client = self.clients.get(client_id) if client_id else None
        if client is not None and topic in client.refused:
            raise _Refused(status(pb.FORBIDDEN, f"[{Reason.SUBSCRIPTION_INCONSISTENT}] {client.refused[topic]}"))
        sub = subscription_of(topic, request.filter_expression)
        addr = await self._broker_addr(topic, mq.broker.name)
        order = (await self.groups.get(addr, group)).orderly  # the broker that pops decides: FIFO or not
        result = await pop_api.pop_message(
            await self._conn(addr),
            group,
            topic,
            -1,  # any queue of the topic on that broker (as RocketMQ's proxy pops, FIFO groups too)
            max_nums=request.batch_size,
            invisible_ms=invisible,
            poll_ms=poll,
            expression=sub.sub_string,
            expression_type=sub.expression_type,
            client_id=client.client_id if client is not None else None,
            order=order,
            attempt_id=request.attempt_id if order and request.HasField("attempt_id") else None,
            timeout=poll / 1000.0 + self.config.request_timeout_seconds + 2.0,
        )
        return result.messages, invisible

    # ------------------------------------------------------------------------------------------ ack, change
    async def _handle(self, group: str, topic: str, text: str) -> tuple[ReceiptHandle, Connection]:
        self._names(group, topic)
        try:
            handle = ReceiptHandle.parse(text)
        except HandleError as e:
            raise _Refused(status(pb.INVALID_RECEIPT_HANDLE, str(e))) from None
        if handle.topic != topic:
            raise _Refused(
                status(pb.INVALID_RECEIPT_HANDLE, f"the receipt handle is of topic {handle.topic}, not {topic}")
            )
        return handle, await self._broker_conn(topic, handle.broker)

    async def _on_lease(self, group: str, topic: str, held: str, op: Callable[[Connection, str], Awaitable[T]]) -> T:
        """Run ``op`` with the broker's current handle of the client's ``held`` one (an auto-renewed lease has a
        newer one; a renewal that raced ``op`` is retried once with its result), then stop renewing it."""
        handle = self.renewals.current(held)
        _, conn = await self._handle(group, topic, handle)
        try:
            return await op(conn, handle)
        except RemotingError:
            newer = self.renewals.current(held)
            if newer == handle:
                raise
            return await op(conn, newer)
        finally:
            self.renewals.done(held)

    async def _renew(self, group: str, topic: str, handle: str, invisible_ms: int) -> str:
        _, conn = await self._handle(group, topic, handle)
        return await pop_api.change_invisible_time(
            conn, group, handle, invisible_ms, self.config.request_timeout_seconds
        )

    async def ack(self, request: svc.AckMessageRequest, context: Any) -> svc.AckMessageResponse:
        """AckMessage: each entry acked at the broker its handle names; one status, or MULTIPLE_RESULTS."""
        if not request.entries:
            return svc.AckMessageResponse(status=status(pb.BAD_REQUEST, "no entries"))
        entries = []
        for e in request.entries:
            try:
                group, timeout = request.group.name, self.config.request_timeout_seconds

                async def ack(conn: Connection, handle: str) -> None:
                    await pop_api.ack_message(conn, group, handle, timeout)  # noqa: B023 (awaited in this round)

                await self._on_lease(group, request.topic.name, e.receipt_handle, ack)
                st = status(pb.OK)
            except _Refused as r:
                st = r.status
            except (RemotingError, SieveError, OSError) as x:
                st = _refusal(x)
            entries.append(
                svc.AckMessageResultEntry(message_id=e.message_id, receipt_handle=e.receipt_handle, status=st)
            )
        codes = {x.status.code for x in entries}
        top = entries[0].status if len(codes) == 1 else status(pb.MULTIPLE_RESULTS, "the entries ended differently")
        return svc.AckMessageResponse(status=top, entries=entries)

    async def change(
        self, request: svc.ChangeInvisibleDurationRequest, context: Any
    ) -> svc.ChangeInvisibleDurationResponse:
        """ChangeInvisibleDuration: the message's new deadline and receipt handle."""
        invisible = _ms(request.invisible_duration)
        try:
            if not 0 <= invisible <= MAX_INVISIBLE_MS:  # 0: visible again now (the Node.js client's nack)
                raise _Refused(
                    status(pb.ILLEGAL_INVISIBLE_TIME, f"invisible duration must be 0 to 12 h, got {invisible} ms")
                )
            group, timeout = request.group.name, self.config.request_timeout_seconds

            async def change(conn: Connection, handle: str) -> str:
                return await pop_api.change_invisible_time(conn, group, handle, invisible, timeout)

            new = await self._on_lease(group, request.topic.name, request.receipt_handle, change)
        except _Refused as r:
            return svc.ChangeInvisibleDurationResponse(status=r.status)
        except (RemotingError, SieveError, OSError) as x:
            return svc.ChangeInvisibleDurationResponse(status=_refusal(x))
        return svc.ChangeInvisibleDurationResponse(status=status(pb.OK), receipt_handle=new)

    async def forward_to_dlq(
        self, request: svc.ForwardMessageToDeadLetterQueueRequest, context: Any
    ) -> svc.ForwardMessageToDeadLetterQueueResponse:
        """ForwardMessageToDeadLetterQueue: the message goes to ``%DLQ%<group>`` now (and is acked), in one step."""
        try:
            group, timeout = request.group.name, self.config.request_timeout_seconds

            async def bury(conn: Connection, handle: str) -> None:
                await pop_api.ack_message(conn, group, handle, timeout, dead_letter=True)

            await self._on_lease(group, request.topic.name, request.receipt_handle, bury)
        except _Refused as r:
            return svc.ForwardMessageToDeadLetterQueueResponse(status=r.status)
        except (RemotingError, SieveError, OSError) as x:
            return svc.ForwardMessageToDeadLetterQueueResponse(status=_refusal(x))
        return svc.ForwardMessageToDeadLetterQueueResponse(status=status(pb.OK))

    # ------------------------------------------------------------------------------------------ assignment
    async def assignment(self, request: svc.QueryAssignmentRequest, context: Any) -> svc.QueryAssignmentResponse:
        """QueryAssignment: one assignment per broker of the topic, queue id -1 (its receives POP any queue there:
        with POP, all of a group's consumers share every queue); for a FIFO group one per queue, as RocketMQ's
        proxy assigns them (its receives still POP any unlocked queue of the broker)."""
        topic = request.topic.name
        try:
            self._names(request.group.name, topic)
            route = await self._route(topic)
        except _Refused as r:
            return svc.QueryAssignmentResponse(status=r.status)
        except (SieveError, OSError) as e:
            return svc.QueryAssignmentResponse(status=status(pb.INTERNAL_SERVER_ERROR, f"name server: {e}"))
        if route is None or not route.queue_datas:
            return svc.QueryAssignmentResponse(status=status(pb.TOPIC_NOT_FOUND, f"topic {topic} not found"))
        host, port = self.endpoint
        endpoints = pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host=host, port=port)])
        masters = {bd.broker_name: bd.broker_addrs.get(0) for bd in route.broker_datas}
        assignments = []
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
            if qd.read_queue_nums <= 0 or not qd.perm & PERM_READ:
                continue
            ids = [-1]
            if await self._orderly(masters.get(qd.broker_name), request.group.name):
                ids = list(range(qd.read_queue_nums))
            broker = pb.Broker(name=qd.broker_name, id=0, endpoints=endpoints)
            assignments += [pb.Assignment(message_queue=pb.MessageQueue(topic=request.topic, id=i, permission=pb.READ,
                                                                        broker=broker)) for i in ids]  # fmt: skip
        return svc.QueryAssignmentResponse(status=status(pb.OK), assignments=assignments)

    async def _orderly(self, addr: str | None, group: str) -> bool:
        """Whether the group is FIFO at the broker (False when the broker cannot say: one assignment for it)."""
        if not addr:
            return False
        try:
            return (await self.groups.get(addr, group)).orderly
        except (RemotingError, SieveError, OSError) as e:
            log.info("settings of group %s at %s: %s", group, addr, e)
            return False
