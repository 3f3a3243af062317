"""Consumer lag and POP in-flight messages, computed when ``/metrics`` is scraped (docs/metrics.md §5).

Lag is what a group has not consumed yet: a queue's end (its max offset) less the group's committed offset, for
every (group, topic, queue) with a committed offset on this broker. A POP group commits its floor (the lowest offset
still leased, docs/pop.md §1), so 4.x and POP groups read alike; a retry topic (``%RETRY%group``) is a topic too.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import Metric

from sievemq.broker.offsets import ConsumerOffsetManager
from sievemq.broker.pop.book import PopBook
from sievemq.metrics.families import labelled_gauge
from sievemq.store import MessageStore

__all__ = ["ConsumerCollector", "queue_lags"]


def queue_lags(offsets: ConsumerOffsetManager, store: MessageStore) -> Iterator[tuple[str, str, int, int]]:
    """``(group, topic, queue, lag)`` for every committed offset (lag never below 0)."""
    for key, queues in offsets.table.items():
        topic, _, group = key.partition("@")
        for queue_id, committed in queues.items():
            yield group, topic, queue_id, max(0, store.get_max_offset(topic, queue_id) - max(committed, 0))


class ConsumerCollector:
    """``sievemq_consumer_lag_messages`` per queue and per topic, ``sievemq_pop_inflight_messages``."""

    def __init__(self, offsets: ConsumerOffsetManager, store: MessageStore, pop: PopBook, limit: int) -> None:
        """``limit``: series per family; the largest values keep theirs, the rest add up in ``(other)``."""
        self.offsets = offsets
        self.store = store
        self.pop = pop
        self.limit = limit

    def collect(self) -> Iterable[Metric]:
        """Lag per queue and per (group, topic); leases held per (group, topic)."""
        per_queue: list[tuple[tuple[str, ...], float]] = []
        per_topic: dict[tuple[str, ...], float] = {}
        for group, topic, queue_id, lag in queue_lags(self.offsets, self.store):
            per_queue.append(((group, topic, str(queue_id)), lag))
            per_topic[(group, topic)] = per_topic.get((group, topic), 0) + lag
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
