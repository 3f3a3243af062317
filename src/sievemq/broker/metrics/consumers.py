"""Consumer lag and POP in-flight messages, computed when ``/metrics`` is scraped (docs/metrics.md §5).

Lag is what a group has not consumed yet: a queue's end (its max offset) less the group's committed offset, for
every (group, topic, queue) with a committed offset on this broker. A POP group commits its floor (the lowest offset
still leased, docs/pop.md §1), so 4.x and POP groups read alike; a retry topic (``%RETRY%group``) is a topic too.

A scrape reads at most ``LAG_QUEUES_MAX`` committed offsets: up to that many, all of them (every queue has its
series, zeros included). Past it (a group consuming thousands of topics), each scrape goes on where the last one
stopped and keeps the queues with a lag above 0 of what it read; the families show those (a queue's figure is as old
as the scrapes it takes to go round: at 400,000 committed queues, 20 scrapes), queues with no lag left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import Metric

from sievemq.broker.offsets import ConsumerOffsetManager
from sievemq.broker.pop.book import PopBook
from sievemq.metrics.families import labelled_gauge
from sievemq.store import MessageStore

__all__ = ["LAG_QUEUES_MAX", "ConsumerCollector", "queue_lags"]

LAG_QUEUES_MAX = 20_000
"""Committed offsets (queues) a scrape reads at most: the lag of each is a look-up of the queue's end in the store."""


def queue_lags(offsets: ConsumerOffsetManager, store: MessageStore) -> Iterator[tuple[str, str, int, int]]:
    """``(group, topic, queue, lag)`` for every committed offset (lag never below 0)."""
    for key, queues in offsets.table.items():
        topic, _, group = key.partition("@")
        for queue_id, committed in queues.items():
            yield group, topic, queue_id, max(0, store.get_max_offset(topic, queue_id) - max(committed, 0))


class ConsumerCollector:
    """``sievemq_consumer_lag_messages`` per queue and per topic, ``sievemq_pop_inflight_messages``."""

    def __init__(self, offsets: ConsumerOffsetManager, store: MessageStore, pop: PopBook, limit: int,
                 queues_max: int = LAG_QUEUES_MAX) -> None:  # fmt: skip
        """``limit``: series per family; the largest values keep theirs, the rest add up in ``(other)``;
        ``queues_max``: committed offsets read per scrape (``LAG_QUEUES_MAX``)."""
        self.offsets = offsets
        self.store = store
        self.pop = pop
        self.limit = limit
        self.queues_max = queues_max
        self.lagging: dict[str, dict[int, int]] = {}
        """Past ``queues_max``: ``topic@group`` -> queue -> lag above 0, as last read."""
        self._keys: list[str] = []
        """The ``topic@group`` keys of the round under way, and where the next scrape goes on."""
        self._next = 0

    def _lags(self) -> list[tuple[tuple[str, ...], float]]:
        """``((group, topic, queue), lag)`` of every committed offset, or of the lagging ones past ``queues_max``."""
        table = self.offsets.table
        # a key holds a queue or more: more keys than queues_max is past it, without adding up 100,000 lengths
        if len(table) <= self.queues_max and sum(map(len, table.values())) <= self.queues_max:
            self.lagging.clear()
            self._keys, self._next = [], 0
            return [((g, t, str(q)), lag) for g, t, q, lag in queue_lags(self.offsets, self.store)]
        self._read_some(table)
        return [((key.partition("@")[2], key.partition("@")[0], str(q)), lag)
                for key, queues in self.lagging.items() for q, lag in queues.items()]  # fmt: skip

    def _read_some(self, table: dict[str, dict[int, int]]) -> None:
        """Read up to ``queues_max`` committed offsets from where the last scrape stopped (a new round from a copy
        of the table's keys once the last one is done, forgetting groups and topics gone)."""
        left = self.queues_max
        rounds = 0
        max_offset = self.store.get_max_offset
        while left > 0:
            if self._next >= len(self._keys):
                rounds += 1
                if rounds > 1:
                    break
                for gone in [k for k in self.lagging if k not in table]:
                    del self.lagging[gone]
                self._keys, self._next = list(table), 0
                continue
            key = self._keys[self._next]
            self._next += 1
            queues = table.get(key)
            if not queues:
                self.lagging.pop(key, None)
                continue
            topic = key.partition("@")[0]
            lags = {q: lag for q, c in queues.items() if (lag := max_offset(topic, q) - max(c, 0)) > 0}
            if lags:
                self.lagging[key] = lags
            else:
                self.lagging.pop(key, None)
            left -= len(queues)

    def collect(self) -> Iterable[Metric]:
        """Lag per queue and per (group, topic); leases held per (group, topic)."""
        per_queue = self._lags()
        per_topic: dict[tuple[str, ...], float] = {}
        for values, lag in per_queue:
            per_topic[values[:2]] = per_topic.get(values[:2], 0) + lag
        yield labelled_gauge("sievemq_consumer_lag_messages", "Messages of a queue its consumer group has not "
                             "consumed yet (queue end less the group's committed offset; 4.x and POP groups)",
                             ["group", "topic", "queue"], per_queue, self.limit)  # fmt: skip
        yield labelled_gauge("sievemq_consumer_group_lag_messages", "The same lag added up over the topic's queues",
                             ["group", "topic"], per_topic.items(), self.limit)  # fmt: skip
        leased: dict[tuple[str, ...], float] = {}
        for (group, topic, _queue), qs in self.pop.queues.items():
            if qs.leases:
                leased[(group, topic)] = leased.get((group, topic), 0) + len(qs.leases)
        yield labelled_gauge("sievemq_pop_inflight_messages", "POP messages handed out and not acked yet (their "
                             "leases; popInflightMax bounds them per queue)", ["group", "topic"], leased.items(),
                             self.limit)  # fmt: skip
