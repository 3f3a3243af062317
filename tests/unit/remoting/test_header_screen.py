"""A RemotingServer with a header screen (ACL on) over loopback: a large frame's header is checked before its body
is read; a refused one is answered (code, remark, reason) and its connection closed without reading the rest.
The broker-level test with the real ACL file is tests/robustness/test_connection_limits.py."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import AsyncIterator

import pytest

from sievemq.errors import RemotingError
from sievemq.protocol.reasons import REASON_FIELD
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.command import FLAG_ONEWAY, FLAG_RESPONSE, FrameDecoder, RemotingCommand, encode, encode_header
from sievemq.remoting.connection import Connection
from sievemq.remoting.limits import MiB, ServerLimits
from sievemq.remoting.server import ProcessorTable, RemotingServer

ECHO = 9201
SCREEN = 1024


def screen(peer: str, cmd: RemotingCommand) -> None:
    """Lets through frames whose header says ``AccessKey = good``."""
    if cmd.ext_fields.get("AccessKey") != "good":
        raise RemotingError(ResponseCode.NO_PERMISSION, "who are you?", "ACL_UNKNOWN_ACCOUNT")


@pytest.fixture
async def server() -> AsyncIterator[RemotingServer]:
    table = ProcessorTable("test")

    async def echo(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(0, None, {"size": len(cmd.body)})

    table.register(ECHO, echo)
    server = RemotingServer(table, limits=ServerLimits(screen_bytes=SCREEN), screen=screen)
    await server.start()
    yield server
    await server.stop()


async def _connect(server: RemotingServer, socks: list[socket.socket]) -> socket.socket:
    s = socket.socket()
    s.setblocking(False)
    await asyncio.get_running_loop().sock_connect(s, ("127.0.0.1", server.port))
    socks.append(s)
    return s


def _head(cmd: RemotingCommand, body_length: int) -> bytes:
    """The prefix and header of ``cmd`` as a frame announcing a body of ``body_length`` bytes."""
    header = encode_header(cmd)
    return struct.pack(">ii", 4 + len(header) + body_length, len(header)) + header


async def _answers_then_eof(s: socket.socket, timeout: float = 3.0) -> list[RemotingCommand]:
    """Every frame the server sends on ``s`` until it closes it (fails if it does not within ``timeout``)."""
    loop, decoder, out = asyncio.get_running_loop(), FrameDecoder(), []
    while True:
        try:
            data = await asyncio.wait_for(loop.sock_recv(s, 1 << 16), timeout)
        except ConnectionResetError:
            return out
        if not data:
            return out
        out += decoder.feed(data)


def _request(fields: dict[str, str], flag: int = 0, opaque: int = 7) -> RemotingCommand:
    cmd = RemotingCommand.request(ECHO, fields)
    cmd.opaque, cmd.flag = opaque, flag
    return cmd


async def test_a_large_frame_without_the_account_is_answered_and_closed_before_its_body(
    server: RemotingServer, raw: list[socket.socket]
) -> None:
    s = await _connect(server, raw)
    await asyncio.get_running_loop().sock_sendall(s, _head(_request({"AccessKey": "bad"}), 15 * MiB) + b"x")
    (answer,) = await _answers_then_eof(s)  # the other 15 MiB are never sent
    assert answer.code == ResponseCode.NO_PERMISSION and answer.opaque == 7 and answer.remark == "who are you?"
    assert answer.ext_fields[REASON_FIELD] == "ACL_UNKNOWN_ACCOUNT"
    assert server.guard.closed == {"screened": 1} and server.guard.partial.total == 0


async def test_a_large_frame_of_a_known_account_and_small_frames_of_anyone_are_served(
    server: RemotingServer, raw: list[socket.socket]
) -> None:
    loop = asyncio.get_running_loop()
    s = await _connect(server, raw)
    big = _request({"AccessKey": "good"})
    big.body = bytes(2 * MiB)
    small = _request({}, opaque=8)
    small.body = bytes(SCREEN // 2)
    await loop.sock_sendall(s, encode(big) + encode(small))
    decoder: FrameDecoder = FrameDecoder()
    answers: list[RemotingCommand] = []
    while len(answers) < 2:
        answers += decoder.feed(await asyncio.wait_for(loop.sock_recv(s, 1 << 16), 3.0))
    assert [(a.opaque, a.code, a.ext_fields["size"]) for a in answers] == [(7, 0, str(2 * MiB)), (8, 0, "512")]


async def test_oneway_frames_unsolicited_responses_and_long_headers_are_closed_unanswered(
    server: RemotingServer, raw: list[socket.socket]
) -> None:
    loop = asyncio.get_running_loop()
    for cmd in (_request({}, FLAG_ONEWAY), _request({}, FLAG_RESPONSE)):
        s = await _connect(server, raw)
        await loop.sock_sendall(s, _head(cmd, MiB) + b"x")
        assert await _answers_then_eof(s) == []
    s = await _connect(server, raw)  # a header longer than the screen reads: refused from its prefix
    await loop.sock_sendall(s, struct.pack(">ii", MiB, SCREEN + 1) + b"{")
    assert await _answers_then_eof(s) == []
    assert server.guard.closed == {"screened": 3}


async def test_a_large_answer_to_the_servers_own_request_is_read(
    server: RemotingServer, raw: list[socket.socket]
) -> None:
    loop = asyncio.get_running_loop()
    s = await _connect(server, raw)
    await loop.sock_sendall(s, encode(_request({})))  # a small request: the server knows this client now
    await asyncio.wait_for(loop.sock_recv(s, 1 << 16), 3.0)
    (conn,) = server.connections
    asked = asyncio.ensure_future(conn.request(RemotingCommand.request(ECHO), 3.0))  # the server asks the client
    decoder: FrameDecoder = FrameDecoder()
    (question,) = decoder.feed(await asyncio.wait_for(loop.sock_recv(s, 1 << 16), 3.0))
    answer = question.response(0, None, None, bytes(MiB))  # unsigned, as clients answer
    await loop.sock_sendall(s, encode(answer))
    assert len((await asyncio.wait_for(asked, 3.0)).body) == MiB
    assert not conn.is_closed
