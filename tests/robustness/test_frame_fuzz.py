"""Frame fuzzing against a real name server and broker: 20,000+ hostile frames per run (``-m soak``: 1,000,000).

Afterwards the broker is the same process, still registered, serves a normal produce and consume, answered
every clean request, kept its memory and descriptors bounded, and its store folder holds nothing it should not:
only legal topics were created, nothing outside the store changed.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections import Counter
from pathlib import Path

import pytest

from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import FrameDecoder, RemotingCommand
from sievemq.remoting.connection import connect
from tests.integration.conftest import Cluster, OpenConn
from tests.integration.helpers import create_topic, pull_all
from tests.robustness.frames import BROKER_CODES, NAMESRV_CODES, Frame, FrameFactory
from tests.support import wire

FRAMES = int(os.environ.get("SIEVEMQ_FUZZ_FRAMES", "20000"))
SOAK_FRAMES = 1_000_000
CLEAN_CONNS = 6
WINDOW = 48
"""Requests in flight per clean connection."""


def rss_anon_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1])
    raise AssertionError("no RssAnon")


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def store_paths(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


_ALLOWED = [
    re.compile(r"commitlog(/\d{20})?"),
    re.compile(r"index(/\d{20})?"),
    re.compile(r"consumequeue/\.summary(\.tmp)?"),  # a clean stop's summary (store/queue_summary.py)
    # a created topic's first queue files are made ahead, as spares (MessageStore.prepare_queues)
    re.compile(r"(consumequeue|consumequeue_ext)(/(?P<topic>[^/]+)(/\d+(/\d{20}(\.spare)?)?)?)?"),
    re.compile(r"config(/[A-Za-z]+\.json(\.bak|\.tmp|\.journal\.\d+)?)?"),  # topics.json's change journal
    re.compile(r"checkpoint|abort|lock"),
]


def unexpected(paths: set[str]) -> list[str]:
    """Store paths that no legitimate request could have made."""
    bad = []
    for p in paths:
        for rx in _ALLOWED:
            m = rx.fullmatch(p)
            if m is not None:
                topic = m.groupdict().get("topic")
                if topic is not None and not re.fullmatch(r"[%|a-zA-Z0-9_-]{1,127}", topic):
                    bad.append(p)
                break
        else:
            bad.append(p)
    return bad


class Tally:
    def __init__(self) -> None:
        self.sent = 0
        self.clean = 0
        self.answered = 0
        self.codes: Counter[int] = Counter()
        self.reconnects = 0


async def _clean_conn(port: int, frames: list[Frame], tally: Tally) -> list[Frame]:
    """Send clean frames (WINDOW in flight); return those never answered. The server must not close us."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    outstanding: dict[int, Frame] = {}
    room = asyncio.Semaphore(WINDOW)
    decoder = FrameDecoder()
    closed = asyncio.Event()

    async def read() -> None:
        while data := await reader.read(1 << 16):
            for cmd in decoder.feed(data):
                f = outstanding.pop(cmd.opaque, None)
                if f is not None:
                    tally.answered += 1
                    tally.codes[cmd.code] += 1
                    room.release()
        closed.set()

    rt = asyncio.create_task(read())
    try:
        for f in frames:
            if closed.is_set():
                raise AssertionError("the server closed a connection that sent only clean frames")
            if f.expect_answer:
                await room.acquire()
                outstanding[f.opaque] = f
            writer.write(f.data)
            tally.sent += 1
            tally.clean += 1
            if tally.sent % 64 == 0:
                await writer.drain()
        await writer.drain()
        deadline = time.monotonic() + 15
        while any(not f.held for f in outstanding.values()) and time.monotonic() < deadline and not closed.is_set():
            await asyncio.sleep(0.05)
        assert not closed.is_set(), "the server closed a connection that sent only clean frames"
        return [f for f in outstanding.values() if not f.held]
    finally:
        rt.cancel()
        writer.close()


async def _dirty_conns(port: int, frames: list[Frame], tally: Tally) -> None:
    """Send dirty frames, a few per connection; the server may close any of them."""
    i = 0
    while i < len(frames):
        batch = frames[i : i + 8]
        i += len(batch)
        try:
            _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            tally.reconnects += 1
            await asyncio.sleep(0.05)
            continue
        try:
            for f in batch:
                writer.write(f.data)
                tally.sent += 1
            await asyncio.wait_for(writer.drain(), 5)
        except (OSError, TimeoutError):
            pass
        finally:
            writer.close()


async def fuzz(port: int, codes: list[int], n: int, seed: int) -> Tally:
    """Send ``n`` frames from ``FrameFactory(seed)`` to ``port``; assert every clean request was answered."""
    factory = FrameFactory(seed, codes)
    frames = [factory.next() for _ in range(n)]
    clean = [f for f in frames if f.clean]
    dirty = [f for f in frames if not f.clean]
    tally = Tally()
    shares = [clean[k::CLEAN_CONNS] for k in range(CLEAN_CONNS)]
    results = await asyncio.gather(*(_clean_conn(port, s, tally) for s in shares), _dirty_conns(port, dirty, tally))
    lost = [f for r in results[:-1] if r for f in r]
    assert not lost, f"{len(lost)} clean requests never answered, codes {Counter(f.code for f in lost)}"
    return tally


async def run_fuzz(cluster: Cluster, open_conn: OpenConn, frames: int) -> None:
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-fz")
    store = cluster.store_dir(broker)
    sentinel = store.parent / "outside-the-store.txt"
    sentinel.write_text("must survive")
    conn = await open_conn(broker)
    await create_topic(conn, "RealTopic", queues=2)
    before = store_paths(store)
    pid = broker.popen.pid if broker.popen else 0
    rss0, fds0 = rss_anon_kb(pid), fd_count(pid)
    t0 = time.monotonic()

    broker_share = frames * 3 // 4
    bt, nt = await asyncio.gather(
        fuzz(broker.port, BROKER_CODES, broker_share, seed=1),
        fuzz(ns.port, NAMESRV_CODES, frames - broker_share, seed=2),
    )
    took = time.monotonic() - t0
    rss1, fds1 = rss_anon_kb(pid), fd_count(pid)
    print(f"\nfuzz: {bt.sent + nt.sent:,} frames in {took:.1f}s ({bt.clean + nt.clean:,} clean, all answered: "
          f"{bt.answered + nt.answered:,}); broker RssAnon {rss0 // 1024} -> {rss1 // 1024} MiB, fds {fds0} -> "
          f"{fds1}; broker answer codes {dict(bt.codes.most_common(6))}")  # fmt: skip

    # The same processes serve, the broker is still in the routes, nothing outside its folders changed.
    assert broker.popen is not None and broker.popen.poll() is None and ns.popen is not None and ns.popen.poll() is None
    assert sentinel.read_text() == "must survive"
    after = store_paths(store)
    assert not unexpected(after), f"paths no request may create: {sorted(unexpected(after))[:20]}"
    gone = {p for p in before - after if not p.startswith(("consumequeue/Fz", "consumequeue_ext/Fz"))}
    assert not gone, f"files removed by the fuzz: {sorted(gone)[:20]}"
    assert rss1 - rss0 < 300 * 1024, f"RssAnon grew by {(rss1 - rss0) // 1024} MiB"
    assert fds1 < fds0 + 200, f"descriptors grew from {fds0} to {fds1}"

    nconn = await connect("127.0.0.1", ns.port)
    try:
        route = await wire.get_route(nconn, "RealTopic")
        assert [b.broker_name for b in route.broker_datas] == ["broker-fz"]
    finally:
        nconn.close()
    conn = await open_conn(broker)
    r = await wire.send_message(conn, "RealTopic", b"after the fuzz", queue_id=1, tags="T")
    assert r.code == ResponseCode.SUCCESS
    got = await pull_all(conn, "RealTopic", 1)
    assert [m.body for m in got][-1:] == [b"after the fuzz"]
    resp = await conn.request(RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), 3.0)
    assert resp.code == ResponseCode.SUCCESS
    lines = len(broker.log().splitlines()) + len(ns.log().splitlines())
    print(f"fuzz: {lines} log lines from the name server and the broker")
    assert lines < 2_000 + frames // 1000, f"{lines} log lines for {frames} frames: logging is not rate-limited"


async def test_fuzzed_frames_leave_the_broker_serving(cluster: Cluster, open_conn: OpenConn) -> None:
    await run_fuzz(cluster, open_conn, FRAMES)


@pytest.mark.soak
async def test_soak_a_million_fuzzed_frames(cluster: Cluster, open_conn: OpenConn) -> None:
    await run_fuzz(cluster, open_conn, SOAK_FRAMES)
