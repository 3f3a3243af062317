"""The client's broker address table (RouteCache): which address a pull, a send or a commit goes to."""

from __future__ import annotations

from sievemq.client.route_cache import RouteCache
from sievemq.protocol.route import PERM_READ, PERM_WRITE, BrokerData, QueueData, TopicRouteData

MASTER, SLAVE = "10.0.0.1:10911", "10.0.0.2:10911"


def cache(addrs: dict[int, str]) -> RouteCache:
    rc = RouteCache()
    rc._cache_route("T", TopicRouteData([QueueData("broker-a", 4, 4, PERM_READ | PERM_WRITE)],
                                        [BrokerData("c", "broker-a", dict(addrs))]))  # fmt: skip
    return rc


def test_the_master_unless_a_listed_broker_is_preferred() -> None:
    rc = cache({0: MASTER, 1: SLAVE})
    assert rc.broker_addr("broker-a") == MASTER
    assert rc.broker_addr("broker-a", prefer=1) == SLAVE
    assert rc.broker_addr("broker-a", prefer=2) == MASTER  # not listed
    assert rc.broker_addr("broker-a", master_only=True, prefer=1) == MASTER


def test_a_slave_while_no_master_is_listed_and_nothing_for_master_only() -> None:
    rc = cache({1: SLAVE})
    assert rc.broker_addr("broker-a") == SLAVE
    assert rc.broker_addr("broker-a", master_only=True) is None
    assert rc.publish_queues("T") == []  # no master: nowhere to send
    assert rc.broker_addr("broker-b") is None


def _route(addrs: dict[int, str]) -> TopicRouteData:
    return TopicRouteData([QueueData("broker-a", 4, 4, PERM_READ | PERM_WRITE)], [BrokerData("c", "broker-a", addrs)])


def test_the_freshest_route_names_the_master_after_a_failover() -> None:
    """A master replaced by its replica (automatic failover): the TBW102 route kept from an auto-creation, and other
    topics' routes not refreshed yet, must not bring the dead master's address back over the fresh route's."""
    rc = RouteCache()
    rc._cache_default_route(_route({0: MASTER}))
    rc._cache_route("T", _route({0: MASTER, 1: SLAVE}))
    rc._cache_route("U", _route({0: MASTER, 1: SLAVE}))
    rc._cache_route("T", _route({0: SLAVE}))  # the replica is the master now
    assert rc.broker_addr("broker-a", master_only=True) == SLAVE
    rc._cache_route("U", _route({0: SLAVE}))
    assert rc.broker_addr("broker-a", master_only=True) == SLAVE
