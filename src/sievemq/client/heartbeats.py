"""The heartbeats of a client instance (HEART_BEAT, docs/protocol/requests.md): one entry for all its producer groups
and consumers, sent to every broker (slaves too when there are consumers) every ``heartbeat_interval``, and at once
to a broker that just appeared in the routes or that a connection was opened to again (it must know the client to
rebalance its groups). A sievemq broker answers with the subscriptions it refuses; the periodic round logs each
refusal once, and once more when all are consistent again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from sievemq.client import api
from sievemq.client.members import ConsumerLike, ProducerLike
from sievemq.protocol.heartbeat import HeartbeatData
from sievemq.protocol.names import CLIENT_INNER_PRODUCER_GROUP
from sievemq.protocol.reasons import RefusedSubscription
from sievemq.remoting.connection import Connection
from sievemq.util.tasks import spawn

log = logging.getLogger("sievemq.client.instance")  # the instance's records, as before the split


class Heartbeats:
    """Heartbeats of the client ``client_id`` for its ``producers`` and ``consumers`` (by group) to the brokers
    ``brokers(include_slaves)`` lists, over connections from ``connect(addr)``; ``timeout``: seconds for an answer;
    heartbeats sent outside a round run in ``background``."""

    def __init__(
        self,
        client_id: str,
        producers: Mapping[str, ProducerLike],
        consumers: Mapping[str, ConsumerLike],
        brokers: Callable[[bool], list[str]],
        connect: Callable[[str], Awaitable[Connection]],
        *,
        timeout: float,
        background: set[asyncio.Task[Any]],
    ) -> None:
        self.client_id = client_id
        self.producers = producers
        self.consumers = consumers
        self.brokers = brokers
        self.connect = connect
        self.timeout = timeout
        self.background = background
        self._lock = asyncio.Lock()
        self._seen: dict[str, Connection] = {}
        """The connection each broker got its last heartbeat on (a new one gets a heartbeat at once)."""
        self._told: list[RefusedSubscription] = []
        """Refusals already logged (or raised by a consumer's start)."""
        self.announced: set[str] = set()
        """Consumer groups heartbeats name: those whose start passed its check (``lifecycle.go_live``). A heartbeat
        makes a broker create the group's config, so a consumer refused at start must never have been in one."""

    def data(self) -> HeartbeatData:
        """The heartbeat: every producer group (with the client's inner one) and every consumer's entry."""
        consumers = [d for g, c in list(self.consumers.items())
                     if g in self.announced and (d := c.consumer_data()) is not None]  # fmt: skip
        groups = sorted(self.producers)
        if CLIENT_INNER_PRODUCER_GROUP not in groups:
            groups.append(CLIENT_INNER_PRODUCER_GROUP)
        return HeartbeatData(self.client_id, groups, consumers)

    async def one(self, addr: str, data: HeartbeatData) -> list[RefusedSubscription]:
        """One heartbeat; returns the subscriptions the broker refused (sievemq brokers list them)."""
        try:
            conn = await self.connect(addr)
            self._seen[addr] = conn
            answer = await api.heartbeat(conn, data, self.timeout)
        except Exception as e:
            log.warning("heartbeat to broker %s failed: %s", addr, e)
            return []
        if answer.remark and not answer.refused:  # refusals are told by their consumer (start) or the tick, once
            log.warning("broker %s: %s", addr, answer.remark)
        return list(answer.refused)

    async def all(self) -> list[RefusedSubscription]:
        """HEART_BEAT to every broker (slaves too when there are consumers); the subscriptions they refused."""
        if not self.producers and not self.consumers:
            return []
        async with self._lock:
            data = self.data()
            addrs = self.brokers(bool(data.consumers))
            answers = await asyncio.gather(*(self.one(a, data) for a in addrs))
        return list(dict.fromkeys(r for refused in answers for r in refused))

    async def tick(self) -> None:
        """The periodic round: heartbeats to every broker, each refusal logged once."""
        refused = await self.all()
        for r in refused:  # say each once, not once per heartbeat
            if r not in self._told:
                log.error("broker refuses a subscription of this client: %s", r.remark)
        if self._told and not refused:
            log.info("every subscription of this client is consistent with its group again")
        self._told = refused

    def told_refusals(self, refused: Iterable[RefusedSubscription]) -> None:
        """Refusals a consumer's ``start()`` raised or logged already: the periodic round does not repeat them."""
        self._told = list(dict.fromkeys([*self._told, *refused]))

    def connected(self, addr: str, conn: Connection) -> None:
        """``conn`` is the connection to ``addr`` now: a broker connected to again gets a heartbeat at once."""
        prev = self._seen.get(addr)
        if prev is not conn:
            self._seen[addr] = conn
            if prev is not None and addr in self.brokers(True):
                spawn(self.one(addr, self.data()), self.background, "heartbeat")

    def greet(self, before: set[str]) -> None:
        """Heartbeat at once to the brokers of the routes that were not among ``before`` (they must know us to
        rebalance)."""
        new = [a for a in self.brokers(True) if a not in before]
        if new and (self.producers or self.consumers):
            data = self.data()
            for addr in new:
                if addr in self.brokers(bool(data.consumers)):
                    spawn(self.one(addr, data), self.background, "heartbeat")
