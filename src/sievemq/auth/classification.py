"""What each request code the broker serves needs under ACL 2.0: which actions on which resources (RocketMQ 5's
``DefaultAuthorizationContextBuilder`` and the ``@RocketMQAction`` of its request headers), or a super user, or
only a valid signature (docs/acl2.md §5).

Every code the broker serves has a row (``tests/unit/auth/test_classification.py`` keeps the table equal to the
broker's processor table); a code without one needs a super user (fail closed). Where RocketMQ names no resource
for a code (it then checks nothing), sievemq follows its plain ACL: codes every account may send stay ``SIGNED``,
its admin-only codes need a super user. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

import orjson

from sievemq.auth.model import Action, Resource, ResourceType
from sievemq.errors import HeaderError
from sievemq.protocol.receipt_handle import HandleError, ReceiptHandle
from sievemq.remoting.codes import RequestCode as C

__all__ = ["AUTH_CODES", "BROKER_RULES", "Kind", "Need", "Rule", "markdown", "rule_of"]


AUTH_CODES: Final = frozenset(c for c in C if 3001 <= c <= 3010)
"""RocketMQ 5's ACL 2.0 admin codes (``RequestCode.AUTH_*``), served only with ACL 2.0 on."""


class Kind(StrEnum):
    SIGNED = "signed"
    """Any enabled user with a valid signature."""
    RESOURCES = "resources"
    """The actions on the resources the request names, allowed by the user's policies."""
    SUPER = "super"
    """A super user only."""


Need = tuple[Resource, frozenset[Action]]
Extractor = Callable[[Mapping[str, str], bytes, str], list[Need]]
"""``(extFields, body, cluster name) -> [(resource, actions)]``: a request needs one of its actions on each."""


@dataclass(frozen=True, slots=True)
class Rule:
    kind: Kind
    needs: Extractor | None = None
    why: str = ""


SUPER_ONLY = Rule(Kind.SUPER, why="not classified: super users only until it is")

_A = Action
PUB, SUB, GET, CREATE, UPDATE, DELETE = (frozenset([a]) for a in (_A.PUB, _A.SUB, _A.GET, _A.CREATE, _A.UPDATE,
                                                                 _A.DELETE))  # fmt: skip
SUB_GET = frozenset([_A.SUB, _A.GET])
SUB_UPDATE = frozenset([_A.SUB, _A.UPDATE])


def _json(body: bytes, what: str) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        raise HeaderError(f"the {what} body is not valid JSON") from None


def _items(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def fields(*specs: tuple[str, str, frozenset[Action]]) -> Extractor:
    """Resources named by header fields: ``(kind, field, actions)``, kind ``topic``, ``group`` or ``cluster``
    (``cluster`` with field ``""``: the broker's cluster). A field that is absent or empty names nothing."""

    def needs(f: Mapping[str, str], body: bytes, cluster: str) -> list[Need]:
        out: list[Need] = []
        for kind, key, actions in specs:
            if kind == "cluster":
                out.append((Resource.cluster((f.get(key) or cluster) if key else cluster), actions))
                continue
            value = f.get(key)
            if value:
                out.append((Resource.topic(value) if kind == "topic" else Resource.group(value), actions))
        return out

    return needs


def _send(topic_key: str) -> Extractor:
    def needs(f: Mapping[str, str], body: bytes, cluster: str) -> list[Need]:
        topic = f.get(topic_key)
        if not topic:
            return []
        resource = Resource.topic(topic)  # a retry topic %RETRY%G: Sub on group G (a consumer's retry)
        return [(resource, PUB if resource.type is ResourceType.TOPIC else SUB)]

    return needs


def _heartbeat(f: Mapping[str, str], body: bytes, cluster: str) -> list[Need]:
    data = _json(body, "heartbeat")
    out: list[Need] = []
    for c in _items(data.get("consumerDataSet") if isinstance(data, dict) else None):
        if _str(c.get("groupName")):
            out.append((Resource.group(c["groupName"]), SUB))
        out += [(Resource.topic(s["topic"]), SUB) for s in _items(c.get("subscriptionDataSet")) if _str(s.get("topic"))]
    return out


def _body_group(group_key: str, topics_key: str) -> Extractor:
    def needs(f: Mapping[str, str], body: bytes, cluster: str) -> list[Need]:
        data = _json(body, "request")
        if not isinstance(data, dict):
            raise HeaderError("the request body is not a JSON object")
        out: list[Need] = [(Resource.group(data[group_key]), SUB)] if _str(data.get(group_key)) else []
        topics = data.get(topics_key)
        for item in _items(topics if isinstance(topics, list) else [topics]):
            if _str(item.get("topic")):
                out.append((Resource.topic(item["topic"]), SUB))
        return out

    return needs


def _config_list(list_key: str, name_key: str, group: bool) -> Extractor:
    def needs(f: Mapping[str, str], body: bytes, cluster: str) -> list[Need]:
        data = _json(body, "config")
        rows = _items(data.get(list_key)) if list_key and isinstance(data, dict) else [data]
        names = [_str(r.get(name_key)) for r in rows if isinstance(r, dict)]
        return [((Resource.group(n) if group else Resource.topic(n)), CREATE) for n in names if n]

    return needs


def _receipt(f: Mapping[str, str], body: bytes, cluster: str) -> list[Need]:
    out = fields(("group", "consumerGroup", SUB), ("topic", "topic", SUB))(f, body, cluster)
    try:
        topic = ReceiptHandle.parse(f.get("extraInfo", "")).topic
    except HandleError:
        return out
    return [*out, (Resource.topic(topic), SUB)] if topic and topic != f.get("topic") else out


def _res(needs: Extractor, why: str) -> Rule:
    return Rule(Kind.RESOURCES, needs, why)


def _super(why: str) -> Rule:
    return Rule(Kind.SUPER, why=why)


def _signed(why: str) -> Rule:
    return Rule(Kind.SIGNED, why=why)


def _cluster(actions: frozenset[Action], why: str) -> Rule:
    return _res(fields(("cluster", "", actions)), why)


_PULL = fields(("group", "consumerGroup", SUB), ("topic", "topic", SUB))
_TOPIC_GET = fields(("topic", "topic", GET))
_SYNC = "replication and metadata sync, for the brokers' own (super) user"

# fmt: off
BROKER_RULES: Mapping[int, Rule] = {
    C.SEND_MESSAGE: _res(_send("topic"), "Pub on the topic (a retry topic %RETRY%G: Sub on group G)"),
    C.SEND_MESSAGE_V2: _res(_send("b"), "Pub on the topic (a retry topic %RETRY%G: Sub on group G)"),
    C.SEND_BATCH_MESSAGE: _res(_send("b"), "Pub on the topic (a retry topic %RETRY%G: Sub on group G)"),
    C.SEND_REPLY_MESSAGE: _res(_send("topic"), "Pub on the reply topic"),
    C.SEND_REPLY_MESSAGE_V2: _res(_send("b"), "Pub on the reply topic"),
    C.CONSUMER_SEND_MSG_BACK: _res(fields(("group", "group", SUB)),
                                   "Sub on the group; once read: Sub on the record's topic"),
    C.END_TRANSACTION: _res(fields(("topic", "topic", PUB)),
                            "Pub on the topic when named; once read: Pub on the half message's topic"),
    C.PULL_MESSAGE: _res(_PULL, "Sub on the topic and on consumerGroup"),
    C.LITE_PULL_MESSAGE: _res(_PULL, "Sub on the topic and on consumerGroup"),
    C.POP_MESSAGE: _res(_PULL, "Sub on the topic and on consumerGroup"),
    C.ACK_MESSAGE: _res(_receipt, "Sub on the topic (and the receipt handle's) and on consumerGroup"),
    C.CHANGE_MESSAGE_INVISIBLETIME: _res(_receipt, "Sub on the topic (and the receipt handle's) and on consumerGroup"),
    C.QUERY_MESSAGE: _res(fields(("topic", "topic", SUB_GET)), "Sub or Get on the topic"),
    C.QUERY_CONSUMER_OFFSET: _res(fields(("topic", "topic", SUB_GET), ("group", "consumerGroup", SUB_GET)),
                                  "Sub or Get on the topic and on consumerGroup"),
    C.UPDATE_CONSUMER_OFFSET: _res(fields(("topic", "topic", SUB_UPDATE), ("group", "consumerGroup", SUB_UPDATE)),
                                   "Sub or Update on the topic and on consumerGroup"),
    C.SEARCH_OFFSET_BY_TIMESTAMP: _res(_TOPIC_GET, "Get on the topic"),
    C.GET_MAX_OFFSET: _res(_TOPIC_GET, "Get on the topic"),
    C.GET_MIN_OFFSET: _res(_TOPIC_GET, "Get on the topic"),
    C.GET_EARLIEST_MSG_STORETIME: _res(_TOPIC_GET, "Get on the topic"),
    C.GET_TOPIC_STATS_INFO: _res(_TOPIC_GET, "Get on the topic"),
    C.GET_TOPIC_CONFIG: _res(_TOPIC_GET, "Get on the topic"),
    C.QUERY_TOPIC_CONSUME_BY_WHO: _res(_TOPIC_GET, "Get on the topic"),
    C.GET_CONSUME_STATS: _res(fields(("group", "consumerGroup", GET), ("topic", "topic", GET)),
                              "Get on consumerGroup and on the topic"),
    C.HEART_BEAT: _res(_heartbeat, "Sub on each consumer group of the body and on each topic it subscribes"),
    C.UNREGISTER_CLIENT: _res(fields(("group", "consumerGroup", SUB)), "Sub on consumerGroup (none when absent)"),
    C.GET_CONSUMER_LIST_BY_GROUP: _res(fields(("group", "consumerGroup", SUB_GET)), "Sub or Get on consumerGroup"),
    C.GET_CONSUMER_CONNECTION_LIST: _res(fields(("group", "consumerGroup", GET)), "Get on consumerGroup"),
    C.GET_SUBSCRIPTIONGROUP_CONFIG: _res(fields(("group", "group", GET)), "Get on the group"),
    C.GET_CONSUMER_RUNNING_INFO: _res(fields(("group", "consumerGroup", GET)), "Get on consumerGroup"),
    C.LOCK_BATCH_MQ: _res(_body_group("consumerGroup", "mqSet"), "Sub on the body's group and each queue's topic"),
    C.UNLOCK_BATCH_MQ: _res(_body_group("consumerGroup", "mqSet"), "Sub on the body's group and each queue's topic"),
    C.CHECK_CLIENT_CONFIG: _res(_body_group("group", "subscriptionData"),
                                "Sub on the body's group and its subscription's topic"),
    C.QUERY_CONSUME_QUEUE: _res(fields(("topic", "topic", GET), ("group", "consumerGroup", GET)),
                                "Get on the topic (and on consumerGroup when named)"),
    C.UPDATE_AND_CREATE_TOPIC: _res(fields(("topic", "topic", CREATE)), "Create on the topic"),
    C.UPDATE_AND_CREATE_TOPIC_LIST: _res(_config_list("topicConfigList", "topicName", group=False),
                                         "Create on each topic of the body"),
    C.DELETE_TOPIC_IN_BROKER: _res(fields(("topic", "topic", DELETE)), "Delete on the topic"),
    C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: _res(_config_list("", "groupName", group=True),
                                                "Create on the body's group"),
    C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST: _res(_config_list("groupConfigList", "groupName", group=True),
                                                     "Create on each group of the body"),
    C.DELETE_SUBSCRIPTIONGROUP: _res(fields(("group", "groupName", DELETE)), "Delete on the group"),
    C.INVOKE_BROKER_TO_RESET_OFFSET: _res(fields(("group", "group", UPDATE), ("topic", "topic", UPDATE)),
                                          "Update on the group and on the topic"),
    C.GET_PRODUCER_CONNECTION_LIST: _cluster(GET, "Get on the cluster"),
    C.GET_ALL_PRODUCER_INFO: _cluster(GET, "Get on the cluster"),
    C.VIEW_BROKER_STATS_DATA: _cluster(GET, "Get on the cluster"),
    C.GET_BROKER_CONSUME_STATS: _cluster(GET, "Get on the cluster"),
    C.GET_GROUP_STATUS: _res(fields(("group", "consumerGroup", GET)), "Get on consumerGroup (sievemq's code)"),
    C.GET_GROUP_FILTERS: _res(fields(("group", "consumerGroup", GET)), "Get on consumerGroup (sievemq's code)"),
    C.EXPLAIN_SELECTOR: _res(fields(("topic", "topic", SUB)),
                             "Sub on the topic: it reads the topic's stored messages (sievemq's code)"),
    30013: _super("EXPLAIN_MESSAGE: every group's filter verdict on a stored message (sievemq's code)"),
    C.GET_TOPIC_NAME_LIST: _signed("the broker's topic names (the name servers list them to anyone)"),
    C.GET_BROKER_RUNTIME_INFO: _signed("the broker's counters, role and disk"),
    C.GET_BROKER_EPOCH_CACHE: _signed("the broker's epoch history under automatic failover"),
    C.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: _signed("the names of the topics the broker keeps for itself"),
    C.UPDATE_BROKER_CONFIG: _super("broker settings (answered with 3)"),
    C.GET_BROKER_CONFIG: _super("the broker's settings (paths, addresses, limits)"),
    C.CLEAN_EXPIRED_CONSUMEQUEUE: _super("deletes the queues of topics the broker no longer has"),
    C.CLEAN_UNUSED_TOPIC: _super("deletes the queues of topics the broker no longer has"),
    C.DELETE_EXPIRED_COMMITLOG: _super("runs retention now"),
    C.REGISTER_FILTER_SERVER: _super("a registered filter server is advertised to consumers"),
    C.VIEW_MESSAGE_BY_ID: _super("reads any record, whatever its topic (the header's topic is not the record's)"),
    C.CONSUME_MESSAGE_DIRECTLY: _super("hands any record to any client's listener"),
    C.GET_ALL_TOPIC_CONFIG: _super(_SYNC),
    C.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: _super(_SYNC),
    C.GET_ALL_CONSUMER_OFFSET: _super(_SYNC),
    C.GET_ALL_DELAY_OFFSET: _super(_SYNC),
    C.GET_ALL_CONSUMER_FILTER: _super(_SYNC),
    C.HA_CHECK: _super(_SYNC),
    C.MERGE_CONSUMER_OFFSET: _super(_SYNC),
    C.GET_ALL_AUTH_METADATA: _super("every user (with its password) and ACL: a slave's copy (sievemq's code)"),
    C.AUTH_CREATE_USER: _cluster(UPDATE, "Update on the cluster (a Super user: only by a super user)"),
    C.AUTH_UPDATE_USER: _cluster(UPDATE, "Update on the cluster (a Super user: only by a super user)"),
    C.AUTH_DELETE_USER: _cluster(UPDATE, "Update on the cluster (a Super user: only by a super user)"),
    C.AUTH_GET_USER: _cluster(GET, "Get on the cluster"),
    C.AUTH_LIST_USER: _cluster(GET, "Get on the cluster"),
    C.AUTH_CREATE_ACL: _cluster(UPDATE, "Update on the cluster"),
    C.AUTH_UPDATE_ACL: _cluster(UPDATE, "Update on the cluster"),
    C.AUTH_DELETE_ACL: _cluster(UPDATE, "Update on the cluster"),
    C.AUTH_GET_ACL: _cluster(GET, "Get on the cluster"),
    C.AUTH_LIST_ACL: _cluster(GET, "Get on the cluster"),
}
"""Every request code the broker serves (and 25, which it refuses with 3)."""
# fmt: on


def rule_of(code: int) -> Rule:
    """The rule of ``code`` (unlisted: super users only)."""
    return BROKER_RULES.get(code, SUPER_ONLY)


def markdown() -> str:
    """The table as the Markdown of docs/acl2.md §5 (kept equal to it by a test)."""
    from sievemq.remoting.codes import request_name

    kinds = {Kind.SIGNED: "any user", Kind.RESOURCES: "policies", Kind.SUPER: "super user"}
    rows = ["| code | who may send it | what it needs |", "| --- | --- | --- |"]
    for code, rule in sorted(BROKER_RULES.items()):
        rows.append(f"| {code} {request_name(code)} | {kinds[rule.kind]} | {rule.why} |")
    return "\n".join(rows) + "\n"
