"""Which resources a request touches and which permission it needs on each (docs/protocol/acl.md §3, §4).

A resource is a topic name, or ``%RETRY%group`` for a consumer group (a group's permission is its retry topic's,
as in RocketMQ). ``BROKER``, ``NAMESRV`` and ``FILTERSRV`` are the policies of the three roles: a policy ``checks``
a code or lets it through unchecked, and says what a checked request ``needs``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from sievemq.acl.permission import Perm
from sievemq.errors import HeaderError
from sievemq.protocol.names import is_retry_topic, retry_topic
from sievemq.protocol.receipt_handle import HandleError, ReceiptHandle
from sievemq.remoting.codes import RequestCode as C

UPDATE_BROKER_CONFIG = 25
"""RocketMQ's admin code for broker settings (sievemq answers it with 3; listed so it stays admin-only)."""
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
"""Sends of message traces to this topic need no permission (RocketMQ's rule)."""


@dataclass(frozen=True, slots=True)
class Needs:
    """What one request needs: permissions on resources, and whether only an admin account may send it."""

    resources: Mapping[str, int] = field(default_factory=dict)
    admin: bool = False


Extractor = Callable[[Mapping[str, str], bytes], dict[str, int]]


def _add(out: dict[str, int], resource: str | None, perm: int) -> None:
    if resource:
        out[resource] = out.get(resource, Perm.NONE) | perm


def _group(out: dict[str, int], group: str | None) -> None:
    if group:
        _add(out, retry_topic(group), Perm.SUB)


def _send(key: str) -> Extractor:
    """A send to ``key``'s topic: PUB, or SUB of the group when it is a retry topic (a consumer's retry)."""

    def needs(f: Mapping[str, str], body: bytes) -> dict[str, int]:
        topic = f.get(key)
        return {topic: Perm.SUB if is_retry_topic(topic) else Perm.PUB} if topic else {}

    return needs


def _topic_and_group(perm: int, group_key: str | None = "consumerGroup") -> Extractor:
    def needs(f: Mapping[str, str], body: bytes) -> dict[str, int]:
        out: dict[str, int] = {}
        _add(out, f.get("topic"), perm)
        if group_key:
            _group(out, f.get(group_key))
        return out

    return needs


def _receipt(f: Mapping[str, str], body: bytes) -> dict[str, int]:
    """ACK_MESSAGE / CHANGE_MESSAGE_INVISIBLETIME: SUB on the topic the receipt handle names and on the group (a
    handle that does not parse needs SUB on the group only; the broker refuses it)."""
    out: dict[str, int] = {}
    try:
        _add(out, ReceiptHandle.parse(f.get("extraInfo", "")).topic, Perm.SUB)
    except HandleError:
        pass
    _group(out, f.get("consumerGroup"))
    return out


def _group_only(key: str) -> Extractor:
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


def _heartbeat(f: Mapping[str, str], body: bytes) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in _items(_json(body, "heartbeat").get("consumerDataSet")):
        _group(out, _str(c.get("groupName")))
        for s in _items(c.get("subscriptionDataSet")):
            _add(out, _str(s.get("topic")), Perm.SUB)
    return out


def _body_group(what: str, group_key: str, topics_key: str) -> Extractor:
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


_locks = _body_group("lock request", "consumerGroup", "mqSet")
_check_client = _body_group("CHECK_CLIENT_CONFIG", "group", "subscriptionData")


@dataclass(frozen=True)
class Policy:
    """The ACL rules of one role: request code -> resources, the admin-only codes, and whether codes listed in
    neither are checked (authenticated, no resource) or let through unchecked."""

    role: str
    extractors: Mapping[int, Extractor]
    admin_codes: frozenset[int]
    check_others: bool = True

    def checks(self, code: int) -> bool:
        """False for a code this role lets through unchecked (no credentials needed)."""
        return self.check_others or code in self.admin_codes or code in self.extractors

    def needs(self, code: int, fields: Mapping[str, str], body: bytes) -> Needs:
        """What a checked request needs."""
        if code in self.admin_codes:
            return Needs(admin=True)
        extract = self.extractors.get(code)
        return Needs(extract(fields, body)) if extract is not None else Needs()


BROKER_ADMIN_CODES = frozenset(
    {
        int(C.UPDATE_AND_CREATE_TOPIC),  # RocketMQ's five admin codes
        UPDATE_BROKER_CONFIG,
        int(C.DELETE_TOPIC_IN_BROKER),
        int(C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP),
        int(C.DELETE_SUBSCRIPTIONGROUP),
        int(C.REGISTER_FILTER_SERVER),  # sievemq: a registered filter server is advertised to consumers
        int(C.VIEW_MESSAGE_BY_ID),  # sievemq: reads any record, whatever its topic
        int(C.INVOKE_BROKER_TO_RESET_OFFSET),  # sievemq: moves a group's offsets (RocketMQ 5 asks UPDATE on both)
        int(C.CONSUME_MESSAGE_DIRECTLY),  # sievemq: hands any record to any client's listener
        int(C.GET_GROUP_STATUS),  # sievemq's private codes
        int(C.GET_GROUP_FILTERS),
        int(C.EXPLAIN_SELECTOR),
    }
)

BROKER = Policy(
    "broker",
    {
        C.SEND_MESSAGE: _send("topic"),
        C.SEND_MESSAGE_V2: _send("b"),
        C.SEND_BATCH_MESSAGE: _send("b"),
        C.SEND_REPLY_MESSAGE: _send("topic"),
        C.SEND_REPLY_MESSAGE_V2: _send("b"),
        C.CONSUMER_SEND_MSG_BACK: _group_only("group"),
        C.PULL_MESSAGE: _topic_and_group(Perm.SUB),
        C.POP_MESSAGE: _topic_and_group(Perm.SUB),
        C.ACK_MESSAGE: _receipt,
        C.CHANGE_MESSAGE_INVISIBLETIME: _receipt,
        C.QUERY_MESSAGE: _topic_and_group(Perm.SUB, None),
        C.HEART_BEAT: _heartbeat,
        C.UNREGISTER_CLIENT: _group_only("consumerGroup"),
        C.GET_CONSUMER_LIST_BY_GROUP: _group_only("consumerGroup"),
        C.GET_SUBSCRIPTIONGROUP_CONFIG: _group_only("group"),
        C.UPDATE_CONSUMER_OFFSET: _topic_and_group(Perm.SUB),
        C.QUERY_CONSUMER_OFFSET: _topic_and_group(Perm.SUB),
        C.SEARCH_OFFSET_BY_TIMESTAMP: _topic_and_group(Perm.ANY, None),
        C.GET_MAX_OFFSET: _topic_and_group(Perm.ANY, None),
        C.GET_MIN_OFFSET: _topic_and_group(Perm.ANY, None),
        C.GET_EARLIEST_MSG_STORETIME: _topic_and_group(Perm.ANY, None),
        C.GET_TOPIC_STATS_INFO: _topic_and_group(Perm.ANY, None),
        C.LOCK_BATCH_MQ: _locks,
        C.UNLOCK_BATCH_MQ: _locks,
        C.CHECK_CLIENT_CONFIG: _check_client,
        C.GET_CONSUME_STATS: _topic_and_group(Perm.ANY),  # the group's progress: SUB on it, any right on the topic
        C.GET_CONSUMER_CONNECTION_LIST: _group_only("consumerGroup"),
        C.QUERY_TOPIC_CONSUME_BY_WHO: _topic_and_group(Perm.ANY, None),
    },
    BROKER_ADMIN_CODES,
)

NAMESRV_ADMIN_CODES = frozenset(
    int(c)
    for c in (C.REGISTER_BROKER, C.UNREGISTER_BROKER, C.PUT_KV_CONFIG, C.DELETE_KV_CONFIG, C.DELETE_TOPIC_IN_NAMESRV)
)

NAMESRV = Policy(
    "name server",
    {},
    NAMESRV_ADMIN_CODES,
    check_others=False,
)

FILTERSRV = Policy(
    "filter server",
    {C.PULL_MESSAGE: _topic_and_group(Perm.SUB), C.REGISTER_MESSAGE_FILTER_CLASS: _topic_and_group(Perm.SUB)},
    frozenset({int(C.FILTERSRV_STATUS)}),
)
