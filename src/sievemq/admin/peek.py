"""``topic peek``: read a topic's messages without a consumer group (docs/admin.md §5).

Pulls as ``TOOLS_CONSUMER`` with the subscription in the request, no commit flag and no long polling: the broker
creates no subscription group and stores no offset for it (``broker/processors/pull.py``). By default the last
``count`` messages of each queue; from ``offset`` on when given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sievemq.admin.api import AdminClient, BrokerInfo
from sievemq.admin.errors import BrokerNotFound, QueueNotFound, TopicNotFound
from sievemq.admin.fanout import fan_out, texts
from sievemq.admin.message_view import MessageView
from sievemq.client import api
from sievemq.errors import RemotingError
from sievemq.protocol.names import TOOLS_CONSUMER_GROUP
from sievemq.remoting.codes import ResponseCode

__all__ = ["PEEK_MAX", "Peeked", "peek"]

PEEK_MAX = 1000
"""Most messages one peek reads per queue."""
_BATCH = 32


@dataclass
class Peeked:
    """Messages read, per queue in offset order, and the brokers that could not be read."""

    messages: list[MessageView]
    errors: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    """Things the reader should know (an offset below the queue's oldest message moved up, ...)."""

    def to_json(self) -> dict[str, Any]:
        """``messages``, ``errors``, ``notes``."""
        return {"messages": [m.to_json() for m in self.messages], "errors": self.errors, "notes": self.notes}


async def _read_queue(
    admin: AdminClient, b: BrokerInfo, addr: str, topic: str, q: int, offset: int | None, count: int
) -> tuple[list[MessageView], list[str]]:
    lo, hi = await admin.min_offset(addr, topic, q), await admin.max_offset(addr, topic, q)
    notes: list[str] = []
    start = max(lo, hi - count) if offset is None else offset
    if offset is not None and offset < lo:
        notes.append(f"{b.name} queue {q}: offset {offset} is gone (retention); read from {lo}")
        start = lo
    conn = await admin.pool.get(addr)
    out: list[MessageView] = []
    while len(out) < count and start < hi:
        r = await api.pull_message(conn, TOOLS_CONSUMER_GROUP, topic, q, start, max_nums=min(_BATCH, count - len(out)),
                                   subscription="*", timeout=admin.timeout)  # fmt: skip
        if r.code == ResponseCode.SUCCESS:
            out.extend(MessageView.of(b.name, m) for m in r.messages[: count - len(out)])
        elif r.code not in (ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_OFFSET_MOVED):
            if r.code == ResponseCode.PULL_NOT_FOUND:
                break
            raise RemotingError(r.code, r.remark or "pull refused", r.reason)
        if r.next_begin_offset <= start:
            break
        start = r.next_begin_offset
    return out, notes


async def peek(
    admin: AdminClient,
    topic: str,
    *,
    queue: int | None = None,
    offset: int | None = None,
    count: int = 10,
    broker: str | None = None,
) -> Peeked:
    """Up to ``count`` messages of each queue of ``topic`` (only ``queue`` / ``broker`` when given): the last ones,
    or those from ``offset`` on. Names that do not exist are errors: TopicNotFound, BrokerNotFound (a broker set
    without the topic), QueueNotFound (a queue id no broker set asked has); an empty queue is an empty answer."""
    count = max(1, min(count, PEEK_MAX))
    try:
        route = await admin.route(topic)
    except RemotingError as e:
        if e.code == ResponseCode.TOPIC_NOT_EXIST:
            raise TopicNotFound(topic) from None
        raise
    queues = {qd.broker_name: qd.read_queue_nums for qd in route.queue_datas}
    known = await admin.brokers()
    if broker is not None and broker not in queues:
        raise BrokerNotFound(broker, topic, sorted(queues), [b.name for b in known])
    sets = [b for b in known if b.name in queues and (broker is None or b.name == broker)]
    if queue is not None and sets and all(queue >= queues[b.name] for b in sets):  # else the sets without it: notes
        raise QueueNotFound(topic, queue, {b.name: queues[b.name] for b in sets})

    async def of_set(b: BrokerInfo) -> tuple[list[MessageView], list[str]]:
        addr = b.read_addr
        if addr is None:
            raise ValueError(f"broker {b.name} has no address")
        qids = [queue] if queue is not None else list(range(queues[b.name]))
        views: list[MessageView] = []
        notes: list[str] = []
        for q in qids:
            if q >= queues[b.name]:
                notes.append(f"{b.name} has no queue {q} of {topic} ({queues[b.name]} queues)")
                continue
            vs, ns = await _read_queue(admin, b, addr, topic, q, offset, count)
            views += vs
            notes += ns
        return views, notes

    answers, failures = await fan_out(sets, of_set)
    views = sorted((v for vs, _ in answers.values() for v in vs),
                   key=lambda v: (v.broker, v.msg.queue_id, v.msg.queue_offset))  # fmt: skip
    return Peeked(views, texts(failures), [n for _, ns in answers.values() for n in ns])
