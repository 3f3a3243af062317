"""What RocketMQ 5's broker counts per request and sievemq's own counters do not split the same way: messages in by
(topic, message type), out by (topic, consumer group), and the size of stored messages (docs/metrics-rocketmq.md).

``BrokerStats`` holds one ``RocketMQCounts`` and feeds it from the same calls that feed its own counters: two
``Counter`` additions, two to the running totals and two bucket increments per send, four additions per pull. The
families are built from them when ``/metrics`` is scraped (``rocketmq_names.py``), reading at most
``httpMetricsMaxSeries`` entries of each table: the running totals give the ``(other)`` series (``bounded.py``).
Retry and dead-letter topics, which RocketMQ's message and throughput counters leave out, are not counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from sievemq.metrics.histogram import LatencyHistogram
from sievemq.protocol.names import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from sievemq.protocol.property_keys import PropertyKey

__all__ = ["MESSAGE_SIZE_BUCKETS", "RocketMQCounts", "message_type"]

MESSAGE_SIZE_BUCKETS: tuple[float, ...] = (1024.0, 4096.0, 524288.0, 1048576.0, 2097152.0, 4194304.0)
"""RocketMQ's ``rocketmq_message_size`` buckets (BrokerMetricsManager's view): 1 KiB, 4 KiB, 512 KiB, 1, 2, 4 MiB."""

_DELAY_KEYS = frozenset({"__STARTDELIVERTIME", PropertyKey.DELAY, PropertyKey.TIMER_DELIVER_MS,
                         PropertyKey.TIMER_DELAY_SEC, PropertyKey.TIMER_DELAY_MS})  # fmt: skip
_SHARDING_KEY = "__SHARDINGKEY"
_LEFT_OUT = (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)


def message_type(props: Mapping[str, str]) -> str:
    """RocketMQ's ``message_type`` label of a sent message (``BrokerMetricsManager.getMessageType``, lower case):
    ``transaction`` (TRAN_MSG true), ``fifo`` (a sharding key), ``delay`` (a delay level or a timer), else
    ``normal``."""
    tran = props.get(PropertyKey.TRAN_MSG)
    if tran is not None and tran.lower() == "true":
        return "transaction"
    if _SHARDING_KEY in props:
        return "fifo"
    return "normal" if _DELAY_KEYS.isdisjoint(props) else "delay"


class RocketMQCounts:
    """Counters since the broker started, in the order first counted (what ``series.first_n`` keeps)."""

    __slots__ = ("get_bytes", "get_bytes_total", "get_messages", "get_messages_total", "message_size",
                 "message_size_total", "put_bytes", "put_bytes_total", "put_messages",
                 "put_messages_total")  # fmt: skip

    def __init__(self) -> None:
        self.put_messages: Counter[tuple[str, str]] = Counter()
        """(topic, message type) -> messages stored for producers."""
        self.put_bytes: Counter[tuple[str, str]] = Counter()
        """(topic, message type) -> their stored bytes (records)."""
        self.message_size: dict[tuple[str, str], LatencyHistogram] = {}
        """(topic, message type) -> one sample per send request: its stored bytes per message."""
        self.get_messages: Counter[tuple[str, str]] = Counter()
        """(topic, consumer group) -> messages delivered."""
        self.get_bytes: Counter[tuple[str, str]] = Counter()
        self.put_messages_total = 0
        """The sum of ``put_messages`` (and so on: the ``(other)`` series is a total less the kept entries)."""
        self.put_bytes_total = 0
        self.get_messages_total = 0
        self.get_bytes_total = 0
        self.message_size_total = LatencyHistogram(MESSAGE_SIZE_BUCKETS)
        """Every sample of ``message_size`` in one histogram."""

    def put(self, topic: str, kind: str, n: int, nbytes: int) -> None:
        """A send request stored ``n`` messages of ``nbytes`` record bytes to ``topic`` (not counted for a retry or
        dead-letter topic)."""
        if topic.startswith(_LEFT_OUT):
            return
        key = (topic, kind)
        self.put_messages[key] += n
        self.put_bytes[key] += nbytes
        self.put_messages_total += n
        self.put_bytes_total += nbytes
        h = self.message_size.get(key)
        if h is None:
            h = self.message_size[key] = LatencyHistogram(MESSAGE_SIZE_BUCKETS)
        if n > 0:
            h.observe(nbytes // n)
            self.message_size_total.observe(nbytes // n)

    def get(self, topic: str, group: str, n: int, nbytes: int) -> None:
        """A pull or POP of ``group`` delivered ``n`` messages of ``nbytes`` bytes from ``topic`` (not counted for a
        retry or dead-letter topic)."""
        if n > 0 and not topic.startswith(_LEFT_OUT):
            key = (topic, group)
            self.get_messages[key] += n
            self.get_bytes[key] += nbytes
            self.get_messages_total += n
            self.get_bytes_total += nbytes
