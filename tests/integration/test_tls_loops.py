"""A RemotingServer with TLS in this process, on both event loops sievemq runs on (asyncio's and uvloop, the
broker's): TLS and plain clients on one port at once, large frames, refused and failed connections."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from sievemq.errors import ConnectionClosedError
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection, connect
from sievemq.remoting.server import ProcessorTable, RemotingServer
from sievemq.remoting.tls import ClientTls, ServerTls, server_context
from tests.support.certs import Certs, make_certs

ECHO = 4242


def run_on(loop_name: str, coro: Callable[[], Coroutine[Any, Any, None]]) -> None:
    if loop_name == "uvloop":
        import uvloop

        uvloop.run(coro())
    else:
        asyncio.run(coro())


LOOPS = pytest.mark.parametrize("loop_name", ["asyncio", "uvloop"])


def closed_after(port: int, data: bytes) -> None:
    """Send ``data`` on a new connection; returns once the server has closed it (a TLS alert may come first)."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(data)
        s.settimeout(3.0)
        try:
            while s.recv(4096):
                pass
        except ConnectionResetError:
            pass


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("pki"))


async def serve(certs: Certs, mode: Any) -> RemotingServer:
    table = ProcessorTable("test")

    async def echo(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(0, "tls" if conn._transport.get_extra_info("ssl_object") else "plain", body=cmd.body)

    table.register(ECHO, echo)
    context = server_context(str(certs.server.cert), str(certs.server.key))
    server = RemotingServer(table, tls=ServerTls(mode, context))
    await server.start()
    return server


async def echo_many(conn: Connection, n: int, size: int) -> set[str]:
    answers = await asyncio.gather(
        *(conn.request(RemotingCommand.request(ECHO, body=bytes([i % 251]) * size), 10.0) for i in range(n))
    )
    for i, a in enumerate(answers):
        assert a.body == bytes([i % 251]) * size
    return {a.remark or "" for a in answers}


@LOOPS
def test_permissive_serves_tls_and_plain_at_once(loop_name: str, certs: Certs) -> None:
    async def go() -> None:
        server = await serve(certs, "permissive")
        tls = ClientTls(ca_file=str(certs.ca.cert)).context()
        try:
            secure = await connect("127.0.0.1", server.port, tls=tls)
            plain = await connect("127.0.0.1", server.port)
            kinds = await asyncio.gather(echo_many(secure, 200, 1000), echo_many(plain, 200, 1000))
            assert kinds == [{"tls"}, {"plain"}]
            assert await echo_many(secure, 2, 4 * 1024 * 1024) == {"tls"}  # frames over many TLS records
            assert len(server.connections) == 2
            secure.close()
            plain.close()
        finally:
            await server.stop()

    run_on(loop_name, go)


@LOOPS
def test_enforcing_closes_plain_and_bad_handshakes_only(loop_name: str, certs: Certs) -> None:
    async def go() -> None:
        server = await serve(certs, "enforcing")
        try:
            good = await connect("127.0.0.1", server.port, tls=ClientTls(ca_file=str(certs.ca.cert)).context())
            plain = await connect("127.0.0.1", server.port)
            with pytest.raises(ConnectionClosedError):
                await plain.request(RemotingCommand.request(ECHO, body=b"x"), 3.0)
            for junk in (b"\x16\x03\x01\x00\x05hello", b"\x16" + b"\xff" * 64):
                await asyncio.to_thread(closed_after, server.port, junk)
            untrusting = ClientTls(ca_file=str(certs.rogue_ca.cert)).context()
            with pytest.raises(ConnectionClosedError, match="not trusted"):
                await connect("127.0.0.1", server.port, tls=untrusting)
            assert await echo_many(good, 50, 100) == {"tls"}  # the good connection never noticed
            await asyncio.sleep(0.1)
            assert server.acceptor is not None and server.acceptor.refused == 1
            assert server.acceptor.failed == 3 and not server.acceptor.pending
            assert len(server.connections) == 1
            good.close()
        finally:
            await server.stop()

    run_on(loop_name, go)


def test_disabled_mode_has_no_gate(certs: Certs, tmp_path: Path) -> None:
    async def go() -> None:
        server = await serve(certs, "disabled")
        try:
            assert server.acceptor is None
            conn = await connect("127.0.0.1", server.port)
            assert type(conn._transport).__name__ == "_SelectorSocketTransport"  # the loop's own, no wrapper
            assert await echo_many(conn, 3, 10) == {"plain"}
            with pytest.raises(ConnectionClosedError, match=r"TLS handshake .* failed"):
                await connect("127.0.0.1", server.port, tls=ClientTls(ca_file=str(certs.ca.cert)).context())
            conn.close()
        finally:
            await server.stop()

    asyncio.run(go())
