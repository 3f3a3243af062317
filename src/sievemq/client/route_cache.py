"""The routes a client instance caches and the broker address table built from them (pure: no I/O).

Routes come from the name servers (GET_ROUTEINFO_BY_TOPIC, docs/protocol/requests.md §14-15); the address table
maps each broker name to its addresses by broker id (0 is the master), over the routes of every topic in use and
the TBW102 route used for auto-creation. Queues are listed from the routes' queue data and permissions.
"""

from __future__ import annotations

from sievemq.client.message import MessageQueue
from sievemq.protocol.route import PERM_READ, PERM_WRITE, TopicRouteData


class RouteCache:
    """Cached routes by topic, and the broker address table (``ClientInstance`` fetches and refreshes them)."""

    def __init__(self) -> None:
        self.routes: dict[str, TopicRouteData] = {}
        self.brokers: dict[str, dict[int, str]] = {}
        """Broker name -> broker id -> address."""
        self._default_route: TopicRouteData | None = None

    def _cache_route(self, topic: str, route: TopicRouteData) -> None:
        """Keep ``topic``'s fresh route; the address table is rebuilt from every cached route."""
        self.routes[topic] = route
        table: dict[str, dict[int, str]] = {}
        # the freshest last, so that its addresses win: the default route (TBW102, kept from an auto-creation and
        # not refreshed) first, ``route`` last (a set whose master moved under automatic failover: the old master's
        # address must not come back from an older route)
        routes = [self._default_route] if self._default_route is not None else []
        routes.extend(r for t, r in self.routes.items() if t != topic)
        routes.append(route)
        for r in routes:
            for bd in r.broker_datas:
                table.setdefault(bd.broker_name, {}).update(bd.broker_addrs)
        self.brokers = table

    def _cache_default_route(self, route: TopicRouteData) -> None:
        """Keep the TBW102 route (auto-creation) and add its brokers to the address table."""
        self._default_route = route
        for bd in route.broker_datas:
            self.brokers.setdefault(bd.broker_name, {}).update(bd.broker_addrs)

    def route(self, topic: str) -> TopicRouteData | None:
        """The cached route."""
        return self.routes.get(topic)

    def subscribe_queues(self, topic: str) -> list[MessageQueue] | None:
        """Readable queues of ``topic`` from the cached route (None when no route is known)."""
        route = self.routes.get(topic)
        if route is None:
            return None
        out = [
            MessageQueue(topic, qd.broker_name, i)
            for qd in route.queue_datas
            if qd.perm & PERM_READ
            for i in range(qd.read_queue_nums)
        ]
        return sorted(out)

    def publish_queues(self, topic: str, route: TopicRouteData | None = None) -> list[MessageQueue]:
        """Writable queues of brokers with a master, in route order (Java ``topicRouteData2TopicPublishInfo``)."""
        route = route or self.routes.get(topic)
        if route is None:
            return []
        masters = {bd.broker_name for bd in route.broker_datas if 0 in bd.broker_addrs}
        return [
            MessageQueue(topic, qd.broker_name, i)
            for qd in sorted(route.queue_datas, key=lambda q: q.broker_name)
            if qd.perm & PERM_WRITE and qd.broker_name in masters
            for i in range(qd.write_queue_nums)
        ]

    def broker_addr(self, broker_name: str, master_only: bool = False, prefer: int = 0) -> str | None:
        """Broker ``prefer``'s address (a pull answer's ``suggestWhichBrokerId``) when listed, else the master's,
        else (unless ``master_only``) a slave's."""
        addrs = self.brokers.get(broker_name) or {}
        if prefer and not master_only and prefer in addrs:
            return addrs[prefer]
        if 0 in addrs:
            return addrs[0]
        if master_only or not addrs:
            return None
        return addrs[min(addrs)]

    def broker_addrs_for_topic(self, topic: str) -> list[str]:
        """One address (master preferred) per broker of ``topic``'s route."""
        route = self.routes.get(topic)
        if route is None:
            return []
        out = []
        for bd in route.broker_datas:
            addr = self.broker_addr(bd.broker_name)
            if addr is None and bd.broker_addrs:
                addr = bd.broker_addrs[min(bd.broker_addrs)]
            if addr:
                out.append(addr)
        return out

    def all_broker_addrs(self, include_slaves: bool = False) -> list[str]:
        """Every known broker address (masters only unless ``include_slaves``)."""
        out: list[str] = []
        for addrs in self.brokers.values():
            for bid, addr in sorted(addrs.items()):
                if (bid == 0 or include_slaves) and addr not in out:
                    out.append(addr)
        return out
