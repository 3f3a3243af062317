"""Who is connected: consumer groups (channels and each client's own subscriptions) and producer groups.

The broker keeps every client's subscriptions, not one per group; ``consistency.decide`` picks the group's
subscription per topic and finds the clients that subscribe differently. Under ``subscriptionConsistency =
"rocketmq"`` the group's subscription is RocketMQ's (the newest ``subVersion``) and nobody is left out, with a
warning for every inconsistency let through.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sievemq.broker.consistency import TopicVerdict, decide, inconsistency_remark
from sievemq.protocol.heartbeat import ConsumerData, Subscription
from sievemq.protocol.names import is_retry_topic
from sievemq.remoting.connection import Connection

log = logging.getLogger(__name__)

STRICT = "strict"
ROCKETMQ = "rocketmq"


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
    """A consumer group's live clients, their subscriptions and the group's verdict per topic."""

    group: str
    mode: str = STRICT
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    channels: dict[str, ClientChannel] = field(default_factory=dict)
    subscriptions: dict[str, dict[str, Subscription]] = field(default_factory=dict)
    registered_at: dict[str, dict[str, int]] = field(default_factory=dict)
    verdicts: dict[str, TopicVerdict] = field(default_factory=dict)
    # (topic, queue id) -> (client id, monotonic time of its last pull)
    pulls: dict[tuple[str, int], tuple[str, float]] = field(default_factory=dict)

    def refresh(self) -> None:
        """Recompute the verdicts from the live clients."""
        live = {c: self.subscriptions.get(c, {}) for c in self.channels}
        self.verdicts = decide(live, self.registered_at)

    def subscription(self, topic: str) -> Subscription | None:
        """The group's subscription of ``topic``."""
        if self.mode == ROCKETMQ:
            best: Subscription | None = None
            for cid in self.channels:
                sub = self.subscriptions.get(cid, {}).get(topic)
                if sub is not None and (best is None or sub.sub_version > best.sub_version):
                    best = sub
            return best
        v = self.verdicts.get(topic)
        return v.group_subscription if v else None

    def inconsistency(self, client_id: str, topic: str) -> tuple[Subscription, Subscription] | None:
        """(group's, client's) subscription when ``client_id`` subscribes ``topic`` differently, in strict mode."""
        if self.mode != STRICT:
            return None
        v = self.verdicts.get(topic)
        if v is None or client_id not in v.inconsistent:
            return None
        return v.group_subscription, v.inconsistent[client_id]

    def remark(self, client_id: str, topic: str) -> str | None:
        """The message for an inconsistent client, or None."""
        inc = self.inconsistency(client_id, topic)
        return inconsistency_remark(self.group, topic, inc[0], inc[1]) if inc else None

    def client_ids(self, topic: str | None = None, requester: str | None = None) -> list[str]:
        """The consumer list a rebalancing client should use.

        In strict mode: for ``topic`` (sievemq's client sends it), the clients consistent on it; otherwise, for
        a known requester, the clients consistent on every (non-retry) topic the requester subscribes; else every
        client without an inconsistency. In rocketmq mode: every live client.
        """
        if self.mode == ROCKETMQ:
            return sorted(self.channels)
        if topic:
            v = self.verdicts.get(topic)
            return sorted(v.consistent) if v else []
        topics = [t for t in self.subscriptions.get(requester or "", {}) if not is_retry_topic(t)]
        if requester in self.channels and topics:
            sets = [self.verdicts[t].consistent for t in topics if t in self.verdicts]
            return sorted(frozenset.intersection(*sets)) if sets else []
        bad = {c for v in self.verdicts.values() for c in v.inconsistent}
        return sorted(c for c in self.channels if c not in bad)

    def inconsistent_pairs(self) -> dict[tuple[str, str], tuple[str, str]]:
        """(client, topic) -> (group's expression, client's expression) for every inconsistency."""
        return {
            (c, t): (v.group_subscription.describe(), sub.describe())
            for t, v in self.verdicts.items()
            for c, sub in v.inconsistent.items()
        }

    def queues_of(self, client_id: str, within: float = 60.0) -> list[tuple[str, int]]:
        """Queues ``client_id`` pulled lately (what it holds, as observed by this broker)."""
        now = time.monotonic()
        return sorted(k for k, (c, t) in self.pulls.items() if c == client_id and now - t <= within)

    def topics(self) -> set[str]:
        """Every topic some live client subscribes."""
        return {t for cid in self.channels for t in self.subscriptions.get(cid, {})}


class ConsumerManager:
    """Consumer groups by name; tells a group's clients when its membership or subscriptions change."""

    def __init__(self, notify: Callable[[str, list[Connection]], None], mode: str = STRICT) -> None:
        if mode not in (STRICT, ROCKETMQ):
            raise ValueError(f"subscriptionConsistency must be 'strict' or 'rocketmq', not {mode!r}")
        self.mode = mode
        self.groups: dict[str, ConsumerGroupInfo] = {}
        self.inconsistencies_seen = 0
        self._notify = notify
        self._seq = itertools.count(1)
        self._logged: dict[str, dict[tuple[str, str], tuple[str, str]]] = {}

    def get(self, group: str) -> ConsumerGroupInfo | None:
        """The group's info, if any client of it is known."""
        return self.groups.get(group)

    def register(self, channel: ClientChannel, data: ConsumerData) -> bool:
        """Record a heartbeat's consumer entry; True (and the group notified) when something changed."""
        info = self.groups.get(data.group)
        if info is None:
            info = ConsumerGroupInfo(data.group, self.mode)
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
        before = info.subscriptions.get(channel.client_id, {})
        seqs = info.registered_at.setdefault(channel.client_id, {})
        for topic, sub in subs.items():
            prev = before.get(topic)
            if prev is None or prev.expression_key() != sub.expression_key() or topic not in seqs:
                seqs[topic] = next(self._seq)
        for topic in [t for t in seqs if t not in subs]:
            del seqs[topic]
        changed_subs = {t: s.expression_key() for t, s in before.items()} != {
            t: s.expression_key() for t, s in subs.items()
        }
        info.subscriptions[channel.client_id] = subs
        changed = new_channel or changed_subs
        if changed:
            self._changed(info)
        return changed

    def _changed(self, info: ConsumerGroupInfo) -> None:
        """Recompute verdicts, log new inconsistencies once, notify the group."""
        info.refresh()
        pairs = info.inconsistent_pairs()
        logged = self._logged.setdefault(info.group, {})
        for (cid, topic), (group_expr, client_expr) in pairs.items():
            if logged.get((cid, topic)) != (group_expr, client_expr):
                self.inconsistencies_seen += 1
                if self.mode == STRICT:
                    log.error(
                        "inconsistent subscription: consumer group %s, topic %s: client %s subscribes '%s' but the "
                        "group subscribes '%s'; "
                        "it gets no queues of the topic until it subscribes alike (or uses another group)",
                        info.group,
                        topic,
                        cid,
                        client_expr,
                        group_expr,
                    )
                else:
                    log.warning(
                        "inconsistent subscription: consumer group %s, topic %s: client %s subscribes '%s', "
                        "others '%s'; subscriptionConsistency=rocketmq lets this through and messages WILL be lost",
                        info.group,
                        topic,
                        cid,
                        client_expr,
                        group_expr,
                    )
        self._logged[info.group] = dict(pairs)
        self._notify(info.group, [c.conn for c in info.channels.values()])

    def unregister(self, group: str, client_id: str) -> None:
        """A client left the group (UNREGISTER_CLIENT)."""
        info = self.groups.get(group)
        if info is None or client_id not in info.channels:
            return
        self._drop(info, client_id)
        log.info("consumer group %s: client %s unregistered", group, client_id)
        self._after_removal(info)

    @staticmethod
    def _drop(info: ConsumerGroupInfo, client_id: str) -> None:
        del info.channels[client_id]
        info.subscriptions.pop(client_id, None)
        info.registered_at.pop(client_id, None)

    def _after_removal(self, info: ConsumerGroupInfo) -> None:
        if info.channels:
            self._changed(info)
        else:
            del self.groups[info.group]
            self._logged.pop(info.group, None)

    def connection_closed(self, conn: Connection) -> None:
        """Drop every channel that used ``conn``."""
        for info in list(self.groups.values()):
            gone = [cid for cid, ch in info.channels.items() if ch.conn is conn]
            for cid in gone:
                self._drop(info, cid)
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
                self._drop(info, cid)
            if gone:
                self._after_removal(info)


class ProducerManager:
    """Producer groups and their clients' channels."""

    def __init__(self) -> None:
        self.groups: dict[str, dict[str, ClientChannel]] = {}

    def register(self, group: str, channel: ClientChannel) -> None:
        """Record a heartbeat's producer entry."""
        self.groups.setdefault(group, {})[channel.client_id] = channel

    def find_channel(self, client_id: str) -> ClientChannel | None:
        """The channel of producer client ``client_id`` in any group (a request-reply requester), or None."""
        for chans in self.groups.values():
            ch = chans.get(client_id)
            if ch is not None and not ch.conn.is_closed:
                return ch
        return None

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
