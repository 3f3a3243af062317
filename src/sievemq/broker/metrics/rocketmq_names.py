"""RocketMQ 5's broker metric families under RocketMQ's own names, beside sievemq's (docs/metrics-rocketmq.md).

RocketMQ 5 (5.1.4 and later: OpenTelemetry 1.29's Prometheus exporter) exposes its broker's metrics as
``rocketmq_*`` families, every series labelled ``cluster``, ``node_type="broker"`` and ``node_id`` (the broker's
name), a unit appended to names that have one (``rocketmq_consumer_lag_latency_milliseconds``). Dashboards and alerts
made for RocketMQ query those names; this collector exports every one sievemq can compute from what it keeps anyway,
read at scrape time like sievemq's own families (docs/metrics.md): ``RocketMQCounts`` (the traffic, counted per
request beside ``BrokerStats``' counters), the consumer tables and offsets (``rocketmq_lag.py``), the store, and
the dead-letter topics (``DeadLetterCounts``). Labelled families are bounded by ``httpMetricsMaxSeries`` as sievemq's
are: the rest adds up in one series whose client-named labels are ``(other)``; the node labels stay.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from sievemq.broker.clients import ConsumerManager, ProducerManager
from sievemq.broker.filter_manager import ConsumerFilterManager
from sievemq.broker.groups import SubscriptionGroupManager
from sievemq.broker.metrics.bounded import head, head_histograms
from sievemq.broker.metrics.rocketmq_counts import RocketMQCounts
from sievemq.broker.metrics.rocketmq_labels import (
    consume_mode,
    flag,
    is_system,
    is_system_group,
    version_desc,
)
from sievemq.broker.metrics.rocketmq_lag import GroupLag, LagRounds, ScanBudget, group_lags
from sievemq.broker.offsets import ConsumerOffsetManager
from sievemq.broker.pop.book import PopBook
from sievemq.broker.topics import TopicConfigManager
from sievemq.broker.transactions.book import PendingHalf
from sievemq.metrics.histogram import LatencyHistogram
from sievemq.metrics.series import OTHER, first_n, top_n
from sievemq.protocol.message import PropertyKey, decode_record
from sievemq.protocol.names import DLQ_GROUP_TOPIC_PREFIX, retry_topic
from sievemq.protocol.route import PERM_READ, PERM_WRITE
from sievemq.store import MessageStore

if TYPE_CHECKING:
    from sievemq.broker.controller import BrokerController

__all__ = ["DeadLetterCounts", "RocketMQCollector", "node_labels", "rocketmq_collector"]

NODE_LABELS = ("cluster", "node_type", "node_id")
"""The labels RocketMQ puts on every series of a broker (``BrokerMetricsManager.init``)."""
STORE_LABELS = ("storage_type", "storage_medium")
STORE_VALUES = ("local", "disk")
"""``DefaultStoreMetricsManager``'s labels: a local store on disk."""
BROKER_PERMISSION = PERM_READ | PERM_WRITE
"""sievemq has no ``brokerPermission`` setting: its brokers always read and write, RocketMQ's default 6."""
DLQ_SCAN_MAX = 1000
"""Dead-letter records read per queue per scrape; a larger burst is counted over the next scrapes."""
DLQ_REFIND_EVERY = 20
"""Scrapes after which the dead-letter topics are looked for again in the topic table even if its size is the same
(a topic deleted and another made between two scrapes)."""
HALF_READS_MAX = 10_000
"""Half-message records read per scrape to learn their topics."""

Rows = Iterable[tuple[tuple[str, ...], float]]


def node_labels(cluster: str, broker_name: str) -> tuple[str, str, str]:
    """``(cluster, node_type, node_id)`` of a broker: RocketMQ's node id is the broker's name."""
    return cluster, "broker", broker_name


def _bounded(metric: CounterMetricFamily | GaugeMetricFamily, node: Sequence[str], labels: Sequence[str],
             rows: Rows, limit: int, *, gauge: bool = False, rest_max: bool = False,
             extra: Callable[[tuple[str, ...]], Mapping[str, str]] | None = None) -> Metric:  # fmt: skip
    """Add ``rows`` (client-named label values -> value) to ``metric`` after the node labels: the first ``limit``
    (a counter) or the ``limit`` largest (a gauge) keep their series, the others add up in ``(other)`` (their
    largest, for a latency: ``rest_max``). ``extra``: more labels some series have and others not."""
    every = list(rows)
    kept, rest = (top_n if gauge else first_n)(every, limit)
    sample = metric.name + ("_total" if isinstance(metric, CounterMetricFamily) else "")
    for values, value in kept:
        more = extra(values) if extra is not None else None
        if more:
            metric.add_sample(sample, {**dict(zip([*NODE_LABELS, *labels], [*node, *values], strict=True)), **more},
                              value)  # fmt: skip
        else:
            metric.add_metric([*node, *values], value)
    if rest is not None:
        if rest_max:
            chosen = {values for values, _ in kept}
            rest = max(v for values, v in every if values not in chosen)
        metric.add_metric([*node, *([OTHER] * len(labels))], rest)
    return metric


def _histograms(name: str, doc: str, node: Sequence[str], labels: Sequence[str],
                rows: Sequence[tuple[tuple[str, ...], LatencyHistogram]],
                rest: LatencyHistogram | None) -> Metric:  # fmt: skip
    """A histogram family: one series per kept label set (``bounded.head_histograms``), ``rest`` in ``(other)``."""
    metric = HistogramMetricFamily(name, doc, labels=[*NODE_LABELS, *labels])
    for values, h in rows:
        _add_histogram(metric, [*node, *values], h)
    if rest is not None:
        _add_histogram(metric, [*node, *([OTHER] * len(labels))], rest)
    return metric


def _add_histogram(metric: HistogramMetricFamily, values: list[str], h: LatencyHistogram) -> None:
    buckets = [(_le(bound), float(n)) for bound, n in h.cumulative()]
    metric.add_metric(values, buckets, h.sum)


def _le(bound: float) -> str:
    """An ``le`` value as OpenTelemetry's exporter writes it (``1024.0``, ``+Inf``)."""
    return "+Inf" if bound == float("inf") else repr(float(bound))


class DeadLetterCounts:
    """Messages moved to a ``%DLQ%<group>`` topic since the broker started, by group and original topic: what
    RocketMQ counts as ``rocketmq_send_to_dlq_messages_total`` where it dead-letters. sievemq dead-letters in three
    places (a consumer's send-back, a client's own send to the retry topic, a POP's last attempt); rather than count in
    each, this reads the records the dead-letter queues gained since the last scrape (their ``RETRY_TOPIC`` property
    names the original topic), at most ``DLQ_SCAN_MAX`` per queue per scrape. Queues that existed at start count from
    their end then. A slave's copies of dead letters are passed over (``copying()`` true): its master counted them.

    The dead-letter topics are found in the topic table (every place that dead-letters creates its topic there):
    its names are walked again only when the table's size changed or every ``DLQ_REFIND_EVERY`` scrapes, so a scrape
    of a broker with 100,000 topics and a few dead-letter topics looks at those few queues only.
    """

    def __init__(self, store: MessageStore, copying: Callable[[], bool] = lambda: False,
                 topics: TopicConfigManager | None = None) -> None:  # fmt: skip
        """``topics``: where the dead-letter topics are found (None: the store's queues, every scrape)."""
        self.store = store
        self.copying = copying
        self.topics = topics
        self.counts: Counter[tuple[str, str]] = Counter()
        """(group, original topic) -> messages, in the order first counted."""
        self.read_to: dict[tuple[str, int], int] = {}
        """(dead-letter topic, queue) -> the next queue offset to read."""
        self._queues: list[tuple[str, int]] = []
        self._found_at: tuple[int, int] = (-1, 0)
        """(size of the topic table, scrapes since) when ``_queues`` was found."""
        for topic, q in self.queues():
            self.read_to[(topic, q)] = store.get_max_offset(topic, q)

    def queues(self) -> list[tuple[str, int]]:
        """The dead-letter queues: (topic, queue id)."""
        if self.topics is None:
            return [(t, q) for t, qs in self.store.topic_queues().items() if t.startswith(DLQ_GROUP_TOPIC_PREFIX)
                    for q in qs]  # fmt: skip
        table = self.topics.table
        size, since = self._found_at
        if size == len(table) and since < DLQ_REFIND_EVERY:
            self._found_at = (size, since + 1)
            return self._queues
        self._queues = [(t, q) for t in [t for t in table if t.startswith(DLQ_GROUP_TOPIC_PREFIX)]
                        for q in range(max(1, table[t].read_queue_nums, table[t].write_queue_nums))]  # fmt: skip
        self._found_at = (len(table), 0)
        return self._queues

    def update(self) -> Counter[tuple[str, str]]:
        """Count what was dead-lettered since the last call; the counts."""
        store = self.store
        skip = self.copying()
        for topic, q in self.queues():
            group = topic[len(DLQ_GROUP_TOPIC_PREFIX) :]
            last = store.get_max_offset(topic, q)
            start = self.read_to.get((topic, q), 0)
            if start > last:  # the topic was deleted and made again: its queue starts over
                start = 0
            if start >= last:
                continue
            start = max(start, store.get_min_offset(topic, q))
            if skip:
                self.read_to[(topic, q)] = max(start, last)
                continue
            end = min(last, start + DLQ_SCAN_MAX)
            offset = start
            while offset < end:
                got = store.get_message(topic, q, offset, min(32, end - offset), None)
                for raw in got.records:
                    props = decode_record(raw, read_body=False)[0].properties
                    self.counts[(group, props.get(PropertyKey.RETRY_TOPIC) or retry_topic(group))] += 1
                if got.next_begin_offset <= offset:
                    break
                offset = got.next_begin_offset
            self.read_to[(topic, q)] = max(offset, start)
        return self.counts


class HalfTopics:
    """Open half messages by the topic their transaction sends to (RocketMQ's ``rocketmq_half_messages``): sievemq's
    transaction book keeps each open half's commit-log offset, not its topic, so the topic is read from the record
    (its ``REAL_TOPIC``) the first time a scrape sees it and remembered while the transaction is open; at most
    ``HALF_READS_MAX`` records are read per scrape (the others count in ``(other)`` until a later scrape reads them).
    """

    def __init__(self, store: MessageStore, pending: Mapping[int, PendingHalf]) -> None:
        self.store = store
        self.pending = pending
        self.topics: dict[int, str] = {}
        """Queue offset of an open half -> its topic."""

    def _topic(self, phy: int) -> str:
        raw = self.store.look_message_by_offset(phy)
        try:
            msg = decode_record(raw, read_body=False)[0] if raw else None
        except ValueError:
            msg = None
        return (msg.properties.get(PropertyKey.REAL_TOPIC) or msg.topic) if msg is not None else OTHER

    def counts(self) -> Counter[str]:
        """Open half messages per topic."""
        pending = self.pending
        for offset in [o for o in self.topics if o not in pending]:
            del self.topics[offset]
        out: Counter[str] = Counter()
        reads = 0
        for offset, half in list(pending.items()):
            topic = self.topics.get(offset)
            if topic is None and reads < HALF_READS_MAX:
                reads += 1
                topic = self.topics[offset] = self._topic(half.phy)
            out[topic or OTHER] += 1
        return out


class RocketMQCollector:
    """``rocketmq_*``: RocketMQ 5's broker families sievemq can compute (the list: docs/metrics-rocketmq.md §1)."""

    def __init__(self, node: tuple[str, str, str], counts: RocketMQCounts, topics: TopicConfigManager,
                 groups: SubscriptionGroupManager, consumers: ConsumerManager, producers: ProducerManager,
                 offsets: ConsumerOffsetManager, store: MessageStore, pop: PopBook, filters: ConsumerFilterManager,
                 limit: int, clock: Callable[[], float] = time.time, copying: Callable[[], bool] = lambda: False,
                 halves: Mapping[int, PendingHalf] | None = None) -> None:  # fmt: skip
        """``copying``: true while the broker is a slave (its dead letters are its master's, counted there);
        ``halves``: the open transactions (``TransactionBook.pending``)."""
        self.node = node
        self.counts = counts
        self.topics = topics
        self.groups = groups
        self.consumers = consumers
        self.producers = producers
        self.offsets = offsets
        self.store = store
        self.pop = pop
        self.filters = filters
        self.limit = limit
        self.clock = clock
        self.dead_letters = DeadLetterCounts(store, copying, topics)
        self.halves = HalfTopics(store, halves if halves is not None else {})

        def a_round(budget: ScanBudget) -> Iterator[GroupLag]:
            return group_lags(consumers, groups, topics, offsets, store, pop, filters, clock, budget)

        def queues_of(topic: str) -> int:
            tc = topics.get(topic)
            return max(1, tc.write_queue_nums) if tc is not None else 1

        self.lag_rounds = LagRounds(a_round, queues_of)
        """The consumer figures, over at most ``LAG_QUEUES_MAX`` queues per scrape (``rocketmq_lag.py``)."""

    def _counter(self, name: str, doc: str, labels: Sequence[str], rows: Rows,
                 extra: Callable[[tuple[str, ...]], Mapping[str, str]] | None = None, *,
                 rest: float | None = None) -> Metric:  # fmt: skip
        """``rest``: the rows are the kept ones already (``bounded.head``) and this is the ``(other)`` series."""
        metric = CounterMetricFamily(name, doc, labels=[*NODE_LABELS, *labels])
        if rest is not None:
            rows = [*rows, ((OTHER,) * len(labels), rest)]
        return _bounded(metric, self.node, labels, rows, self.limit + 1 if rest is not None else self.limit,
                        extra=extra)  # fmt: skip

    def _gauge(self, name: str, doc: str, labels: Sequence[str], rows: Rows, rest_max: bool = False) -> Metric:
        metric = GaugeMetricFamily(name, doc, labels=[*NODE_LABELS, *labels])
        return _bounded(metric, self.node, labels, rows, self.limit, gauge=True, rest_max=rest_max)

    def _single(self, name: str, doc: str, value: float, labels: Sequence[str] = (),
                values: Sequence[str] = ()) -> Metric:  # fmt: skip
        metric = GaugeMetricFamily(name, doc, labels=[*NODE_LABELS, *labels])
        metric.add_metric([*self.node, *values], value)
        return metric

    def collect(self) -> Iterable[Metric]:
        """Every family, read now."""
        yield from self._traffic()
        yield from self._bookkeeping()
        yield from self._connections()
        yield from self._lag()
        yield from self._store()

    # ------------------------------------------------------------------------------------------ traffic
    def _traffic(self) -> Iterable[Metric]:
        c = self.counts
        limit = self.limit
        into = ["topic", "message_type", "is_system"]

        def rows(kept: list[tuple[tuple[str, str], int]], system: Callable[[str, str], bool]) -> Rows:
            return (((a, b, flag(system(a, b))), n) for (a, b), n in kept)

        def put_system(topic: str, _kind: str) -> bool:
            return is_system(topic)

        def get_system(topic: str, group: str) -> bool:
            return is_system(topic, group)

        # The tables hold no retry or dead-letter topic (RocketMQCounts leaves them out); at most ``limit`` entries
        # of each are read, the (other) series is the running total less them (bounded.py).
        kept, rest = head(c.put_messages, limit, c.put_messages_total)
        yield self._counter("rocketmq_messages_in", "Total number of incoming messages (sends stored, by the topic "
                            "the producer named; retry and dead-letter topics left out)", into,
                            rows(kept, put_system), rest=rest)  # fmt: skip
        kept, rest = head(c.put_bytes, limit, c.put_bytes_total)
        yield self._counter("rocketmq_throughput_in", "Total traffic of incoming messages, bytes as stored",
                            into, rows(kept, put_system), rest=rest)  # fmt: skip
        sizes, size_rest = head_histograms(c.message_size, limit, c.message_size_total)
        yield _histograms("rocketmq_message_size", "Incoming messages size, bytes per message of each send request",
                          self.node, into, [((t, k, flag(is_system(t))), h) for (t, k), h in sizes],
                          size_rest)  # fmt: skip
        out = ["topic", "consumer_group", "is_system"]
        got, got_rest = head(c.get_messages, limit, c.get_messages_total)
        got_bytes, got_bytes_rest = head(c.get_bytes, limit, c.get_bytes_total)
        pairs = {(g, t) for (t, g), _ in got} | {(g, t) for (t, g), _ in got_bytes}
        popping = {(g, t) for g, t, _ in list(self.pop.queues) if (g, t) in pairs} if pairs else set()

        def pop_retry(values: tuple[str, ...]) -> Mapping[str, str]:
            """RocketMQ labels a POP's deliveries ``is_retry`` (sievemq's POP has no retry topic: false)."""
            return {"is_retry": "false"} if (values[1], values[0]) in popping else {}

        yield self._counter("rocketmq_messages_out", "Total number of outgoing messages (pulls and POPs; retry and "
                            "dead-letter topics left out)", out, rows(got, get_system), pop_retry,
                            rest=got_rest)  # fmt: skip
        yield self._counter("rocketmq_throughput_out", "Total traffic of outgoing messages, bytes as delivered", out,
                            rows(got_bytes, get_system), pop_retry, rest=got_bytes_rest)  # fmt: skip
        dlq = self.dead_letters.update()
        yield self._counter("rocketmq_send_to_dlq_messages", "Consumer send to DLQ messages (since the broker "
                            "started, by group and original topic)", ["consumer_group", "topic", "is_system"],
                            (((g, t, flag(is_system(t, g))), n) for (g, t), n in list(dlq.items())))  # fmt: skip

    # ------------------------------------------------------------------------------------------ bookkeeping
    def _bookkeeping(self) -> Iterable[Metric]:
        yield self._single("rocketmq_broker_permission", "Broker permission (sievemq: always 6, read and write)",
                           BROKER_PERMISSION)  # fmt: skip
        yield self._single("rocketmq_topic_number", "Active topic number", len(self.topics.table))
        yield self._single("rocketmq_consumer_group_number", "Active subscription group number",
                           len(self.groups.table))  # fmt: skip
        yield self._gauge("rocketmq_half_messages", "Half messages of all topics (open transactions, by the topic "
                          "they send to)", ["topic"], (((t,), n) for t, n in self.halves.counts().items()))  # fmt: skip

    # ------------------------------------------------------------------------------------------ connections
    def _connections(self) -> Iterable[Metric]:
        producers: Counter[tuple[str, ...]] = Counter()
        for channels in list(self.producers.groups.values()):
            for ch in list(channels.values()):
                producers[(ch.language.lower(), version_desc(ch.version), "remoting")] += 1
        yield self._gauge("rocketmq_producer_connections", "Producer connections", ["language", "version",
                          "protocol_type"], producers.items())  # fmt: skip
        consumers: Counter[tuple[str, ...]] = Counter()
        for group, info in list(self.consumers.groups.items()):
            mode = consume_mode(info.consume_type)
            for ch in list(info.channels.values()):
                consumers[(group, ch.language.lower(), version_desc(ch.version), mode, "remoting",
                           flag(is_system_group(group)))] += 1  # fmt: skip
        yield self._gauge("rocketmq_consumer_connections", "Consumer connections", ["consumer_group", "language",
                          "version", "consume_mode", "protocol_type", "is_system"], consumers.items())  # fmt: skip

    # ------------------------------------------------------------------------------------------ lag
    def _lag(self) -> Iterable[Metric]:
        rows = self.lag_rounds.rows()
        labels = ["consumer_group", "topic", "is_retry", "is_system"]

        def of(field: str) -> Rows:
            return (((r.group, r.topic, "false", flag(is_system(r.topic, r.group))), getattr(r, field)) for r in rows)

        yield self._gauge("rocketmq_consumer_lag_messages", "Consumer lag messages", labels, of("lag"))
        yield self._gauge("rocketmq_consumer_lag_latency_milliseconds", "Consumer lag time: milliseconds since the "
                          "oldest unconsumed message was stored", labels, of("lag_latency_ms"),
                          rest_max=True)  # fmt: skip
        yield self._gauge("rocketmq_consumer_inflight_messages", "Consumer inflight messages (pulled or popped, "
                          "not committed or acked)", labels, of("inflight"))  # fmt: skip
        yield self._gauge("rocketmq_consumer_queueing_latency_milliseconds", "Consumer queueing time: milliseconds "
                          "since the oldest message not pulled yet was stored", labels, of("queueing_latency_ms"),
                          rest_max=True)  # fmt: skip
        yield self._gauge("rocketmq_consumer_ready_messages", "Consumer ready messages (stored, not pulled yet)",
                          labels, of("ready"))  # fmt: skip

    # ------------------------------------------------------------------------------------------ store
    def _store(self) -> Iterable[Metric]:
        s = self.store

        def one(name: str, doc: str, value: float) -> Metric:
            return self._single(name, doc, value, STORE_LABELS, STORE_VALUES)

        try:
            st = os.statvfs(s.root)
        except OSError:
            pass
        else:
            used = (st.f_blocks - st.f_bfree) * st.f_frsize
            yield one("rocketmq_storage_size_bytes", "Broker storage size: bytes used on the store's filesystem", used)
        yield one("rocketmq_storage_flush_behind_bytes", "Broker flush behind bytes: commit log written, not yet "
                  "forced to disk", max(0, s.max_phy_offset - s.commitlog.mfq.flushed_offset))  # fmt: skip
        yield one("rocketmq_storage_dispatch_behind_bytes", "Broker dispatch behind bytes: commit log not yet in "
                  "the consume queues", max(0, s.max_phy_offset - s.writer.dispatched_to))  # fmt: skip
        earliest = s.commitlog.store_timestamp_at(s.min_phy_offset) if s.max_phy_offset > s.min_phy_offset else None
        if earliest is not None and earliest > 0:
            yield one("rocketmq_storage_message_reserve_time_milliseconds", "Broker message reserve time: "
                      "milliseconds since the oldest message the commit log holds was stored",
                      max(0, int(self.clock() * 1000) - earliest))  # fmt: skip


def rocketmq_collector(b: BrokerController) -> RocketMQCollector:
    """The collector of a running broker (``broker_metrics`` adds it unless ``httpMetricsRocketmqNames`` is off)."""
    c = b.config
    node = node_labels(c.broker_cluster_name, c.broker_name)
    return RocketMQCollector(node, b.stats.rocketmq, b.topics, b.groups, b.consumers, b.producers, b.offsets,
                             b.store, b.pop.book, b.filters, c.http_metrics_max_series,
                             copying=lambda: b.replication.is_slave, halves=b.transactions.book.pending)  # fmt: skip
