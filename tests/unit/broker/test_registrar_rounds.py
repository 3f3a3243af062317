"""The broker's registrar (broker/registration.py) against sievemq's name-server processors in this process: the
bodies it builds, rounds that ask the data version first, parts, and a refused compressed body sent again as JSON."""

from __future__ import annotations

import asyncio

from sievemq.broker.registration import NamesrvRegistrar, RegisterSettings, TableSnapshot, encode_table
from sievemq.namesrv.processors import NamesrvProcessors
from sievemq.namesrv.routes import RouteTable
from sievemq.protocol import register_body as rb
from sievemq.protocol.route import TopicConfig
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.server import ProcessorTable, RemotingServer

HEADER = {"brokerAddr": "127.0.0.1:1", "brokerId": 0, "brokerName": "b", "clusterName": "c", "haServerAddr": ""}


def snap(n: int, counter: int = 1) -> TableSnapshot:
    return TableSnapshot({"counter": counter, "timestamp": 5}, [TopicConfig(f"t{i}", 2, 2) for i in range(n)], [])


def test_bodies_compressed_from_the_threshold_and_split_in_parts() -> None:
    small = encode_table(snap(999), RegisterSettings())
    assert not small.compressed and len(small.parts) == 1 and len(rb.decode_json(small.parts[0]).topics) == 999
    big = encode_table(snap(1000), RegisterSettings())
    assert big.compressed and len(rb.decode_compressed(big.parts[0]).topics) == 1000
    assert not encode_table(snap(5000), RegisterSettings(compressed=False)).compressed
    split = encode_table(snap(2001), RegisterSettings(split=True, split_size=800))
    assert [len(rb.decode_compressed(p).topics) for p in split.parts] == [800, 800, 401]
    assert all(rb.decode_compressed(p).data_version["counter"] == 1 for p in split.parts)
    assert len(encode_table(snap(0), RegisterSettings(split=True)).parts) == 1  # an empty table still registers


async def test_rounds_ask_first_send_parts_and_fall_back_to_json() -> None:
    procs = NamesrvProcessors(RouteTable())
    seen: list[tuple[int, str, bool]] = []
    refuse_compressed = [True]

    async def register(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        compressed = str(cmd.ext_fields.get("compressed")).lower() == "true"
        seen.append((cmd.code, cmd.ext_fields.get(rb.PART_FIELD, ""), compressed))
        if compressed and refuse_compressed[0]:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "compressed RegisterBrokerBody is not supported")
        return await procs.register_broker(conn, cmd)

    async def query(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        seen.append((cmd.code, "", False))
        return await procs.query_data_version(conn, cmd)

    table = ProcessorTable("name server")
    table.register(RequestCode.REGISTER_BROKER, register)
    table.register(RequestCode.QUERY_DATA_VERSION, query)
    table.register(RequestCode.UNREGISTER_BROKER, procs.unregister_broker)
    server = RemotingServer(table)
    await server.start()
    current = [snap(1500)]
    reg = NamesrvRegistrar([f"127.0.0.1:{server.port}"], HEADER, lambda: current[0], 30.0,
                           settings=RegisterSettings(split=True, split_size=1000))  # fmt: skip
    try:
        assert await reg.register_all(force=False) == {f"127.0.0.1:{server.port}": True}
        reg_code = RequestCode.REGISTER_BROKER
        assert seen == [(reg_code, "1/2", True), (reg_code, "1/2", False), (reg_code, "2/2", False)]
        assert len(procs.routes.topic_queues) == 1500
        seen.clear()
        assert (await reg.register_all(force=False)) and seen == [(RequestCode.QUERY_DATA_VERSION, "", False)]
        assert reg.unchanged == 1
        seen.clear()
        current[0] = snap(1400, counter=2)  # a new version: the table again, JSON (this name server refused zlib)
        refuse_compressed[0] = False
        await reg.register_all(force=False)
        assert seen == [(reg_code, "1/2", False), (reg_code, "2/2", False)]
        assert len(procs.routes.topic_queues) == 1400  # the last part removed the 100 it no longer lists
        procs.routes.live.clear()  # the name server lost the broker: the query says so, the table goes again
        seen.clear()
        await reg.register_all(force=False)
        assert [c for c, _, _ in seen] == [RequestCode.QUERY_DATA_VERSION, reg_code, reg_code]
        # a topic changed and one created (a kick or register_now: forced): only they go, unmarked
        topics = list(current[0].topics)
        topics[0] = TopicConfig("t0", 8, 8)
        current[0] = TableSnapshot({"counter": 3, "timestamp": 5}, [*topics, TopicConfig("fresh", 1, 1)], [])
        seen.clear()
        await reg.register_all()
        assert seen == [(reg_code, "", False)] and reg.increments == 1
        assert procs.routes.topic_queues["t0"]["b"].write_queue_nums == 8 and "fresh" in procs.routes.topic_queues
        assert len(procs.routes.topic_queues) == 1401
        # the next periodic round sends the whole table once (no question first), then rounds only ask again
        seen.clear()
        await reg.register_all(force=False)
        assert seen == [(reg_code, "1/2", False), (reg_code, "2/2", False)]
        seen.clear()
        await reg.register_all(force=False)
        assert seen == [(RequestCode.QUERY_DATA_VERSION, "", False)]
        # a topic removed: the whole table, whose last part removes it
        current[0] = TableSnapshot({"counter": 4, "timestamp": 5}, current[0].topics[1:], [])
        seen.clear()
        await reg.register_all()
        assert [p for _, p, _ in seen] == ["1/2", "2/2"] and "t0" not in procs.routes.topic_queues
    finally:
        await reg.stop()
        await server.stop()


async def test_concurrent_forced_registrations_share_rounds() -> None:
    procs = NamesrvProcessors(RouteTable())
    count = [0]

    async def register(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        count[0] += 1
        return await procs.register_broker(conn, cmd)

    table = ProcessorTable("name server")
    table.register(RequestCode.REGISTER_BROKER, register)
    table.register(RequestCode.UNREGISTER_BROKER, procs.unregister_broker)
    server = RemotingServer(table)
    await server.start()
    reg = NamesrvRegistrar([f"127.0.0.1:{server.port}"], HEADER, lambda: snap(10), 30.0)
    try:
        results = await asyncio.gather(*(reg.register_all() for _ in range(20)))  # e.g. 20 topics created at once
        assert all(r == {f"127.0.0.1:{server.port}": True} for r in results)
        assert count[0] <= 2, count[0]
    finally:
        await reg.stop()
        await server.stop()
