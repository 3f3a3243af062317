"""ServerGuard without sockets: the sweep's frame, first-frame and idle timeouts, the connection cap from injected
descriptor counts and per peer IP, who gives way at the cap, the out-of-descriptors error, and asyncio's accept
failures turned into one rate-limited line."""

from __future__ import annotations

import asyncio
import errno
import logging
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from sievemq.remoting.connection import Connection
from sievemq.remoting.guard import ACCEPT_OUT_OF_RESOURCES, ServerGuard
from sievemq.remoting.limits import ServerLimits


@dataclass(eq=False)
class FakeConn:
    peer: tuple[str, int] = ("10.0.0.1", 5000)
    partial_bytes: int = 0
    partial_since: float = 0.0
    shed_calls: int = field(default=0)
    close_calls: int = field(default=0)
    slotted: bool = False
    opened_at: float = 0.0
    last_active: float = 0.0
    busy: bool = False
    peer_key: str = ""

    def __post_init__(self) -> None:
        self.peer_key = self.peer[0]

    def shed(self) -> None:
        self.shed_calls += 1

    def close(self) -> None:
        self.close_calls += 1


def _admit(guard: ServerGuard, conns: set[Any], conn: FakeConn, at: float = 0.0, proven: bool = True) -> bool:
    """What a served connection does: joins the server's set, is admitted, maybe completes a frame."""
    conn.opened_at = conn.last_active = at
    conns.add(conn)
    if not guard.admit(cast(Connection, conn)):
        conns.discard(conn)
        return False
    if proven:
        guard.proven(cast(Connection, conn))
    return True


def _guard(limits: ServerLimits, conns: set[Any], counts: tuple[int | None, int | None]) -> ServerGuard:
    return ServerGuard(limits, cast(set[Connection], conns), lambda: counts)


def _messages(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level]


def test_sweep_closes_overdue_frames_once_each_and_logs_once_per_peer(caplog: pytest.LogCaptureFixture) -> None:
    a1, a2 = FakeConn(("10.0.0.1", 1)), FakeConn(("10.0.0.1", 2))
    b, fresh, idle = FakeConn(("10.0.0.2", 3)), FakeConn(("10.0.0.3", 4)), FakeConn(("10.0.0.4", 5))
    conns: set[Any] = {a1, a2, b, fresh, idle}
    guard = _guard(ServerLimits(frame_timeout=30.0), conns, (None, None))
    for c in (a1, a2, b):
        guard.partial.hold(c, 1000, False, 100.0)
    guard.partial.hold(fresh, 10, False, 125.0)
    with caplog.at_level(logging.WARNING, "sievemq.remoting"):
        guard.sweep(131.0)
    assert [c.shed_calls for c in (a1, a2, b, fresh, idle)] == [1, 1, 1, 0, 0]
    assert guard.partial.total == 10  # only fresh's bytes are still counted
    lines = _messages(caplog, logging.WARNING)
    assert len(lines) == 2, lines  # 10.0.0.1 had two offenders: one line
    assert all("a frame still incomplete 30 s after its first byte" in line for line in lines)


def test_the_cap_follows_the_descriptor_limit_and_refusals_name_it(caplog: pytest.LogCaptureFixture) -> None:
    conns: set[Any] = set()
    guard = _guard(ServerLimits(fd_reserve=32), conns, (200, 150))  # 50 descriptors open for other uses
    for _ in range(100):
        assert _admit(guard, conns, FakeConn(), at=1000.0)
    guard.sweep(1000.0)  # the first sweep counts
    assert guard.cap == 200 - 50 - 32
    while guard.slots.total < guard.cap:
        assert _admit(guard, conns, FakeConn())
    with caplog.at_level(logging.ERROR, "sievemq.remoting"):
        for _ in range(20):
            assert not _admit(guard, conns, FakeConn(("10.1.1.1", 7)))  # every one proven: nobody gives way
    (line,) = _messages(caplog, logging.ERROR)
    assert "refusing connection from 10.1.1.1:7" in line and "118 connections open, the cap is 118" in line
    assert "RLIMIT_NOFILE 200 less 50 descriptors open for other uses and a reserve of 32" in line
    assert guard.closed == {"cap": 20}


def test_running_out_of_descriptors_is_an_error_line(caplog: pytest.LogCaptureFixture) -> None:
    conns: set[Any] = set()
    guard = _guard(ServerLimits(), conns, (64, 64))
    for _ in range(10):
        _admit(guard, conns, FakeConn(), at=1000.0)
    with caplog.at_level(logging.ERROR, "sievemq.remoting"):
        guard.sweep(1000.0)
        guard.sweep(1001.0)  # counted again (near the cap), not logged again (rate limit)
    (line,) = _messages(caplog, logging.ERROR)
    assert "out of file descriptors: all 64 of RLIMIT_NOFILE are open (10 connections" in line
    assert guard.cap == 0


def test_one_peer_ip_cannot_take_more_than_its_cap(caplog: pytest.LogCaptureFixture) -> None:
    conns: set[Any] = set()
    guard = _guard(ServerLimits(max_connections_per_ip=3), conns, (None, None))
    mine = [FakeConn(("10.0.0.1", i)) for i in range(3)]
    assert all(_admit(guard, conns, c) for c in mine)
    with caplog.at_level(logging.WARNING, "sievemq.remoting"):
        for i in range(10):
            assert not _admit(guard, conns, FakeConn(("10.0.0.1", 100 + i)))
    assert _admit(guard, conns, FakeConn(("10.0.0.2", 1)))  # another peer is served
    (line,) = _messages(caplog, logging.WARNING)  # one line per peer per interval
    assert "refusing connection from 10.0.0.1:100: 3 connections from 10.0.0.1 are open" in line
    guard.left(cast(Connection, mine[0]))
    guard.left(cast(Connection, mine[0]))  # idempotent
    assert guard.slots.count("10.0.0.1") == 2
    assert _admit(guard, conns, FakeConn(("10.0.0.1", 200)))  # room again
    assert guard.closed == {"peer_cap": 10}


def test_at_the_cap_a_peer_with_fewer_connections_takes_an_unproven_ones_place() -> None:
    conns: set[Any] = set()
    guard = _guard(ServerLimits(max_connections=6), conns, (None, None))
    guard.sweep(1000.0)
    busy = [FakeConn(("10.0.0.1", i)) for i in range(2)]
    silent = [FakeConn(("10.0.0.1", 10 + i)) for i in range(3)]
    for c in busy:
        assert _admit(guard, conns, c)
    for c in silent:
        assert _admit(guard, conns, c, proven=False)  # connected, never completed a frame
    assert _admit(guard, conns, FakeConn(("10.0.0.2", 1)))  # 6: the cap
    newcomer = FakeConn(("10.0.0.3", 1))
    assert _admit(guard, conns, newcomer)
    assert [c.shed_calls for c in silent] == [1, 0, 0]  # the oldest unproven one of the biggest peer gave way
    assert guard.slots.total == 6 and guard.slots.count("10.0.0.1") == 4
    assert not _admit(guard, conns, FakeConn(("10.0.0.1", 99)))  # the biggest peer cannot push others out
    assert guard.closed == {"evicted": 1, "cap": 1}


def test_the_sweep_closes_unproven_connections_in_time_and_idle_ones() -> None:
    conns: set[Any] = set()
    guard = _guard(ServerLimits(first_frame_timeout=5.0, idle_timeout=60.0), conns, (None, None))
    never = [FakeConn(("10.0.0.1", i)) for i in range(3)]
    for i, c in enumerate(never):
        _admit(guard, conns, c, at=100.0 + i, proven=False)
    served = FakeConn(("10.0.0.2", 1))
    _admit(guard, conns, served, at=100.0)
    holding = FakeConn(("10.0.0.3", 1), busy=True)  # a held long-polling pull: silent, but not idle
    _admit(guard, conns, holding, at=100.0)
    guard.sweep(106.5)  # the first two connected more than 5 s ago
    assert [c.shed_calls for c in never] == [1, 1, 0]
    guard.sweep(159.0)
    assert never[2].shed_calls == 1 and served.close_calls == 0  # 59 s without a byte: not yet idle
    served.last_active = 150.0
    guard.sweep(161.0)
    assert served.close_calls == 0
    guard.sweep(210.5)
    assert served.close_calls == 1 and holding.close_calls == 0
    assert guard.closed == {"first_frame_timeout": 3, "idle": 1}
    assert guard.slots.total == 1  # the busy one


def test_an_idle_timeout_of_zero_closes_nobody() -> None:
    conns: set[Any] = set()
    guard = _guard(ServerLimits(idle_timeout=0.0), conns, (None, None))
    c = FakeConn()
    _admit(guard, conns, c, at=0.0)
    guard.sweep(1e6)
    assert c.close_calls == 0 and c.shed_calls == 0


@dataclass
class FakeSocket:
    fd: int

    def fileno(self) -> int:
        return self.fd

    def getsockname(self) -> tuple[str, int]:
        return ("127.0.0.1", 4242)


@dataclass
class FakeServer:
    sockets: list[FakeSocket]


async def test_asyncio_accept_failures_become_one_error_line_and_others_pass_through(
    caplog: pytest.LogCaptureFixture,
) -> None:
    loop = asyncio.get_running_loop()
    seen: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, ctx: seen.append(ctx))
    guard = _guard(ServerLimits(), set(), (1024, 20))
    guard.start(cast(asyncio.Server, FakeServer([FakeSocket(7)])))
    try:
        emfile = OSError(errno.EMFILE, "Too many open files")
        with caplog.at_level(logging.ERROR, "sievemq.remoting"):
            for _ in range(5):  # asyncio retries every second: one line, not five
                loop.call_exception_handler(
                    {"message": ACCEPT_OUT_OF_RESOURCES, "exception": emfile, "socket": FakeSocket(7)}
                )
        loop.call_exception_handler({"message": ACCEPT_OUT_OF_RESOURCES, "socket": FakeSocket(8)})  # not ours
        loop.call_exception_handler({"message": "something else"})
        (line,) = _messages(caplog, logging.ERROR)
        assert "cannot accept connections on port 4242: [Errno 24] Too many open files (RLIMIT_NOFILE 1024" in line
        assert [ctx.get("socket") for ctx in seen] == [FakeSocket(8), None]
    finally:
        guard.stop()
    loop.call_exception_handler({"message": "after stop"})
    assert seen[-1] == {"message": "after stop"}  # the previous handler is back
