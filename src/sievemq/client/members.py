"""What a client instance needs from the producers and consumers that share it (``ClientInstance.producers``,
``ClientInstance.consumers``): their topics and heartbeat entries, and the hooks its periodic work calls."""

from __future__ import annotations

from typing import Protocol

from sievemq.client.message import MessageQueue
from sievemq.protocol.heartbeat import ConsumerData
from sievemq.protocol.route import TopicRouteData
from sievemq.protocol.running_info import ConsumerRunningInfo


class ProducerLike(Protocol):
    """What the instance needs from a producer."""

    group: str

    def topics(self) -> list[str]:
        """Topics whose routes the producer uses."""
        ...

    def on_route(self, topic: str, route: TopicRouteData) -> None:
        """A fresh route arrived."""
        ...


class ConsumerLike(Protocol):
    """What the instance needs from a consumer."""

    group: str

    def topics(self) -> list[str]:
        """Topics whose routes the consumer uses."""
        ...

    def consumer_data(self) -> ConsumerData | None:
        """The heartbeat entry (None: not a group member, e.g. a pull consumer with assigned queues only)."""
        ...

    async def rebalance(self) -> bool:
        """One rebalance round; False asks for an early retry."""
        ...

    async def persist_offsets(self) -> None:
        """Periodic offset persistence."""
        ...

    async def reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """A broker reset the group's offsets of ``topic`` (RESET_CONSUMER_CLIENT_OFFSET)."""
        ...

    def running_info(self) -> ConsumerRunningInfo:
        """What the consumer answers to GET_CONSUMER_RUNNING_INFO (``mqadmin consumerStatus``): its settings,
        subscriptions and queues (``client/running_info.py``)."""
        ...
