"""Typed request wrappers over one remoting connection (RocketMQ's MQClientAPIImpl, in small functions).

This is the lowest layer of sievemq's client: producers and consumers build on it. Each function returns a typed
result (a small frozen dataclass or a plain value) or raises ``RemotingError`` for a refusal, carrying the response
code and the machine-readable ``reason`` (``sievemq.protocol.reasons``) so that callers branch on those, never on
remarks. The exception is ``pull_message``: every pull answer (docs/protocol/requests.md §6) is a ``PullResult``
whose code the consumers branch on. Request and answer fields are those of docs/protocol/requests.md. It never
imports broker code; the wrappers only tests need live in ``tests/support/wire.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from sievemq.errors import RemotingError
from sievemq.protocol.heartbeat import HeartbeatData, Subscription
from sievemq.protocol.message import MessageExt, decode_records
from sievemq.protocol.pull_header import PullMessageHeader, pull_sys_flag
from sievemq.protocol.reasons import Reason, RefusedSubscription, decode_refused_subscriptions, reason_of
from sievemq.protocol.send_header import SendMessageHeader
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection

SEND_OK_CODES = frozenset(
    {
        ResponseCode.SUCCESS,
        ResponseCode.FLUSH_DISK_TIMEOUT,
        ResponseCode.FLUSH_SLAVE_TIMEOUT,
        ResponseCode.SLAVE_NOT_AVAILABLE,
    }
)
"""The codes of a send the broker stored (the flush and slave codes say how durably); any other is a refusal."""

NO_CONSUMER_CODE = ResponseCode.SYSTEM_ERROR
"""What GET_CONSUMER_LIST_BY_GROUP answers for a group without clients (docs/protocol/requests.md §8)."""


@dataclass(frozen=True)
class SendResult:
    """What a broker answered to a send it stored (``code`` is one of ``SEND_OK_CODES``)."""

    code: int
    msg_id: str
    """The broker's offsetMsgId (a comma-separated list for a batch)."""
    queue_id: int
    queue_offset: int
    remark: str | None = None
    region_id: str = "DefaultRegion"
    trace_on: bool = True


@dataclass(frozen=True)
class PullResult:
    """What a broker answered to a pull."""

    code: int
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt]
    remark: str | None = None
    reason: Reason | None = None
    """The refusal's machine-readable reason (``sievemq.protocol.reasons``), when the answer carries one."""
    suggest_broker_id: int = 0
    """``suggestWhichBrokerId``: which broker of the set to pull this queue from next (0: the master)."""


@dataclass(frozen=True)
class HeartbeatResult:
    """What a broker answered to a heartbeat (always SUCCESS: a refusal of some subscriptions is listed here)."""

    remark: str | None = None
    """Why subscriptions were refused, for people (None when the broker has nothing to say)."""
    reason: Reason | None = None
    """``Reason.SUBSCRIPTION_INCONSISTENT`` when ``refused`` is not empty."""
    refused: tuple[RefusedSubscription, ...] = ()
    """The subscriptions the broker refuses (a sievemq broker lists them; the client gets no queues of those)."""


def _check(resp: RemotingCommand, *ok: int) -> RemotingCommand:
    if resp.code not in (ok or (ResponseCode.SUCCESS,)):
        raise RemotingError.from_response(resp.code, resp.remark, resp.ext_fields)
    return resp


async def pull_message(
    conn: Connection,
    group: str,
    topic: str,
    queue_id: int,
    offset: int,
    *,
    max_nums: int = 32,
    subscription: str | None = "*",
    expression_type: str = "TAG",
    suspend_ms: int = 0,
    commit_offset: int | None = None,
    sub_version: int = 0,
    class_filter: bool = False,
    timeout: float = 30.0,
) -> PullResult:
    """PULL_MESSAGE; ``subscription`` None means "use the group's heartbeat subscription". Every answer is a
    ``PullResult`` (found, not found, offset moved and refusals alike): the consumers branch on its code and reason.

    ``class_filter`` sets FLAG_CLASS_FILTER (0x8), as a pull sent to a filter server carries (with ``subscription``
    None, so that FLAG_SUBSCRIPTION is clear).
    """
    header = PullMessageHeader(
        consumer_group=group,
        topic=topic,
        queue_id=queue_id,
        queue_offset=offset,
        max_msg_nums=max_nums,
        sys_flag=pull_sys_flag(
            commit_offset=commit_offset is not None,
            suspend=suspend_ms > 0,
            subscription=subscription is not None,
            class_filter=class_filter,
        ),
        commit_offset=commit_offset if commit_offset is not None else 0,
        suspend_timeout_millis=suspend_ms,
        subscription=subscription,
        expression_type=expression_type,
        sub_version=sub_version,
    )
    resp = await conn.request(RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_fields()), timeout)
    f = resp.ext_fields
    msgs = decode_records(resp.body) if resp.code == ResponseCode.SUCCESS and resp.body else []
    return PullResult(
        resp.code,
        int(f.get("nextBeginOffset", "0")),
        int(f.get("minOffset", "0")),
        int(f.get("maxOffset", "0")),
        msgs,
        resp.remark,
        reason_of(f),
        _suggested(f.get("suggestWhichBrokerId")),
    )


def _suggested(value: str | None) -> int:
    """A pull answer's ``suggestWhichBrokerId`` (0, the master, when absent or not a small number)."""
    try:
        n = int(value) if value is not None else 0
    except ValueError:
        return 0
    return n if 0 <= n <= 1024 else 0


async def register_filter_class(
    conn: Connection,
    fields: dict[str, Any],
    body: bytes = b"",
    timeout: float = 15.0,
) -> None:
    """REGISTER_MESSAGE_FILTER_CLASS (302) to a filter server: header ``consumerGroup``, ``topic``, ``className``,
    ``classCRC`` (and the ``upload*`` signature fields for an upload), body the source (docs/protocol/filter-server.md
    §5). Returns once accepted; a refusal raises ``RemotingError`` with the filter server's code and reason.
    """
    cmd = RemotingCommand.request(RequestCode.REGISTER_MESSAGE_FILTER_CLASS, fields, body)
    _check(await conn.request(cmd, timeout))


async def heartbeat(conn: Connection, data: HeartbeatData, timeout: float = 3.0) -> HeartbeatResult:
    """HEART_BEAT: the remark, reason and refused subscriptions of the answer (RemotingError for a refusal)."""
    cmd = RemotingCommand.request(RequestCode.HEART_BEAT, body=orjson.dumps(data.to_json()))
    resp = _check(await conn.request(cmd, timeout))
    f = resp.ext_fields
    return HeartbeatResult(resp.remark, reason_of(f), tuple(decode_refused_subscriptions(f)))


async def consumer_ids(conn: Connection, group: str, timeout: float = 3.0, topic: str | None = None) -> list[str]:
    """GET_CONSUMER_LIST_BY_GROUP: the group's client ids, empty when the broker knows no client of the group
    (``NO_CONSUMER_CODE``); other refusals raise ``RemotingError``.

    ``topic`` (a sievemq extension, ignored by Java brokers) asks for the clients that subscribe it consistently.
    """
    resp = await conn.request(
        RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group, "topic": topic}),
        timeout,
    )
    if resp.code == NO_CONSUMER_CODE:
        return []
    return list(orjson.loads(_check(resp).body).get("consumerIdList") or [])


async def query_offset(
    conn: Connection, group: str, topic: str, queue_id: int, timeout: float = 3.0, *, zero_if_not_found: bool = True
) -> int:
    """QUERY_CONSUMER_OFFSET (-1 when the broker has none). ``zero_if_not_found=False`` sends RocketMQ 5's
    ``setZeroIfNotFound=false``: a broker that knows the field then never answers 0 for a group without an offset
    (docs/consume-from.md)."""
    fields: dict[str, object] = {"consumerGroup": group, "topic": topic, "queueId": queue_id}
    if not zero_if_not_found:
        fields["setZeroIfNotFound"] = "false"
    resp = await conn.request(RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, fields), timeout)
    if resp.code == ResponseCode.QUERY_NOT_FOUND:
        return -1
    return int(_check(resp).ext_fields.get("offset", "-1"))


async def update_offset(
    conn: Connection, group: str, topic: str, queue_id: int, offset: int, timeout: float = 3.0
) -> None:
    """UPDATE_CONSUMER_OFFSET (request/response form)."""
    _check(
        await conn.request(
            RemotingCommand.request(
                RequestCode.UPDATE_CONSUMER_OFFSET,
                {"consumerGroup": group, "topic": topic, "queueId": queue_id, "commitOffset": offset},
            ),
            timeout,
        )
    )


async def queue_offset(conn: Connection, code: int, topic: str, queue_id: int, timeout: float = 3.0) -> int:
    """GET_MAX_OFFSET or GET_MIN_OFFSET."""
    resp = _check(await conn.request(RemotingCommand.request(code, {"topic": topic, "queueId": queue_id}), timeout))
    return int(resp.ext_fields.get("offset", "0"))


async def send_request(
    conn: Connection,
    header: SendMessageHeader,
    body: bytes,
    *,
    code: int = RequestCode.SEND_MESSAGE_V2,
    timeout: float = 3.0,
) -> SendResult:
    """A send (SEND_MESSAGE_V2 by default, or SEND_BATCH_MESSAGE) with a prepared header (docs/protocol/requests.md
    §2-3): the answer of a stored message, ``RemotingError`` for any code outside ``SEND_OK_CODES``."""
    cmd = RemotingCommand.request(code, header.to_fields(v2=code != RequestCode.SEND_MESSAGE), body)
    resp = _check(await conn.request(cmd, timeout), *SEND_OK_CODES)
    f = resp.ext_fields
    return SendResult(
        code=resp.code,
        msg_id=f.get("msgId", ""),
        queue_id=int(f.get("queueId", header.queue_id)),
        queue_offset=int(f.get("queueOffset", "0")),
        remark=resp.remark,
        region_id=f.get("MSG_REGION", "DefaultRegion"),
        trace_on=f.get("TRACE_ON", "true") != "false",
    )


def send_oneway_request(
    conn: Connection, header: SendMessageHeader, body: bytes, *, code: int = RequestCode.SEND_MESSAGE_V2
) -> None:
    """The same send as ``send_request``, one-way (no answer)."""
    cmd = RemotingCommand.request(code, header.to_fields(v2=code != RequestCode.SEND_MESSAGE), body, oneway=True)
    conn.send_oneway(cmd)


async def send_back(
    conn: Connection,
    *,
    offset: int,
    group: str,
    delay_level: int = 0,
    origin_msg_id: str | None = None,
    origin_topic: str | None = None,
    max_reconsume_times: int | None = None,
    timeout: float = 3.0,
) -> None:
    """CONSUMER_SEND_MSG_BACK: a consumed message (by commit-log ``offset``) goes to the retry topic or the DLQ."""
    fields: dict[str, Any] = {
        "offset": offset,
        "group": group,
        "delayLevel": delay_level,
        "originMsgId": origin_msg_id,
        "originTopic": origin_topic,
        "unitMode": False,
        "maxReconsumeTimes": max_reconsume_times,
    }
    _check(await conn.request(RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, fields), timeout))


async def unregister_client(
    conn: Connection,
    client_id: str,
    *,
    producer_group: str | None = None,
    consumer_group: str | None = None,
    timeout: float = 3.0,
) -> None:
    """UNREGISTER_CLIENT for one producer or consumer group."""
    fields = {"clientID": client_id, "producerGroup": producer_group, "consumerGroup": consumer_group}
    _check(await conn.request(RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, fields), timeout))


async def end_transaction(
    conn: Connection,
    producer_group: str,
    half_offset: int,
    half_phy: int,
    state: int,
    msg_id: str,
    *,
    from_check: bool = False,
    remark: str | None = None,
    timeout: float = 3.0,
) -> str | None:
    """END_TRANSACTION: ``state`` 8 commits, 12 rolls back, 0 leaves it to the broker's check; the broker's remark.

    ``half_offset`` / ``half_phy``: the half message's queue offset and commit-log offset (from the send result).
    """
    fields = {
        "producerGroup": producer_group,
        "tranStateTableOffset": half_offset,
        "commitLogOffset": half_phy,
        "commitOrRollback": state,
        "fromTransactionCheck": "true" if from_check else "false",
        "msgId": msg_id,
        "transactionId": msg_id,
    }
    cmd = RemotingCommand.request(RequestCode.END_TRANSACTION, fields)
    cmd.remark = remark
    return _check(await conn.request(cmd, timeout)).remark


async def lock_batch_mq(
    conn: Connection, group: str, client_id: str, queues: list[dict[str, Any]], timeout: float = 3.0
) -> list[dict[str, Any]]:
    """LOCK_BATCH_MQ for an orderly consumer: ``queues`` as ``{"topic", "brokerName", "queueId"}`` objects; the
    ones this client holds now (locked, or still its own)."""
    body = orjson.dumps({"consumerGroup": group, "clientId": client_id, "mqSet": queues})
    resp = _check(await conn.request(RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, body=body), timeout))
    held = orjson.loads(resp.body).get("lockOKMQSet") if resp.body else None
    return [q for q in held or [] if isinstance(q, dict)]


async def unlock_batch_mq(
    conn: Connection, group: str, client_id: str, queues: list[dict[str, Any]], timeout: float = 3.0
) -> None:
    """UNLOCK_BATCH_MQ: give queues up (an orderly consumer after a rebalance took them away, or at close)."""
    body = orjson.dumps({"consumerGroup": group, "clientId": client_id, "mqSet": queues})
    _check(await conn.request(RemotingCommand.request(RequestCode.UNLOCK_BATCH_MQ, body=body), timeout))


async def check_client_config(
    conn: Connection, client_id: str, group: str, subscription: Subscription, timeout: float = 3.0
) -> None:
    """CHECK_CLIENT_CONFIG: returns when the broker can serve this subscription; ``RemotingError`` (the broker's code,
    remark and reason, e.g. ``Reason.SQL92_DISABLED``) when it cannot."""
    body = orjson.dumps({"clientId": client_id, "group": group, "subscriptionData": subscription.to_json()})
    _check(await conn.request(RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, body=body), timeout))


async def search_offset(conn: Connection, topic: str, queue_id: int, timestamp_ms: int, timeout: float = 3.0) -> int:
    """SEARCH_OFFSET_BY_TIMESTAMP: the first queue offset stored at or after ``timestamp_ms`` (RocketMQ 5's rule)."""
    cmd = RemotingCommand.request(
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": topic, "queueId": queue_id, "timestamp": timestamp_ms}
    )
    resp = _check(await conn.request(cmd, timeout))
    return int(resp.ext_fields.get("offset", "0"))
