"""The name-server codes RocketMQ's mqadmin sends (docs/admin.md §10): GET_NAMESRV_CONFIG (319),
WIPE_WRITE_PERM_OF_BROKER (205) and ADD_WRITE_PERM_OF_BROKER (327)."""

from __future__ import annotations

from sievemq.namesrv.config import NamesrvConfig
from sievemq.namesrv.processors import NamesrvProcessors
from sievemq.namesrv.routes import RouteTable
from sievemq.protocol.route import PERM_INHERIT, PERM_READ, PERM_WRITE, TopicConfig
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection


def reg(rt: RouteTable, name: str, topics: list[TopicConfig], version: int) -> None:
    rt.register_broker("C", f"127.0.0.1:{len(name)}", name, 0, "", topics, {"counter": version, "timestamp": 1}, [],
                       1, 0.0)  # fmt: skip


def perm(rt: RouteTable, topic: str, broker: str) -> int:
    return rt.topic_queues[topic][broker].perm


def test_write_perm_is_wiped_and_added_in_the_routes_until_the_broker_changes_its_topics() -> None:
    rt = RouteTable()
    reg(rt, "a", [TopicConfig("T", 4, 4), TopicConfig("U", 1, 1, PERM_READ | PERM_WRITE | PERM_INHERIT)], 1)
    reg(rt, "bb", [TopicConfig("T", 2, 2)], 1)
    assert rt.set_write_perm("a", writable=False) == 2
    assert (perm(rt, "T", "a"), perm(rt, "U", "a"), perm(rt, "T", "bb")) == (PERM_READ, PERM_READ | PERM_INHERIT, 6)
    reg(rt, "a", [TopicConfig("T", 4, 4), TopicConfig("U", 1, 1)], 1)
    assert perm(rt, "T", "a") == PERM_READ, "a registration with the same data version leaves the routes"
    assert rt.set_write_perm("a", writable=True) == 2
    assert perm(rt, "U", "a") == PERM_READ | PERM_WRITE, "read-write, as RocketMQ sets it"
    rt.set_write_perm("a", writable=False)
    reg(rt, "a", [TopicConfig("T", 4, 4)], 2)
    assert perm(rt, "T", "a") == 6, "a new data version puts the broker's own permissions back"
    assert rt.set_write_perm("nobody", writable=False) == 0


async def test_processors_answer_config_and_counts() -> None:
    rt = RouteTable()
    reg(rt, "a", [TopicConfig("T", 4, 4)], 1)
    config = NamesrvConfig(listen_port=9999, tls_server_key_password="hidden")
    p = NamesrvProcessors(rt, False, config)
    got = await p.get_config(Connection(), RemotingCommand.request(RequestCode.GET_NAMESRV_CONFIG, {}))
    props = dict(line.split("=", 1) for line in got.body.decode().splitlines())
    assert props["listenPort"] == "9999" and props["orderMessageEnable"] == "false"
    assert props["brokerExpireSeconds"] == "120" and "tlsServerKeyPassword" not in props
    wipe = await p.wipe_write_perm(Connection(), RemotingCommand.request(205, {"brokerName": "a"}))
    assert (wipe.code, wipe.ext_fields) == (ResponseCode.SUCCESS, {"wipeTopicCount": "1"})
    add = await p.add_write_perm(Connection(), RemotingCommand.request(327, {"brokerName": "a"}))
    assert add.ext_fields == {"addTopicCount": "1"}
