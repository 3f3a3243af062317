"""How far consumer groups are, as RocketMQ's tools ask (docs/admin.md §3): GET_CONSUME_STATS (208),
GET_CONSUMER_CONNECTION_LIST (203), QUERY_TOPIC_CONSUME_BY_WHO (300) and GET_BROKER_CONSUME_STATS (317, every
group at once: ``mqadmin brokerConsumeStats``). Read-only."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from sievemq.broker.clients import ConsumerManager
from sievemq.broker.offsets import ConsumerOffsetManager
from sievemq.broker.topics import TopicConfigManager
from sievemq.protocol.admin_bodies import Connection as ClientConnection
from sievemq.protocol.admin_bodies import (
    ConsumerConnection,
    ConsumeStats,
    OffsetWrapper,
    encode_consume_stats,
    encode_consume_stats_list,
    encode_consumer_connection,
    encode_group_list,
)
from sievemq.protocol.mq_json import QueueKey
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.headers import get_bool, get_str, require_str
from sievemq.remoting.server import ProcessorTable
from sievemq.store import MessageStore


def _no_pop_cursor(group: str, topic: str, queue_id: int) -> int | None:
    return None


@dataclass
class ConsumeStatsProcessor:
    """Answers what a group consumed, who its clients are, and which groups consume a topic.

    ``pop_cursor(group, topic, queue)``: a POP group's cursor on this broker (None for other groups), reported as
    ``pullOffset``; for other groups, where their last pull left off (as RocketMQ).
    """

    offsets: ConsumerOffsetManager
    store: MessageStore
    topics: TopicConfigManager
    consumers: ConsumerManager
    broker_name: str
    pop_cursor: Callable[[str, str, int], int | None] = field(default=_no_pop_cursor)
    group_names: Callable[[], Iterable[str]] = field(default=tuple)
    """The broker's subscription groups (GET_BROKER_CONSUME_STATS reports these, as RocketMQ)."""
    broker_addr: str = ""

    def register(self, table: ProcessorTable) -> None:
        """Put 208, 203 and 300 into ``table``."""
        table.register(RequestCode.GET_CONSUME_STATS, self.consume_stats)
        table.register(RequestCode.GET_CONSUMER_CONNECTION_LIST, self.connection_list)
        table.register(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, self.consume_by_who)
        table.register(RequestCode.GET_BROKER_CONSUME_STATS, self.broker_consume_stats)

    def topics_of(self, group: str, topic: str | None) -> list[str]:
        """The topics whose queues GET_CONSUME_STATS reports: ``topic``, else those the group has offsets of or
        subscribes; while the group is online, only those it subscribes (as RocketMQ)."""
        info = self.consumers.get(group)
        subscribed = info.topics() if info is not None else set()
        topics = {topic} if topic else set(self.offsets.offsets_of_group(group)) | subscribed
        if subscribed:
            topics &= subscribed
        return sorted(topics)

    def stats(self, group: str, topic: str | None = None) -> ConsumeStats:
        """The group's queues on this broker (RocketMQ's ConsumeStats)."""
        table: dict[QueueKey, OffsetWrapper] = {}
        for t in self.topics_of(group, topic):
            tc = self.topics.get(t)
            if tc is None:
                continue
            for q in range(tc.read_queue_nums):
                broker_offset = max(0, self.store.get_max_offset(t, q))
                consumer_offset = max(0, self.offsets.query(group, t, q))
                cursor = self.pop_cursor(group, t, q)
                if cursor is None:
                    cursor = self.offsets.pulled_offset(group, t, q)
                last = self.store.get_store_time(t, q, consumer_offset - 1) if consumer_offset > 0 else None
                table[QueueKey(t, self.broker_name, q)] = OffsetWrapper(
                    broker_offset, consumer_offset, max(consumer_offset, cursor or 0), last or 0
                )
        return ConsumeStats(table)

    async def consume_stats(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """208 GET_CONSUME_STATS, header ``consumerGroup`` and optional ``topic``: ConsumeStats (a group this broker
        does not know has no queues)."""
        f = cmd.ext_fields
        stats = self.stats(require_str(f, "consumerGroup"), get_str(f, "topic") or None)
        return cmd.response(ResponseCode.SUCCESS, body=encode_consume_stats(stats))

    def connection(self, group: str) -> ConsumerConnection | None:
        """The group's live clients and subscriptions (None: no client of it is connected here)."""
        info = self.consumers.get(group)
        if info is None or not info.channels:
            return None
        conns = [ClientConnection(cid, f"{ch.conn.peer[0]}:{ch.conn.peer[1]}", ch.language, ch.version)
                 for cid, ch in sorted(info.channels.items())]  # fmt: skip
        subs = {}
        for t in sorted(info.topics()):
            sub = info.subscription(t)
            if sub is not None:
                subs[t] = sub.to_json()
        return ConsumerConnection(conns, subs, info.consume_type, info.message_model, info.consume_from_where)

    async def connection_list(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """203 GET_CONSUMER_CONNECTION_LIST, header ``consumerGroup``: ConsumerConnection, or CONSUMER_NOT_ONLINE."""
        group = require_str(cmd.ext_fields, "consumerGroup")
        cc = self.connection(group)
        if cc is None:
            return cmd.response(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")
        return cmd.response(ResponseCode.SUCCESS, body=encode_consumer_connection(cc))

    def groups_of_topic(self, topic: str) -> list[str]:
        """Groups that subscribe ``topic`` here or have offsets of it."""
        online = {g for g, info in self.consumers.groups.items() if topic in info.topics()}
        return sorted(online | set(self.offsets.groups_of_topic(topic)))

    async def consume_by_who(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """300 QUERY_TOPIC_CONSUME_BY_WHO, header ``topic``: GroupList."""
        topic = require_str(cmd.ext_fields, "topic")
        return cmd.response(ResponseCode.SUCCESS, body=encode_group_list(self.groups_of_topic(topic)))

    def broker_stats(self, order_only: bool = False) -> tuple[list[dict[str, list[ConsumeStats]]], int]:
        """Every subscription group's queues of the topics it has offsets of (those it subscribes, while online;
        with ``order_only`` the ordered topics only), as RocketMQ's ConsumeStatsList, and the total diff."""
        out: list[dict[str, list[ConsumeStats]]] = []
        total = 0
        for group in sorted(self.group_names()):
            info = self.consumers.get(group)
            subscribed = info.topics() if info is not None else set()
            found = []
            for topic in sorted(self.offsets.offsets_of_group(group)):
                tc = self.topics.get(topic)
                if tc is None or (order_only and not tc.order) or (subscribed and topic not in subscribed):
                    continue
                stats = self.stats(group, topic)
                total += sum(max(0, w.broker_offset - w.consumer_offset) for w in stats.offsets.values())
                found.append(stats)
            out.append({group: found})
        return out, total

    async def broker_consume_stats(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """317 GET_BROKER_CONSUME_STATS, header ``isOrder``: ConsumeStatsList (``brokerAddr``,
        ``consumeStatsList``: ``[{group: [ConsumeStats...]}]``, ``totalDiff``, ``totalInflightDiff``)."""
        groups, total = self.broker_stats(get_bool(cmd.ext_fields, "isOrder"))
        return cmd.response(ResponseCode.SUCCESS, body=encode_consume_stats_list(self.broker_addr, groups, total))
