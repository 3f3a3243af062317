"""Messages of a topic stored in a time range, read without a consumer group (docs/dashboard.md §4).

Per queue: SEARCH_OFFSET_BY_TIMESTAMP (29) gives the offset stored nearest ``begin``; pulls as ``TOOLS_CONSUMER``
(no subscription group made, no offset stored, as ``topic peek``) read on from there until a message stored after
``end``, the queue's end, or ``limit`` messages. Bounded: at most ``limit`` messages per queue are read, and the
answer keeps the ``limit`` oldest of all queues.
"""

from __future__ import annotations

from sievemq.admin.api import AdminClient, BrokerInfo
from sievemq.admin.errors import TopicNotFound
from sievemq.admin.fanout import fan_out, texts
from sievemq.admin.message_view import MessageView
from sievemq.admin.peek import Peeked
from sievemq.client import api
from sievemq.errors import RemotingError
from sievemq.protocol.names import TOOLS_CONSUMER_GROUP
from sievemq.remoting.codes import ResponseCode

__all__ = ["TIME_SEARCH_MAX", "find_by_time"]

TIME_SEARCH_MAX = 500
"""Most messages one time-range search answers."""
_BATCH = 32


async def _read_range(
    admin: AdminClient, b: BrokerInfo, addr: str, topic: str, q: int, begin: int, end: int, limit: int
) -> list[MessageView]:
    hi = await admin.max_offset(addr, topic, q)
    lo = await admin.min_offset(addr, topic, q)
    if hi <= lo:
        return []
    conn = await admin.pool.get(addr)
    start = max(lo, await api.search_offset(conn, topic, q, begin, admin.timeout))
    out: list[MessageView] = []
    while len(out) < limit and start < hi:
        r = await api.pull_message(conn, TOOLS_CONSUMER_GROUP, topic, q, start, max_nums=_BATCH, subscription="*",
                                   timeout=admin.timeout)  # fmt: skip
        if r.code == ResponseCode.PULL_NOT_FOUND:
            break
        if r.code not in (ResponseCode.SUCCESS, ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_OFFSET_MOVED):
            raise RemotingError(r.code, r.remark or "pull refused", r.reason)
        for m in r.messages if r.code == ResponseCode.SUCCESS else ():
            if m.store_timestamp > end:
                return out
            if m.store_timestamp >= begin and len(out) < limit:
                out.append(MessageView.of(b.name, m))
        if r.next_begin_offset <= start:
            break
        start = r.next_begin_offset
    return out


async def find_by_time(admin: AdminClient, topic: str, begin: int, end: int, limit: int = 100) -> Peeked:
    """Messages of ``topic`` stored between ``begin`` and ``end`` (epoch ms, both included), oldest first, at most
    ``limit`` (up to ``TIME_SEARCH_MAX``); TopicNotFound when the name servers know no such topic."""
    limit = max(1, min(limit, TIME_SEARCH_MAX))
    try:
        route = await admin.route(topic)
    except RemotingError as e:
        if e.code == ResponseCode.TOPIC_NOT_EXIST:
            raise TopicNotFound(topic) from None
        raise
    queues = {qd.broker_name: qd.read_queue_nums for qd in route.queue_datas}
    sets = [b for b in await admin.brokers() if b.name in queues]

    async def of_set(b: BrokerInfo) -> list[MessageView]:
        addr = b.read_addr
        if addr is None:
            raise ValueError(f"broker {b.name} has no address")
        views: list[MessageView] = []
        for q in range(queues.get(b.name, 0)):
            views += await _read_range(admin, b, addr, topic, q, begin, end, limit)
        return views

    answers, failures = await fan_out(sets, of_set)
    views = sorted((v for vs in answers.values() for v in vs),
                   key=lambda v: (v.msg.store_timestamp, v.broker, v.msg.queue_id, v.msg.queue_offset))  # fmt: skip
    notes = [f"more than {limit} messages in the range: the {limit} oldest are shown"] if len(views) > limit else []
    return Peeked(views[:limit], texts(failures), notes)
