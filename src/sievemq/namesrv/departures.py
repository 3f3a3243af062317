"""Brokers that left the name server, remembered so that a route query can say why a topic has no route (pure).

When a broker name loses its last address (it unregistered, its connection closed, or it went silent), its topics
leave the routes. A client asking for one of them then hears "no route", which sends users looking at the topic
when the broker is what is missing. The name server keeps what each departed broker served, and answers such a
query naming the broker, its addresses, when and why it left (docs/protocol/requests.md, GET_ROUTEINFO_BY_TOPIC).

Bounded: at most ``MAX_DEPARTURES`` brokers and ``MAX_TOPICS`` topic names in all (the oldest departures go
first); a broker that registers again is forgotten.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

MAX_DEPARTURES = 32
MAX_TOPICS = 65_536


@dataclass(slots=True)
class Departure:
    """One broker name that left, with what it served."""

    broker_name: str
    cluster: str
    addrs: tuple[str, ...]
    why: str
    """How it left, as a clause: "its connection closed (...)", "it stopped (it unregistered)", "it had not registered
    for 120 s"."""
    at: float
    """When (the clock the route table is given)."""
    topics: set[str] = field(default_factory=set)


class Departures:
    """Departed brokers by name, oldest first."""

    def __init__(self, max_departures: int = MAX_DEPARTURES, max_topics: int = MAX_TOPICS) -> None:
        self.max_departures = max_departures
        self.max_topics = max_topics
        self._by_name: OrderedDict[str, Departure] = OrderedDict()
        self._topic_count = 0

    def record(
        self, broker_name: str, cluster: str, addrs: Iterable[str], topics: Iterable[str], why: str, now: float
    ) -> None:
        """``broker_name`` left (its last address went) while serving ``topics``."""
        self.returned(broker_name)
        kept: set[str] = set()
        for topic in topics:
            if len(kept) >= self.max_topics:
                break
            kept.add(topic)
        self._by_name[broker_name] = Departure(broker_name, cluster, tuple(sorted(addrs)), why, now, kept)
        self._topic_count += len(kept)
        while self._by_name and (len(self._by_name) > self.max_departures or self._topic_count > self.max_topics):
            _, oldest = self._by_name.popitem(last=False)
            self._topic_count -= len(oldest.topics)

    def returned(self, broker_name: str) -> None:
        """``broker_name`` registers again: it is no longer missing."""
        gone = self._by_name.pop(broker_name, None)
        if gone is not None:
            self._topic_count -= len(gone.topics)

    def forget_topic(self, topic: str) -> None:
        """``topic`` was deleted: no broker is missing for it."""
        for d in self._by_name.values():
            if topic in d.topics:
                d.topics.discard(topic)
                self._topic_count -= 1

    def of_topic(self, topic: str) -> list[Departure]:
        """The departed brokers that served ``topic``, oldest first."""
        return [d for d in self._by_name.values() if topic in d.topics]

    def __len__(self) -> int:
        return len(self._by_name)


def describe(topic: str, gone: list[Departure], now: float) -> str:
    """The remark of a route query for ``topic`` whose brokers all left (``gone``: non-empty)."""
    parts = [
        f"broker {d.broker_name} ({', '.join(d.addrs) or 'no address'}, cluster {d.cluster}) served it until "
        f"{max(0.0, now - d.at):.0f} s ago, when {d.why}"
        for d in gone
    ]
    return (
        f"no running broker serves topic {topic!r}: {'; '.join(parts)}. Start the broker again (its data is kept), "
        f"or create the topic on a running broker (sievemq topic create {topic})"
    )
