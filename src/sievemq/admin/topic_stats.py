"""A topic's queues on every broker set (GET_TOPIC_STATS_INFO 202) and the groups that consume it
(QUERY_TOPIC_CONSUME_BY_WHO 300 and GET_CONSUME_STATS 208): what the dashboard's topic views show
(docs/dashboard.md §3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sievemq.admin.api import AdminClient, BrokerInfo
from sievemq.admin.errors import TopicNotFound
from sievemq.admin.fanout import fan_out, texts
from sievemq.admin.progress import SYSTEM_GROUPS, consume_stats
from sievemq.errors import RemotingError
from sievemq.protocol.admin_bodies import TopicOffset, decode_group_list, decode_topic_stats
from sievemq.remoting.codes import RequestCode, ResponseCode

__all__ = ["QueueStats", "TopicStats", "topic_consumers", "topic_sets", "topic_stats"]


@dataclass(frozen=True, slots=True)
class QueueStats:
    """One queue of a topic on one broker set."""

    broker: str
    queue_id: int
    min_offset: int
    max_offset: int
    last_store_timestamp: int
    """Store time (epoch ms) of the queue's newest message; 0 when it holds none."""

    @property
    def messages(self) -> int:
        """Messages still stored: max offset less min offset."""
        return max(0, self.max_offset - self.min_offset)

    def to_json(self) -> dict[str, Any]:
        """``brokerName``, ``queueId``, ``minOffset``, ``maxOffset``, ``messages``, ``lastStoreTimestamp``."""
        return {"brokerName": self.broker, "queueId": self.queue_id, "minOffset": self.min_offset,
                "maxOffset": self.max_offset, "messages": self.messages,
                "lastStoreTimestamp": self.last_store_timestamp}  # fmt: skip


@dataclass
class TopicStats:
    """Every queue of a topic, and the broker sets that did not answer."""

    topic: str
    queues: list[QueueStats]
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def messages(self) -> int:
        """Messages stored over every queue."""
        return sum(q.messages for q in self.queues)

    @property
    def put_total(self) -> int:
        """Messages ever written to the queues (sum of max offsets): two samples give the rate in."""
        return sum(q.max_offset for q in self.queues)

    @property
    def last_store_timestamp(self) -> int:
        """Store time of the topic's newest message (0: none)."""
        return max((q.last_store_timestamp for q in self.queues), default=0)


def _queues(broker: str, table: dict[Any, TopicOffset]) -> list[QueueStats]:
    return [QueueStats(broker, k.queue_id, v.min_offset, v.max_offset, v.last_update_timestamp)
            for k, v in sorted(table.items())]  # fmt: skip


async def topic_sets(admin: AdminClient, topic: str, brokers: list[BrokerInfo] | None = None) -> list[BrokerInfo]:
    """The broker sets of ``topic``'s route; TopicNotFound when the name servers know no such topic."""
    try:
        route = await admin.route(topic)
    except RemotingError as e:
        if e.code == ResponseCode.TOPIC_NOT_EXIST:
            raise TopicNotFound(topic) from None
        raise
    names = {qd.broker_name for qd in route.queue_datas}
    return [b for b in (brokers if brokers is not None else await admin.brokers()) if b.name in names]


async def topic_stats(admin: AdminClient, topic: str, brokers: list[BrokerInfo] | None = None) -> TopicStats:
    """``topic``'s queues on every broker set of its route (the master, else a slave, answers); TopicNotFound
    when the name servers know no such topic."""
    sets = await topic_sets(admin, topic, brokers)

    async def ask(b: BrokerInfo) -> list[QueueStats]:
        addr = b.read_addr
        if addr is None:
            raise ValueError(f"broker {b.name} has no address")
        resp = await admin.call(addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic})
        return _queues(b.name, decode_topic_stats(resp.body))

    answers, failures = await fan_out(sets, ask)
    return TopicStats(topic, [q for qs in answers.values() for q in qs], texts(failures))


async def topic_consumers(
    admin: AdminClient, topic: str, brokers: list[BrokerInfo] | None = None
) -> tuple[dict[str, int], dict[str, str]]:
    """The groups consuming ``topic`` (not the tools' own) with their committed offsets summed over its queues
    (two samples give the rate out), and the broker sets that did not answer."""
    sets = await topic_sets(admin, topic, brokers)

    async def ask(b: BrokerInfo) -> dict[str, int]:
        addr = b.read_addr
        if addr is None:
            raise ValueError(f"broker {b.name} has no address")
        resp = await admin.call(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic})
        out: dict[str, int] = {}
        for g in decode_group_list(resp.body):
            if g in SYSTEM_GROUPS:
                continue
            stats = await consume_stats(admin, addr, g, topic)
            out[g] = sum(w.consumer_offset for k, w in stats.offsets.items() if k.topic == topic)
        return out

    answers, failures = await fan_out(sets, ask)
    totals: dict[str, int] = {}
    for per_group in answers.values():
        for g, n in per_group.items():
            totals[g] = totals.get(g, 0) + n
    return dict(sorted(totals.items())), texts(failures)
