"""Two name servers and two brokers: every broker registers with every name server; routes span brokers."""

from __future__ import annotations

import time

import orjson

from sievemq.client import api
from sievemq.protocol.msgid import parse_offset_msg_id
from sievemq.remoting.codes import RequestCode, ResponseCode
from tests.integration.conftest import Cluster, OpenConn
from tests.integration.helpers import call, create_topic, eventually, route_brokers, route_or_none
from tests.support import wire

TOPIC = "SpreadTopic"


async def test_two_namesrvs_two_brokers_routes_sends_pulls_and_broker_loss(
    cluster: Cluster, open_conn: OpenConn
) -> None:
    ns_a, ns_b = cluster.namesrv("ns-a"), cluster.namesrv("ns-b")
    both = f"{ns_a.addr};{ns_b.addr}"
    br_a = cluster.broker(both, "broker-a")
    br_b = cluster.broker(both, "broker-b")
    expected = {"broker-a": br_a.addr, "broker-b": br_b.addr}

    conn_a, conn_b = await open_conn(br_a), await open_conn(br_b)
    await create_topic(conn_a, TOPIC, queues=2)
    await create_topic(conn_b, TOPIC, queues=3)
    ns_conns = [await open_conn(ns_a), await open_conn(ns_b)]

    # Each name server routes the topic to both brokers, with each broker's own queue counts.
    for nsc in ns_conns:
        route = await eventually(
            lambda nsc=nsc: _when(route_or_none(nsc, TOPIC), lambda r: route_brokers(r) == expected),
            what="route with both brokers",
        )
        queues = {q.broker_name: (q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queue_datas}
        assert queues == {"broker-a": (2, 2, 6), "broker-b": (3, 3, 6)}

        info = orjson.loads((await call(nsc, RequestCode.GET_BROKER_CLUSTER_INFO)).body)
        assert sorted(info["clusterAddrTable"]["DefaultCluster"]) == ["broker-a", "broker-b"]
        assert {n: bd["brokerAddrs"]["0"] for n, bd in info["brokerAddrTable"].items()} == expected

        resp = await call(nsc, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        assert resp.code == ResponseCode.SUCCESS
        assert TOPIC in orjson.loads(resp.body)["topicList"]

    # Messages sent to each broker's queues come back from that broker only.
    sent: dict[str, list[bytes]] = {"broker-a": [], "broker-b": []}
    for name, conn, proc, nq in (("broker-a", conn_a, br_a, 2), ("broker-b", conn_b, br_b, 3)):
        for q in range(nq):
            body = f"{name}/q{q}".encode()
            r = await wire.send_message(conn, TOPIC, body, queue_id=q)
            assert (r.queue_id, r.queue_offset) == (q, 0)
            host, port, _ = parse_offset_msg_id(r.msg_id)
            assert f"{host}:{port}" == proc.addr, "msgId must name the broker that stored the message"
            sent[name].append(body)
    for name, conn, nq in (("broker-a", conn_a, 2), ("broker-b", conn_b, 3)):
        got = []
        for q in range(nq):
            r = await api.pull_message(conn, "spread-group", TOPIC, q, 0)
            assert r.code == ResponseCode.SUCCESS, r
            got.extend(m.body for m in r.messages)
        assert got == sent[name]
    # broker-a has no queue 2 of this topic.
    r = await api.pull_message(conn_a, "spread-group", TOPIC, 2, 0)
    assert r.code != ResponseCode.SUCCESS

    # A topic deleted on one broker only keeps its route to the other one.
    await create_topic(conn_a, "HalfDeleted", queues=1)
    await create_topic(conn_b, "HalfDeleted", queues=1)
    for nsc in ns_conns:
        await eventually(
            lambda nsc=nsc: _when(route_or_none(nsc, "HalfDeleted"), lambda r: route_brokers(r) == expected),
            what="HalfDeleted on both brokers",
        )
    resp = await call(conn_b, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "HalfDeleted"})
    assert resp.code == ResponseCode.SUCCESS
    for nsc in ns_conns:
        await eventually(
            lambda nsc=nsc: _when(
                route_or_none(nsc, "HalfDeleted"), lambda r: route_brokers(r) == {"broker-a": br_a.addr}
            ),
            what="HalfDeleted only on broker-a",
        )

    # kill -9 one broker: both name servers drop it at once (its registration connection closed), long
    # before the 120 s expiry.
    br_b.kill9()
    t0 = time.monotonic()
    for nsc in ns_conns:
        await eventually(
            lambda nsc=nsc: _when(route_or_none(nsc, TOPIC), lambda r: route_brokers(r) == {"broker-a": br_a.addr}),
            timeout=3.0,
            what="route without the killed broker",
        )
        info = orjson.loads((await call(nsc, RequestCode.GET_BROKER_CLUSTER_INFO)).body)
        assert list(info["brokerAddrTable"]) == ["broker-a"]
        assert info["clusterAddrTable"]["DefaultCluster"] == ["broker-a"]
    assert time.monotonic() - t0 < 3.0


async def _when(aw, pred):  # type: ignore[no-untyped-def]
    value = await aw
    return value if value is not None and pred(value) else None


async def test_brokers_reregister_with_a_restarted_namesrv_and_a_restarted_broker_returns(
    cluster: Cluster, open_conn: OpenConn
) -> None:
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-a")  # registers every 2 s
    conn = await open_conn(broker)
    await create_topic(conn, "ComebackTopic", queues=2)
    nsc = await open_conn(ns)
    await eventually(lambda: route_or_none(nsc, "ComebackTopic"), what="route")

    # The name server dies and comes back empty: the broker's next registration fills it again.
    ns.kill9()
    ns = cluster.restart(ns)
    nsc = await open_conn(ns)
    assert await route_or_none(nsc, "ComebackTopic") is None, "a restarted name server starts empty"
    route = await eventually(lambda: route_or_none(nsc, "ComebackTopic"), timeout=6.0, what="re-registration")
    assert route_brokers(route) == {"broker-a": broker.addr}

    # The broker dies: gone from the route; it comes back with its topics from disk.
    broker.kill9()
    await eventually(lambda: _is_none(route_or_none(nsc, "ComebackTopic")), timeout=3.0, what="broker dropped")
    broker = cluster.restart(broker)
    route = await eventually(lambda: route_or_none(nsc, "ComebackTopic"), timeout=3.0, what="broker back")
    assert route_brokers(route) == {"broker-a": broker.addr}
    assert [(q.read_queue_nums, q.write_queue_nums) for q in route.queue_datas] == [(2, 2)]


async def _is_none(aw) -> bool:  # type: ignore[no-untyped-def]
    return (await aw) is None
