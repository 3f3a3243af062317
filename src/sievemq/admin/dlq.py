"""``dlq resend G``: send a group's dead letters back so that the group consumes them again (docs/admin.md §6).

Each message of ``%DLQ%G`` is sent as a new message to ``%RETRY%G`` (only group G consumes it, under its original
topic, which the ``RETRY_TOPIC`` property keeps), or with ``to_origin`` to that original topic itself (every group
of the topic gets it). The copy keeps body, tags, keys, properties and message id, starts a new round of retries
(``reconsumeTimes`` 0), and carries ``DLQ_RESENT_FROM`` = ``<broker>:<queue>:<offset>`` of its dead letter.

Nothing is resent twice: before sending, the target topic's index is asked for a message with the same id that
carries this dead letter's mark (a run that stopped half way, or one with ``--key``, is completed, not repeated);
and the group ``TOOLS_DLQ_RESEND`` keeps, per DLQ queue, the offset below which every dead letter was resent, so
that a run starts there (the mark check covers what lies beyond it).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any

from sievemq.admin.api import AdminClient, BrokerInfo
from sievemq.admin.errors import GroupNotFound
from sievemq.admin.fanout import fan_out, texts
from sievemq.admin.progress import known_groups
from sievemq.client import api
from sievemq.errors import RemotingError, SieveError
from sievemq.protocol.message import MessageExt, PropertyKey, decode_records, properties_to_string
from sievemq.protocol.names import TOOLS_CONSUMER_GROUP, TOOLS_DLQ_RESEND_GROUP, dlq_topic, retry_topic
from sievemq.protocol.send_header import SendMessageHeader
from sievemq.protocol.sysflag import TRANSACTION_MASK
from sievemq.remoting.codes import RequestCode, ResponseCode

__all__ = ["RESENT_FROM", "ResendResult", "advance", "copy_of", "matches", "resend"]

RESENT_FROM = "DLQ_RESENT_FROM"
"""Property of a resent copy: ``<brokerName>:<queueId>:<queueOffset>`` of the dead letter it copies."""
_DROPPED = (PropertyKey.DELAY, PropertyKey.REAL_TOPIC, PropertyKey.REAL_QID, PropertyKey.TRAN_MSG,
            PropertyKey.TRAN_PREPARED_QUEUE_OFFSET, PropertyKey.TRANSACTION_CHECK_TIMES, PropertyKey.WAIT,
            PropertyKey.TIMER_DELIVER_MS, PropertyKey.TIMER_DELAY_SEC, PropertyKey.TIMER_DELAY_MS,
            PropertyKey.TIMER_OUT_MS, PropertyKey.MIN_OFFSET, PropertyKey.MAX_OFFSET, PropertyKey.CLUSTER)  # fmt: skip
_BATCH = 32


# ------------------------------------------------------------------------------------------------ deciding
def marker(broker: str, msg: MessageExt) -> str:
    """The mark of a dead letter: ``<brokerName>:<queueId>:<queueOffset>``."""
    return f"{broker}:{msg.queue_id}:{msg.queue_offset}"


def copy_id(broker: str, msg: MessageExt) -> str:
    """The message id of the copy: the dead letter's own, else one derived from its mark (32 hex digits)."""
    return msg.uniq_key or hashlib.blake2b(marker(broker, msg).encode(), digest_size=16).hexdigest().upper()


def matches(msg: MessageExt, key: str | None, msg_id: str | None) -> bool:
    """Whether a dead letter is selected: ``key`` among its KEYS, ``msg_id`` its id, offsetMsgId or original id."""
    if key is not None and key not in msg.keys:
        return False
    if msg_id is not None:
        ids = {msg.uniq_key, msg.offset_msg_id, msg.properties.get(PropertyKey.ORIGIN_MESSAGE_ID)}
        return msg_id.upper() in {i.upper() for i in ids if i}
    return True


def copy_of(broker: str, msg: MessageExt, topic: str) -> tuple[SendMessageHeader, bytes]:
    """The send of ``msg``'s copy to ``topic`` (a first delivery: no delay, timer, transaction or retry count)."""
    props = {k: v for k, v in msg.properties.items() if k not in _DROPPED}
    props[PropertyKey.UNIQ_KEY] = copy_id(broker, msg)
    props[RESENT_FROM] = marker(broker, msg)
    if not topic.startswith("%RETRY%"):
        props.pop(PropertyKey.RETRY_TOPIC, None)
    header = SendMessageHeader(
        producer_group=TOOLS_DLQ_RESEND_GROUP,
        topic=topic,
        sys_flag=msg.sys_flag & ~TRANSACTION_MASK,
        born_timestamp=msg.born_timestamp,
        flag=msg.flag,
        properties=properties_to_string(props),
        reconsume_times=0,
    )
    return header, msg.body


def advance(cursor: int, done: list[tuple[int, bool]]) -> int:
    """The new cursor: past every offset from ``cursor`` on that is done (resent now or before), up to the first
    that is not. ``done``: (offset, done) in offset order; offsets missing from it (gaps) count as done."""
    for offset, ok in done:
        if offset < cursor:
            continue
        if not ok:
            return offset
        cursor = offset + 1
    return cursor


# ------------------------------------------------------------------------------------------------ doing
@dataclass
class ResendResult:
    """What a resend did (or, with ``dry_run``, would do)."""

    group: str
    dlq_topic: str
    dry_run: bool
    examined: int = 0
    """Dead letters looked at (from each queue's cursor to its end)."""
    selected: int = 0
    """Of those, the ones ``--key`` / ``--msg-id`` select (all without them)."""
    resent: list[dict[str, Any]] = field(default_factory=list)
    """One entry per copy sent (or to send): the dead letter's mark, message id, original topic, target topic."""
    already: int = 0
    """Selected dead letters found resent by an earlier run (not sent again)."""
    failed: dict[str, str] = field(default_factory=dict)
    """Mark -> why the copy could not be sent."""
    cursors: dict[str, list[int]] = field(default_factory=dict)
    """``<broker>:<queue>`` -> [cursor before, cursor after]."""
    errors: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """See docs/admin.md §6."""
        return {"group": self.group, "dlqTopic": self.dlq_topic, "dryRun": self.dry_run, "examined": self.examined,
                "selected": self.selected, "resent": self.resent, "alreadyResent": self.already,
                "failed": self.failed, "cursors": self.cursors, "errors": self.errors}  # fmt: skip


async def _cursor(admin: AdminClient, addr: str, topic: str, q: int, lo: int) -> int:
    fields = {"consumerGroup": TOOLS_DLQ_RESEND_GROUP, "topic": topic, "queueId": q}
    resp = await admin.request(addr, RequestCode.QUERY_CONSUMER_OFFSET, fields)
    if resp.code == ResponseCode.SUCCESS:
        return max(lo, int(resp.ext_fields.get("offset", "0")))
    if resp.code == ResponseCode.QUERY_NOT_FOUND:
        return lo
    raise RemotingError.from_response(resp.code, resp.remark, resp.ext_fields)


async def _already_resent(admin: AdminClient, addr: str, topic: str, broker: str, msg: MessageExt) -> bool:
    """Whether ``topic`` holds a copy of this dead letter (same id, its mark), stored after it."""
    fields = {"topic": topic, "key": copy_id(broker, msg), "maxNum": 32, "_UNIQUE_KEY_QUERY": "true",
              "beginTimestamp": msg.store_timestamp, "endTimestamp": int(time.time() * 1000) + 86_400_000}  # fmt: skip
    resp = await admin.request(addr, RequestCode.QUERY_MESSAGE, fields)
    if resp.code == ResponseCode.QUERY_NOT_FOUND:
        return False
    if resp.code != ResponseCode.SUCCESS:
        raise RemotingError.from_response(resp.code, resp.remark, resp.ext_fields)
    mark = marker(broker, msg)
    return any(m.properties.get(RESENT_FROM) == mark for m in decode_records(resp.body))


async def _read(admin: AdminClient, addr: str, topic: str, q: int, start: int, end: int) -> list[MessageExt]:
    conn = await admin.pool.get(addr)
    out: list[MessageExt] = []
    while start < end:
        r = await api.pull_message(conn, TOOLS_CONSUMER_GROUP, topic, q, start, max_nums=_BATCH, subscription="*",
                                   timeout=admin.timeout)  # fmt: skip
        if r.code == ResponseCode.SUCCESS:
            out.extend(r.messages)
        elif r.code not in (ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_OFFSET_MOVED):
            break
        if r.next_begin_offset <= start:
            break
        start = r.next_begin_offset
    return out


async def resend(
    admin: AdminClient,
    group: str,
    *,
    dry_run: bool = False,
    key: str | None = None,
    msg_id: str | None = None,
    to_origin: bool = False,
) -> ResendResult:
    """Resend ``group``'s dead letters (those ``key`` / ``msg_id`` select) once; see the module docstring."""
    topic = dlq_topic(group)
    result = ResendResult(group, topic, dry_run)
    try:
        route = await admin.route(topic)
    except RemotingError as e:
        if e.code != ResponseCode.TOPIC_NOT_EXIST:
            raise
        if group not in await known_groups(admin):
            raise GroupNotFound(group) from None
        return result  # a group without dead letters
    names = {qd.broker_name: qd.read_queue_nums for qd in route.queue_datas}
    sets = [b for b in await admin.brokers() if b.name in names]

    async def of_set(b: BrokerInfo) -> None:
        addr = b.addrs.get(0)
        if addr is None:
            raise SieveError(f"broker set {b.name} has no master online: dead letters are resent through masters")
        for q in range(names[b.name]):
            await _resend_queue(admin, result, b, addr, q, key, msg_id, to_origin)

    _, failures = await fan_out(sets, of_set)
    result.errors = texts(failures)
    return result


async def _resend_queue(
    admin: AdminClient,
    result: ResendResult,
    b: BrokerInfo,
    addr: str,
    q: int,
    key: str | None,
    msg_id: str | None,
    to_origin: bool,
) -> None:
    topic, group = result.dlq_topic, result.group
    lo, hi = await admin.min_offset(addr, topic, q), await admin.max_offset(addr, topic, q)
    cursor = await _cursor(admin, addr, topic, q, lo)
    done: list[tuple[int, bool]] = []
    for msg in await _read(admin, addr, topic, q, cursor, hi):
        result.examined += 1
        mark = marker(b.name, msg)
        if not matches(msg, key, msg_id):
            done.append((msg.queue_offset, False))
            continue
        result.selected += 1
        origin = msg.properties.get(PropertyKey.RETRY_TOPIC)
        target = origin if to_origin else retry_topic(group)
        if target is None:
            result.failed[mark] = "the dead letter does not name its original topic (no RETRY_TOPIC property)"
            done.append((msg.queue_offset, False))
            continue
        if await _already_resent(admin, addr, target, b.name, msg):
            result.already += 1
            done.append((msg.queue_offset, True))
            continue
        entry = {"deadLetter": mark, "msgId": copy_id(b.name, msg), "originTopic": origin, "topic": target,
                 "keys": msg.keys, "tags": msg.tags}  # fmt: skip
        if result.dry_run:
            result.resent.append(entry)
            done.append((msg.queue_offset, False))
            continue
        header, body = copy_of(b.name, msg, target)
        try:
            conn = await admin.pool.get(addr)
            sent = await api.send_request(conn, header, body, timeout=admin.timeout)
        except RemotingError as e:
            result.failed[mark] = str(e)
            done.append((msg.queue_offset, False))
            continue
        result.resent.append({**entry, "offsetMsgId": sent.msg_id})
        done.append((msg.queue_offset, True))
    after = advance(cursor, done) if done else cursor
    if not result.dry_run and after > cursor:
        fields = {"consumerGroup": TOOLS_DLQ_RESEND_GROUP, "topic": topic, "queueId": q, "commitOffset": after}
        await admin.call(addr, RequestCode.UPDATE_CONSUMER_OFFSET, fields)
    result.cursors[f"{b.name}:{q}"] = [cursor, after]
