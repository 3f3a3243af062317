"""RocketMQ 5's consumer families, computed when ``/metrics`` is scraped as its ``ConsumerLagCalculator`` does
(docs/metrics-rocketmq.md §3): for every subscription group with live consumers, for every topic they subscribe
(retry topics left out), added up over the topic's write queues:

- ``lag``: queue end less the committed offset (a queue without a committed offset has none);
- ``inflight``: messages pulled and not committed (4.x: last pull offset less committed offset; POP: the leases);
- ``ready``: messages not pulled yet (queue end less the last pull offset; POP: less the POP cursor);
- ``lag_latency`` / ``queueing_latency``: milliseconds since the oldest unconsumed / unpulled message was stored.

As RocketMQ with its default ``estimateAccumulation``, the three counts of a group with a tag or SQL92 subscription
count only the messages its filter would let through, judged on the consume queue (``FilterEstimate``): the tag's
hash, or the group's Bloom bits in the message's bitmap (a SQL92 group without them counts every message). Up to
``SCAN_MAX`` entries of a range are read, or until ``SAMPLE_MATCHES`` matched; a longer range is extrapolated from
them, as RocketMQ's ``ConsumeQueue.estimateMessageCount`` does; a whole pass reads at most ``PASS_SCAN_MAX``.
Otherwise a pass over the live groups' queues costs a few dictionary lookups per queue and at most two store-time
reads per queue that has something waiting.

A scrape goes over at most ``LAG_QUEUES_MAX`` queues (``LagRounds``): live groups subscribing more than that (a
group consuming thousands of topics) are gone over in rounds spread across scrapes, each scrape showing the figures
of the last whole round updated with those of the round under way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from sievemq.broker.clients import ConsumerManager
from sievemq.broker.filter_manager import ConsumerFilterManager
from sievemq.broker.groups import SubscriptionGroupManager
from sievemq.broker.offsets import ConsumerOffsetManager
from sievemq.broker.pop.book import PopBook
from sievemq.broker.topics import TopicConfigManager
from sievemq.filter.tags import TagExpression
from sievemq.protocol.heartbeat import Subscription
from sievemq.protocol.names import is_retry_topic
from sievemq.protocol.route import PERM_READ, PERM_WRITE
from sievemq.store import MessageStore

__all__ = ["LAG_QUEUES_MAX", "PASS_SCAN_MAX", "SAMPLE_MATCHES", "SCAN_MAX", "FilterEstimate", "GroupLag", "LagRounds",
           "ScanBudget", "group_lags"]  # fmt: skip

LAG_QUEUES_MAX = 20_000
"""Queues (of live groups' subscribed topics) one scrape goes over at most (``LagRounds``)."""

SCAN_MAX = 10_000
"""Consume-queue entries read at most per estimated range (RocketMQ reads up to ``maxConsumeQueueScan``, 20,000)."""
PASS_SCAN_MAX = 20_000
"""Consume-queue entries one pass (one scrape) reads at most over every group and queue: the pass runs on the event
loop, so its cost is bounded whatever the number of filtered groups and their backlogs (~20-60 ms at most). Past it,
a range counts whole, as a group without a filter (RocketMQ, which runs this on a thread of its own, reads up to
20,000 entries per range)."""
SAMPLE_MATCHES = 5_000
"""Matches after which an estimate extrapolates (RocketMQ's ``sampleCountThreshold``)."""
_READ = 512
"""Entries read per consume-queue read."""


def _int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


class ScanBudget:
    """What a pass may still read (``PASS_SCAN_MAX``), shared by its estimates."""

    __slots__ = ("left",)

    def __init__(self, entries: int = PASS_SCAN_MAX) -> None:
        self.left = entries


class FilterEstimate:
    """How many messages of a queue range a group's subscription lets through, judged on the consume queue alone
    (no record is read, nothing is counted in the filter statistics)."""

    __slots__ = ("budget", "codes", "mask_len", "positions", "store", "trust_after")

    def __init__(self, store: MessageStore, codes: frozenset[int] | None = None, positions: list[int] | None = None,
                 mask_len: int = 0, trust_after: int = 0, budget: ScanBudget | None = None) -> None:  # fmt: skip
        """``codes``: a tag subscription's hash codes; else ``positions`` (the SQL92 group's Bloom bits), the
        broker's bitmap length and the time before which bitmaps are not trusted; ``budget``: the pass's."""
        self.budget = budget if budget is not None else ScanBudget()
        self.store = store
        self.codes = codes
        self.positions = positions
        self.mask_len = mask_len
        self.trust_after = trust_after

    @classmethod
    def of(cls, store: MessageStore, group: str, sub: Subscription | None, filters: ConsumerFilterManager,
           budget: ScanBudget | None = None) -> FilterEstimate | None:  # fmt: skip
        """The estimate of a group's subscription, None when it lets everything through (``*``, class filters, a
        SQL92 group without Bloom bits: RocketMQ counts those whole too)."""
        if sub is None or sub.class_filter_mode:
            return None
        if sub.is_tag:
            try:
                expr = TagExpression.parse(sub.sub_string)
            except ValueError:
                return None
            return None if expr.sub_all else cls(store, codes=expr.codes, budget=budget)
        if sub.expression_type == "SQL92":
            entry = filters.get(group, sub.topic)
            if entry is None or not entry.bit_positions or not entry.mask:
                return None
            if entry.expression.strip() != sub.sub_string.strip():
                return None
            return cls(store, positions=entry.bit_positions, mask_len=len(entry.mask), trust_after=entry.born_time,
                       budget=budget)  # fmt: skip
        return None

    def _maybe(self, topic: str, queue_id: int, offset: int, tags_code: int) -> bool:
        if self.codes is not None:
            return _int32(tags_code) in self.codes
        ext = self.store.get_cq_ext_unit(topic, queue_id, offset)
        if ext is None or not ext.bitmap or ext.store_time <= self.trust_after or len(ext.bitmap) != self.mask_len:
            return True
        bitmap = ext.bitmap
        return all(bitmap[p >> 3] & (1 << (p & 7)) for p in self.positions or ())

    def count(self, topic: str, queue_id: int, start: int, end: int) -> int:
        """Messages of ``[start, end)`` the subscription lets through (an estimate past ``SCAN_MAX`` entries, or
        past what the pass's budget leaves; the whole range once the budget is spent)."""
        if end <= start:
            return 0
        limit = min(SCAN_MAX, self.budget.left)
        raw = matched = 0
        offset = start
        while offset < end and raw < limit and matched <= SAMPLE_MATCHES:
            entries = self.store.read_cq_entries(topic, queue_id, offset, min(_READ, end - offset, limit - raw))
            if not entries:
                break
            for phy, _size, code in entries:
                raw += 1
                if phy >= 0 and self._maybe(topic, queue_id, offset, code):
                    matched += 1
                offset += 1
                if matched > SAMPLE_MATCHES:
                    break
        self.budget.left -= raw
        if raw == 0:
            return end - start  # nothing readable (deleted files), or no budget left: the whole range
        if offset < end:
            return int(matched * (end - start) / raw)
        return matched


def _count(estimate: FilterEstimate | None, topic: str, queue_id: int, start: int, end: int) -> int:
    if estimate is None:
        return max(0, end - start)
    return estimate.count(topic, queue_id, start, end)


@dataclass(slots=True)
class GroupLag:
    """One (group, topic)'s figures (RocketMQ's ``CalculateLagResult``, ``...InflightResult``,
    ``...AvailableResult``)."""

    group: str
    topic: str
    lag: int = 0
    inflight: int = 0
    ready: int = 0
    lag_latency_ms: int = 0
    queueing_latency_ms: int = 0


def _oldest(store: MessageStore, topic: str, queue_id: int, offset: int, current: int | None) -> int | None:
    """The earlier of ``current`` and the store time of the message at ``offset`` (when there is one)."""
    t = store.get_store_time(topic, queue_id, offset)
    if t is None or t <= 0:
        return current
    return t if current is None else min(current, t)


def group_lags(consumers: ConsumerManager, groups: SubscriptionGroupManager, topics: TopicConfigManager,
               offsets: ConsumerOffsetManager, store: MessageStore, pop: PopBook, filters: ConsumerFilterManager,
               clock: Callable[[], float] = time.time,
               budget: ScanBudget | None = None) -> Iterator[GroupLag]:  # fmt: skip
    """The figures of every (group, topic) RocketMQ's broker would report (see the module docstring); ``budget``:
    the consume-queue entries the estimates may read (a new ``ScanBudget`` when None)."""
    budget = budget if budget is not None else ScanBudget()
    for name, info in list(consumers.groups.items()):
        if name not in groups.table or not info.channels:
            continue
        is_pop = info.consume_type == "CONSUME_POP"
        for topic in sorted(info.topics()):
            if is_retry_topic(topic):
                continue
            tc = topics.get(topic)
            if tc is None or not tc.perm & (PERM_READ | PERM_WRITE):
                continue
            now_ms = int(clock() * 1000)
            result = GroupLag(name, topic)
            estimate = FilterEstimate.of(store, name, info.subscription(topic), filters, budget)
            oldest_unconsumed: int | None = None
            oldest_unpulled: int | None = None
            for queue_id in range(tc.write_queue_nums):
                end = max(0, store.get_max_offset(topic, queue_id))
                qs = pop.queue(name, topic, queue_id) if is_pop else None
                if qs is not None:
                    leased = len(qs.leases)
                    pulled = min(max(qs.cursor, 0), end)
                    consumed = qs.floor()
                    ready = _count(estimate, topic, queue_id, pulled, end)
                    result.inflight += leased
                    result.ready += ready
                    result.lag += ready + leased
                else:
                    committed = offsets.query(name, topic, queue_id)
                    consumed = committed if committed >= 0 else end
                    noted = offsets.pulled_offset(name, topic, queue_id)
                    pulled = min(noted if noted is not None and noted >= consumed else consumed, end)
                    inflight = _count(estimate, topic, queue_id, consumed, pulled)
                    ready = _count(estimate, topic, queue_id, pulled, end)
                    result.lag += inflight + ready
                    result.inflight += inflight
                    result.ready += ready
                if consumed < end:
                    oldest_unconsumed = _oldest(store, topic, queue_id, consumed, oldest_unconsumed)
                if pulled < end:
                    oldest_unpulled = _oldest(store, topic, queue_id, pulled, oldest_unpulled)
            if oldest_unconsumed is not None:
                result.lag_latency_ms = max(0, now_ms - oldest_unconsumed)
            if oldest_unpulled is not None:
                result.queueing_latency_ms = max(0, now_ms - oldest_unpulled)
            yield result


class LagRounds:
    """``group_lags`` spread over scrapes: each ``rows`` call goes on with the round under way for about
    ``queues_max`` queues (a new round when the last one ended), with a fresh ``ScanBudget``, and answers the last
    whole round's figures updated with the new ones (a (group, topic) gone stays until the round after it ends).
    Within ``queues_max`` queues a call makes a whole round: the figures are those of now."""

    def __init__(self, rounds: Callable[[ScanBudget], Iterator[GroupLag]], queues_of: Callable[[str], int],
                 queues_max: int = LAG_QUEUES_MAX) -> None:  # fmt: skip
        """``rounds(budget)``: a new round (``group_lags``); ``queues_of(topic)``: the queues a topic's figures
        cost."""
        self.rounds = rounds
        self.queues_of = queues_of
        self.queues_max = queues_max
        self.budget = ScanBudget()
        self._round: Iterator[GroupLag] | None = None
        self._fresh: dict[tuple[str, str], GroupLag] = {}
        self._last: dict[tuple[str, str], GroupLag] = {}

    def rows(self) -> list[GroupLag]:
        """The figures to show now."""
        self.budget.left = PASS_SCAN_MAX
        if self._round is None:
            self._round, self._fresh = self.rounds(self.budget), {}
        read = 0
        for r in self._round:
            self._fresh[(r.group, r.topic)] = r
            read += self.queues_of(r.topic)
            if read >= self.queues_max:
                return list({**self._last, **self._fresh}.values())
        self._last, self._round = self._fresh, None
        return list(self._last.values())
