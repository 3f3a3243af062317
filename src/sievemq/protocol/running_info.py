"""GET_CONSUMER_RUNNING_INFO (307): what a consumer tells an operator about itself (RocketMQ's
``ConsumerRunningInfo``), the body of its answer. Pure: built from plain data, no I/O.

An operator's ``mqadmin consumerStatus -g G`` (and the RocketMQ dashboard's consumer detail) asks a broker, which
passes the request to each client of the group (``broker/processors/client_admin.py``); the client answers with this
document, in RocketMQ's fastjson form (``mq_json``: ``mqTable`` is keyed by message queue objects):

- ``properties``: strings only (a Java ``Properties``): ``PROP_*`` below, and the consumer's settings under the names
  of the Java consumer's fields (``consumerGroup``, ``messageModel``, ``pullBatchSize``, ...).
- ``subscriptionSet``: the SubscriptionData of each subscribed topic (a clustering push consumer's
  ``%RETRY%<group>`` too), ordered as Java's TreeSet orders them (``topic@subString``).
- ``mqTable``: a ``ProcessQueueInfo`` per queue the consumer holds.
- ``statusTable``: a ``ConsumeStatus`` per subscribed topic (rates over the last minute).
- ``mqPopTable``, ``userConsumerInfo``: empty (sievemq's 4.x client neither pops nor adds user entries).
- ``jstack``: only when the request asked for it (``jstackEnable``).

mqadmin reads ``PROP_CONSUME_TYPE`` (a ``ConsumeType`` name), ``PROP_CONSUMER_START_TIMESTAMP`` (milliseconds, as a
string) and, for a push consumer, ``PROP_CONSUMEORDERLY`` and each queue's ``locked``, ``lastLockTimestamp`` and
``lastConsumeTimestamp`` to print its analysis: a missing one fails the command.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sievemq.protocol.heartbeat import Subscription
from sievemq.protocol.mq_json import QueueKey, QueueMap, dumps

__all__ = [
    "CONSUME_ACTIVELY",
    "CONSUME_PASSIVELY",
    "PROP_CLIENT_VERSION",
    "PROP_CONSUMER_START_TIMESTAMP",
    "PROP_CONSUME_ORDERLY",
    "PROP_CONSUME_TYPE",
    "PROP_NAMESERVER_ADDR",
    "PROP_THREADPOOL_CORE_SIZE",
    "ConsumeStatus",
    "ConsumerRunningInfo",
    "ProcessQueueInfo",
    "namesrv_property",
]

PROP_NAMESERVER_ADDR = "PROP_NAMESERVER_ADDR"
"""The client's name servers, each followed by ``;`` (``namesrv_property``)."""
PROP_THREADPOOL_CORE_SIZE = "PROP_THREADPOOL_CORE_SIZE"
"""Listener calls at a time (a push consumer)."""
PROP_CONSUME_ORDERLY = "PROP_CONSUMEORDERLY"
"""``true``/``false`` (a push consumer)."""
PROP_CONSUME_TYPE = "PROP_CONSUME_TYPE"
"""``CONSUME_PASSIVELY`` (push) or ``CONSUME_ACTIVELY`` (pull)."""
PROP_CLIENT_VERSION = "PROP_CLIENT_VERSION"
"""The client's version as RocketMQ names it (``V4_9_8``)."""
PROP_CONSUMER_START_TIMESTAMP = "PROP_CONSUMER_START_TIMESTAMP"
"""When the consumer started, milliseconds since 1970."""

CONSUME_PASSIVELY = "CONSUME_PASSIVELY"
CONSUME_ACTIVELY = "CONSUME_ACTIVELY"


def namesrv_property(addrs: Sequence[str]) -> str:
    """``PROP_NAMESERVER_ADDR`` as Java writes it: every address followed by ``;``."""
    return "".join(f"{a};" for a in addrs)


@dataclass(frozen=True, slots=True)
class ProcessQueueInfo:
    """RocketMQ's ``ProcessQueueInfo``: one held queue. Offsets are queue offsets; times are milliseconds since 1970;
    ``cached_*`` are the messages fetched from the queue and not consumed (or handed out) yet."""

    commit_offset: int = -1
    """The consumed offset held in memory (-1: none known)."""
    cached_min_offset: int = 0
    cached_max_offset: int = 0
    cached_count: int = 0
    cached_size_mib: int = 0
    """Bytes of the cached bodies, whole MiB (rounded down, as Java does)."""
    transaction_min_offset: int = 0
    transaction_max_offset: int = 0
    transaction_count: int = 0
    """Java's orderly consumer's batch being consumed (sievemq counts it among ``cached_*``: zeros here)."""
    locked: bool = False
    """An orderly push consumer holds the broker's lock on the queue."""
    try_unlock_times: int = 0
    last_lock_ms: int = 0
    dropped: bool = False
    last_pull_ms: int = 0
    last_consume_ms: int = 0

    def to_json(self) -> dict[str, Any]:
        """The JSON object (fastjson's names, in its order: sorted)."""
        return {
            "cachedMsgCount": self.cached_count,
            "cachedMsgMaxOffset": self.cached_max_offset,
            "cachedMsgMinOffset": self.cached_min_offset,
            "cachedMsgSizeInMiB": self.cached_size_mib,
            "commitOffset": self.commit_offset,
            "droped": self.dropped,  # sic: RocketMQ's spelling
            "lastConsumeTimestamp": self.last_consume_ms,
            "lastLockTimestamp": self.last_lock_ms,
            "lastPullTimestamp": self.last_pull_ms,
            "locked": self.locked,
            "transactionMsgCount": self.transaction_count,
            "transactionMsgMaxOffset": self.transaction_max_offset,
            "transactionMsgMinOffset": self.transaction_min_offset,
            "tryUnlockTimes": self.try_unlock_times,
        }


@dataclass(frozen=True, slots=True)
class ConsumeStatus:
    """RocketMQ's ``ConsumeStatus`` of one topic: rates over the last minute (per second; round trips in ms) and the
    messages whose consumption failed in the last hour. What a client does not measure stays 0."""

    pull_rt: float = 0.0
    pull_tps: float = 0.0
    consume_rt: float = 0.0
    consume_ok_tps: float = 0.0
    consume_failed_tps: float = 0.0
    consume_failed_msgs: int = 0

    def to_json(self) -> dict[str, Any]:
        """The JSON object (fastjson's names, sorted)."""
        return {
            "consumeFailedMsgs": self.consume_failed_msgs,
            "consumeFailedTPS": float(self.consume_failed_tps),
            "consumeOKTPS": float(self.consume_ok_tps),
            "consumeRT": float(self.consume_rt),
            "pullRT": float(self.pull_rt),
            "pullTPS": float(self.pull_tps),
        }


@dataclass(frozen=True, slots=True)
class ConsumerRunningInfo:
    """The answer's body (see the module docstring)."""

    properties: Mapping[str, str]
    subscriptions: Sequence[Subscription] = ()
    queues: Mapping[QueueKey, ProcessQueueInfo] = field(default_factory=dict)
    status: Mapping[str, ConsumeStatus] = field(default_factory=dict)
    jstack: str | None = None

    def with_jstack(self, jstack: str | None) -> ConsumerRunningInfo:
        """The same with ``jstack`` (None: left out, as when the request does not ask for it)."""
        return ConsumerRunningInfo(self.properties, self.subscriptions, self.queues, self.status, jstack)

    def to_json(self) -> dict[str, Any]:
        """The document: fastjson's names in its order (sorted), the subscriptions in TreeSet order (one per
        ``topic@subString``), the queues in MessageQueue order; ``jstack`` left out when None (fastjson omits
        nulls)."""
        subs: dict[str, Subscription] = {}
        for s in self.subscriptions:
            subs.setdefault(f"{s.topic}@{s.sub_string}", s)
        doc: dict[str, Any] = {}
        if self.jstack is not None:
            doc["jstack"] = self.jstack
        doc["mqPopTable"] = QueueMap()
        doc["mqTable"] = QueueMap({QueueKey(*k): v.to_json() for k, v in self.queues.items()})
        doc["properties"] = {str(k): str(v) for k, v in sorted(self.properties.items())}
        doc["statusTable"] = {t: st.to_json() for t, st in sorted(self.status.items())}
        doc["subscriptionSet"] = [subs[k].to_json() for k in sorted(subs, key=_java_order)]
        doc["userConsumerInfo"] = {}
        return doc

    def encode(self) -> bytes:
        """The body (``mqTable`` keyed by queue objects, as RocketMQ writes it)."""
        return dumps(self.to_json())


def _java_order(key: str) -> list[int]:
    """Java's ``String.compareTo`` order: by UTF-16 code units."""
    units = key.encode("utf-16-be")
    return [int.from_bytes(units[i : i + 2], "big") for i in range(0, len(units), 2)]
