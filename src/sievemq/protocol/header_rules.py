"""The edge check of request headers: names and numbers, by field name, before any processor runs. Pure.

Every server (name server, broker, filter server) runs ``check_request`` on each request whose code it
answers, so no processor ever sees a topic or group name outside RocketMQ's rules, or a number that does
not fit the Java type RocketMQ declares for the field (``int``: 32 bits, ``long``: 64 bits), or a negative
value where only non-negative ones mean something. A refusal is SYSTEM_ERROR (as RocketMQ answers an
illegal topic), INVALID_PARAMETER (29) for an illegal name in a send or a topic creation (as RocketMQ 5 answers),
with reason ``INVALID_NAME`` or ``INVALID_HEADER`` and a remark naming the field. Fields
are checked only when present and not empty: which fields a request *requires* is the processor's business.

The rules are keyed by field name because RocketMQ uses each name with one meaning across its headers
(``topic``, ``queueId``, ``commitOffset``...). SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE carry one-letter
keys (docs/protocol/requests.md §2); they are read through the V2 table.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping

from sievemq.errors import HeaderError, RemotingError
from sievemq.protocol import accel as _accel
from sievemq.protocol.names import group_problem, topic_problem
from sievemq.protocol.reasons import Reason
from sievemq.protocol.route import PERM_MAX
from sievemq.protocol.send_header import V2_TO_V1
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.headers import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, parse_int

__all__ = ["INT_RULES", "NAME_RULES", "check_fields", "check_name", "check_request", "reference_check_fields"]

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
    "tranStateTableOffset": _U64,
    "commitLogOffset": _U64,
    "commitOrRollback": _I32,
    "brokerId": _U64,
    "invisibleTime": _U64,
    "pollTime": _U64,
    "bornTime": _U64,
    "initMode": _I32,
}
"""Field -> inclusive range of its integer value."""

_V2_CODES = frozenset({RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2})
_SEND_CODES = frozenset({RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE,
                         RequestCode.UPDATE_AND_CREATE_TOPIC})  # fmt: skip
"""Requests whose illegal names RocketMQ 5 answers with INVALID_PARAMETER (29), not SYSTEM_ERROR."""


def check_name(field: str, value: str) -> None:
    """Raise RemotingError (reason INVALID_NAME) when ``value`` is not a legal name for ``field``."""
    rule = NAME_RULES.get(field)
    problem = rule(value) if rule is not None else None
    if problem is not None:
        raise RemotingError(ResponseCode.SYSTEM_ERROR, f"{problem} (field '{field}')", Reason.INVALID_NAME)


_PASSED: dict[str, set[str]] = {name: set() for name in NAME_RULES}
"""Field -> values that passed its name rule (a rule is a pure function of the value): most requests repeat a
few topics and groups, so most name checks end in one set lookup. Each set is emptied when it reaches
``_PASSED_MAX``, so a client sending ever new names cannot grow it."""
_PASSED_MAX = 4096

_NamePlan = dict[str, tuple[str, set[str]]]
"""Wire key -> (field name, its passed values)."""
_IntPlan = dict[str, tuple[str, int, int]]
"""Wire key -> (field name, lowest, highest)."""


def _plan(rename: Mapping[str, str]) -> tuple[_NamePlan, _IntPlan]:
    """Each wire key's check, the renaming done once: keys are read as themselves unless ``rename`` maps them."""
    names: _NamePlan = {name: (name, seen) for name, seen in _PASSED.items()}
    ints: _IntPlan = {name: (name, lo, hi) for name, (lo, hi) in INT_RULES.items()}
    for key, name in rename.items():
        names.pop(key, None)
        ints.pop(key, None)
        if name in _PASSED:
            names[key] = (name, _PASSED[name])
        elif name in INT_RULES:
            ints[key] = (name, *INT_RULES[name])
    return names, ints


_PLANS: dict[bool, tuple[_NamePlan, _IntPlan]] = {False: _plan({}), True: _plan(V2_TO_V1)}
"""The plans of the two spellings: as named (every code) and one-letter (SEND_MESSAGE_V2, SEND_BATCH_MESSAGE)."""


def check_fields(fields: Mapping[str, str], rename: Mapping[str, str] | None = None) -> None:
    """Check every named or numeric field of ``fields`` (``rename``: wire key -> RocketMQ field name).

    Does what ``reference_check_fields`` does, for less: one lookup per key (``_PLANS``), passed names
    remembered, and a number that ``int`` reads and that lies in its bounds accepted without the full parse
    (which produces the errors).
    """
    if not rename:
        names, ints = _PLANS[False]
    elif rename is V2_TO_V1:
        names, ints = _PLANS[True]
    else:
        names, ints = _plan(rename)
    for key, value in fields.items():
        if not value:
            continue
        rule = names.get(key)
        if rule is not None:
            name, seen = rule
            if value not in seen:
                check_name(name, value)
                if len(seen) >= _PASSED_MAX:
                    seen.clear()
                seen.add(value)
            continue
        bounds = ints.get(key)
        if bounds is None or value == "null":
            continue
        name, lo, hi = bounds
        # the common case, non-negative digits (as ``int`` reads them), in bounds; the full parse for the rest
        if len(value) <= _MAX_INT_CHARS and value.isdecimal() and lo <= int(value) <= hi:
            continue
        parse_int(name, value, lo, hi)


_MAX_INT_CHARS = 19
"""Digits ``int`` reads in negligible time (and below ``parse_int``'s own length limit)."""


def reference_check_fields(fields: Mapping[str, str], rename: Mapping[str, str] | None = None) -> None:
    """The plain form of ``check_fields`` (no memory, one full parse per number): what the tests compare against."""
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
    if not fields:
        return
    if code not in _SEND_CODES:
        check_fields(fields, V2_TO_V1 if code in _V2_CODES else None)
        return
    try:
        check_fields(fields, V2_TO_V1 if code in _V2_CODES else None)
    except HeaderError:
        raise  # a number out of its Java type: RocketMQ cannot decode the header either (SYSTEM_ERROR)
    except RemotingError as e:  # an illegal name: RocketMQ 5's send check answers INVALID_PARAMETER
        raise RemotingError(ResponseCode.INVALID_PARAMETER, e.remark, e.reason) from None


REFERENCE: dict[str, object] = {"check_fields": check_fields}
"""The pure-Python ``check_fields``, kept whatever runs (the accelerator's tests compare against it; its twin takes
the common case, names already passed and short numbers in bounds, and hands anything else to it)."""
_accel.install(sys.modules[__name__], REFERENCE, "init_header_rules", _accel.headers)
