"""The 5.x consumers a proxy serves, as the brokers see them (docs/proxy.md §5).

A 5.x client names itself in every call (metadata ``x-mq-client-id``) and states its group and subscriptions in
its Telemetry settings. The proxy registers each such consumer with the brokers of its topics by a 4.x HEART_BEAT
under the client's own id (one connection per broker carries all of them), so a broker's subscription-consistency
check, its SQL92 filter registration (Bloom bitmaps, counts in ``sievemq group filters``) and its consumer lists work
for 5.x groups exactly as for 4.x ones. A subscription a broker refuses is remembered with the broker's remark:
the client's receives of that topic are refused with it. A client silent for ``CLIENT_EXPIRY_S`` is unregistered.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from sievemq.client import api
from sievemq.protocol.heartbeat import ConsumerData, HeartbeatData, Subscription
from sievemq.protocol.route import TopicRouteData
from sievemq.proxy.v2 import definition_pb2 as pb
from sievemq.remoting.connection import Connection

__all__ = ["CLIENT_EXPIRY_S", "ClientRegistry", "ConsumerClient", "subscription_of"]

log = logging.getLogger(__name__)

CLIENT_EXPIRY_S = 120.0
MAX_CLIENTS = 10_000
"""Clients one proxy tracks at most (a flood of invented client ids cannot grow it further)."""
MAX_SUBSCRIPTIONS = 256
"""Topics one consumer may subscribe (each costs a heartbeat entry at its brokers)."""


def subscription_of(topic: str, expr: pb.FilterExpression) -> Subscription:
    """A 5.x filter expression as the 4.x subscription a broker checks (SQL is SQL92; no expression: ``*``)."""
    if expr.type == pb.SQL:
        return Subscription(topic, expr.expression, "SQL92")
    return Subscription(topic, expr.expression or "*", "TAG")


@dataclass
class ConsumerClient:
    """One 5.x consumer."""

    client_id: str
    group: str
    subscriptions: dict[str, Subscription]
    version: int = field(default_factory=lambda: int(time.time() * 1000))
    last_seen: float = field(default_factory=time.monotonic)
    refused: dict[str, str] = field(default_factory=dict)
    """topic -> the broker's remark, for a subscription a broker refused."""


class ClientRegistry:
    """See the module docstring. ``route`` finds a topic's route, ``conn`` a broker connection."""

    def __init__(
        self,
        route: Callable[[str], Awaitable[TopicRouteData | None]],
        conn: Callable[[str], Awaitable[Connection]],
        timeout: float = 3.0,
    ) -> None:
        self._route, self._conn, self.timeout = route, conn, timeout
        self.clients: dict[str, ConsumerClient] = {}

    def get(self, client_id: str) -> ConsumerClient | None:
        """The consumer of that id, if it sent its settings."""
        return self.clients.get(client_id)

    async def _brokers(self, topics: list[str]) -> set[str]:
        addrs: set[str] = set()
        for topic in topics:
            try:
                route = await self._route(topic)
            except Exception as e:
                log.warning("route of %s for a 5.x consumer: %s", topic, e)
                continue
            for bd in route.broker_datas if route is not None else []:
                addrs.update(a for a in bd.broker_addrs.values() if a)
        return addrs

    async def settle(self, client_id: str, settings: pb.Settings) -> ConsumerClient | None:
        """A consumer's Telemetry settings: remember it and register it with its brokers (None: not a consumer)."""
        if not settings.HasField("subscription") or not settings.subscription.group.name:
            return None
        sub = settings.subscription
        if len(sub.subscriptions) > MAX_SUBSCRIPTIONS:
            raise RuntimeError(f"a consumer subscribes at most {MAX_SUBSCRIPTIONS} topics here")
        subs = {e.topic.name: subscription_of(e.topic.name, e.expression) for e in sub.subscriptions}
        old = self.clients.get(client_id)
        if old is None and len(self.clients) >= MAX_CLIENTS:
            self.expire()
            if len(self.clients) >= MAX_CLIENTS:
                raise RuntimeError(f"this proxy serves {MAX_CLIENTS} clients already")
        client = ConsumerClient(client_id, sub.group.name, subs)
        if old is not None and old.group == client.group and old.subscriptions == subs:
            client.version = old.version
        self.clients[client_id] = client
        await self.heartbeat(client)
        return client

    async def heartbeat(self, client: ConsumerClient) -> None:
        """HEART_BEAT for ``client`` to every broker of its topics; remember what they refuse."""
        client.last_seen = time.monotonic()
        subs = [
            Subscription(s.topic, s.sub_string, s.expression_type, client.version)
            for s in client.subscriptions.values()
        ]
        data = HeartbeatData(client.client_id, [], [ConsumerData(client.group, "CONSUME_POP", "CLUSTERING",
                                                                 "CONSUME_FROM_LAST_OFFSET", subs)])  # fmt: skip
        refused: dict[str, str] = {}
        addrs = await self._brokers(list(client.subscriptions))

        async def one(addr: str) -> None:
            try:
                answer = await api.heartbeat(await self._conn(addr), data, self.timeout)
            except Exception as e:
                log.warning("heartbeat of 5.x consumer %s to %s failed: %s", client.client_id, addr, e)
                return
            for r in answer.refused:
                if r.group == client.group:
                    refused[r.topic] = r.remark

        await asyncio.gather(*(one(a) for a in sorted(addrs)))
        client.refused = refused

    async def seen(self, client_id: str) -> None:
        """A client's Heartbeat call: refresh it with its brokers."""
        client = self.clients.get(client_id)
        if client is not None:
            await self.heartbeat(client)

    async def forget(self, client_id: str) -> None:
        """A client said goodbye (or expired): UNREGISTER_CLIENT at its brokers."""
        client = self.clients.pop(client_id, None)
        if client is None:
            return
        for addr in sorted(await self._brokers(list(client.subscriptions))):
            try:
                await api.unregister_client(await self._conn(addr), client_id, consumer_group=client.group,
                                            timeout=self.timeout)  # fmt: skip
            except Exception as e:
                log.info("unregister of 5.x consumer %s at %s: %s", client_id, addr, e)

    def expire(self, now: float | None = None) -> list[str]:
        """Drop clients silent for ``CLIENT_EXPIRY_S`` (the brokers expire their registrations by themselves)."""
        now = time.monotonic() if now is None else now
        gone = [cid for cid, c in self.clients.items() if now - c.last_seen > CLIENT_EXPIRY_S]
        for cid in gone:
            del self.clients[cid]
        return gone
