"""GET_GROUP_STATUS (sievemq extension, code 30010): a consumer group as this broker sees it — each client, its
expressions, whether it is consistent, the queues it pulls, and the group's lag."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import orjson

from sievemq.broker.clients import ConsumerManager
from sievemq.broker.offsets import ConsumerOffsetManager
from sievemq.broker.topics import TopicConfigManager
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.headers import require_str
from sievemq.remoting.server import ProcessorTable
from sievemq.store import MessageStore


@dataclass
class GroupStatusProcessor:
    """Reports a consumer group's state."""

    consumers: ConsumerManager
    offsets: ConsumerOffsetManager
    topics: TopicConfigManager
    store: MessageStore
    broker_name: str

    def register(self, table: ProcessorTable) -> None:
        """Put GET_GROUP_STATUS into ``table``."""
        table.register(RequestCode.GET_GROUP_STATUS, self.group_status)

    def status(self, group: str) -> dict[str, Any]:
        """The JSON-able status of ``group`` on this broker."""
        info = self.consumers.get(group)
        topics: dict[str, Any] = {}
        clients: list[dict[str, Any]] = []
        subscribed = sorted(info.topics()) if info else []
        for topic in sorted(set(subscribed) | set(self.offsets.offsets_of_group(group))):
            tc = self.topics.get(topic)
            lag: dict[str, int] = {}
            if tc is not None:
                for q in range(tc.read_queue_nums):
                    committed = self.offsets.query(group, topic, q)
                    max_off = self.store.get_max_offset(topic, q)
                    lag[str(q)] = max(0, max_off - max(committed, 0))
            entry: dict[str, Any] = {"lag": lag, "totalLag": sum(lag.values())}
            sub = info.subscription(topic) if info else None
            if sub is not None:
                entry["expression"] = sub.describe()
            if info is not None and topic in info.verdicts:
                entry["holders"] = list(info.verdicts[topic].holders)
            topics[topic] = entry
        if info is not None:
            now = time.monotonic()
            for cid, ch in sorted(info.channels.items()):
                subs = {}
                for topic, sub in sorted(info.subscriptions.get(cid, {}).items()):
                    subs[topic] = {"expression": sub.describe(), "consistent": info.inconsistency(cid, topic) is None}
                clients.append(
                    {
                        "clientId": cid,
                        "address": f"{ch.conn.peer[0]}:{ch.conn.peer[1]}",
                        "language": ch.language,
                        "version": ch.version,
                        "lastHeartbeatSecondsAgo": round(now - ch.last_update, 1),
                        "subscriptions": subs,
                        "queues": [[t, q] for t, q in info.queues_of(cid)],
                        "consistent": all(s["consistent"] for s in subs.values()),
                    }
                )
        return {
            "group": group,
            "broker": self.broker_name,
            "mode": self.consumers.mode,
            "messageModel": info.message_model if info else None,
            "topics": topics,
            "clients": clients,
            "inconsistenciesSeen": self.consumers.inconsistencies_seen,
        }

    async def group_status(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """30010 GET_GROUP_STATUS, header ``consumerGroup``."""
        group = require_str(cmd.ext_fields, "consumerGroup")
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps(self.status(group)))
