"""What a consumer answers to GET_CONSUMER_RUNNING_INFO (307; ``mqadmin consumerStatus``, the RocketMQ dashboard's
consumer detail): its settings as the properties of RocketMQ's ``ConsumerRunningInfo``, and the messages pulled per
topic over the last minute (``ConsumeStatus.pullTPS``). The document itself is ``protocol/running_info.py``.

Properties carry the names of the Java consumer's fields where sievemq has the same setting
(``DefaultMQPushConsumer`` for a push consumer, ``DefaultLitePullConsumer`` for a pull consumer, ``ClientConfig``
for both), in Java's units (milliseconds, MiB); a push consumer's ``pull_suspend`` and ``pull_timeout``, fixed in
Java's push consumer, go under the lite pull consumer's names (``brokerSuspendMaxTimeMillis``,
``consumerTimeoutMillisWhenSuspend``).

``ConsumeStatus``: the client counts the messages its pulls bring (``pullTPS``, a push consumer); it does not time
pulls or listeners nor count failures, so ``pullRT``, ``consumeRT``, ``consumeOKTPS``, ``consumeFailedTPS`` and
``consumeFailedMsgs`` are 0.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from datetime import datetime

from sievemq.client.allocate import AllocateStrategy
from sievemq.client.instance import ClientConfig
from sievemq.client.options import ConsumeOptions
from sievemq.client.queue_puller import PULL_RETRY_DELAY
from sievemq.protocol import running_info as ri

__all__ = ["CLIENT_VERSION", "PulledCounter", "client_properties", "pull_properties", "push_properties"]

CLIENT_VERSION = "V4_9_8"
"""RocketMQ's name of the version the client sends in every request (``remoting.command.SIEVEMQ_VERSION``, 409:
``MQVersion.Version.V4_9_8``); mqadmin prints the same in its ``#Version`` column."""

RATE_WINDOW = 60.0
"""Seconds over which ``PulledCounter`` counts (RocketMQ's per-minute statistics)."""


def _ms(seconds: float) -> str:
    return str(round(seconds * 1000))


def java_time(ms: int) -> str:
    """``yyyyMMddHHmmss`` in local time (Java's ``consumeTimestamp``)."""
    return datetime.fromtimestamp(ms / 1000).strftime("%Y%m%d%H%M%S")


def strategy_name(strategy: AllocateStrategy) -> str:
    """What a queue allocation strategy is called (a function's qualified name)."""
    return str(getattr(strategy, "__qualname__", None) or type(strategy).__name__)


def client_properties(config: ClientConfig, *, consume_type: str, started_ms: int) -> dict[str, str]:
    """The properties every consumer has: ``ClientConfig``'s fields, the name servers, the client version, the
    consume type and when the consumer started."""
    return {
        ri.PROP_NAMESERVER_ADDR: ri.namesrv_property(config.namesrv),
        ri.PROP_CONSUME_TYPE: consume_type,
        ri.PROP_CLIENT_VERSION: CLIENT_VERSION,
        ri.PROP_CONSUMER_START_TIMESTAMP: str(started_ms),
        "namesrvAddr": ";".join(config.namesrv),
        "clientIP": config.client_ip,
        "instanceName": config.instance_name,
        "pollNameServerInterval": _ms(config.poll_namesrv_interval),
        "heartbeatBrokerInterval": _ms(config.heartbeat_interval),
        "persistConsumerOffsetInterval": _ms(config.persist_interval),
        "mqClientApiTimeout": _ms(config.request_timeout),
        "pullTimeDelayMillsWhenException": _ms(PULL_RETRY_DELAY),
        "useTLS": str(config.tls).lower(),
        "unitMode": "false",
    }


def push_properties(
    group: str,
    config: ClientConfig,
    consume: ConsumeOptions,
    *,
    broadcasting: bool,
    orderly: bool,
    consume_from: str,
    consume_timestamp: int,
    allocate: AllocateStrategy,
    started_ms: int,
) -> dict[str, str]:
    """A push consumer's properties (``DefaultMQPushConsumer``'s names)."""
    props = client_properties(config, consume_type=ri.CONSUME_PASSIVELY, started_ms=started_ms)
    props.update({
        ri.PROP_CONSUME_ORDERLY: str(orderly).lower(),
        ri.PROP_THREADPOOL_CORE_SIZE: str(consume.concurrency),
        "consumerGroup": group,
        "messageModel": "BROADCASTING" if broadcasting else "CLUSTERING",
        "consumeFromWhere": consume_from,
        "consumeTimestamp": java_time(consume_timestamp),
        "allocateMessageQueueStrategy": strategy_name(allocate),
        "consumeThreadMin": str(consume.concurrency),
        "consumeThreadMax": str(consume.concurrency),
        "consumeConcurrentlyMaxSpan": str(consume.max_span),
        "pullThresholdForQueue": str(consume.max_cached_messages),
        "pullThresholdSizeForQueue": str(consume.max_cached_mib),
        "consumeMessageBatchMaxSize": str(consume.consume_batch_size),
        "pullBatchSize": str(consume.pull_batch_size),
        "maxReconsumeTimes": str(consume.max_reconsume_times),
        "suspendCurrentQueueTimeMillis": _ms(consume.suspend),
        "brokerSuspendMaxTimeMillis": _ms(consume.pull_suspend),
        "consumerTimeoutMillisWhenSuspend": _ms(consume.pull_timeout),
    })  # fmt: skip
    return props


def pull_properties(
    group: str,
    config: ClientConfig,
    *,
    consume_from: str,
    consume_timestamp: int,
    allocate: AllocateStrategy,
    pull_batch_size: int,
    max_cached_messages: int,
    pull_suspend: float,
    pull_timeout: float,
    auto_commit: bool,
    started_ms: int,
) -> dict[str, str]:
    """A pull consumer's properties (``DefaultLitePullConsumer``'s names)."""
    props = client_properties(config, consume_type=ri.CONSUME_ACTIVELY, started_ms=started_ms)
    props.update({
        "consumerGroup": group,
        "messageModel": "CLUSTERING",
        "consumeFromWhere": consume_from,
        "consumeTimestamp": java_time(consume_timestamp),
        "allocateMessageQueueStrategy": strategy_name(allocate),
        "pullBatchSize": str(pull_batch_size),
        "pullThresholdForQueue": str(max_cached_messages),
        "brokerSuspendMaxTimeMillis": _ms(pull_suspend),
        "consumerTimeoutMillisWhenSuspend": _ms(pull_timeout),
        "autoCommit": str(auto_commit).lower(),
        "autoCommitIntervalMillis": _ms(config.persist_interval),
    })  # fmt: skip
    return props


class PulledCounter:
    """Messages pulled per topic over the last ``RATE_WINDOW`` seconds (``clock``: seconds, monotonic)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.since = clock()
        self._seen: dict[str, deque[tuple[float, int]]] = {}

    def add(self, topic: str, count: int) -> None:
        """``count`` messages of ``topic`` arrived now."""
        if count <= 0:
            return
        now = self.clock()
        seen = self._seen.setdefault(topic, deque())
        seen.append((now, count))
        self._trim(seen, now)

    def tps(self, topic: str) -> float:
        """Messages per second over the last minute (over the time since the counter began, when shorter)."""
        now = self.clock()
        seen = self._seen.get(topic)
        if not seen:
            return 0.0
        self._trim(seen, now)
        span = min(RATE_WINDOW, max(now - self.since, 1.0))
        return sum(n for _, n in seen) / span

    @staticmethod
    def _trim(seen: deque[tuple[float, int]], now: float) -> None:
        while seen and now - seen[0][0] > RATE_WINDOW:
            seen.popleft()
