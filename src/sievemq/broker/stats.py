"""Message counters of a broker (puts and gets, total and per topic, messages and bytes) and the latency histograms
of sends and pulls. The processors update them per request; ``/metrics`` reads them when scraped
(``sievemq.broker.metrics.collectors``, docs/metrics.md §3)."""

from __future__ import annotations

from collections import Counter

from sievemq.metrics.histogram import LatencyHistogram


class BrokerStats:
    """Counts messages stored and delivered, and times sends and pulls."""

    def __init__(self) -> None:
        self.put_total = 0
        self.get_total = 0
        self.put_by_topic: Counter[str] = Counter()
        self.get_by_topic: Counter[str] = Counter()
        self.put_bytes_by_topic: Counter[str] = Counter()
        """Bytes of the stored records (body, properties and header, as in the commit log)."""
        self.get_bytes_by_topic: Counter[str] = Counter()
        self.send_latency = LatencyHistogram()
        """Seconds from a send's arrival at its processor to its answer (SYNC_FLUSH and SYNC_MASTER waits included)."""
        self.pull_latency = LatencyHistogram()
        """Seconds from a pull's arrival at its processor to its answer, less the time it was held (long polling)."""

    def put(self, topic: str, n: int, nbytes: int = 0) -> None:
        """``n`` messages of ``nbytes`` record bytes stored to ``topic``."""
        self.put_total += n
        self.put_by_topic[topic] += n
        self.put_bytes_by_topic[topic] += nbytes

    def get(self, topic: str, n: int, nbytes: int = 0) -> None:
        """``n`` messages of ``nbytes`` record bytes delivered from ``topic``."""
        self.get_total += n
        self.get_by_topic[topic] += n
        self.get_bytes_by_topic[topic] += nbytes
