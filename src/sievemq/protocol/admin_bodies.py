"""The bodies of RocketMQ's consumer-administration codes, as sievemq writes and reads them (docs/admin.md §2). Pure.

- ConsumeStats (GET_CONSUME_STATS 208): ``{"offsetTable": {queue: {"brokerOffset", "consumerOffset",
  "pullOffset", "lastTimestamp"}}}`` with queue-object keys (``mq_json``);
- ResetOffsetBody (INVOKE_BROKER_TO_RESET_OFFSET 222's answer, RESET_CONSUMER_CLIENT_OFFSET 220):
  ``{"offsetTable": {queue: offset}}``, and its C++ form ``{"offsetTable": [{"topic", "brokerName", "queueId",
  "offset"}]}`` (RocketMQ's ``ResetOffsetBodyForC``, what the C++ client reads);
- ConsumerConnection (GET_CONSUMER_CONNECTION_LIST 203): ``{"connectionSet": [{"clientId", "clientAddr",
  "language", "version"}], "subscriptionTable": {topic: SubscriptionData}, "consumeType", "messageModel",
  "consumeFromWhere"}``;
- GroupList (QUERY_TOPIC_CONSUME_BY_WHO 300): ``{"groupList": [group, ...]}``;
- TopicStatsTable (GET_TOPIC_STATS_INFO 202): ``{"offsetTable": {queue: {"minOffset", "maxOffset",
  "lastUpdateTimestamp"}}}`` with queue-object keys.

Decoding checks shapes and types and raises ``ValueError`` for anything else: these bodies come from peers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from sievemq.protocol.mq_json import QueueKey, QueueMap, dumps, loads

__all__ = [
    "ConsumeStats",
    "ConsumerConnection",
    "OffsetWrapper",
    "TopicOffset",
    "decode_consume_stats",
    "decode_consumer_connection",
    "decode_group_list",
    "decode_reset_body",
    "decode_topic_stats",
    "encode_consume_stats",
    "encode_consume_stats_list",
    "encode_consumer_connection",
    "encode_group_list",
    "encode_reset_body",
    "encode_reset_body_for_c",
    "encode_topic_stats",
]


@dataclass(frozen=True, slots=True)
class OffsetWrapper:
    """One queue of a group on one broker (RocketMQ's OffsetWrapper)."""

    broker_offset: int
    """The queue's max offset: the next message to be written."""
    consumer_offset: int
    """The group's committed offset (0 when it has none, as RocketMQ answers)."""
    pull_offset: int
    """How far the group has read: for a POP group its cursor (in-flight messages lie between the two); else the
    committed offset."""
    last_timestamp: int
    """Store time (epoch ms) of the last consumed message (the one before ``consumer_offset``); 0 when none."""


@dataclass(frozen=True, slots=True)
class ConsumeStats:
    """A group's queues on one broker."""

    offsets: dict[QueueKey, OffsetWrapper]
    consume_tps: float | None = None
    """The broker's consume rate for the group (sievemq's brokers do not report one: None)."""


def encode_consume_stats(stats: ConsumeStats) -> bytes:
    """ConsumeStats as RocketMQ writes it (``consumeTps`` only when known)."""
    return dumps(_consume_stats_doc(stats))


def encode_consume_stats_list(broker_addr: str, groups: list[dict[str, list[ConsumeStats]]], total_diff: int) -> bytes:
    """ConsumeStatsList (GET_BROKER_CONSUME_STATS 317): ``{"brokerAddr", "consumeStatsList": [{group:
    [ConsumeStats...]}], "totalDiff", "totalInflightDiff"}``."""
    rows = [{g: [_consume_stats_doc(s) for s in stats] for g, stats in row.items()} for row in groups]
    inflight = sum(max(0, w.pull_offset - w.consumer_offset) for row in groups for stats in row.values()
                   for s in stats for w in s.offsets.values())  # fmt: skip
    return dumps({"brokerAddr": broker_addr, "consumeStatsList": rows, "totalDiff": total_diff,
                  "totalInflightDiff": inflight})  # fmt: skip


def _consume_stats_doc(stats: ConsumeStats) -> dict[str, Any]:
    table = QueueMap(
        {
            k: {
                "brokerOffset": w.broker_offset,
                "consumerOffset": w.consumer_offset,
                "lastTimestamp": w.last_timestamp,
                "pullOffset": w.pull_offset,
            }
            for k, w in stats.offsets.items()
        }
    )
    doc: dict[str, Any] = {"offsetTable": table}
    if stats.consume_tps is not None:
        doc["consumeTps"] = stats.consume_tps
    return doc


def _object(value: Any, what: str) -> dict[Any, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{what} is not a JSON object")
    return value


def _int(d: Mapping[Any, Any], key: str, default: int | None = None) -> int:
    v = d.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"{key} is not an integer")
    return v


def _str(d: Mapping[Any, Any], key: str, default: str | None = None) -> str:
    v = d.get(key, default)
    if not isinstance(v, str):
        raise ValueError(f"{key} is not a string")
    return v


def _queue_table(doc: Any, what: str) -> dict[QueueKey, Any]:
    table = _object(_object(doc, what).get("offsetTable", {}), f"{what}.offsetTable")
    out: dict[QueueKey, Any] = {}
    for k, v in table.items():
        if not isinstance(k, QueueKey):
            raise ValueError(f"{what}.offsetTable has a key that is not a message queue")
        out[k] = v
    return out


def decode_consume_stats(body: bytes) -> ConsumeStats:
    """Parse a ConsumeStats body (ValueError when it is not one)."""
    doc = loads(body)
    offsets = {}
    for k, v in _queue_table(doc, "ConsumeStats").items():
        w = _object(v, "OffsetWrapper")
        consumer = _int(w, "consumerOffset", 0)
        offsets[k] = OffsetWrapper(_int(w, "brokerOffset", 0), consumer, _int(w, "pullOffset", consumer),
                                   _int(w, "lastTimestamp", 0))  # fmt: skip
    tps = doc.get("consumeTps")
    return ConsumeStats(offsets, float(tps) if isinstance(tps, int | float) and not isinstance(tps, bool) else None)


def encode_reset_body(table: Mapping[QueueKey, int]) -> bytes:
    """ResetOffsetBody: queue -> the offset it was set to."""
    return dumps({"offsetTable": QueueMap(table)})


def encode_reset_body_for_c(table: Mapping[QueueKey, int]) -> bytes:
    """ResetOffsetBodyForC: the same as a list (what RocketMQ sends to C++ clients)."""
    rows = [{"brokerName": k.broker_name, "offset": v, "queueId": k.queue_id, "topic": k.topic}
            for k, v in sorted(table.items())]  # fmt: skip
    return orjson.dumps({"offsetTable": rows})


def decode_reset_body(body: bytes) -> dict[QueueKey, int]:
    """Parse a ResetOffsetBody in either form (ValueError when it is neither)."""
    doc = _object(loads(body), "ResetOffsetBody")
    table = doc.get("offsetTable", {})
    out: dict[QueueKey, int] = {}
    if isinstance(table, list):
        for row in table:
            r = _object(row, "ResetOffsetBody.offsetTable[]")
            out[QueueKey(_str(r, "topic"), _str(r, "brokerName"), _int(r, "queueId"))] = _int(r, "offset")
        return out
    for k, v in _queue_table(doc, "ResetOffsetBody").items():
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError("ResetOffsetBody.offsetTable has an offset that is not an integer")
        out[k] = v
    return out


@dataclass(frozen=True, slots=True)
class Connection:
    """One client of a consumer group as a broker sees it."""

    client_id: str
    client_addr: str
    language: str
    version: int


@dataclass(frozen=True, slots=True)
class ConsumerConnection:
    """A consumer group's live clients and subscriptions on one broker."""

    connections: list[Connection]
    subscriptions: dict[str, dict[str, Any]]
    """Topic -> RocketMQ's SubscriptionData (``subString``, ``expressionType``, ``tagsSet``, ...)."""
    consume_type: str = ""
    message_model: str = ""
    consume_from_where: str = ""


def encode_consumer_connection(cc: ConsumerConnection) -> bytes:
    """ConsumerConnection as RocketMQ writes it."""
    return orjson.dumps(
        {
            "connectionSet": [
                {"clientAddr": c.client_addr, "clientId": c.client_id, "language": c.language, "version": c.version}
                for c in cc.connections
            ],
            "consumeFromWhere": cc.consume_from_where,
            "consumeType": cc.consume_type,
            "messageModel": cc.message_model,
            "subscriptionTable": cc.subscriptions,
        }
    )


def decode_consumer_connection(body: bytes) -> ConsumerConnection:
    """Parse a ConsumerConnection body (ValueError when it is not one)."""
    doc = _object(loads(body), "ConsumerConnection")
    conns = []
    for c in doc.get("connectionSet") or []:
        c = _object(c, "Connection")
        conns.append(Connection(_str(c, "clientId"), _str(c, "clientAddr", ""), _str(c, "language", ""),
                                _int(c, "version", 0)))  # fmt: skip
    subs = {str(t): _object(s, "SubscriptionData") for t, s in _object(doc.get("subscriptionTable") or {},
                                                                         "subscriptionTable").items()}  # fmt: skip
    return ConsumerConnection(
        sorted(conns, key=lambda c: c.client_id),
        subs,
        str(doc.get("consumeType") or ""),
        str(doc.get("messageModel") or ""),
        str(doc.get("consumeFromWhere") or ""),
    )


def encode_group_list(groups: list[str]) -> bytes:
    """GroupList."""
    return orjson.dumps({"groupList": sorted(groups)})


def decode_group_list(body: bytes) -> list[str]:
    """Parse a GroupList body (ValueError when it is not one)."""
    groups = _object(loads(body), "GroupList").get("groupList") or []
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise ValueError("GroupList.groupList is not a list of names")
    return sorted(groups)


@dataclass(frozen=True, slots=True)
class TopicOffset:
    """One queue of a topic on one broker (RocketMQ's TopicOffset)."""

    min_offset: int
    max_offset: int
    last_update_timestamp: int
    """Store time (epoch ms) of the queue's newest message; 0 when it holds none."""


def encode_topic_stats(table: Mapping[QueueKey, TopicOffset]) -> bytes:
    """TopicStatsTable as RocketMQ writes it."""
    rows = {k: {"lastUpdateTimestamp": v.last_update_timestamp, "maxOffset": v.max_offset, "minOffset": v.min_offset}
            for k, v in table.items()}  # fmt: skip
    return dumps({"offsetTable": QueueMap(rows)})


def decode_topic_stats(body: bytes) -> dict[QueueKey, TopicOffset]:
    """Parse a TopicStatsTable body (ValueError when it is not one)."""
    out = {}
    for k, v in _queue_table(loads(body), "TopicStatsTable").items():
        o = _object(v, "TopicOffset")
        out[k] = TopicOffset(_int(o, "minOffset", 0), _int(o, "maxOffset", 0), _int(o, "lastUpdateTimestamp", 0))
    return out
