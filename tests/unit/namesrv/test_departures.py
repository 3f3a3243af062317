"""The name server remembers brokers that left, so a route query of their topics names them (bounded)."""

from __future__ import annotations

from sievemq.namesrv.departures import Departures, describe
from sievemq.namesrv.routes import RouteTable
from sievemq.protocol.route import TopicConfig


def reg(rt: RouteTable, name: str, addr: str, topics: list[str], conn: int = 1, now: float = 0.0) -> None:
    configs = [TopicConfig(t, 4, 4) for t in topics]
    rt.register_broker("C", addr, name, 0, "", configs, {"counter": 1}, [], conn, now)


def test_a_broker_whose_connection_closed_is_named_for_its_topics() -> None:
    rt = RouteTable()
    reg(rt, "a", "127.0.0.1:1", ["T", "U"], conn=7)
    reg(rt, "b", "127.0.0.1:2", ["U"], conn=8)
    rt.connection_closed(7, now=100.0)
    assert rt.route("T") is None
    (gone,) = rt.departures.of_topic("T")
    assert (gone.broker_name, gone.addrs, gone.cluster) == ("a", ("127.0.0.1:1",), "C")
    assert "connection closed" in gone.why
    text = describe("T", [gone], now=112.0)
    assert "broker a (127.0.0.1:1, cluster C)" in text and "12 s ago" in text and "'T'" in text
    assert rt.route("U") is not None, "U still has broker b"


def test_expiry_and_unregistration_say_how_the_broker_left() -> None:
    rt = RouteTable()
    reg(rt, "a", "127.0.0.1:1", ["T"], now=0.0)
    reg(rt, "b", "127.0.0.1:2", ["V"], conn=2, now=0.0)
    rt.expire(now=121.0, max_silence=120.0)
    assert "had not registered for 120 s" in rt.departures.of_topic("T")[0].why
    rt2 = RouteTable()
    reg(rt2, "a", "127.0.0.1:1", ["T"])
    rt2.unregister_broker("C", "127.0.0.1:1", "a", 0, now=5.0)
    assert rt2.departures.of_topic("T")[0].why == "it stopped (it unregistered)"


def test_a_broker_that_registers_again_is_no_longer_missing() -> None:
    rt = RouteTable()
    reg(rt, "a", "127.0.0.1:1", ["T"], conn=1)
    rt.connection_closed(1)
    assert rt.departures.of_topic("T")
    reg(rt, "a", "127.0.0.1:1", ["T"], conn=2)
    assert rt.departures.of_topic("T") == [] and len(rt.departures) == 0


def test_a_deleted_topic_has_no_missing_broker() -> None:
    rt = RouteTable()
    reg(rt, "a", "127.0.0.1:1", ["T", "U"], conn=1)
    rt.connection_closed(1)
    rt.delete_topic("T")
    assert rt.departures.of_topic("T") == [] and rt.departures.of_topic("U")


def test_a_master_leaving_its_slave_behind_is_not_a_departure() -> None:
    rt = RouteTable()
    reg(rt, "a", "127.0.0.1:1", ["T"], conn=1)
    rt.register_broker("C", "127.0.0.1:3", "a", 1, "", [], {"counter": 1}, [], 3, 0.0)
    rt.connection_closed(1)
    route = rt.route("T")
    assert route is not None and route.broker_datas[0].broker_addrs == {1: "127.0.0.1:3"}
    assert rt.departures.of_topic("T") == []


def test_departures_are_bounded_in_brokers_and_in_topic_names() -> None:
    d = Departures(max_departures=3, max_topics=10)
    for i in range(5):
        d.record(f"b{i}", "C", ["h:1"], [f"T{i}"], "gone", float(i))
    assert len(d) == 3 and d.of_topic("T0") == [] and d.of_topic("T4")
    d.record("big", "C", ["h:2"], [f"X{i}" for i in range(100)], "gone", 9.0)
    assert len(d) == 1, "the oldest departures go to make room for the topic names"
    assert sum(1 for i in range(100) if d.of_topic(f"X{i}")) == 10, "at most max_topics names are kept"
    d.returned("big")
    assert len(d) == 0 and d.of_topic("X0") == []
