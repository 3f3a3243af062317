"""A scrape's work and page stay bounded however many topics a broker holds (docs/metrics.md §2): per-topic counter
families read only their first ``limit`` entries and take ``(other)`` from running totals, consumer lag past
``queues_max`` committed queues is read a slice per scrape, dead-letter queues are found in the topic table."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.core import Metric

from sievemq.broker.metrics.bounded import head, head_histograms, histogram_lines
from sievemq.broker.metrics.collectors import TrafficCollector
from sievemq.broker.metrics.consumers import ConsumerCollector
from sievemq.broker.metrics.rocketmq_counts import MESSAGE_SIZE_BUCKETS, RocketMQCounts
from sievemq.broker.metrics.rocketmq_lag import PASS_SCAN_MAX, GroupLag, LagRounds, ScanBudget
from sievemq.broker.metrics.rocketmq_names import DeadLetterCounts
from sievemq.broker.metrics.store import QUEUES_WALK_SECONDS, StoreCollector
from sievemq.broker.offsets import ConsumerOffsetManager
from sievemq.broker.pop.book import PopBook
from sievemq.broker.stats import BrokerStats
from sievemq.metrics.histogram import LatencyHistogram
from sievemq.metrics.series import OTHER, first_n
from sievemq.store import MessageStore

counts = st.lists(st.tuples(st.text(max_size=3), st.integers(min_value=0, max_value=10**6)), max_size=50)


@given(counts, st.integers(min_value=1, max_value=20))
def test_head_is_first_n_read_from_the_table_and_its_total(xs: list[tuple[str, int]], limit: int) -> None:
    table: Counter[str] = Counter()
    for k, n in xs:
        table[k] += n
    kept, rest = head(table, limit, sum(table.values()))
    assert (kept, rest) == first_n(list(table.items()), limit)


@given(st.lists(st.lists(st.integers(min_value=1, max_value=5_000_000), min_size=1, max_size=5), max_size=30),
       st.integers(min_value=1, max_value=100))  # fmt: skip
def test_head_histograms_fit_the_lines_and_keep_the_totals(samples: list[list[int]], limit: int) -> None:
    table: dict[str, LatencyHistogram] = {}
    total = LatencyHistogram(MESSAGE_SIZE_BUCKETS)
    for i, values in enumerate(samples):
        h = table[f"t{i}"] = LatencyHistogram(MESSAGE_SIZE_BUCKETS)
        for v in values:
            h.observe(v)
            total.observe(v)
    kept, rest = head_histograms(table, limit, total)
    assert len(kept) == min(len(table), max(1, limit // histogram_lines(MESSAGE_SIZE_BUCKETS)))
    assert [k for k, _ in kept] == list(table)[: len(kept)]
    merged = [sum(h.counts[b] for _, h in kept) + (rest.counts[b] if rest else 0) for b in range(len(total.counts))]
    assert merged == total.counts
    assert (rest is None) == (len(kept) == len(table))


def _series(metric: Metric) -> dict[str, float]:
    return {s.labels.get("topic", ""): s.value for s in metric.samples}


def test_traffic_families_read_the_first_topics_and_total_the_rest() -> None:
    stats = BrokerStats()
    for i in range(5000):
        stats.put(f"T{i}", 2, 100)
        stats.get(f"T{i}", 1, 50, group="G")
    families = {m.name: m for m in TrafficCollector(stats, 100).collect()}
    for name, each in (("sievemq_messages_in", 2), ("sievemq_messages_in_bytes", 100), ("sievemq_messages_out", 1),
                       ("sievemq_messages_out_bytes", 50)):  # fmt: skip
        series = _series(families[name])
        assert len(series) == 101, name
        assert series[OTHER] == 4900 * each
        assert sum(series.values()) == 5000 * each
    assert stats.put_bytes_total == 500_000 and stats.get_bytes_total == 250_000
    assert stats.runtime_table()["putMessageSizeTotal"] == "500000"


def test_rocketmq_counts_leave_out_retry_and_dead_letter_topics_and_keep_totals() -> None:
    c = RocketMQCounts()
    c.put("T", "normal", 2, 2000)
    c.put("%RETRY%G", "normal", 5, 500)
    c.put("%DLQ%G", "normal", 5, 500)
    c.get("T", "G", 1, 1000)
    c.get("%RETRY%G", "G", 3, 300)
    assert list(c.put_messages) == [("T", "normal")] and list(c.get_messages) == [("T", "G")]
    assert (c.put_messages_total, c.put_bytes_total, c.get_messages_total, c.get_bytes_total) == (2, 2000, 1, 1000)
    assert c.message_size_total.counts == c.message_size[("T", "normal")].counts


@dataclass
class _Store:
    """What the collectors ask of the store: queue ends (and counts of how often they asked)."""

    ends: dict[tuple[str, int], int] = field(default_factory=dict)
    asked: int = 0

    def get_max_offset(self, topic: str, queue_id: int) -> int:
        self.asked += 1
        return self.ends.get((topic, queue_id), 0)

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        return 0


def _lag(collector: ConsumerCollector) -> dict[tuple[str, ...], float]:
    metric = next(iter(collector.collect()))
    return {tuple(s.labels.values()): s.value for s in metric.samples}


def test_lag_past_the_budget_is_read_a_slice_per_scrape_and_finds_every_lagging_queue(tmp_path: Any) -> None:
    offsets = ConsumerOffsetManager(tmp_path)
    store = _Store()
    for i in range(1000):
        for q in range(4):
            offsets.commit("G", f"T{i}", q, 5)
            store.ends[(f"T{i}", q)] = 5
    store.ends[("T7", 1)] = 12  # two lagging queues among 4,000
    store.ends[("T900", 3)] = 6
    c = ConsumerCollector(offsets, cast(MessageStore, store), PopBook(), limit=50, queues_max=1000)
    seen: dict[tuple[str, ...], float] = {}
    for _ in range(4):  # 4,000 queues, 1,000 a scrape
        store.asked = 0
        seen = _lag(c)
        assert store.asked <= 1000, "a scrape reads at most queues_max queue ends"
    assert seen == {("G", "T7", "1"): 7, ("G", "T900", "3"): 1}, "queues with no lag are left out past the budget"
    offsets.commit("G", "T7", 1, 12)
    offsets.remove_topic("T900")
    for _ in range(4):
        seen = _lag(c)
    assert seen == {}, "a caught-up queue and a removed topic leave"


def test_lag_within_the_budget_lists_every_queue_zeros_included(tmp_path: Any) -> None:
    offsets = ConsumerOffsetManager(tmp_path)
    store = _Store({("T", 0): 3, ("T", 1): 0})
    offsets.commit("G", "T", 0, 1)
    offsets.commit("G", "T", 1, 0)
    c = ConsumerCollector(offsets, cast(MessageStore, store), PopBook(), limit=50)
    assert _lag(c) == {("G", "T", "0"): 2, ("G", "T", "1"): 0}


def test_dead_letter_queues_are_found_in_the_topic_table_again_only_when_it_changed() -> None:
    table: dict[str, Any] = {f"T{i}": SimpleNamespace(read_queue_nums=4, write_queue_nums=4) for i in range(1000)}
    table["%DLQ%G"] = SimpleNamespace(read_queue_nums=1, write_queue_nums=1)
    topics = SimpleNamespace(table=table)
    dlq = DeadLetterCounts(cast(MessageStore, _Store()), topics=cast(Any, topics))
    assert dlq.queues() == [("%DLQ%G", 0)]
    table["%DLQ%H"] = SimpleNamespace(read_queue_nums=1, write_queue_nums=1)
    assert dlq.queues() == [("%DLQ%G", 0), ("%DLQ%H", 0)], "a new topic: looked for again"
    del table["T1"]
    table["T1"] = SimpleNamespace(read_queue_nums=4, write_queue_nums=4)
    assert dlq.update() == Counter(), "nothing dead-lettered: no record read"


def test_lag_rounds_spread_a_large_round_over_scrapes() -> None:
    lag = {f"T{i}": i for i in range(10)}
    calls: list[int] = []

    def a_round(budget: ScanBudget) -> Iterator[GroupLag]:
        assert budget.left == PASS_SCAN_MAX, "every scrape gets a whole scan budget"
        calls.append(0)
        for topic, n in list(lag.items()):
            calls[-1] += 1
            yield GroupLag("G", topic, lag=n)

    rounds = LagRounds(a_round, lambda _t: 4, queues_max=12)  # 3 topics of 4 queues a scrape
    first = rounds.rows()
    assert [r.topic for r in first] == ["T0", "T1", "T2"] and calls == [3]
    for _ in range(3):
        rows = rounds.rows()
    assert {r.topic: r.lag for r in rows} == lag, "a round ended: every (group, topic)"
    lag["T0"] = 100
    del lag["T9"]
    rows = rounds.rows()
    assert {r.topic: r.lag for r in rows}["T0"] == 100, "the round under way updates the last one's figures"
    for _ in range(3):
        rows = rounds.rows()
    assert {r.topic: r.lag for r in rows} == lag, "a (group, topic) gone leaves when its round ends"
    small = LagRounds(a_round, lambda _t: 1, queues_max=100)
    assert {r.topic: r.lag for r in small.rows()} == lag, "within the budget one scrape is a whole round"


def test_store_walk_past_the_budget_goes_on_over_scrapes() -> None:
    queues = [SimpleNamespace(mfq=[SimpleNamespace(allocated=10)], ext=None) for _ in range(50_000)]
    store = SimpleNamespace(queues=SimpleNamespace(all=lambda: list(queues)))
    now = [0.0]
    c = StoreCollector(cast(MessageStore, store), clock=lambda: now[0])
    assert c._queues() == (50_000, 500_000, 0), "the first walk is whole"
    queues.extend(SimpleNamespace(mfq=[], ext=SimpleNamespace(mfq=[SimpleNamespace(allocated=7)]))
                  for _ in range(10_000))  # fmt: skip
    now[0] = 10.0
    assert c._queues() == (50_000, 500_000, 0), "no new walk within QUEUES_WALK_SECONDS"
    now[0] = QUEUES_WALK_SECONDS
    seen = [c._queues() for _ in range(3)]
    assert seen[:2] == [(50_000, 500_000, 0)] * 2, "a walk of 60,000 queues takes three scrapes"
    assert seen[2] == (60_000, 500_000, 70_000)


def test_store_walk_within_the_budget_is_whole_every_scrape() -> None:
    queues = [SimpleNamespace(mfq=[SimpleNamespace(allocated=1)], ext=None)]
    store = SimpleNamespace(queues=SimpleNamespace(all=lambda: list(queues)))
    c = StoreCollector(cast(MessageStore, store), clock=lambda: 0.0)
    assert c._queues() == (1, 1, 0)
    queues.append(SimpleNamespace(mfq=[SimpleNamespace(allocated=2)], ext=None))
    assert c._queues() == (2, 3, 0)
