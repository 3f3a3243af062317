"""The name server's route tables (pure state, no I/O): which broker holds which queues of which topic.

Only a master's (broker id 0) registration changes queue data, and only when its data version changed or it
registers for the first time. Unlike RocketMQ 4.x, a master's registration is its complete topic list: topics
it no longer lists are removed from its routes (so ``sievemq topic delete`` disappears from routes at once).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sievemq.namesrv.departures import Departures
from sievemq.protocol.route import PERM_READ, PERM_WRITE, BrokerData, QueueData, TopicConfig, TopicRouteData


@dataclass(slots=True)
class BrokerLive:
    """Liveness of one registered broker address."""

    last_update: float
    data_version: dict[str, Any]
    conn_id: int
    ha_server_addr: str = ""


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
    ) -> RegisterResult:
        """Record a broker registration; returns the master/HA addresses for a slave."""
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
        changed = prev is None or prev.data_version != data_version
        if broker_id == 0 and (changed or first):
            names = {tc.topic_name for tc in topic_configs}
            for tc in topic_configs:
                self.topic_queues.setdefault(tc.topic_name, {})[broker_name] = QueueData(
                    broker_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_sys_flag
                )
            for topic in list(self.topic_queues):
                if topic not in names:
                    self._remove_topic_of_broker(topic, broker_name)
        self.live[broker_addr] = BrokerLive(now, data_version, conn_id, ha_server_addr)
        if filter_server_list:
            self.filter_servers[broker_addr] = list(filter_server_list)
        else:
            self.filter_servers.pop(broker_addr, None)
        result = RegisterResult()
        if broker_id != 0:
            master = bd.broker_addrs.get(0)
            if master:
                result.master_addr = master
                ml = self.live.get(master)
                result.ha_server_addr = ml.ha_server_addr if ml else ""
        return result

    def _remove_topic_of_broker(self, topic: str, broker_name: str) -> None:
        queues = self.topic_queues.get(topic)
        if queues is None:
            return
        queues.pop(broker_name, None)
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
                for topic in list(self.topic_queues):
                    self._remove_topic_of_broker(topic, broker_name)

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
        self.topic_queues.pop(topic, None)
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
