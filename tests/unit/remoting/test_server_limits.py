"""A RemotingServer's limits in one process over loopback (as tests/unit/remoting/test_connection.py): back-pressure
without dropping requests, the partial-frame budget, the frame timeout, the connection cap, warnings per peer.

The broker-level tests with real processes and memory bounds are tests/robustness/test_connection_limits.py.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from sievemq.remoting.command import FrameDecoder, RemotingCommand, encode
from sievemq.remoting.connection import Connection, connect
from sievemq.remoting.limits import MiB, ServerLimits
from sievemq.remoting.server import ProcessorTable, RemotingServer
from tests.support.quiet import quiet_period

BIG, HOLD, ECHO = 9101, 9102, 9103
ANSWER = 64 * 1024


class Served:
    """The test server's processors and what they saw."""

    def __init__(self) -> None:
        self.calls = 0
        self.release = asyncio.Event()

    def table(self) -> ProcessorTable:
        table = ProcessorTable("test")

        async def big(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
            self.calls += 1
            return cmd.response(0, None, None, b"x" * ANSWER)

        async def hold(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
            await self.release.wait()
            return cmd.response(0)

        async def echo(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
            return cmd.response(0, None, {"x": cmd.ext_fields.get("x", "")})

        table.register(BIG, big)
        table.register(HOLD, hold)
        table.register(ECHO, echo)
        return table


Start = Callable[..., Awaitable[RemotingServer]]


@pytest.fixture
async def served() -> Served:
    return Served()


@pytest.fixture
async def start(served: Served) -> AsyncIterator[Start]:
    """``await start(**limits)``: a server with those ServerLimits, stopped at the end of the test."""
    servers: list[RemotingServer] = []

    async def _start(**limits: object) -> RemotingServer:
        server = RemotingServer(served.table(), limits=ServerLimits(**limits))  # type: ignore[arg-type]
        await server.start()
        servers.append(server)
        return server

    yield _start
    for server in servers:
        await server.stop()


def _lines(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


async def _raw_connect(
    port: int, socks: list[socket.socket], rcvbuf: int | None = None, source: str | None = None
) -> socket.socket:
    """A raw client socket (from loopback address ``source``: warnings and shares are per peer IP)."""
    s = socket.socket()
    if source:
        s.bind((source, 0))
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.setblocking(False)
    await asyncio.get_running_loop().sock_connect(s, ("127.0.0.1", port))
    socks.append(s)
    return s


def _request(code: int, opaque: int) -> bytes:
    cmd = RemotingCommand.request(code, {"x": opaque})
    cmd.opaque = opaque
    return encode(cmd)


async def _wait(probe: Callable[[], bool], timeout: float = 3.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not probe():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


async def _closed(s: socket.socket, wait: float = 3.0) -> bool:
    """True when the peer closed ``s`` (EOF, or a reset: Linux resets when unread input is dropped); False when
    nothing came within ``wait`` seconds."""
    try:
        return await asyncio.wait_for(asyncio.get_running_loop().sock_recv(s, 10), wait) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


async def _read_answers(s: socket.socket, count: int) -> list[int]:
    loop, decoder, opaques = asyncio.get_running_loop(), FrameDecoder(), []
    while len(opaques) < count:
        data = await asyncio.wait_for(loop.sock_recv(s, 1 << 20), 5.0)
        assert data, f"closed after {len(opaques)} answers"
        opaques += [c.opaque for c in decoder.feed(data)]
    return opaques


async def test_unread_answers_pause_reading_and_every_request_is_answered_later(
    served: Served, start: Start, raw: list[socket.socket]
) -> None:
    server = await start(max_unsent_bytes=256 * 1024, max_requests_in_flight=8)
    s = await _raw_connect(server.port, raw, rcvbuf=64 * 1024)
    n = 2000
    sender = asyncio.ensure_future(
        asyncio.get_running_loop().sock_sendall(s, b"".join(_request(BIG, i + 1) for i in range(n)))
    )
    await _wait(lambda: served.calls > 0)
    (conn,) = server.connections
    gate = conn._gate
    assert gate is not None
    # the answers pile up unread: writing pauses at the mark, then reading stops
    await _wait(lambda: gate.write_paused and not gate.reading, timeout=10.0)
    assert conn._transport is not None
    unsent = conn._transport.get_write_buffer_size()
    # the mark, the answer that crossed it and one whose handler was already running
    assert unsent <= 256 * 1024 + 2 * (ANSWER + 1024), f"{unsent} bytes wait to be sent"
    assert served.calls < n / 4, f"{served.calls} of {n} answers were computed for a peer that reads none"
    assert gate.in_flight <= 8
    answered = await _read_answers(s, n)  # the peer reads at last: everything is answered, in order
    assert answered == list(range(1, n + 1))
    await sender
    assert served.calls == n
    await _wait(lambda: gate.reading)


async def test_held_requests_fill_the_cap_then_later_ones_wait_unread_not_dropped(served: Served, start: Start) -> None:
    server = await start(max_requests_in_flight=4)
    conn = await connect("127.0.0.1", server.port)
    held = [asyncio.ensure_future(conn.request(RemotingCommand.request(HOLD), 10.0)) for _ in range(4)]
    echo = asyncio.ensure_future(conn.request(RemotingCommand.request(ECHO, {"x": "late"}), 10.0))
    await quiet_period(0.2, "a fifth request served past the cap of 4", unchanged=echo.done)
    assert not echo.done(), "a fifth request was served past the cap of 4"
    served.release.set()
    assert (await echo).ext_fields["x"] == "late"
    assert all(r.code == 0 for r in await asyncio.gather(*held))
    conn.close()


def _frame_head(length: int) -> bytes:
    """The start of a JSON frame announcing ``length`` bytes (the header says nothing yet)."""
    return struct.pack(">ii", length, 100)


async def test_past_the_budget_the_peer_holding_the_most_is_closed_not_the_newcomer(
    start: Start, raw: list[socket.socket], caplog: pytest.LogCaptureFixture
) -> None:
    server = await start(partial_frame_budget=1 * MiB)
    loop = asyncio.get_running_loop()
    a = await _raw_connect(server.port, raw, source="127.0.0.2")
    await loop.sock_sendall(a, _frame_head(MiB) + b"\0" * (600 * 1024))
    await _wait(lambda: server.guard.partial.total >= 600 * 1024)
    b = await _raw_connect(server.port, raw, source="127.0.0.3")
    with caplog.at_level(logging.WARNING, "sievemq.remoting"):
        await loop.sock_sendall(b, _frame_head(MiB) + b"\0" * (600 * 1024))
        assert await _closed(a)  # a held the most when b's frame took the total past the budget
    await _wait(lambda: server.guard.partial.total == 8 + 600 * 1024)  # b is kept, a's bytes are released
    assert not await _closed(b, 0.2)
    lines = _lines(caplog, "budget")
    assert len(lines) == 1 and "127.0.0.2" in lines[0] and "budget of 1.0 MiB" in lines[0], lines
    assert server.guard.closed == {"partial_budget": 1}
    conn = await connect("127.0.0.1", server.port)  # others are served
    assert (await conn.request(RemotingCommand.request(ECHO, {"x": 1}), 3.0)).ext_fields["x"] == "1"
    conn.close()


async def test_an_incomplete_frame_times_out_but_a_busy_connection_does_not(
    start: Start, raw: list[socket.socket], caplog: pytest.LogCaptureFixture
) -> None:
    server = await start(frame_timeout=0.3)
    loop = asyncio.get_running_loop()
    stalled = await _raw_connect(server.port, raw)
    busy = await _raw_connect(server.port, raw)
    with caplog.at_level(logging.WARNING, "sievemq.remoting"):
        await loop.sock_sendall(stalled, _frame_head(1000) + b"\0" * 10)
        # busy sends frames in pieces that end mid-frame, for longer than the timeout: never idle that long
        frames = b"".join(_request(ECHO, i) for i in range(1, 200))
        for i in range(0, len(frames), 97):
            await loop.sock_sendall(busy, frames[i : i + 97])
            await asyncio.sleep(0.005)
        assert await _closed(stalled)
    assert len(await _read_answers(busy, 199)) == 199
    lines = _lines(caplog, "incomplete")
    assert len(lines) == 1 and "0.3 s after its first byte" in lines[0], lines


async def test_connections_over_the_cap_are_closed_with_one_error_line(
    start: Start, raw: list[socket.socket], caplog: pytest.LogCaptureFixture
) -> None:
    server = await start(max_connections=3)
    kept = [await connect("127.0.0.1", server.port) for _ in range(3)]
    with caplog.at_level(logging.ERROR, "sievemq.remoting"):
        for s in [await _raw_connect(server.port, raw) for _ in range(5)]:
            assert await _closed(s)
    lines = _lines(caplog, "refusing connection")
    assert len(lines) == 1 and "3 connections open, the cap is 3 (the configured maximum)" in lines[0], lines
    kept[0].close()
    await _wait(lambda: len(server.connections) == 2)
    again = await connect("127.0.0.1", server.port)  # room again: served
    assert (await again.request(RemotingCommand.request(ECHO, {"x": 2}), 3.0)).ext_fields["x"] == "2"
    for c in [*kept, again]:
        c.close()


async def test_bad_frame_warnings_are_limited_per_peer_ip(
    start: Start, raw: list[socket.socket], caplog: pytest.LogCaptureFixture
) -> None:
    server = await start()
    loop = asyncio.get_running_loop()
    with caplog.at_level(logging.WARNING, "sievemq.remoting"):
        for _ in range(50):
            s = await _raw_connect(server.port, raw)
            await loop.sock_sendall(s, struct.pack(">ii", -5, 0))
            assert await _closed(s)
    lines = _lines(caplog, "closing connection")
    assert len(lines) == 1 and "frame length -5" in lines[0], lines
