"""The name server's route tables (pure state, no I/O): which broker holds which queues of which topic.

Only a master's (broker id 0) registration changes queue data (docs/registration.md §3). With a new data version
(or a broker new to this name server) its topics are applied, each compared with what the routes hold; with the
same version only topics the routes lack are added (RocketMQ's rule: a split or incremental registration carries
the version of its first part). A registration marked as the complete table (``part``: this is part i of n, a
sievemq broker's ``topicTablePart`` header; 1 of 1 unsplit) also removes, once all n parts of one version arrived,
the topics it no longer lists (so ``sievemq topic delete`` leaves the routes at once); an unmarked one (RocketMQ's
brokers, whose registrations may be partial) removes none, as RocketMQ's name server. The same body again under
the same version is a repeat: ``repeat`` answers it in O(1), without reading it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sievemq.namesrv.departures import Departures
from sievemq.protocol.register_body import version_key
from sievemq.protocol.route import PERM_READ, PERM_WRITE, BrokerData, QueueData, TopicConfig, TopicRouteData

MAX_REMEMBERED_BODIES = 4096
"""Bodies per broker address remembered as applied under its current data version (a split table's parts)."""


@dataclass(slots=True)
class BrokerLive:
    """Liveness of one registered broker address."""

    last_update: float
    data_version: dict[str, Any]
    conn_id: int
    ha_server_addr: str = ""
    identity: tuple[str, str, int] = ("", "", 0)
    """(cluster, broker name, broker id) it registered as."""
    bodies: set[tuple[int, int]] = field(default_factory=set)
    """(crc32, length) of the bodies applied under ``data_version``: the same body again is a repeat."""


@dataclass(slots=True)
class TableParts:
    """The parts of a master's complete topic table received under one data version."""

    version: tuple[int, int, int]
    total: int
    seen: set[int] = field(default_factory=set)
    names: set[str] = field(default_factory=set)
    swept: bool = False


@dataclass(slots=True)
class RegisterResult:
    """What REGISTER_BROKER answers (master address and HA address, for slaves)."""

    master_addr: str = ""
    ha_server_addr: str = ""


@dataclass
class RouteTable:
    """Topic -> queues per broker, broker name -> addresses, cluster -> broker names, liveness, filter servers, and
    the brokers that left (``departures``: what a route query of their topics is told)."""

    topic_queues: dict[str, dict[str, QueueData]] = field(default_factory=dict)
    brokers: dict[str, BrokerData] = field(default_factory=dict)
    clusters: dict[str, set[str]] = field(default_factory=dict)
    live: dict[str, BrokerLive] = field(default_factory=dict)
    filter_servers: dict[str, list[str]] = field(default_factory=dict)
    departures: Departures = field(default_factory=Departures)
    broker_topics: dict[str, set[str]] = field(default_factory=dict)
    """Broker name -> the topics it has queues of (an index of ``topic_queues``)."""
    parts: dict[str, TableParts] = field(default_factory=dict)
    """Master broker name -> its complete table's parts under its latest data version."""

    def repeat(
        self,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        body_key: tuple[int, int],
        conn_id: int,
        now: float,
    ) -> RegisterResult | None:
        """A registration whose body (``body_key``: crc32 and length) was applied already under the broker's current
        data version, from the same broker: refresh its liveness and answer (O(1)); None when it is not a repeat
        (then read the body and call ``register_broker``)."""
        live = self.live.get(broker_addr)
        if live is None or live.identity != (cluster, broker_name, broker_id) or body_key not in live.bodies:
            return None
        bd = self.brokers.get(broker_name)
        if bd is None or bd.broker_addrs.get(broker_id) != broker_addr:
            return None
        live.last_update = now
        live.conn_id = conn_id
        live.ha_server_addr = ha_server_addr
        return self._result(bd, broker_id)

    def register_broker(
        self,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topic_configs: list[TopicConfig],
        data_version: dict[str, Any],
        filter_server_list: list[str],
        conn_id: int,
        now: float,
        part: tuple[int, int] | None = (1, 1),
        body_key: tuple[int, int] | None = None,
    ) -> RegisterResult:
        """Record a broker registration; returns the master/HA addresses for a slave. ``part``: (i, n), part i of
        the n parts of the broker's complete table; None: maybe partial (nothing is removed). ``body_key``: what
        ``repeat`` recognises the body by afterwards."""
        self.clusters.setdefault(cluster, set()).add(broker_name)
        self.departures.returned(broker_name)
        bd = self.brokers.get(broker_name)
        first = bd is None
        if bd is None:
            bd = BrokerData(cluster, broker_name, {})
            self.brokers[broker_name] = bd
        # an address re-registering under another id replaces the old entry (slave promoted, etc.)
        for bid, addr in list(bd.broker_addrs.items()):
            if addr == broker_addr and bid != broker_id:
                del bd.broker_addrs[bid]
        first = first or bd.broker_addrs.get(broker_id) != broker_addr
        bd.broker_addrs[broker_id] = broker_addr
        prev = self.live.get(broker_addr)
        identity = (cluster, broker_name, broker_id)
        version = version_key(data_version)
        changed = first or prev is None or prev.identity != identity or version_key(prev.data_version) != version
        if broker_id == 0:
            self._apply(broker_name, topic_configs, version, changed, part)
        live = prev if prev is not None and not changed else BrokerLive(now, data_version, conn_id, identity=identity)
        live.last_update, live.conn_id, live.ha_server_addr = now, conn_id, ha_server_addr
        if body_key is not None and len(live.bodies) < MAX_REMEMBERED_BODIES:
            live.bodies.add(body_key)
        self.live[broker_addr] = live
        if filter_server_list:
            self.filter_servers[broker_addr] = list(filter_server_list)
        else:
            self.filter_servers.pop(broker_addr, None)
        return self._result(bd, broker_id)

    def _result(self, bd: BrokerData, broker_id: int) -> RegisterResult:
        result = RegisterResult()
        if broker_id != 0:
            master = bd.broker_addrs.get(0)
            if master:
                result.master_addr = master
                ml = self.live.get(master)
                result.ha_server_addr = ml.ha_server_addr if ml else ""
        return result

    def _apply(
        self,
        broker_name: str,
        topics: list[TopicConfig],
        version: tuple[int, int, int],
        changed: bool,
        part: tuple[int, int] | None,
    ) -> None:
        """A master's topics: all compared and applied when ``changed`` or when they are a part of its complete
        table not received yet under this version; otherwise only those the routes lack. Once every part of a
        complete table arrived, topics it does not list are removed."""
        gen = self.parts.get(broker_name)
        fresh = changed
        if part is not None:
            index, total = part
            if gen is None or gen.version != version or gen.total != total:
                gen = self.parts[broker_name] = TableParts(version, total)
            if index in gen.seen and not changed:
                return  # this part was applied under this version already
            fresh = True
            gen.seen.add(index)
            if not gen.swept:
                gen.names.update(tc.topic_name for tc in topics)
        self._upsert(broker_name, topics, only_missing=not fresh)
        if gen is not None and part is not None and not gen.swept and len(gen.seen) >= gen.total:
            gen.swept = True
            for topic in self.broker_topics.get(broker_name, set()) - gen.names:
                self._remove_topic_of_broker(topic, broker_name)
            gen.names = set()  # not needed any more: a repeat of a part changes nothing

    def _upsert(self, broker_name: str, topics: list[TopicConfig], only_missing: bool) -> None:
        owned = self.broker_topics.setdefault(broker_name, set())
        table = self.topic_queues
        for tc in topics:
            name = tc.topic_name
            queues = table.get(name)
            if queues is None:
                queues = table[name] = {}
            qd = queues.get(broker_name)
            if qd is None:
                owned.add(name)
            elif only_missing or (
                qd.read_queue_nums == tc.read_queue_nums
                and qd.write_queue_nums == tc.write_queue_nums
                and qd.perm == tc.perm
                and qd.topic_sys_flag == tc.topic_sys_flag
            ):
                continue
            queues[broker_name] = QueueData(
                broker_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_sys_flag
            )

    def _remove_topic_of_broker(self, topic: str, broker_name: str) -> None:
        queues = self.topic_queues.get(topic)
        if queues is None:
            return
        queues.pop(broker_name, None)
        owned = self.broker_topics.get(broker_name)
        if owned is not None:
            owned.discard(topic)
        if not queues:
            del self.topic_queues[topic]

    def unregister_broker(
        self,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        *,
        why: str = "it stopped (it unregistered)",
        now: float = 0.0,
    ) -> None:
        """Forget one broker address; a broker name with no address left loses its queues too, and is remembered as
        departed (``why`` it left, at ``now``) for the topics it served."""
        self.live.pop(broker_addr, None)
        self.filter_servers.pop(broker_addr, None)
        bd = self.brokers.get(broker_name)
        if bd is not None:
            if bd.broker_addrs.get(broker_id) == broker_addr:
                del bd.broker_addrs[broker_id]
            else:
                for bid, addr in list(bd.broker_addrs.items()):
                    if addr == broker_addr:
                        del bd.broker_addrs[bid]
            if not bd.broker_addrs:
                served = [t for t, queues in self.topic_queues.items() if broker_name in queues]
                if served:
                    self.departures.record(broker_name, cluster or bd.cluster, [broker_addr], served, why, now)
                del self.brokers[broker_name]
                names = self.clusters.get(cluster or bd.cluster)
                if names is not None:
                    names.discard(broker_name)
                    if not names:
                        del self.clusters[cluster or bd.cluster]
                for topic in served:
                    self._remove_topic_of_broker(topic, broker_name)
                self.broker_topics.pop(broker_name, None)
                self.parts.pop(broker_name, None)

    def _forget_addr(self, broker_addr: str, why: str, now: float) -> None:
        for name, bd in list(self.brokers.items()):
            for bid, addr in list(bd.broker_addrs.items()):
                if addr == broker_addr:
                    self.unregister_broker(bd.cluster, broker_addr, name, bid, why=why, now=now)
                    return
        self.live.pop(broker_addr, None)
        self.filter_servers.pop(broker_addr, None)

    def expire(self, now: float, max_silence: float) -> list[str]:
        """Drop brokers not heard from for ``max_silence`` seconds; returns their addresses."""
        dead = [addr for addr, lv in self.live.items() if now - lv.last_update > max_silence]
        for addr in dead:
            self._forget_addr(addr, f"it had not registered for {max_silence:.0f} s", now)
        return dead

    def connection_closed(self, conn_id: int, now: float = 0.0) -> list[str]:
        """Drop brokers whose registration came over the connection that closed."""
        dead = [addr for addr, lv in self.live.items() if lv.conn_id == conn_id]
        for addr in dead:
            self._forget_addr(addr, "its connection closed (stopped, crashed or cut off)", now)
        return dead

    def route(self, topic: str) -> TopicRouteData | None:
        """The route of ``topic``, or None when no broker holds it."""
        queues = self.topic_queues.get(topic)
        if not queues:
            return None
        route = TopicRouteData()
        for name, qd in sorted(queues.items()):
            bd = self.brokers.get(name)
            if bd is None:
                continue
            route.queue_datas.append(
                QueueData(qd.broker_name, qd.read_queue_nums, qd.write_queue_nums, qd.perm, qd.topic_sys_flag)
            )
            route.broker_datas.append(BrokerData(bd.cluster, bd.broker_name, dict(bd.broker_addrs)))
            for addr in bd.broker_addrs.values():
                fs = self.filter_servers.get(addr)
                if fs:
                    route.filter_server_table[addr] = list(fs)
        if not route.broker_datas:
            return None
        return route

    def set_write_perm(self, broker_name: str, writable: bool) -> int:
        """WIPE_WRITE_PERM_OF_BROKER (``writable`` false: each of the broker's topics loses PERM_WRITE) or
        ADD_WRITE_PERM_OF_BROKER (true: each becomes read-write), in the routes only: the broker's next registration
        with a new data version (a topic change) puts its own permissions back, as in RocketMQ. Returns how many
        topics were changed."""
        count = 0
        for queues in self.topic_queues.values():
            qd = queues.get(broker_name)
            if qd is None:
                continue
            qd.perm = PERM_READ | PERM_WRITE if writable else qd.perm & ~PERM_WRITE
            count += 1
        return count

    def delete_topic(self, topic: str) -> None:
        """Remove a topic from every broker's routes."""
        for broker_name in self.topic_queues.pop(topic, {}):
            owned = self.broker_topics.get(broker_name)
            if owned is not None:
                owned.discard(topic)
        self.departures.forget_topic(topic)

    def topic_list(self) -> list[str]:
        """Every topic some broker holds."""
        return sorted(self.topic_queues)

    def system_topic_list(self) -> dict[str, Any]:
        """TopicList JSON of RocketMQ's "system topics" as its name server answers 304: every cluster name and every
        broker name, and one broker address (where tools ask for the brokers' own system topics, 305)."""
        names: list[str] = []
        for cluster, brokers in sorted(self.clusters.items()):
            names.append(cluster)
            names.extend(sorted(brokers))
        body: dict[str, Any] = {"topicList": names}
        for _, bd in sorted(self.brokers.items()):
            if bd.broker_addrs:
                body["brokerAddr"] = bd.broker_addrs[min(bd.broker_addrs)]
                break
        return body

    def cluster_info(self) -> dict[str, Any]:
        """ClusterInfo JSON: brokerAddrTable and clusterAddrTable."""
        return {
            "brokerAddrTable": {name: bd.to_json() for name, bd in sorted(self.brokers.items())},
            "clusterAddrTable": {c: sorted(names) for c, names in sorted(self.clusters.items())},
        }
