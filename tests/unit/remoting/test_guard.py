"""ServerGuard without sockets: the sweep's frame timeouts, the connection cap from injected descriptor counts,
the out-of-descriptors error, and asyncio's accept failures turned into one rate-limited line."""

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

    def shed(self) -> None:
        self.shed_calls += 1


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
    conns: set[Any] = {FakeConn() for _ in range(100)}
    guard = _guard(ServerLimits(fd_reserve=32), conns, (200, 150))  # 50 descriptors open for other uses
    guard.sweep(1000.0)  # the first sweep counts
    assert guard.cap == 200 - 50 - 32
    while len(conns) < guard.cap:
        conns.add(FakeConn())
        assert guard.admit(cast(Connection, FakeConn()))
    with caplog.at_level(logging.ERROR, "sievemq.remoting"):
        for _ in range(20):
            newest = FakeConn(("10.1.1.1", 7))
            conns.add(newest)
            assert not guard.admit(cast(Connection, newest))
            conns.discard(newest)
    (line,) = _messages(caplog, logging.ERROR)
    assert "refusing connection from 10.1.1.1:7" in line and "118 connections open, the cap is 118" in line
    assert "RLIMIT_NOFILE 200 less 50 descriptors open for other uses and a reserve of 32" in line


def test_running_out_of_descriptors_is_an_error_line(caplog: pytest.LogCaptureFixture) -> None:
    conns: set[Any] = {FakeConn() for _ in range(10)}
    guard = _guard(ServerLimits(), conns, (64, 64))
    with caplog.at_level(logging.ERROR, "sievemq.remoting"):
        guard.sweep(1000.0)
        guard.sweep(1001.0)  # counted again (near the cap), not logged again (rate limit)
    (line,) = _messages(caplog, logging.ERROR)
    assert "out of file descriptors: all 64 of RLIMIT_NOFILE are open (10 connections" in line
    assert guard.cap == 0


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
