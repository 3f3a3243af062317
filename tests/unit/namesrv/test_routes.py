"""Name-server route table: registration, route assembly, expiry, connection loss."""

from __future__ import annotations

from sievemq.namesrv.routes import RouteTable
from sievemq.protocol.route import TopicConfig


def reg(rt: RouteTable, name: str, addr: str, topics: list[TopicConfig], version: int = 1, conn: int = 1,
        now: float = 0.0, fs: list[str] | None = None, broker_id: int = 0) -> None:
    rt.register_broker("C", addr, name, broker_id, "", topics, {"counter": version, "timestamp": 1}, fs or [], conn,
                       now)


def test_topic_spread_over_two_brokers() -> None:
    rt = RouteTable()
    reg(rt, "a", "127.0.0.1:1", [TopicConfig("T", 4, 4)], conn=1)
    reg(rt, "b", "127.0.0.1:2", [TopicConfig("T", 2, 2)], conn=2)
    route = rt.route("T")
    assert route is not None
    assert [(q.broker_name, q.write_queue_nums) for q in route.queue_datas] == [("a", 4), ("b", 2)]
    assert {b.broker_name: b.broker_addrs for b in route.broker_datas} == {"a": {0: "127.0.0.1:1"},
                                                                           "b": {0: "127.0.0.1:2"}}
    assert rt.route("missing") is None
    assert rt.topic_list() == ["T"]


def test_route_json_quotes_broker_ids_and_has_filter_servers() -> None:
    rt = RouteTable()
    reg(rt, "a", "127.0.0.1:1", [TopicConfig("T", 4, 4)], fs=["127.0.0.1:9"])
    route = rt.route("T")
    assert route is not None
    js = route.to_json()
    assert js["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:1"}
    assert js["filterServerTable"] == {"127.0.0.1:1": ["127.0.0.1:9"]}
    reg(rt, "a", "127.0.0.1:1", [TopicConfig("T", 4, 4)], version=2)
    route = rt.route("T")
    assert route is not None and route.filter_server_table == {}


def test_unchanged_data_version_keeps_queues_and_changed_version_replaces_them() -> None:
    rt = RouteTable()
    reg(rt, "a", "127.0.0.1:1", [TopicConfig("T", 4, 4), TopicConfig("U", 1, 1)])
    reg(rt, "a", "127.0.0.1:1", [TopicConfig("T", 8, 8)], version=1)
    route = rt.route("T")
    assert route is not None and route.queue_datas[0].write_queue_nums == 4
    reg(rt, "a", "127.0.0.1:1", [TopicConfig("T", 8, 8)], version=2)
    route = rt.route("T")
    assert route is not None and route.queue_datas[0].write_queue_nums == 8
    assert rt.route("U") is None


def test_slave_registration_does_not_change_queues() -> None:
    rt = RouteTable()
    reg(rt, "a", "127.0.0.1:1", [TopicConfig("T", 4, 4)])
    rt.register_broker("C", "127.0.0.1:3", "a", 1, "", [TopicConfig("X", 1, 1)], {"counter": 9}, [], 3, 0.0)
    assert rt.route("X") is None
    route = rt.route("T")
    assert route is not None and route.broker_datas[0].broker_addrs == {0: "127.0.0.1:1", 1: "127.0.0.1:3"}


def test_expiry_and_connection_close_drop_brokers() -> None:
    rt = RouteTable()
    reg(rt, "a", "127.0.0.1:1", [TopicConfig("T", 4, 4)], conn=1, now=0.0)
    reg(rt, "b", "127.0.0.1:2", [TopicConfig("T", 4, 4)], conn=2, now=100.0)
    assert rt.expire(now=121.0, max_silence=120.0) == ["127.0.0.1:1"]
    route = rt.route("T")
    assert route is not None and [b.broker_name for b in route.broker_datas] == ["b"]
    assert rt.connection_closed(2) == ["127.0.0.1:2"]
    assert rt.route("T") is None
    assert rt.cluster_info() == {"brokerAddrTable": {}, "clusterAddrTable": {}}


def test_unregister_and_delete_topic() -> None:
    rt = RouteTable()
    reg(rt, "a", "127.0.0.1:1", [TopicConfig("T", 4, 4), TopicConfig("U", 4, 4)])
    rt.delete_topic("U")
    assert rt.route("U") is None
    rt.unregister_broker("C", "127.0.0.1:1", "a", 0)
    assert rt.route("T") is None and rt.brokers == {}
