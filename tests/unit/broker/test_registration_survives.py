"""The periodic registration survives a round that fails before sending (a body that cannot be built)."""

from __future__ import annotations

import asyncio
from typing import Any

from sievemq.broker.registration import NamesrvRegistrar
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.server import ProcessorTable, RemotingServer


async def test_a_failing_round_is_logged_counted_and_the_next_one_registers() -> None:
    got: list[RemotingCommand] = []

    async def register(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        got.append(cmd)
        return cmd.response(ResponseCode.SUCCESS)

    table = ProcessorTable("name server")
    table.register(RequestCode.REGISTER_BROKER, register)
    server = RemotingServer(table)
    await server.start()
    calls = 0

    def body() -> dict[str, Any]:
        nonlocal calls
        calls += 1
        if calls <= 2:
            return {"bad": 10**30}  # orjson cannot serialise it: the round fails before any request
        return {"topicConfigSerializeWrapper": {"topicConfigTable": {}}}

    header = {"brokerAddr": "127.0.0.1:1", "brokerId": 0, "brokerName": "b", "clusterName": "c"}
    reg = NamesrvRegistrar([f"127.0.0.1:{server.port}"], header, body, interval=0.02)
    reg.start()
    try:
        for _ in range(500):
            if got:
                break
            await asyncio.sleep(0.01)
        assert got, "the registration loop died after a failed round"
        assert reg.failures == 2
    finally:
        await reg.stop()
        await server.stop()
