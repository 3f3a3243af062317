"""How far consumer groups are: ``group progress`` and ``group list`` (docs/admin.md §3).

The answers of every broker set (GET_CONSUME_STATS 208 and GET_CONSUMER_CONNECTION_LIST 203, from the master, else
a slave) are put together by the pure ``aggregate``; ``group_progress`` and ``group_list`` do the asking. Results are
dataclasses with ``to_json()`` (the CLI's ``--json``, a dashboard's API): field names are stable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from sievemq.admin.api import AdminClient, BrokerInfo
from sievemq.admin.errors import GroupNotFound, TopicNotFound
from sievemq.admin.fanout import CONCURRENCY, fan_out, texts
from sievemq.errors import RemotingError, SieveError
from sievemq.protocol import mq_json
from sievemq.protocol.admin_bodies import (
    ConsumerConnection,
    ConsumeStats,
    OffsetWrapper,
    decode_consume_stats,
    decode_consumer_connection,
)
from sievemq.protocol.mq_json import QueueKey
from sievemq.protocol.names import (
    CLIENT_INNER_PRODUCER_GROUP,
    FILTERSRV_CONSUMER_GROUP,
    TOOLS_CONSUMER_GROUP,
    TOOLS_DLQ_RESEND_GROUP,
)
from sievemq.remoting.codes import RequestCode, ResponseCode

T = TypeVar("T")

__all__ = [
    "SYSTEM_GROUPS",
    "GroupProgress",
    "GroupSummary",
    "Member",
    "QueueProgress",
    "aggregate",
    "broker_views",
    "consume_stats",
    "consumer_connection",
    "expression_of",
    "group_list",
    "group_progress",
    "known_groups",
    "merge_replicas",
]

SYSTEM_GROUPS = frozenset(
    {
        TOOLS_CONSUMER_GROUP,
        TOOLS_DLQ_RESEND_GROUP,
        FILTERSRV_CONSUMER_GROUP,
        CLIENT_INNER_PRODUCER_GROUP,
        "CID_RMQ_SYS_TRANS",
        "SELF_TEST_C_GROUP",
        "__MONITOR_CONSUMER",
    }
)
"""Groups brokers and tools use for themselves: ``group list`` shows them only with ``--all``."""


@dataclass(frozen=True, slots=True)
class QueueProgress:
    """One queue of a group: where the queue ends, where the group is, and what lies between."""

    topic: str
    broker: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    last_timestamp: int
    """Store time (epoch ms) of the last consumed message; 0 when none."""
    inflight: int = 0
    """POP groups: messages handed out and not acked yet (between the committed offset and the POP cursor)."""

    @property
    def lag(self) -> int:
        """Messages stored and not consumed yet."""
        return max(0, self.broker_offset - self.consumer_offset)

    def to_json(self) -> dict[str, Any]:
        """``topic``, ``brokerName``, ``queueId``, ``brokerOffset``, ``consumerOffset``, ``lag``, ``inflight``,
        ``lastTimestamp``."""
        return {"topic": self.topic, "brokerName": self.broker, "queueId": self.queue_id,
                "brokerOffset": self.broker_offset, "consumerOffset": self.consumer_offset, "lag": self.lag,
                "inflight": self.inflight, "lastTimestamp": self.last_timestamp}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Member:
    """A client of the group, as the brokers that know it see it."""

    client_id: str
    client_addr: str
    language: str
    version: int
    brokers: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """``clientId``, ``clientAddr``, ``language``, ``version``, ``brokers``."""
        return {"clientId": self.client_id, "clientAddr": self.client_addr, "language": self.language,
                "version": self.version, "brokers": list(self.brokers)}  # fmt: skip


@dataclass
class GroupProgress:
    """A consumer group over the whole cluster."""

    group: str
    queues: list[QueueProgress]
    members: list[Member]
    consume_type: str | None = None
    """CONSUME_PASSIVELY (push), CONSUME_ACTIVELY (pull), CONSUME_POP (5.x); None when no client is online."""
    message_model: str | None = None
    subscriptions: dict[str, str] = field(default_factory=dict)
    """Topic -> the group's expression (``TagA || TagB``, ``SQL92 a > 1``)."""
    errors: dict[str, str] = field(default_factory=dict)
    """Broker name -> why it did not answer (its queues are missing from ``queues``)."""

    @property
    def lag(self) -> int:
        """Messages not consumed yet, over every queue."""
        return sum(q.lag for q in self.queues)

    @property
    def inflight(self) -> int:
        """POP messages handed out and not acked, over every queue."""
        return sum(q.inflight for q in self.queues)

    @property
    def last_timestamp(self) -> int:
        """Store time of the newest consumed message of any queue (0: none)."""
        return max((q.last_timestamp for q in self.queues), default=0)

    @property
    def topics(self) -> list[str]:
        """Topics of the group's queues."""
        return sorted({q.topic for q in self.queues})

    def to_json(self) -> dict[str, Any]:
        """See docs/admin.md §3 for the fields."""
        return {
            "group": self.group,
            "consumeType": self.consume_type,
            "messageModel": self.message_model,
            "subscriptions": self.subscriptions,
            "members": [m.to_json() for m in self.members],
            "queues": [q.to_json() for q in self.queues],
            "totals": {
                "lag": self.lag,
                "inflight": self.inflight,
                "lastTimestamp": self.last_timestamp,
                "queues": len(self.queues),
                "topics": len(self.topics),
                "brokerOffset": sum(q.broker_offset for q in self.queues),
                "consumerOffset": sum(q.consumer_offset for q in self.queues),
            },
            "errors": self.errors,
        }


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """One line of ``group list``."""

    group: str
    members: int
    consume_type: str | None
    message_model: str | None
    lag: int
    inflight: int
    last_timestamp: int
    topics: list[str]
    errors: dict[str, str]

    @classmethod
    def of(cls, p: GroupProgress) -> GroupSummary:
        """The summary of a group's progress."""
        return cls(p.group, len(p.members), p.consume_type, p.message_model, p.lag, p.inflight, p.last_timestamp,
                   p.topics, p.errors)  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        """``group``, ``members``, ``consumeType``, ``messageModel``, ``lag``, ``inflight``, ``lastTimestamp``,
        ``topics``, ``errors``."""
        return {"group": self.group, "members": self.members, "consumeType": self.consume_type,
                "messageModel": self.message_model, "lag": self.lag, "inflight": self.inflight,
                "lastTimestamp": self.last_timestamp, "topics": self.topics, "errors": self.errors}  # fmt: skip


def expression_of(sub: Mapping[str, Any]) -> str:
    """A SubscriptionData as a person reads it: the tag expression, or ``<type> <expression>``."""
    text = str(sub.get("subString") or "*")
    kind = str(sub.get("expressionType") or "TAG")
    if sub.get("classFilterMode"):
        return f"function {text}"
    return text if kind.upper() == "TAG" else f"{kind} {text}"


def aggregate(
    group: str,
    stats: Mapping[str, ConsumeStats],
    connections: Mapping[str, ConsumerConnection | None],
    errors: Mapping[str, str] | None = None,
) -> GroupProgress:
    """One group's progress from each broker set's ConsumeStats and ConsumerConnection (None: no client online
    there). Pure."""
    queues = sorted(
        (QueueProgress(k.topic, k.broker_name, k.queue_id, w.broker_offset, w.consumer_offset, w.last_timestamp,
                       max(0, w.pull_offset - w.consumer_offset))
         for s in stats.values() for k, w in s.offsets.items()),
        key=lambda q: (q.topic, q.broker, q.queue_id),
    )  # fmt: skip
    seen: dict[str, tuple[Any, list[str]]] = {}
    consume_type = message_model = None
    subscriptions: dict[str, str] = {}
    for broker, cc in sorted(connections.items()):
        if cc is None:
            continue
        consume_type = consume_type or cc.consume_type or None
        message_model = message_model or cc.message_model or None
        for topic, sub in sorted(cc.subscriptions.items()):
            subscriptions.setdefault(topic, expression_of(sub))
        for c in cc.connections:
            seen.setdefault(c.client_id, (c, []))[1].append(broker)
    members = [Member(cid, c.client_addr, c.language, c.version, tuple(bs)) for cid, (c, bs) in sorted(seen.items())]
    return GroupProgress(group, queues, members, consume_type, message_model, subscriptions, dict(errors or {}))


# ------------------------------------------------------------------------------------------------ asking
async def consume_stats(admin: AdminClient, addr: str, group: str, topic: str | None = None) -> ConsumeStats:
    """GET_CONSUME_STATS of ``group`` (on ``topic`` only, when given) from one broker."""
    fields = {"consumerGroup": group, **({"topic": topic} if topic else {})}
    resp = await admin.call(addr, RequestCode.GET_CONSUME_STATS, fields)
    return decode_consume_stats(resp.body)


async def consumer_connection(admin: AdminClient, addr: str, group: str) -> ConsumerConnection | None:
    """GET_CONSUMER_CONNECTION_LIST of ``group`` from one broker (None: no client of it online there)."""
    resp = await admin.request(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group})
    if resp.code == ResponseCode.CONSUMER_NOT_ONLINE:
        return None
    if resp.code != ResponseCode.SUCCESS:
        raise RemotingError.from_response(resp.code, resp.remark, resp.ext_fields)
    return decode_consumer_connection(resp.body)


def _replicas(b: BrokerInfo) -> list[str]:
    """Every address of the broker set, its master first (ValueError when it has none)."""
    if not b.addrs:
        raise ValueError(f"broker {b.name} has no address")
    return [addr for _id, addr in sorted(b.addrs.items())]


async def _each_replica(b: BrokerInfo, ask: Callable[[str], Awaitable[T]]) -> list[T]:
    """``ask(addr)`` of every replica of the set: the answers of those that gave one (master first); the first
    failure is raised when none did. A master that has just come back may not know yet what its slave learned while
    it was away (its next metadata round brings it over), so reads of groups ask every replica."""
    results = await asyncio.gather(*(ask(a) for a in _replicas(b)), return_exceptions=True)
    answers = [r for r in results if not isinstance(r, BaseException)]
    if not answers:
        first = next(r for r in results if isinstance(r, BaseException))
        raise first
    for r in results:
        if isinstance(r, BaseException) and not isinstance(r, SieveError | OSError | ValueError):
            raise r  # a bug, not a replica's failure
    return answers


def merge_replicas(stats: Sequence[ConsumeStats]) -> ConsumeStats:
    """One broker set's ConsumeStats from its replicas' (master first): per queue the answer with the highest
    committed offset (a master back from an outage may not have the offsets its slave took yet), the highest queue
    end. Pure."""
    merged: dict[QueueKey, OffsetWrapper] = {}
    for s in stats:
        for key, w in s.offsets.items():
            have = merged.get(key)
            if have is None:
                merged[key] = w
            elif w.consumer_offset > have.consumer_offset:
                merged[key] = replace(w, broker_offset=max(w.broker_offset, have.broker_offset))
            elif w.broker_offset > have.broker_offset:
                merged[key] = replace(have, broker_offset=w.broker_offset)
    return ConsumeStats(merged, stats[0].consume_tps if stats else None)


async def broker_views(
    admin: AdminClient, brokers: Iterable[BrokerInfo], group: str, topic: str | None = None
) -> tuple[dict[str, ConsumeStats], dict[str, ConsumerConnection | None], dict[str, str]]:
    """Every broker set's ConsumeStats and ConsumerConnection of ``group`` (and the failures), each set's merged
    from all its replicas (``merge_replicas``; the connections of the first replica that has any)."""

    async def replica(addr: str) -> tuple[ConsumeStats, ConsumerConnection | None]:
        return await consume_stats(admin, addr, group, topic), await consumer_connection(admin, addr, group)

    async def view(b: BrokerInfo) -> tuple[ConsumeStats, ConsumerConnection | None]:
        answers = await _each_replica(b, replica)
        return merge_replicas([a[0] for a in answers]), next((a[1] for a in answers if a[1] is not None), None)

    answers, failures = await fan_out(brokers, view)
    return {n: a[0] for n, a in answers.items()}, {n: a[1] for n, a in answers.items()}, texts(failures)


async def known_groups(admin: AdminClient, brokers: Iterable[BrokerInfo] | None = None) -> set[str]:
    """Every group some replica of some broker set has a subscription config (201) or offsets (43) of."""
    bs = list(brokers) if brokers is not None else await admin.brokers()

    async def replica(addr: str) -> set[str]:
        configs = mq_json.loads((await admin.call(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).body)
        offsets = mq_json.loads((await admin.call(addr, RequestCode.GET_ALL_CONSUMER_OFFSET)).body)
        out = set((configs.get("subscriptionGroupTable") or {}).keys())
        out.update(str(k).partition("@")[2] for k in (offsets.get("offsetTable") or {}))
        return out

    async def names(b: BrokerInfo) -> set[str]:
        return set().union(*await _each_replica(b, replica))

    answers, failures = await fan_out(bs, names)
    if failures and not answers:
        raise SieveError("no broker answered: " + "; ".join(f"{n}: {e}" for n, e in texts(failures).items()))
    return set().union(*answers.values()) if answers else set()


async def group_progress(admin: AdminClient, group: str, topic: str | None = None) -> GroupProgress:
    """``group``'s queues on every broker set (only ``topic``'s when given), its members and subscriptions;
    GroupNotFound when no broker knows it, TopicNotFound when ``topic`` does not exist."""
    if topic is not None and topic not in await admin.topic_list():
        raise TopicNotFound(topic)
    brokers = await admin.brokers()
    stats, conns, errors = await broker_views(admin, brokers, group, topic)
    progress = aggregate(group, stats, conns, errors)
    if not progress.queues and not progress.members and group not in await known_groups(admin, brokers):
        raise GroupNotFound(group)
    return progress


async def group_list(admin: AdminClient, include_system: bool = False) -> list[GroupSummary]:
    """Every consumer group of the cluster with its members, type and total lag."""
    brokers = await admin.brokers()
    groups = sorted(g for g in await known_groups(admin, brokers) if include_system or g not in SYSTEM_GROUPS)
    gate = asyncio.Semaphore(max(1, CONCURRENCY // max(1, len(brokers))))

    async def one(g: str) -> GroupSummary:
        async with gate:
            return GroupSummary.of(aggregate(g, *await broker_views(admin, brokers, g)))

    return list(await asyncio.gather(*(one(g) for g in groups)))
