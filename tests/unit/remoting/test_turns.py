"""A connection starts the requests it read within a budget of the loop's turn (``connection.TURN_BUDGET``): slow
requests read together are served over several turns, in the order they came, and other work runs in between."""

from __future__ import annotations

import asyncio
import itertools
import socket
import time

from sievemq.remoting.command import FrameDecoder, RemotingCommand, encode
from sievemq.remoting.connection import TURN_BUDGET
from sievemq.remoting.server import ProcessorTable, RemotingServer

SLOW = 1
FAST = 2


class Turns:
    """Counts the loop's turns: a callback that schedules itself again with ``call_soon`` runs once per turn."""

    def __init__(self) -> None:
        self.count = 0
        self.running = True

    def tick(self) -> None:
        if self.running:
            self.count += 1
            asyncio.get_running_loop().call_soon(self.tick)


async def _answers(s: socket.socket, count: int) -> list[int]:
    loop, decoder = asyncio.get_running_loop(), FrameDecoder()
    opaques: list[int] = []
    while len(opaques) < count:
        data = await asyncio.wait_for(loop.sock_recv(s, 1 << 16), 10.0)
        assert data, f"closed after {len(opaques)} answers"
        opaques += [c.opaque for c in decoder.feed(data)]
    return opaques


async def _serve(turns: Turns, seen: list[tuple[int, int]]) -> RemotingServer:
    table = ProcessorTable("test")

    def slow(_conn: object, cmd: RemotingCommand) -> RemotingCommand:  # answered at once, after a long step
        seen.append((cmd.opaque, turns.count))
        end = time.monotonic() + TURN_BUDGET * 1.5
        while time.monotonic() < end:
            pass
        return cmd.response()

    def fast(_conn: object, cmd: RemotingCommand) -> RemotingCommand:
        seen.append((cmd.opaque, turns.count))
        return cmd.response()

    table.register(SLOW, slow)  # type: ignore[arg-type]
    table.register(FAST, fast)  # type: ignore[arg-type]
    server = RemotingServer(table)
    await server.start()
    return server


async def _round(code: int, n: int) -> tuple[list[int], list[tuple[int, int]]]:
    turns, seen = Turns(), []  # type: ignore[var-annotated]
    server = await _serve(turns, seen)
    s = socket.create_connection(("127.0.0.1", server.port))
    s.setblocking(False)
    try:
        turns.tick()
        frames = b"".join(encode(RemotingCommand(code, opaque=i + 1)) for i in range(n))
        await asyncio.get_running_loop().sock_sendall(s, frames)
        answered = await _answers(s, n)
    finally:
        turns.running = False
        s.close()
        await server.stop()
    return answered, seen


async def test_slow_requests_read_together_are_started_over_several_turns_in_order() -> None:
    answered, seen = await _round(SLOW, 6)
    assert answered == [1, 2, 3, 4, 5, 6]
    assert [opaque for opaque, _ in seen] == [1, 2, 3, 4, 5, 6]
    started_in = [turn for _, turn in seen]
    # each one spends more than the budget: the next one waits for a later turn, whatever the reads were
    assert all(a < b for a, b in itertools.pairwise(started_in)), started_in


async def test_fast_requests_are_all_answered_in_order() -> None:
    answered, seen = await _round(FAST, 50)
    assert answered == list(range(1, 51))
    assert [opaque for opaque, _ in seen] == list(range(1, 51))
