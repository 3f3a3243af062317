"""Which resources a request touches and which permission it needs on each: the extractors the ACL table
(``classification.py``) names for its RESOURCES codes (docs/protocol/acl.md §3).

A resource is a topic name, or ``%RETRY%group`` for a consumer group (a group's permission is its retry topic's,
as in RocketMQ). Pure: an extractor gets the request's extFields and body.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from sievemq.acl.permission import Perm
from sievemq.acl.policy import Extractor
from sievemq.errors import HeaderError
from sievemq.protocol.names import is_retry_topic, retry_topic
from sievemq.protocol.receipt_handle import HandleError, ReceiptHandle

__all__ = ["TRACE_TOPIC", "body_group", "group_only", "heartbeat", "receipt", "send", "topic_and_group"]

TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
"""Sends of message traces to this topic need no permission (RocketMQ's rule)."""


def _add(out: dict[str, int], resource: str | None, perm: int) -> None:
    if resource:
        out[resource] = out.get(resource, Perm.NONE) | perm


def _group(out: dict[str, int], group: str | None) -> None:
    if group:
        _add(out, retry_topic(group), Perm.SUB)


def send(key: str) -> Extractor:
    """A send to ``key``'s topic: PUB, or SUB of the group when it is a retry topic (a consumer's retry)."""

    def needs(f: Mapping[str, str], body: bytes) -> dict[str, int]:
        topic = f.get(key)
        return {topic: Perm.SUB if is_retry_topic(topic) else Perm.PUB} if topic else {}

    return needs


def topic_and_group(perm: int, group_key: str | None = "consumerGroup") -> Extractor:
    """``perm`` on the ``topic`` field, and SUB on the group in ``group_key`` (None: no group)."""

    def needs(f: Mapping[str, str], body: bytes) -> dict[str, int]:
        out: dict[str, int] = {}
        _add(out, f.get("topic"), perm)
        if group_key:
            _group(out, f.get(group_key))
        return out

    return needs


def receipt(f: Mapping[str, str], body: bytes) -> dict[str, int]:
    """ACK_MESSAGE / CHANGE_MESSAGE_INVISIBLETIME: SUB on the topic the receipt handle names and on the group (a
    handle that does not parse needs SUB on the group only; the broker refuses it)."""
    out: dict[str, int] = {}
    try:
        _add(out, ReceiptHandle.parse(f.get("extraInfo", "")).topic, Perm.SUB)
    except HandleError:
        pass
    _group(out, f.get("consumerGroup"))
    return out


def group_only(key: str) -> Extractor:
    """SUB on the group in ``key`` (nothing when the field is absent)."""

    def needs(f: Mapping[str, str], body: bytes) -> dict[str, int]:
        out: dict[str, int] = {}
        _group(out, f.get(key))
        return out

    return needs


def _json(body: bytes, what: str) -> dict[str, Any]:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise HeaderError(f"the {what} body is not valid JSON") from None
    if not isinstance(data, dict):
        raise HeaderError(f"the {what} body is not a JSON object")
    return data


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _items(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def heartbeat(f: Mapping[str, str], body: bytes) -> dict[str, int]:
    """HEART_BEAT: SUB on each consumer group of the body and on each topic it subscribes."""
    out: dict[str, int] = {}
    for c in _items(_json(body, "heartbeat").get("consumerDataSet")):
        _group(out, _str(c.get("groupName")))
        for s in _items(c.get("subscriptionDataSet")):
            _add(out, _str(s.get("topic")), Perm.SUB)
    return out


def body_group(what: str, group_key: str, topics_key: str) -> Extractor:
    """A JSON body naming a group and a list (or one object) of items with a ``topic``: SUB on each."""

    def needs(f: Mapping[str, str], body: bytes) -> dict[str, int]:
        data = _json(body, what)
        out: dict[str, int] = {}
        _group(out, _str(data.get(group_key)))
        topics = data.get(topics_key)
        for item in _items(topics if isinstance(topics, list) else [topics]):
            _add(out, _str(item.get("topic")), Perm.SUB)
        return out

    return needs
