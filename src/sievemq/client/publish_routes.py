"""Where a producer's messages go (Java ``TopicPublishInfo`` and ``MQFaultStrategy``): the writable queues of each
topic it sends to, taken round robin, avoiding the brokers whose sends failed lately, the masters' addresses, and
(for a request) the brokers a reply may come from.

A topic's queues come from its route. A topic without a route is sent through the route of ``TBW102`` so that the
broker creates it (with at most ``default_topic_queue_nums`` queues); the name servers are asked for its own route
again a second later. A topic with no queue to send to is a ``NoRouteError`` naming what is missing (a master, a
departed broker, write permission).
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field

from sievemq.client.errors import NoRouteError
from sievemq.client.instance import ClientInstance
from sievemq.client.message import MessageQueue
from sievemq.errors import ConnectionClosedError
from sievemq.protocol.names import AUTO_CREATE_TOPIC_KEY, reply_topic
from sievemq.protocol.route import PERM_WRITE, TopicRouteData

__all__ = ["PublishInfo", "PublishRoutes", "master_addr", "unwritable"]

log = logging.getLogger("sievemq.client.producer")  # the producer's records, as before the split


REFETCH_S = 1.0
"""A topic's route is fetched at most this often after failed sends (``PublishRoutes.after_failure``)."""

def unwritable(route: TopicRouteData) -> str:
    """Why a route that lists queues has none to send to: brokers without a master, or queues not writable."""
    masters = {bd.broker_name for bd in route.broker_datas if 0 in bd.broker_addrs}
    why = []
    for bd in route.broker_datas:
        if bd.broker_name not in masters:
            slaves = ", ".join(addr for _, addr in sorted(bd.broker_addrs.items())) or "none"
            why.append(f"broker {bd.broker_name} has no master in the routes (is it running?); its slaves ({slaves}) "
                       "take no sends")  # fmt: skip
    for qd in route.queue_datas:
        if qd.broker_name in masters and not (qd.perm & PERM_WRITE and qd.write_queue_nums):
            why.append(f"broker {qd.broker_name} holds it read-only (perm {qd.perm}, "
                       f"{qd.write_queue_nums} write queues)")  # fmt: skip
    return "; ".join(why) or "its route lists no writable queue"


@dataclass
class PublishInfo:
    """Writable queues of a topic and the round-robin position."""

    queues: list[MessageQueue]
    from_default: bool = False
    checked_at: float = field(default_factory=time.monotonic)
    counter: int = field(default_factory=lambda: random.randrange(1 << 16))

    def select(self, avoid: set[str], last_broker: str | None) -> MessageQueue:
        """Next queue round robin, avoiding brokers in ``avoid``, else one not on ``last_broker``."""
        n = len(self.queues)
        for i in range(n):
            mq = self.queues[(self.counter + i) % n]
            if mq.broker_name not in avoid and mq.broker_name != last_broker:
                self.counter += i + 1
                return mq
        for i in range(n):
            mq = self.queues[(self.counter + i) % n]
            if mq.broker_name != last_broker:
                self.counter += i + 1
                return mq
        mq = self.queues[self.counter % n]
        self.counter += 1
        return mq


async def master_addr(inst: ClientInstance, mq: MessageQueue) -> str:
    """The address of ``mq``'s master broker (the route is fetched when unknown)."""
    addr = inst.broker_addr(mq.broker_name, master_only=True)
    if addr is None:
        await inst.update_route(mq.topic)
        addr = inst.broker_addr(mq.broker_name, master_only=True)
    if addr is None:
        raise ConnectionClosedError(f"no master address known for broker {mq.broker_name}")
    return addr


class PublishRoutes:
    """The ``PublishInfo`` of each topic one producer sent to, and the brokers its sends avoid for now."""

    def __init__(self) -> None:
        self.infos: dict[str, PublishInfo] = {}
        self._faults: dict[str, float] = {}
        """Broker name -> until when (``time.monotonic()``) sends avoid it."""
        self._asked: dict[str, float] = {}
        """Topic -> when its route was last fetched after a failed send."""

    def topics(self) -> list[str]:
        """Topics sent to (their routes are refreshed)."""
        return list(self.infos)

    def on_route(self, inst: ClientInstance, topic: str, route: TopicRouteData) -> None:
        """A fresh route: rebuild the topic's queue list (keeps the round-robin position)."""
        if topic not in self.infos:
            return
        queues = inst.publish_queues(topic, route)
        if queues:
            old = self.infos[topic]
            self.infos[topic] = PublishInfo(queues, False, time.monotonic(), old.counter)

    async def info(self, inst: ClientInstance, topic: str, default_queue_nums: int) -> PublishInfo:
        """The topic's writable queues; from TBW102's route, at most ``default_queue_nums`` per broker, when the
        name servers know no route (auto-create)."""
        info = self.infos.get(topic)
        if info is not None and info.queues and not (info.from_default and time.monotonic() - info.checked_at > 1.0):
            return info
        route = await inst.update_route(topic)
        queues = inst.publish_queues(topic, route) if route else []
        if queues:
            info = PublishInfo(queues, False, time.monotonic(), info.counter if info else random.randrange(1 << 16))
            self.infos[topic] = info
            return info
        if info is not None and info.queues:
            info.checked_at = time.monotonic()
            return info
        default = await inst.fetch_route(AUTO_CREATE_TOPIC_KEY)
        if default is not None and default.queue_datas:
            inst.remember_brokers(default)
            for qd in default.queue_datas:
                n = min(default_queue_nums, qd.read_queue_nums)
                qd.read_queue_nums = qd.write_queue_nums = n
            queues = inst.publish_queues(topic, default)
            if queues:
                info = PublishInfo(queues, True)
                self.infos[topic] = info
                return info
        raise await self._no_route(inst, topic, route)

    async def _no_route(self, inst: ClientInstance, topic: str, route: TopicRouteData | None) -> NoRouteError:
        """Why ``topic`` has no queue to send to, naming what is missing (a master, a departed broker)."""
        if route is not None and route.queue_datas:
            return NoRouteError(topic, unwritable(route))
        try:
            await inst.fetch_route(topic, missing_ok=False)
        except NoRouteError as e:
            if e.reason:  # the name server knows more (BROKER_GONE: the brokers that left)
                return NoRouteError(topic, e.detail, e.reason)
        return NoRouteError(topic, "no name server knows it and auto-creation (TBW102) is not available")

    async def know_reply_brokers(self, inst: ClientInstance, topic: str, default_queue_nums: int) -> None:
        """Heartbeat to every broker of the clusters of ``topic`` (the routes of their reply topics are fetched): a
        reply to a request sent to ``topic`` may come from any of them."""
        info = await self.info(inst, topic, default_queue_nums)
        names = {mq.broker_name for mq in info.queues}
        route = inst.route(topic)
        routes = [route] if route is not None else list(inst.routes.values())
        clusters = {b.cluster for r in routes for b in r.broker_datas if b.broker_name in names}
        for cluster in clusters:
            try:
                await inst.update_route(reply_topic(cluster))
            except Exception as e:
                log.debug("route of %s: %s", reply_topic(cluster), e)

    async def after_failure(self, inst: ClientInstance, topic: str) -> None:
        """A send to ``topic`` failed as a moved master would make it fail (its address unreachable, or it answered
        that it is no master): fetch the route now, at most once a second, instead of at the next poll (a set under
        automatic failover has a new master within seconds)."""
        now = time.monotonic()
        if now - self._asked.get(topic, 0.0) < REFETCH_S:
            return
        self._asked[topic] = now
        if len(self._asked) > 4096:
            self._asked = {t: at for t, at in self._asked.items() if now - at < REFETCH_S}
        await inst.update_route(topic)

    def mark(self, broker: str, failed: bool, backoff: float) -> None:
        """A send to ``broker`` failed (avoid it for ``backoff`` seconds) or succeeded (no longer avoid it)."""
        if failed:
            self._faults[broker] = time.monotonic() + backoff
        else:
            self._faults.pop(broker, None)

    def avoid(self) -> set[str]:
        """The brokers sends avoid now."""
        now = time.monotonic()
        return {b for b, until in self._faults.items() if until > now}
