"""EXPLAIN_MESSAGE (30013, a sievemq extension): for one stored message, every consumer group of its topic known to
this broker and what its subscription does with the message (docs/traces.md §4) — delivered or filtered out, by
which stage (tag hash, exact tag, Bloom bitmap, SQL92 evaluation, filter function) and why — with the group's
committed offset of the message's queue.

Groups come from the clients' heartbeats (the group's subscription of the topic, and the clients that subscribe it
differently), from the stored SQL92 filters (``consumerFilter.json``: a group whose clients are offline) and from
the committed offsets (a group with offsets but no known subscription is UNKNOWN)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from sievemq.broker.clients import ConsumerManager
from sievemq.broker.filter_manager import ConsumerFilterManager, FilterEntry
from sievemq.broker.filter_servers import FunctionCounts
from sievemq.broker.message_verdicts import BitmapView, judge
from sievemq.broker.offsets import ConsumerOffsetManager
from sievemq.broker.topics import TopicConfigManager
from sievemq.errors import RemotingError
from sievemq.protocol.heartbeat import Subscription
from sievemq.protocol.message import MessageExt, decode_record
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.headers import get_str, int_or, require_str
from sievemq.remoting.server import ProcessorTable
from sievemq.store import CqExtUnit, MessageStore

__all__ = ["MessageVerdictProcessor"]


def _bitmap(entry: FilterEntry | None, ext: CqExtUnit | None) -> BitmapView | None:
    """The group's Bloom test of the message, as a pull makes it (``SqlFilter.match_cq``)."""
    if entry is None or not entry.bit_positions or ext is None or not ext.bitmap:
        return None
    why = ""
    if ext.store_time <= entry.born_time:
        why = "the message was stored before the group's filter was registered (its bitmap has no bits of the group)"
    elif len(ext.bitmap) != len(entry.mask):
        why = "the bitmap was written under other Bloom settings"
    return BitmapView(entry.bit_positions, bytes(ext.bitmap), not why, why)


@dataclass
class MessageVerdictProcessor:
    """Verdicts of the consumer groups on one stored message."""

    consumers: ConsumerManager
    filters: ConsumerFilterManager
    offsets: ConsumerOffsetManager
    topics: TopicConfigManager
    store: MessageStore
    broker_name: str
    sql_enabled: bool = True
    functions: Mapping[tuple[str, str], FunctionCounts] = field(default_factory=dict)

    def register(self, table: ProcessorTable) -> None:
        """Put EXPLAIN_MESSAGE into ``table``."""
        table.register(RequestCode.EXPLAIN_MESSAGE, self.explain_message)

    def _message(self, topic: str, queue_id: int, offset: int) -> tuple[MessageExt, int, CqExtUnit | None]:
        entries = self.store.read_cq_entries(topic, queue_id, offset, 1)
        if not entries or entries[0][0] < 0:
            where = f"{topic} queue {queue_id} offset {offset}"
            raise RemotingError(ResponseCode.QUERY_NOT_FOUND, f"no message at {where} on {self.broker_name}")
        phy, _size, code = entries[0]
        raw = self.store.look_message_by_offset(phy)
        if raw is None:
            raise RemotingError(ResponseCode.QUERY_NOT_FOUND, f"the record at commit-log offset {phy} is gone")
        msg, _ = decode_record(raw, read_body=False)
        return msg, code, self.store.get_cq_ext_unit(topic, queue_id, offset)

    def groups_of(self, topic: str) -> list[str]:
        """Every group this broker knows to consume ``topic``."""
        names = {g for g, info in self.consumers.groups.items() if topic in info.topics()}
        names |= {e.group for e in self.filters.by_topic.get(topic, [])}
        names |= set(self.offsets.groups_of_topic(topic))
        names |= {g for (g, t) in self.functions if t == topic}
        return sorted(names)

    def verdict(self, group: str, msg: MessageExt, code: int, ext: CqExtUnit | None) -> dict[str, Any]:
        """One group's verdict on ``msg`` (JSON)."""
        topic = msg.topic
        info = self.consumers.get(group)
        sub = info.subscription(topic) if info is not None else None
        entry = self.filters.get(group, topic)
        source = "heartbeat" if sub is not None else ""
        if sub is None and entry is not None:  # offline: its stored SQL92 filter
            sub, source = Subscription(topic, entry.expression, "SQL92"), "consumerFilter.json"
        fc = self.functions.get((group, topic))
        counts = {"matched": fc.matched, "filteredOut": fc.filtered_out, "errors": fc.errors} if fc else None
        bitmap = _bitmap(entry, ext) if sub is not None and not sub.is_tag else None
        v = judge(sub, msg.tags, msg.properties, code=code, bitmap=bitmap, sql_enabled=self.sql_enabled,
                  function_counts=counts)  # fmt: skip
        committed = self.offsets.query(group, topic, msg.queue_id)
        out: dict[str, Any] = {
            "group": group,
            "online": bool(info and info.channels),
            "clients": len(info.channels) if info else 0,
            "messageModel": info.message_model if info else None,
            "subscription": None if sub is None else {
                "expressionType": "FUNCTION" if sub.class_filter_mode else (sub.expression_type or "TAG"),
                "expression": sub.sub_string, "source": source},
            **v.to_json(),
            "consumerOffset": committed if committed >= 0 else None,
            "pastMessage": committed > msg.queue_offset,
        }  # fmt: skip
        if info is not None:
            v_topic = info.verdicts.get(topic)
            if v_topic is not None and v_topic.inconsistent:
                out["inconsistentClients"] = {c: s.describe() for c, s in sorted(v_topic.inconsistent.items())}
        return out

    async def explain_message(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """30013: ``topic``, ``queueId``, ``queueOffset`` and optionally ``consumerGroup`` (only that group)."""
        f = cmd.ext_fields
        topic = require_str(f, "topic")
        queue_id = int_or(f, "queueId", -1)
        offset = int_or(f, "queueOffset", -1)
        tc = self.topics.get(topic)
        if tc is None:
            raise RemotingError(ResponseCode.TOPIC_NOT_EXIST, f"topic {topic} does not exist on this broker")
        if not 0 <= queue_id < max(tc.read_queue_nums, tc.write_queue_nums) or offset < 0:
            raise RemotingError(ResponseCode.SYSTEM_ERROR, f"queueId must be a queue of {topic} and queueOffset 0 or "
                                "more")  # fmt: skip
        msg, code, ext = self._message(topic, queue_id, offset)
        only = get_str(f, "consumerGroup", "") or ""
        groups = [only] if only else self.groups_of(topic)
        body = {
            "broker": self.broker_name,
            "topic": topic,
            "queueId": queue_id,
            "queueOffset": offset,
            "msgId": msg.uniq_key,
            "tags": msg.tags,
            "hasBitmap": bool(ext is not None and ext.bitmap),
            "groups": [self.verdict(g, msg, code, ext) for g in groups],
        }
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps(body))
