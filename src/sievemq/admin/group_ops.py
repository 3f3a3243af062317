"""Changing consumer groups from the operator's side: ``group reset-offset`` and ``group delete`` (docs/admin.md §4).

A reset goes to the master of every broker set holding the topic (INVOKE_BROKER_TO_RESET_OFFSET 222), which moves
the offsets, its online clients and its POP state; the slaves of the set then get the new offsets too
(UPDATE_CONSUMER_OFFSET), so that none keeps an older, larger one. A delete goes to every master
(DELETE_SUBSCRIPTIONGROUP 207 with ``cleanOffset``), then removes the group's retry topic (and, when asked, its
dead-letter topic).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from sievemq.admin.api import AdminClient, BrokerInfo
from sievemq.admin.errors import GroupNotFound, GroupOnline, TopicNotFound
from sievemq.admin.fanout import all_refused, fan_out, texts
from sievemq.admin.progress import (
    broker_views,
    consume_stats,
    known_groups,
)
from sievemq.admin.timespec import ResetPoint
from sievemq.errors import RemotingError, SieveError
from sievemq.protocol.admin_bodies import decode_reset_body
from sievemq.protocol.names import dlq_topic, retry_topic
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import RequestCode, ResponseCode

__all__ = ["DeleteResult", "QueueReset", "ResetResult", "delete_group", "reset_offset"]


@dataclass(frozen=True, slots=True)
class QueueReset:
    """One queue of a reset: the group's offset before (None: it had none) and after."""

    topic: str
    broker: str
    queue_id: int
    before: int | None
    after: int

    def to_json(self) -> dict[str, Any]:
        """``topic``, ``brokerName``, ``queueId``, ``before``, ``after``."""
        return {"topic": self.topic, "brokerName": self.broker, "queueId": self.queue_id, "before": self.before,
                "after": self.after}  # fmt: skip


@dataclass
class ResetResult:
    """What a reset changed."""

    group: str
    topic: str
    to: str
    timestamp: int
    queues: list[QueueReset]
    clients_told: list[str] = field(default_factory=list)
    """Client ids of the group's online consumers, which the masters told (RESET_CONSUMER_CLIENT_OFFSET)."""
    errors: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """See docs/admin.md §4."""
        return {"group": self.group, "topic": self.topic, "to": self.to, "timestamp": self.timestamp,
                "queues": [q.to_json() for q in self.queues], "clientsTold": self.clients_told,
                "errors": self.errors}  # fmt: skip


async def _sets_of_topic(admin: AdminClient, topic: str) -> list[BrokerInfo]:
    try:
        route = await admin.route(topic)
    except RemotingError as e:
        if e.code == ResponseCode.TOPIC_NOT_EXIST:
            raise TopicNotFound(topic) from None
        raise
    names = {bd.broker_name for bd in route.broker_datas}
    return [b for b in await admin.brokers() if b.name in names]


async def reset_offset(
    admin: AdminClient, group: str, topic: str, point: ResetPoint, force: bool = True
) -> ResetResult:
    """Move ``group``'s offsets of ``topic`` on every broker set to ``point`` (see docs/admin.md §4)."""
    sets = await _sets_of_topic(admin, topic)

    async def one(b: BrokerInfo) -> tuple[list[QueueReset], list[str]]:
        master = b.addrs.get(0)
        if master is None:
            raise SieveError(f"broker set {b.name} has no master online: offsets are reset on masters")
        stats = await consume_stats(admin, master, group, topic)
        before = {k.queue_id: w.consumer_offset for k, w in stats.offsets.items()}
        fields = {"topic": topic, "group": group, "timestamp": point.timestamp, "isForce": force}
        answer = await admin.call(master, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields)
        table = decode_reset_body(answer.body)
        for slave in (addr for bid, addr in sorted(b.addrs.items()) if bid != 0):
            for k, offset in table.items():  # a slave must not keep a larger offset of before the reset
                sync = {"consumerGroup": group, "topic": topic, "queueId": k.queue_id, "commitOffset": offset}
                try:
                    await admin.call(slave, RequestCode.UPDATE_CONSUMER_OFFSET, sync)
                except RemotingError as e:
                    if e.code != ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
                        raise
                    break  # a slave that has not copied the group yet holds none of its offsets either
        rows = [QueueReset(k.topic, k.broker_name, k.queue_id, before.get(k.queue_id), v) for k, v in table.items()]
        return rows, _told(answer.ext_fields.get("clientsTold", "[]"))

    answers, failures = await fan_out(sets, one)
    if all_refused(failures, Reason.GROUP_NOT_FOUND, len(answers)):
        raise GroupNotFound(group)
    queues = sorted((q for rows, _ in answers.values() for q in rows), key=lambda q: (q.broker, q.queue_id))
    told = sorted({c for _, cs in answers.values() for c in cs})
    return ResetResult(group, topic, point.text, point.timestamp, queues, told, texts(failures))


def _told(field: str) -> list[str]:
    """The client ids a broker says it told (a JSON list; anything else: none)."""
    try:
        ids = orjson.loads(field)
    except orjson.JSONDecodeError:
        return []
    return [str(i) for i in ids] if isinstance(ids, list) else []


@dataclass
class DeleteResult:
    """What a group delete removed."""

    group: str
    brokers: list[str]
    """Broker sets that had the group."""
    offsets_removed: bool
    retry_topic_deleted: bool
    dlq_topic: str | None
    """The group's dead-letter topic when it exists."""
    dlq_messages: int
    dlq_deleted: bool
    members: list[str] = field(default_factory=list)
    """Client ids online when the group was deleted (only with force)."""
    errors: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """See docs/admin.md §4."""
        return {"group": self.group, "brokers": self.brokers, "offsetsRemoved": self.offsets_removed,
                "retryTopicDeleted": self.retry_topic_deleted, "dlqTopic": self.dlq_topic,
                "dlqMessages": self.dlq_messages, "dlqDeleted": self.dlq_deleted, "members": self.members,
                "errors": self.errors}  # fmt: skip


async def _messages(admin: AdminClient, topic: str) -> int | None:
    """Messages stored in ``topic`` over all its queues (None: no such topic)."""
    try:
        route = await admin.route(topic)
    except RemotingError as e:
        if e.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        raise
    brokers = {b.name: b for b in await admin.brokers()}
    total = 0
    for qd in route.queue_datas:
        b = brokers.get(qd.broker_name)
        addr = b.read_addr if b is not None else None
        for q in range(qd.read_queue_nums if addr else 0):
            assert addr is not None
            total += await admin.max_offset(addr, topic, q) - await admin.min_offset(addr, topic, q)
    return total


async def delete_group(
    admin: AdminClient, group: str, *, force: bool = False, keep_offsets: bool = False, delete_dlq: bool = False
) -> DeleteResult:
    """Delete ``group`` on every master: its subscription config, its offsets and POP state (unless
    ``keep_offsets``), its retry topic, and its dead-letter topic with ``delete_dlq``."""
    brokers = await admin.brokers()
    masters = [b for b in brokers if 0 in b.addrs]
    _, conns, _ = await broker_views(admin, masters, group)
    members = sorted({c.client_id for cc in conns.values() if cc is not None for c in cc.connections})
    if members and not force:
        raise GroupOnline(group, members)
    if group not in await known_groups(admin, brokers) and not members:
        raise GroupNotFound(group)

    async def one(b: BrokerInfo) -> bool:
        fields = {"groupName": group, "cleanOffset": not keep_offsets}
        resp = await admin.call(b.addrs[0], RequestCode.DELETE_SUBSCRIPTIONGROUP, fields)
        return resp.ext_fields.get("groupExisted", "true") == "true"

    answers, failures = await fan_out(masters, one)
    retry = retry_topic(group)
    retry_deleted = await _messages(admin, retry) is not None
    if retry_deleted:
        await admin.delete_topic(retry)
    dlq = dlq_topic(group)
    dlq_count = await _messages(admin, dlq)
    if dlq_count is not None and delete_dlq:
        await admin.delete_topic(dlq)
    return DeleteResult(group, sorted(n for n, existed in answers.items() if existed), not keep_offsets,
                        retry_deleted, dlq if dlq_count is not None else None, dlq_count or 0,
                        dlq_count is not None and delete_dlq, members, texts(failures))  # fmt: skip
