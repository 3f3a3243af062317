"""Who is connected: consumer groups (channels and each client's subscriptions) and producer groups.

The broker keeps every client's own subscriptions, not one per group, so that it can tell which clients of a
group subscribe differently. For now the group's effective subscription per topic is the newest one among
live clients (RocketMQ's rule); the consistency rules build on this table.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from sievemq.protocol.heartbeat import ConsumerData, Subscription
from sievemq.remoting.connection import Connection

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ClientChannel:
    """One client's connection to this broker."""

    client_id: str
    conn: Connection
    language: str
    version: int
    last_update: float


@dataclass
class ConsumerGroupInfo:
    """A consumer group's live clients and their subscriptions."""

    group: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    channels: dict[str, ClientChannel] = field(default_factory=dict)
    subscriptions: dict[str, dict[str, Subscription]] = field(default_factory=dict)

    def client_ids(self, topic: str | None = None) -> list[str]:
        """Sorted ids of live clients (of those subscribing ``topic`` when given)."""
        if topic is None:
            return sorted(self.channels)
        return sorted(c for c in self.channels if topic in self.subscriptions.get(c, {}))

    def subscription(self, topic: str) -> Subscription | None:
        """The group's effective subscription of ``topic`` (newest subVersion among live clients)."""
        best: Subscription | None = None
        for cid in self.channels:
            sub = self.subscriptions.get(cid, {}).get(topic)
            if sub is not None and (best is None or sub.sub_version > best.sub_version):
                best = sub
        return best

    def topics(self) -> set[str]:
        """Every topic some live client subscribes."""
        return {t for cid in self.channels for t in self.subscriptions.get(cid, {})}


class ConsumerManager:
    """Consumer groups by name; tells a group's clients when its membership or subscriptions change."""

    def __init__(self, notify: Callable[[str, list[Connection]], None]) -> None:
        self.groups: dict[str, ConsumerGroupInfo] = {}
        self._notify = notify

    def get(self, group: str) -> ConsumerGroupInfo | None:
        """The group's info, if any client of it is known."""
        return self.groups.get(group)

    def register(self, channel: ClientChannel, data: ConsumerData) -> bool:
        """Record a heartbeat's consumer entry; True (and the group notified) when something changed."""
        info = self.groups.get(data.group)
        if info is None:
            info = ConsumerGroupInfo(data.group)
            self.groups[data.group] = info
        info.consume_type = data.consume_type
        info.message_model = data.message_model
        info.consume_from_where = data.consume_from_where
        old = info.channels.get(channel.client_id)
        new_channel = old is None or old.conn is not channel.conn
        if old is not None and not new_channel:
            old.last_update = channel.last_update
            old.version = channel.version
        else:
            info.channels[channel.client_id] = channel
            log.info(
                "consumer group %s: client %s joined from %s:%d", data.group, channel.client_id, *channel.conn.peer
            )
        subs = {s.topic: s for s in data.subscriptions}
        before = info.subscriptions.get(channel.client_id)
        changed_subs = before is None or {t: (s.expression_type, s.sub_string) for t, s in before.items()} != {
            t: (s.expression_type, s.sub_string) for t, s in subs.items()
        }
        info.subscriptions[channel.client_id] = subs
        changed = new_channel or changed_subs
        if changed:
            self._notify(data.group, [c.conn for c in info.channels.values()])
        return changed

    def unregister(self, group: str, client_id: str) -> None:
        """A client left the group (UNREGISTER_CLIENT)."""
        info = self.groups.get(group)
        if info is None or client_id not in info.channels:
            return
        del info.channels[client_id]
        info.subscriptions.pop(client_id, None)
        log.info("consumer group %s: client %s unregistered", group, client_id)
        self._after_removal(info)

    def _after_removal(self, info: ConsumerGroupInfo) -> None:
        if info.channels:
            self._notify(info.group, [c.conn for c in info.channels.values()])
        else:
            del self.groups[info.group]

    def connection_closed(self, conn: Connection) -> None:
        """Drop every channel that used ``conn``."""
        for info in list(self.groups.values()):
            gone = [cid for cid, ch in info.channels.items() if ch.conn is conn]
            for cid in gone:
                del info.channels[cid]
                info.subscriptions.pop(cid, None)
                log.info("consumer group %s: client %s disconnected", info.group, cid)
            if gone:
                self._after_removal(info)

    def expire(self, now: float, timeout: float) -> None:
        """Drop channels without a heartbeat for ``timeout`` seconds."""
        for info in list(self.groups.values()):
            gone = [cid for cid, ch in info.channels.items() if now - ch.last_update > timeout]
            for cid in gone:
                log.warning("consumer group %s: client %s expired (no heartbeat for %.0fs)", info.group, cid, timeout)
                info.channels[cid].conn.close()
                del info.channels[cid]
                info.subscriptions.pop(cid, None)
            if gone:
                self._after_removal(info)


class ProducerManager:
    """Producer groups and their clients' channels."""

    def __init__(self) -> None:
        self.groups: dict[str, dict[str, ClientChannel]] = {}

    def register(self, group: str, channel: ClientChannel) -> None:
        """Record a heartbeat's producer entry."""
        self.groups.setdefault(group, {})[channel.client_id] = channel

    def unregister(self, group: str, client_id: str) -> None:
        """A producer client left."""
        chans = self.groups.get(group)
        if chans is not None:
            chans.pop(client_id, None)
            if not chans:
                del self.groups[group]

    def connection_closed(self, conn: Connection) -> None:
        """Drop every channel that used ``conn``."""
        for group, chans in list(self.groups.items()):
            for cid in [c for c, ch in chans.items() if ch.conn is conn]:
                del chans[cid]
            if not chans:
                del self.groups[group]

    def expire(self, now: float, timeout: float) -> None:
        """Drop channels without a heartbeat for ``timeout`` seconds."""
        for group, chans in list(self.groups.items()):
            for cid in [c for c, ch in chans.items() if now - ch.last_update > timeout]:
                del chans[cid]
            if not chans:
                del self.groups[group]
