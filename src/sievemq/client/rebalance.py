"""Sharing a topic's queues among the clients of a consumer group.

The strategies (Java's ``AllocateMessageQueue*``, pure functions) are in ``allocate.py``. ``Rebalancer`` runs one
round for a consumer: for each subscribed topic, read the queues from the route and the group's client ids from
a broker, allocate, then tell the owner which queues it lost (first, awaited: their offsets get persisted) and
which it gained. In broadcasting mode every client takes every queue.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from sievemq.client import api
from sievemq.client.allocate import AllocateStrategy, allocate_averagely
from sievemq.client.message import MessageQueue

if TYPE_CHECKING:
    from sievemq.client.instance import ClientInstance

log = logging.getLogger(__name__)

class QueueOwner(Protocol):
    """What a consumer gives the Rebalancer."""

    def owned_queues(self) -> set[MessageQueue]:
        """Queues currently processed."""
        ...

    async def drop_queue(self, mq: MessageQueue) -> None:
        """Stop processing ``mq`` and persist its offset."""
        ...

    async def take_queue(self, mq: MessageQueue) -> bool:
        """Start processing ``mq``; False if it could not be set up this round (tried again next round)."""
        ...


class Rebalancer:
    """One consumer's rebalance rounds."""

    def __init__(
        self,
        instance: ClientInstance,
        group: str,
        owner: QueueOwner,
        *,
        broadcasting: bool = False,
        strategy: AllocateStrategy = allocate_averagely,
    ) -> None:
        self.instance = instance
        self.group = group
        self.owner = owner
        self.broadcasting = broadcasting
        self.strategy = strategy

    async def consumer_ids(self, topic: str) -> list[str] | None:
        """The group's client ids as a broker of ``topic`` knows them (None when no broker answered)."""
        addrs = self.instance.broker_addrs_for_topic(topic)
        random.shuffle(addrs)
        for addr in addrs:
            try:
                conn = await self.instance.conn(addr)
                ids = await api.consumer_ids(conn, self.group, self.instance.config.request_timeout, topic)
            except Exception as e:
                log.debug("consumer list of %s from %s failed: %s", self.group, addr, e)
                continue
            if ids:
                return ids
        return None

    async def target(self, topic: str) -> set[MessageQueue] | None:
        """The queues of ``topic`` this client should own now (None: unknown this round)."""
        mqs = self.instance.subscribe_queues(topic)
        if mqs is None:
            await self.instance.update_route(topic)
            mqs = self.instance.subscribe_queues(topic)
            if mqs is None:
                return None
        if self.broadcasting:
            return set(mqs)
        cids = await self.consumer_ids(topic)
        if not cids:
            return None
        return set(self.strategy(mqs, cids, self.instance.client_id))

    async def rebalance(self, topics: Iterable[str]) -> bool:
        """One round; True when every topic could be balanced (False asks for an early retry)."""
        topics = list(topics)
        complete = True
        targets: dict[str, set[MessageQueue]] = {}
        for topic in topics:
            try:
                t = await self.target(topic)
            except Exception as e:
                log.warning("rebalance of %s/%s failed: %s", self.group, topic, e)
                t = None
            if t is None:
                complete = False
            else:
                targets[topic] = t
        owned = self.owner.owned_queues()
        wanted = set(topics)
        # Lost queues first: a queue must be released before another client may take it.
        lost = [mq for mq in owned if mq.topic not in wanted or (mq.topic in targets and mq not in targets[mq.topic])]
        for mq in sorted(lost):
            await self.owner.drop_queue(mq)
        if lost:
            log.info("group %s client %s released %s", self.group, self.instance.client_id, [str(q) for q in lost])
        gained: list[MessageQueue] = []
        for _topic, target in sorted(targets.items()):
            for mq in sorted(target - owned):
                if await self.owner.take_queue(mq):
                    gained.append(mq)
                else:
                    complete = False
        if gained:
            log.info("group %s client %s took %s", self.group, self.instance.client_id, [str(q) for q in gained])
        return complete
