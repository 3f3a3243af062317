"""Finding stored messages: ``message show ID``, ``message find --topic T --key K`` and which groups consumed a
message (docs/admin.md §5), over VIEW_MESSAGE_BY_ID (33), QUERY_MESSAGE (12), QUERY_TOPIC_CONSUME_BY_WHO (300),
GET_CONSUME_STATS (208) and GET_CONSUMER_CONNECTION_LIST (203)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from sievemq.admin.api import AdminClient, BrokerInfo
from sievemq.admin.errors import MessageNotFound, NotAMessageId, TopicNotFound
from sievemq.admin.fanout import CONCURRENCY, fan_out, texts
from sievemq.admin.message_view import GroupTrack, MessageView, TrackState, track
from sievemq.admin.progress import SYSTEM_GROUPS, consume_stats, consumer_connection
from sievemq.errors import RemotingError, SieveError
from sievemq.protocol.admin_bodies import decode_group_list
from sievemq.protocol.message import MessageExt, decode_records
from sievemq.protocol.msgid import parse_offset_msg_id
from sievemq.protocol.names import NOT_ALLOWED_SEND_TOPICS
from sievemq.remoting.codes import RequestCode, ResponseCode

__all__ = ["FIND_MAX", "ID_LENGTHS", "Found", "consumption", "find_by_key", "message_id", "show"]

FIND_MAX = 1000
"""Most messages ``find_by_key`` gathers (brokers answer at most 64 per query: it asks page by page)."""
_PAGE = 64
_FAR_FUTURE = 1 << 62


@dataclass
class Found:
    """Messages found, and brokers that could not be asked."""

    messages: list[MessageView]
    errors: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """``messages`` (each as ``MessageView.to_json``) and ``errors``."""
        return {"messages": [m.to_json() for m in self.messages], "errors": self.errors}


def _decode(resp_body: bytes) -> list[MessageExt]:
    try:
        return decode_records(resp_body)
    except ValueError as e:
        raise SieveError(f"a broker answered with records that do not decode: {e}") from None


async def _by_offset_id(admin: AdminClient, brokers: list[BrokerInfo], msg_id: str) -> MessageView | None:
    """The record an offsetMsgId names, when its address is a broker of the cluster (read from its set)."""
    try:
        host, port, phy = parse_offset_msg_id(msg_id)
    except ValueError:
        return None
    addr = f"{host}:{port}"
    for b in brokers:
        if addr in b.addrs.values():
            read = b.read_addr or addr
            resp = await admin.request(read, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": phy})
            if resp.code != ResponseCode.SUCCESS:
                return None
            for m in _decode(resp.body):
                if m.commit_log_offset == phy:
                    return MessageView.of(b.name, m)
    return None


async def _query(
    admin: AdminClient, b: BrokerInfo, topic: str, key: str, unique: bool, begin: int, end: int
) -> list[MessageView]:
    addr = b.read_addr
    if addr is None:
        return []
    fields: dict[str, Any] = {"topic": topic, "key": key, "maxNum": _PAGE, "beginTimestamp": begin,
                              "endTimestamp": end}  # fmt: skip
    if unique:
        fields["_UNIQUE_KEY_QUERY"] = "true"
    resp = await admin.request(addr, RequestCode.QUERY_MESSAGE, fields)
    if resp.code == ResponseCode.QUERY_NOT_FOUND:
        return []
    if resp.code != ResponseCode.SUCCESS:
        raise RemotingError.from_response(resp.code, resp.remark, resp.ext_fields)
    return [MessageView.of(b.name, m) for m in _decode(resp.body)]


async def _sets_of(admin: AdminClient, topic: str, brokers: list[BrokerInfo]) -> list[BrokerInfo]:
    try:
        route = await admin.route(topic)
    except RemotingError as e:
        if e.code == ResponseCode.TOPIC_NOT_EXIST:
            return []
        raise
    names = {bd.broker_name for bd in route.broker_datas}
    return [b for b in brokers if b.name in names]


async def _by_uniq_key(
    admin: AdminClient, brokers: list[BrokerInfo], msg_id: str, topics: list[str]
) -> tuple[list[MessageView], dict[str, str]]:
    gate = asyncio.Semaphore(CONCURRENCY)
    found: list[MessageView] = []
    errors: dict[str, str] = {}

    async def topic_of(t: str) -> None:
        async with gate:
            sets = await _sets_of(admin, t, brokers)
            answers, failures = await fan_out(sets, lambda b: _query(admin, b, t, msg_id, True, 0, _FAR_FUTURE))
        found.extend(v for vs in answers.values() for v in vs if v.msg.uniq_key == msg_id)
        errors.update(texts(failures))

    await asyncio.gather(*(topic_of(t) for t in topics))
    return sorted(found, key=lambda v: (v.msg.store_timestamp, v.broker, v.msg.commit_log_offset)), errors


ID_LENGTHS = range(32, 65)
"""Hex digits a message id may have: 32 (a UNIQ_KEY, an IPv4 offsetMsgId), 34 (a 5.x client's id), 56 (IPv6); the
range leaves room for other clients' UNIQ_KEYs."""


def message_id(text: str) -> str:
    """``text`` as a message id (stripped, upper case); NotAMessageId when it cannot be one (not hex digits, or
    too short or long), so that a typo or a business key is refused before every topic is searched."""
    msg_id = text.strip().upper()
    if not msg_id or any(c not in "0123456789ABCDEF" for c in msg_id):
        raise NotAMessageId(text, "it is not made of hex digits")
    if len(msg_id) not in ID_LENGTHS:
        raise NotAMessageId(text, f"{len(msg_id)} hex digits")
    return msg_id


async def show(admin: AdminClient, msg_id: str, topic: str | None = None) -> Found:
    """The message ``msg_id`` names: an offsetMsgId (a record of one broker), or a UNIQ_KEY (the id a send
    returns; every record with it: the message, and its retries and dead letter copies). Without ``topic``
    a UNIQ_KEY is looked for in every topic. NotAMessageId when ``msg_id`` cannot be an id, TopicNotFound when
    ``topic`` does not exist, MessageNotFound when no broker has it."""
    msg_id = message_id(msg_id)
    brokers = await admin.brokers()
    if topic is not None and not await _sets_of(admin, topic, brokers):
        raise TopicNotFound(topic)
    view = await _by_offset_id(admin, brokers, msg_id)
    if view is not None and (topic is None or view.msg.topic == topic):
        return Found([view])
    topics = [topic] if topic else [t for t in await admin.topic_list() if t not in NOT_ALLOWED_SEND_TOPICS]
    found, errors = await _by_uniq_key(admin, brokers, msg_id, topics)
    if not found:
        where = f"topic {topic}" if topic else f"any of {len(topics)} topics"
        more = f" ({len(errors)} broker(s) did not answer: {errors})" if errors else ""
        raise MessageNotFound(f"no message {msg_id} in {where}: neither an offsetMsgId of a broker nor a message "
                              f"id (UNIQ_KEY) found{more}")  # fmt: skip
    return Found(found, errors)


async def find_by_key(
    admin: AdminClient, topic: str, key: str, begin: int = 0, end: int | None = None, limit: int = _PAGE
) -> Found:
    """Messages of ``topic`` whose KEYS hold ``key`` (or whose UNIQ_KEY is ``key``) stored between ``begin`` and
    ``end`` (epoch ms), at most ``limit`` (up to ``FIND_MAX``), newest first, from every broker set."""
    limit = max(1, min(limit, FIND_MAX))
    brokers = await admin.brokers()
    sets = await _sets_of(admin, topic, brokers)
    if not sets:
        raise TopicNotFound(topic)
    stop = end if end is not None else int(time.time() * 1000) + 86_400_000

    async def pages(b: BrokerInfo) -> list[MessageView]:
        out: dict[int, MessageView] = {}
        upper = stop
        while len(out) < limit:
            page = await _query(admin, b, topic, key, False, begin, upper)
            new = [v for v in page if v.msg.commit_log_offset not in out]
            for v in new:
                out[v.msg.commit_log_offset] = v
            if len(page) < _PAGE or not new:
                break
            upper = min(v.msg.store_timestamp for v in page)  # the next page: older ones (equal times seen again)
        return list(out.values())

    answers, failures = await fan_out(sets, pages)
    views = sorted((v for vs in answers.values() for v in vs), key=lambda v: -v.msg.store_timestamp)[:limit]
    return Found(views, texts(failures))


async def consumption(admin: AdminClient, view: MessageView) -> list[GroupTrack]:
    """Every group that consumes the message's topic (on its broker): consumed or not, by its committed offset of
    the message's queue; when the group is online also whether its subscription filters the message out."""
    brokers = {b.name: b for b in await admin.brokers()}
    b = brokers.get(view.broker)
    addr = b.read_addr if b is not None else None
    if addr is None:
        return []
    m = view.msg
    resp = await admin.call(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": m.topic})
    groups = [g for g in decode_group_list(resp.body) if g not in SYSTEM_GROUPS]

    async def one(group: str) -> GroupTrack:
        try:
            stats = await consume_stats(admin, addr, group, m.topic)
            cc = await consumer_connection(admin, addr, group)
        except (SieveError, OSError, ValueError) as e:
            return GroupTrack(group, TrackState.UNKNOWN, False, None, None, str(e))
        offset = next((w.consumer_offset for k, w in stats.offsets.items()
                       if k.topic == m.topic and k.queue_id == m.queue_id), None)  # fmt: skip
        sub = cc.subscriptions.get(m.topic) if cc is not None else None
        pair = (str(sub.get("expressionType") or "TAG"), str(sub.get("subString") or "*")) if sub else None
        state = track(m, offset, online=cc is not None, message_model=cc.message_model if cc else None,
                      subscription=pair)  # fmt: skip
        return GroupTrack(group, state, cc is not None, offset, f"{pair[0]} {pair[1]}" if pair else None)

    return list(await asyncio.gather(*(one(g) for g in groups)))
