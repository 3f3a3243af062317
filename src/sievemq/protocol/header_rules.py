"""The edge check of request headers: names and numbers, by field name, before any processor runs. Pure.

Every server (name server, broker, filter server) runs ``check_request`` on each request whose code it
answers, so no processor ever sees a topic or group name outside RocketMQ's rules, or a number that does
not fit the Java type RocketMQ declares for the field (``int``: 32 bits, ``long``: 64 bits), or a negative
value where only non-negative ones mean something. A refusal is SYSTEM_ERROR (as RocketMQ answers an
illegal topic) with reason ``INVALID_NAME`` or ``INVALID_HEADER`` and a remark naming the field. Fields
are checked only when present and not empty: which fields a request *requires* is the processor's business.

The rules are keyed by field name because RocketMQ uses each name with one meaning across its headers
(``topic``, ``queueId``, ``commitOffset``...). SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE carry one-letter
keys (docs/protocol/requests.md §2); they are read through the V2 table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sievemq.errors import RemotingError
from sievemq.protocol.names import group_problem, topic_problem
from sievemq.protocol.reasons import Reason
from sievemq.protocol.route import PERM_MAX
from sievemq.protocol.send_header import V2_TO_V1
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.headers import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, parse_int

__all__ = ["INT_RULES", "NAME_RULES", "check_fields", "check_name", "check_request"]

_TOPIC: Callable[[str], str | None] = topic_problem
_GROUP: Callable[[str], str | None] = group_problem


def _named(what: str) -> Callable[[str], str | None]:
    return lambda v: group_problem(v, what)


NAME_RULES: dict[str, Callable[[str], str | None]] = {
    "topic": _TOPIC,
    "defaultTopic": _TOPIC,
    "originTopic": _TOPIC,
    "consumerGroup": _GROUP,
    "producerGroup": _GROUP,
    "group": _GROUP,
    "groupName": _GROUP,
    "brokerName": _named("broker"),
    "clusterName": _named("cluster"),
}
"""Field -> the function that says why a value is not a legal name (None when it is)."""

_I32 = (INT32_MIN, INT32_MAX)
_I64 = (INT64_MIN, INT64_MAX)
_U32 = (0, INT32_MAX)
_U64 = (0, INT64_MAX)
INT_RULES: dict[str, tuple[int, int]] = {
    # int in RocketMQ's headers
    "queueId": (-1, INT32_MAX),  # -1: "any queue" in a send
    "sysFlag": _I32,
    "flag": _I32,
    "topicSysFlag": _I32,
    "perm": (0, PERM_MAX),
    "readQueueNums": _U32,
    "writeQueueNums": _U32,
    "defaultTopicQueueNums": _I32,
    "maxMsgNums": _I32,
    "reconsumeTimes": _I32,
    "maxReconsumeTimes": _I32,
    "delayLevel": _I32,
    "maxNum": _I32,
    # long
    "queueOffset": _I64,
    "commitOffset": _I64,
    "offset": _I64,
    "bornTimestamp": _I64,
    "timestamp": _I64,
    "beginTimestamp": _I64,
    "endTimestamp": _I64,
    "subVersion": _I64,
    "classCRC": _I64,
    "suspendTimeoutMillis": _U64,
    "brokerId": _U64,
}
"""Field -> inclusive range of its integer value."""

_V2_CODES = frozenset({RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE})


def check_name(field: str, value: str) -> None:
    """Raise RemotingError (reason INVALID_NAME) when ``value`` is not a legal name for ``field``."""
    rule = NAME_RULES.get(field)
    problem = rule(value) if rule is not None else None
    if problem is not None:
        raise RemotingError(ResponseCode.SYSTEM_ERROR, f"{problem} (field '{field}')", Reason.INVALID_NAME)


def check_fields(fields: Mapping[str, str], rename: Mapping[str, str] | None = None) -> None:
    """Check every named or numeric field of ``fields`` (``rename``: wire key -> RocketMQ field name)."""
    names, ints = NAME_RULES, INT_RULES
    for key, value in fields.items():
        if not value:
            continue
        name = rename.get(key, key) if rename else key
        if name in names:
            check_name(name, value)
        else:
            bounds = ints.get(name)
            if bounds is not None and value != "null":
                parse_int(name, value, *bounds)


def check_request(code: int, fields: Mapping[str, str]) -> None:
    """The edge check of one request's header (see the module docstring); raises HeaderError / RemotingError."""
    if fields:
        check_fields(fields, V2_TO_V1 if code in _V2_CODES else None)
