"""Connection.request: responses matched by opaque, timeouts, cancellation (no leftover pending requests)."""

from __future__ import annotations

import asyncio

import pytest

from sievemq.errors import RequestTimeoutError
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection, connect
from sievemq.remoting.server import ProcessorTable, RemotingServer

ECHO, SILENT = 9001, 9002


async def _server() -> RemotingServer:
    table = ProcessorTable("test")

    async def echo(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(0, None, {"seen": cmd.ext_fields.get("x", "")})

    async def silent(conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        await asyncio.sleep(3600)
        return None

    table.register(ECHO, echo)
    table.register(SILENT, silent)
    server = RemotingServer(table)
    await server.start()
    return server


async def test_request_response_timeout_and_cancel() -> None:
    server = await _server()
    conn = await connect("127.0.0.1", server.port)
    try:
        answers = await asyncio.gather(*(conn.request(RemotingCommand.request(ECHO, {"x": i}), 5.0) for i in range(20)))
        assert [a.ext_fields["seen"] for a in answers] == [str(i) for i in range(20)]

        with pytest.raises(RequestTimeoutError, match=f"no response to request code {SILENT} .* in 0.1s"):
            await conn.request(RemotingCommand.request(SILENT), 0.1)
        assert not conn._pending

        task = asyncio.ensure_future(conn.request(RemotingCommand.request(SILENT), 30.0))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not conn._pending

        # the connection still works after both
        assert (await conn.request(RemotingCommand.request(ECHO, {"x": "after"}), 5.0)).ext_fields["seen"] == "after"
    finally:
        conn.close()
        await server.stop()
