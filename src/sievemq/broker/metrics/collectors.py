"""The broker's traffic, filter and bookkeeping metrics, read from counters the broker keeps anyway
(docs/metrics.md §3-4). Nothing here runs per message: ``collect`` runs when ``/metrics`` is scraped, and reads at
most ``httpMetricsMaxSeries`` entries of each per-topic table, however many topics the broker holds (``bounded.py``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from prometheus_client.core import CounterMetricFamily, Metric

from sievemq.broker.filter_manager import FilterCounts
from sievemq.broker.filter_servers import FunctionCounts
from sievemq.broker.groups import SubscriptionGroupManager
from sievemq.broker.metrics.bounded import head
from sievemq.broker.pop.service import PopService
from sievemq.broker.stats import BrokerStats
from sievemq.broker.timer.service import TimerService
from sievemq.broker.topics import TopicConfigManager
from sievemq.broker.transactions.service import TransactionService
from sievemq.metrics.families import FILTER_HELP, counter, gauge, histogram
from sievemq.metrics.series import OTHER

__all__ = ["BookkeepingCollector", "FilterCollector", "TrafficCollector", "filter_outcomes", "function_outcomes"]


class TrafficCollector:
    """Messages and bytes in and out per topic, send and pull latency (``BrokerStats``)."""

    def __init__(self, stats: BrokerStats, limit: int) -> None:
        """``limit``: series per labelled family (``httpMetricsMaxSeries``)."""
        self.stats = stats
        self.limit = limit

    def _per_topic(self, name: str, doc: str, counts: Mapping[str, int], total: int) -> Metric:
        """The first ``limit`` topics counted, the others in ``(other)``: ``total`` (the table's sum) less them."""
        metric = CounterMetricFamily(name, doc, labels=["topic"])
        kept, rest = head(counts, self.limit, total)
        for topic, n in kept:
            metric.add_metric([topic], n)
        if rest is not None:
            metric.add_metric([OTHER], rest)
        return metric

    def collect(self) -> Iterable[Metric]:
        """The per-topic counters and the two latency histograms."""
        s = self.stats
        yield self._per_topic("sievemq_messages_in", "Messages stored for producers (and replies), by the topic the "
                              "producer named (a delayed, timer or transactional message counts when it arrives)",
                              s.put_by_topic, s.put_total)  # fmt: skip
        yield self._per_topic("sievemq_messages_in_bytes", "Bytes of those messages as stored (record: body, "
                              "properties and header)", s.put_bytes_by_topic, s.put_bytes_total)  # fmt: skip
        yield self._per_topic("sievemq_messages_out", "Messages delivered to consumers (pulls and POPs; the same "
                              "message delivered twice counts twice)", s.get_by_topic, s.get_total)  # fmt: skip
        yield self._per_topic("sievemq_messages_out_bytes", "Bytes of those messages as delivered (records)",
                              s.get_bytes_by_topic, s.get_bytes_total)  # fmt: skip
        yield histogram("sievemq_send_latency_seconds", "Time from a send request reaching the broker's send "
                        "processor to its answer, refusals included (a SYNC_FLUSH or SYNC_MASTER wait is part of "
                        "it; the network and the request's queueing are not)", s.send_latency)  # fmt: skip
        yield histogram("sievemq_pull_latency_seconds", "Time from a pull request reaching the broker's pull "
                        "processor to its answer, excluding the time a long-polling pull was held waiting for "
                        "messages", s.pull_latency)  # fmt: skip


def filter_outcomes(c: FilterCounts) -> list[tuple[str, str, int]]:
    """``(kind, outcome, messages)`` of one group's counts, the zero ones left out: tag (matched, filtered_out),
    bitmap (filtered_out: skipped by the Bloom bits without reading the message), sql (matched, filtered_out,
    error)."""
    rows = [
        ("tag", "matched", c.tag_matched),
        ("tag", "filtered_out", c.filtered_by_tag),
        ("bitmap", "filtered_out", c.filtered_by_bitmap),
        ("sql", "matched", c.sql_matched),
        ("sql", "filtered_out", c.filtered_by_evaluation),
        ("sql", "error", c.evaluation_errors),
    ]
    return [r for r in rows if r[2]]




def function_outcomes(c: FunctionCounts) -> list[tuple[str, str, int]]:
    """``(kind, outcome, messages)`` of one group's function counts as its filter servers reported them: all three
    outcomes, zeros included (as a filter server's own /metrics shows them); ``error`` counts failed batches."""
    return [("function", "matched", c.matched), ("function", "filtered_out", c.filtered_out),
            ("function", "error", c.errors)]  # fmt: skip


class FilterCollector:
    """``sievemq_filter_messages_total{kind, outcome, group, topic}`` from the filter manager's counts (tag, bitmap,
    sql) and the counts the broker's filter servers reported (function)."""

    def __init__(self, counts: Mapping[tuple[str, str], FilterCounts], limit: int,
                 functions: Mapping[tuple[str, str], FunctionCounts] | None = None) -> None:  # fmt: skip
        """``counts``: (group, topic) -> counts, in the order first counted (``ConsumerFilterManager.counts``);
        ``functions`` the same from filter servers (``FunctionCountBook.totals``). Of each, the first ``limit``
        pairs have their own series, the others are added up per kind and outcome."""
        self.counts = counts
        self.functions: Mapping[tuple[str, str], FunctionCounts] = functions if functions is not None else {}
        self.limit = limit

    def collect(self) -> Iterable[Metric]:
        """One series per (kind, outcome) of each pair that counted any (every outcome of a function)."""
        metric = CounterMetricFamily("sievemq_filter_messages", FILTER_HELP, labels=["kind", "outcome", "group",
                                                                                     "topic"])  # fmt: skip
        self._add(metric, [(pair, filter_outcomes(c)) for pair, c in list(self.counts.items())])
        self._add(metric, [(pair, function_outcomes(c)) for pair, c in list(self.functions.items())])
        yield metric

    def _add(self, metric: CounterMetricFamily,
             pairs: list[tuple[tuple[str, str], list[tuple[str, str, int]]]]) -> None:  # fmt: skip
        rest: dict[tuple[str, str], int] = {}
        for i, ((group, topic), rows) in enumerate(pairs):
            for kind, outcome, n in rows:
                if i < self.limit:
                    metric.add_metric([kind, outcome, group, topic], n)
                else:
                    rest[(kind, outcome)] = rest.get((kind, outcome), 0) + n
        for (kind, outcome), n in rest.items():
            metric.add_metric([kind, outcome, OTHER, OTHER], n)


class BookkeepingCollector:
    """Topics and groups, open transactions and their checks, pending timer messages, POP dead letters."""

    def __init__(self, topics: TopicConfigManager, groups: SubscriptionGroupManager,
                 transactions: TransactionService, timers: TimerService, pop: PopService) -> None:  # fmt: skip
        self.topics = topics
        self.groups = groups
        self.transactions = transactions
        self.timers = timers
        self.pop = pop

    def collect(self) -> Iterable[Metric]:
        """Sizes and counts as they are."""
        tx = self.transactions
        yield gauge("sievemq_broker_topics", "Topics this broker holds (system topics included)",
                    len(self.topics.table))  # fmt: skip
        yield gauge("sievemq_broker_consumer_groups", "Subscription groups this broker holds", len(self.groups.table))
        yield gauge("sievemq_transactions_open", "Half messages of transactions neither committed nor rolled back yet",
                    len(tx.book.pending))  # fmt: skip
        yield counter("sievemq_transaction_checks", "CHECK_TRANSACTION_STATE requests sent to producers about open "
                      "transactions", tx.checks_sent)  # fmt: skip
        yield counter("sievemq_transactions_expired", "Open transactions rolled back after transactionCheckMax "
                      "checks without an answer", tx.expired)  # fmt: skip
        yield gauge("sievemq_timer_messages_pending", "Timer messages parked and not delivered yet",
                    self.timers.waiting())  # fmt: skip
        yield counter("sievemq_pop_dead_letters", "POP messages moved to their group's dead-letter topic after the "
                      "group's last delivery attempt", self.pop.dead_lettered)  # fmt: skip
