"""Label values as RocketMQ 5's broker writes them on its metrics (docs/metrics-rocketmq.md §2): client versions by
``MQVersion.Version`` name, languages and consume modes in lower case, booleans as ``true``/``false``."""

from __future__ import annotations

from functools import cache

from sievemq.protocol.names import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, is_reserved_topic

__all__ = ["consume_mode", "flag", "is_retry_or_dlq", "is_system", "is_system_group", "version_desc"]

_CONSUME_MODES = {"CONSUME_ACTIVELY": "pull", "CONSUME_PASSIVELY": "push", "CONSUME_POP": "pop"}
"""RocketMQ's ``ConsumeType.getTypeCN()``, lower case."""
SYSTEM_GROUP_PREFIX = "cid_rmq_sys_"
"""``MixAll.CID_RMQ_SYS_PREFIX`` in lower case: groups RocketMQ's metrics call system groups."""


@cache
def _versions() -> tuple[str, ...]:
    """The names of ``MQVersion.Version`` in order (a version number is an index into it): the 3.0.0 pre-releases,
    then ``Vx_y_z_SNAPSHOT``, ``Vx_y_z`` for 3.0.1-3.0.15, 3.1.0-3.2.9, 3.3.1-3.9.9 (no x.y.0), 4.0.0-5.9.9, and
    ``HIGHER_VERSION``."""
    out = ["V3_0_0_SNAPSHOT", "V3_0_0_ALPHA1", *(f"V3_0_0_BETA{i}" for i in range(1, 6))]
    for i in range(6, 10):
        out += [f"V3_0_0_BETA{i}_SNAPSHOT", f"V3_0_0_BETA{i}"]
    out.append("V3_0_0_FINAL")
    triples = [(3, 0, c) for c in range(1, 16)]
    triples += [(3, b, c) for b in (1, 2) for c in range(10)]
    triples += [(3, b, c) for b in range(3, 10) for c in range(1, 10)]
    triples += [(a, b, c) for a in (4, 5) for b in range(10) for c in range(10)]
    for a, b, c in triples:
        out += [f"V{a}_{b}_{c}_SNAPSHOT", f"V{a}_{b}_{c}"]
    out.append("HIGHER_VERSION")
    return tuple(out)


def version_desc(version: int) -> str:
    """``MQVersion.getVersionDesc(version)`` in lower case (``v4_9_4``): a version past the table is the last name,
    a negative one (no RocketMQ client sends it) ``unknown``."""
    names = _versions()
    if version < 0:
        return "unknown"
    return names[min(version, len(names) - 1)].lower()


def consume_mode(consume_type: str) -> str:
    """``pull``, ``push`` or ``pop`` for a heartbeat's consume type (the name in lower case for any other)."""
    return _CONSUME_MODES.get(consume_type, consume_type.lower())


def flag(value: bool) -> str:
    """A boolean attribute as OpenTelemetry's Prometheus exporter writes it."""
    return "true" if value else "false"


def is_system_group(group: str) -> bool:
    """``BrokerMetricsManager.isSystemGroup``: the group starts with ``CID_RMQ_SYS_`` (any case)."""
    return group.lower().startswith(SYSTEM_GROUP_PREFIX)


def is_system(topic: str, group: str = "") -> bool:
    """``BrokerMetricsManager.isSystem``: a system topic (``TopicValidator.isSystemTopic``) or a system group."""
    return is_reserved_topic(topic) or is_system_group(group)


def is_retry_or_dlq(topic: str) -> bool:
    """``%RETRY%...`` and ``%DLQ%...`` topics, which RocketMQ's message and throughput counters leave out."""
    return topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX))
