"""Registration at scale (docs/registration.md): a real broker holding 100,000 topics registers compressed and
split with a real name server, periodic rounds send no table while nothing changed, a new topic goes alone (then
the whole table once more), a name server that lost the broker gets it back, one refusing compressed bodies gets
JSON.

Beside the real name server, each test gives the broker a recording name server in this process (sievemq's own
name-server processors, counting what arrives) as its second name server.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from sievemq.namesrv.processors import NamesrvProcessors
from sievemq.namesrv.routes import RouteTable
from sievemq.protocol.register_body import PART_FIELD
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.headers import get_bool
from sievemq.remoting.server import ProcessorTable, RemotingServer
from tests.integration.conftest import Cluster, OpenConn
from tests.integration.helpers import call, create_topic, eventually, route_or_none
from tests.support.procs import Proc

SCALE = 100_000
SYSTEM_TOPICS = 7
"""Topics every broker makes for itself (SELF_TEST, TBW102, cluster, broker name, OFFSET_MOVED, SCHEDULE, reply)."""


@dataclass
class Recorder:
    """A name server in the test process: sievemq's processors, and a record of what the broker sent."""

    refuse_compressed: bool = False
    registers: list[tuple[str, bool, int]] = field(default_factory=list)
    """(topicTablePart, compressed, body bytes) of each REGISTER_BROKER."""
    queries: int = 0
    server: RemotingServer | None = None
    processors: NamesrvProcessors = field(default_factory=lambda: NamesrvProcessors(RouteTable()))

    async def start(self) -> str:
        table = ProcessorTable("name server")
        table.register(RequestCode.REGISTER_BROKER, self._register)
        table.register(RequestCode.QUERY_DATA_VERSION, self._query)
        table.register(RequestCode.UNREGISTER_BROKER, self.processors.unregister_broker)
        self.server = RemotingServer(table)
        await self.server.start()
        return f"127.0.0.1:{self.server.port}"

    async def _register(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        compressed = get_bool(cmd.ext_fields, "compressed")
        self.registers.append((cmd.ext_fields.get(PART_FIELD, ""), compressed, len(cmd.body)))
        if compressed and self.refuse_compressed:  # what sievemq name servers before compression answered
            return cmd.response(ResponseCode.SYSTEM_ERROR, "compressed RegisterBrokerBody is not supported")
        return await self.processors.register_broker(conn, cmd)

    async def _query(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        self.queries += 1
        return await self.processors.query_data_version(conn, cmd)

    def topics(self) -> int:
        return sum(1 for q in self.processors.routes.topic_queues.values() if "broker-a" in q)

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop()


def preload_topics(cluster: Cluster, label: str, count: int) -> None:
    """Write the broker's topics.json before it starts: ``count`` topics of 4 queues."""
    config = cluster.tmp / label / "config"
    config.mkdir(parents=True, exist_ok=True)
    table = {
        f"scale-{i:06d}": {"topicName": f"scale-{i:06d}", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}
        for i in range(count)
    }
    doc = {"dataVersion": {"counter": 1, "timestamp": 1_700_000_000_000}, "topicConfigTable": table}
    Path(config / "topics.json").write_bytes(orjson.dumps(doc))


async def settled(rec: Recorder, rounds: int = 2) -> int:
    """Wait until ``rounds`` more periodic rounds reached the recorder; the REGISTER_BROKERs seen by then."""
    before = rec.queries
    await eventually(lambda: rec.queries >= before + rounds, timeout=30.0, what=f"{rounds} periodic rounds")
    return len(rec.registers)


async def test_100k_topics_compressed_and_split_then_only_changes(cluster: Cluster, open_conn: OpenConn) -> None:
    ns = cluster.namesrv()
    rec = Recorder()
    rec_addr = await rec.start()
    try:
        preload_topics(cluster, "broker-a", SCALE)
        # started beside the event loop: the recorder must answer the broker's first registration meanwhile
        broker = await asyncio.to_thread(cluster.broker, f"{ns.addr};{rec_addr}", "broker-a",
                                         "--enable-split-registration", "true", "--split-registration-size", "5000",
                                         "--max-topics", "200000")  # fmt: skip
        total = SCALE + SYSTEM_TOPICS
        parts = math.ceil(total / 5000)
        nsc = await open_conn(ns)
        route = await eventually(lambda: route_or_none(nsc, f"scale-{SCALE - 1:06d}"), timeout=60.0, what="route")
        assert [(q.broker_name, q.write_queue_nums) for q in route.queue_datas] == [("broker-a", 4)]
        listed = orjson.loads((await call(nsc, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).body)["topicList"]
        assert len(listed) == total
        await eventually(lambda: rec.topics() == total, what="every part at the recorder too")
        first = rec.registers[:parts]
        assert [p for p, _, _ in first] == [f"{i}/{parts}" for i in range(1, parts + 1)]
        assert all(compressed for _, compressed, _ in first)
        size = sum(n for _, _, n in first)
        assert size < 1_000_000, f"{size} bytes for {total} topics (JSON: about 15 MB)"

        # nothing changes: the periodic rounds ask the data version only
        sent = await settled(rec)
        assert await settled(rec) == sent, "a round sent the table although nothing changed"

        # a topic created: sent alone at once (an increment, unmarked), then the whole table once more
        bc = await open_conn(broker)
        await create_topic(bc, "AddedLater", queues=2)
        await eventually(lambda: route_or_none(nsc, "AddedLater"), what="route of the new topic")
        await eventually(lambda: rec.processors.routes.route("AddedLater"), what="route at the recorder")
        part, compressed, size = rec.registers[sent]
        assert (part, compressed) == ("", False) and size < 2000, rec.registers[sent]
        await eventually(lambda: len(rec.registers) >= sent + 1 + parts, what="the whole table once more")
        assert [p for p, _, _ in rec.registers[sent + 1 : sent + 1 + parts]] == [
            f"{i}/{parts}" for i in range(1, parts + 1)
        ]
        sent = await settled(rec)
        assert await settled(rec) == sent, "a round sent the table although nothing changed"
        # a topic deleted on the broker only: gone from the routes once every part of the table arrived
        resp = await call(bc, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "scale-000042"})
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        await eventually(lambda: _gone(nsc, "scale-000042"), what="the deleted topic leaves the routes")
        assert await route_or_none(nsc, f"scale-{SCALE - 1:06d}") is not None
    finally:
        await rec.stop()


async def _gone(nsc: Connection, topic: str) -> bool:
    return await route_or_none(nsc, topic) is None


async def test_a_name_server_that_lost_the_broker_gets_the_table_again(cluster: Cluster, open_conn: OpenConn) -> None:
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-a")
    bc = await open_conn(broker)
    await create_topic(bc, "Kept", queues=3)
    nsc = await open_conn(ns)
    await eventually(lambda: route_or_none(nsc, "Kept"), what="route")
    nsc.close()
    ns.kill9()
    again = cluster.restart(ns)  # a new name server process on the same port: it knows no broker
    nsc = await open_conn(again)
    route = await eventually(lambda: route_or_none(nsc, "Kept"), timeout=30.0, what="route after the restart")
    assert route.queue_datas[0].write_queue_nums == 3


async def test_a_name_server_refusing_compressed_bodies_gets_json(cluster: Cluster, open_conn: OpenConn) -> None:
    ns = cluster.namesrv()
    rec = Recorder(refuse_compressed=True)
    rec_addr = await rec.start()
    try:
        preload_topics(cluster, "broker-a", 1500)  # compressed from 1000 topics on
        broker: Proc = await asyncio.to_thread(
            cluster.broker, f"{ns.addr};{rec_addr}", "broker-a", "--max-topics", "5000"
        )
        await eventually(lambda: rec.topics() == 1500 + SYSTEM_TOPICS, timeout=30.0, what="JSON registration")
        assert [c for _, c, _ in rec.registers[:2]] == [True, False]
        nsc = await open_conn(ns)
        await eventually(lambda: route_or_none(nsc, "scale-001499"), what="the other name server took it compressed")
        bc = await open_conn(broker)
        await create_topic(bc, "Later")
        await eventually(lambda: rec.processors.routes.route("Later"), what="the change, JSON")
        assert not any(c for _, c, _ in rec.registers[2:]), "compressed again after a refusal"
    finally:
        await rec.stop()
