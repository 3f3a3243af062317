"""One master store, one slave store, the HA link between them over loopback TCP (no broker); the HA port's gate."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from sievemq.ha.gate import HelloGate
from sievemq.ha.master import HAServer
from sievemq.ha.slave import HAClient
from sievemq.ha.tickets import TicketBook
from sievemq.ha.wire import encode_hello, encode_report
from sievemq.protocol.message import MessageExt, decode_record
from sievemq.store import MessageStore, StoreConfig
from tests.support.quiet import quiet_period

SEG = 64 * 1024


def store(root: Path) -> MessageStore:
    s = MessageStore(StoreConfig(root, commitlog_file_size=SEG, cq_entries_per_file=64, index_hash_slots=64,
                                 index_max_entries=512, delete_when_hours=()), ("127.0.0.1", 10911))  # fmt: skip
    s.load()
    return s


async def put(s: MessageStore, n: int, start: int = 0, size: int = 700) -> int:
    for i in range(start, start + n):
        r = await s.put_message(MessageExt("T", bytes([i % 251]) * size, properties={"KEYS": f"k{i}"},
                                           queue_id=i % 2, born_host=("1.2.3.4", 1)))  # fmt: skip
        assert r.ok
    return s.max_phy_offset


def bodies(s: MessageStore, q: int) -> list[bytes]:
    out, off = [], s.get_min_offset("T", q)
    while (r := s.get_message("T", q, off, 32, None)).records:
        out += [decode_record(x)[0].body for x in r.records]
        off = r.next_begin_offset
    return out


async def until(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        assert loop.time() < end, "timed out"
        await asyncio.sleep(0.01)


class Pair:
    def __init__(self, tmp: Path) -> None:
        self.master, self.slave = store(tmp / "m"), store(tmp / "s")
        self.tickets = TicketBook()
        self.gate = HelloGate(self.tickets, timeout_s=1.0, max_pending=4)
        self.server = HAServer(self.master, "127.0.0.1", 0, gate=self.gate, batch=4096, heartbeat_s=0.2,
                               housekeeping_s=2.0)  # fmt: skip
        self.addr: str | None = None
        self.client = HAClient(self.slave, lambda: self.addr, heartbeat_s=0.2, housekeeping_s=2.0, admit=self.ticket)
        self.master.add_dispatch_listener(lambda *a: self.server.notify())

    async def ticket(self, addr: str = "") -> str:
        """What HA_CHECK hands a slave on 127.0.0.1."""
        return self.tickets.issue("127.0.0.1", time.monotonic())

    async def start(self) -> None:
        await self.server.start()
        self.addr = f"127.0.0.1:{self.server.port}"
        self.client.start()

    async def close(self) -> None:
        await self.client.stop()
        await self.server.stop()
        for s in (self.master, self.slave):
            if s.available:
                s.abandon()


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[Pair]:
    p = Pair(tmp_path)
    await p.start()
    yield p
    await p.close()


async def test_the_slave_becomes_a_copy_and_acknowledges(pair: Pair) -> None:
    end = await put(pair.master, 300)  # ~3 segments
    await until(lambda: pair.slave.max_phy_offset == end)
    assert await pair.server.wait_acked(end, 5.0) and pair.server.acked == end
    for q in (0, 1):
        assert bodies(pair.slave, q) == bodies(pair.master, q)
    assert pair.slave.query_message("T", "k299", 1, 0, 1 << 62) == pair.master.query_message("T", "k299", 1, 0, 1 << 62)
    assert pair.client.lag_bytes == 0 and pair.client.lag_seconds == 0.0
    more = await put(pair.master, 5, 300)
    assert await pair.server.wait_acked(more, 5.0)  # new bytes are pushed at once, not at the next heartbeat


async def test_a_slave_that_was_away_resumes_from_its_end(pair: Pair) -> None:
    end = await put(pair.master, 50)
    await until(lambda: pair.slave.max_phy_offset == end)
    await pair.client.stop()
    end = await put(pair.master, 80, 50)
    assert not await pair.server.wait_acked(end, 0.3)  # nobody copies: a SYNC_MASTER send would time out
    pair.client.start()
    await until(lambda: pair.slave.max_phy_offset == end)
    assert bodies(pair.slave, 0) == bodies(pair.master, 0)


async def test_slave_ok_needs_a_slave_close_enough(pair: Pair) -> None:
    await until(lambda: bool(pair.server.slaves))
    assert pair.server.slave_ok(pair.master.max_phy_offset)
    pair.server.max_fallbehind = 10
    assert not pair.server.slave_ok(pair.master.max_phy_offset + 11)
    await pair.client.stop()
    await until(lambda: not pair.server.slaves)
    assert not pair.server.slave_ok(pair.master.max_phy_offset)


async def test_a_master_behind_its_slave_sends_nothing_and_says_so(tmp_path: Path) -> None:
    p = Pair(tmp_path)
    await put(p.slave, 20)  # the slave holds more than the (new, empty) master
    held = p.slave.max_phy_offset
    await p.start()
    try:
        await until(lambda: p.server.behind_slave is not None)
        await put(p.master, 3)
        await quiet_period(0.5, "the slave's log written", unchanged=lambda: p.slave.max_phy_offset)
        assert p.slave.max_phy_offset == held  # nothing overwritten, nothing appended
    finally:
        await p.close()


async def stranger(port: int, first: bytes) -> bytes:
    """Connect to the HA port, send ``first``, and read whatever comes until the master closes (at most 5 s)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(first)
    got = b""
    try:
        async with asyncio.timeout(5.0):
            while chunk := await reader.read(4096):
                got += chunk
    finally:
        writer.close()
    return got


async def test_only_a_good_hello_opens_a_link(pair: Pair) -> None:
    end = await put(pair.master, 20)
    await until(lambda: pair.slave.max_phy_offset == end)  # the real slave follows with its tickets
    port = pair.server.port
    ticket = await pair.ticket()
    refused = pair.gate.refused
    assert await stranger(port, encode_report(0)) == b""  # RocketMQ's first bytes: closed after the hello timeout
    assert await stranger(port, b"GET / HTTP/1.0\r\n" * 4) == b""
    assert await stranger(port, encode_hello("0" * 32) + encode_report(0)) == b""  # never issued
    assert pair.gate.refused == refused + 3 and len(pair.server.slaves) == 1  # strangers never count as slaves
    got = await stranger_link(port, ticket)
    assert len(got) > end and pair.master.read_commitlog(0, 64) in got  # the ticket opens one link...
    assert await stranger(port, encode_hello(ticket) + encode_report(0)) == b""  # ...once


async def stranger_link(port: int, ticket: str) -> bytes:
    """Open a link with ``ticket`` from offset 0 and read for a moment."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(encode_hello(ticket) + encode_report(0))
    got = b""
    try:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):
                while chunk := await reader.read(1 << 16):
                    got += chunk
    finally:
        writer.close()
    return got


async def test_idle_strangers_are_pushed_out_beyond_the_pending_cap(pair: Pair) -> None:
    idle = [await asyncio.open_connection("127.0.0.1", pair.server.port) for _ in range(pair.gate.max_pending)]
    await until(lambda: pair.gate.pending == pair.gate.max_pending)
    late = await asyncio.open_connection("127.0.0.1", pair.server.port)  # one more: the oldest is closed
    async with asyncio.timeout(0.5):  # long before the hello timeout
        assert await idle[0][0].read(10) == b""
    assert pair.gate.pending == pair.gate.max_pending
    late[1].write(encode_hello(await pair.ticket()) + encode_report(pair.slave.max_phy_offset))
    await until(lambda: len(pair.server.slaves) == 2)  # a slave's hello still gets through
    for _r, w in [*idle, late]:
        w.close()
