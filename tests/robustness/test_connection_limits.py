"""What one client can cost a real broker (``sievemq broker``, real TCP): its memory stays bounded, offenders are
closed, the log stays short, and everyone else is served meanwhile.

Memory is the broker's RssAnon (/proc/<pid>/status): the store's mapped files count in VmRSS, not in it. Peers
that must be told apart in the log connect from different loopback addresses (127.0.0.N), since warnings are
rate-limited per peer IP.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager

from sievemq.client import api
from sievemq.protocol.pull_header import PullMessageHeader, pull_sys_flag
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand, encode
from sievemq.remoting.connection import connect
from sievemq.remoting.limits import MiB
from tests.integration.conftest import Cluster
from tests.support import wire
from tests.support.procs import Proc, broker_proc

MB = 1_000_000
BODY = os.urandom(2048).hex().encode()  # 4 KiB


def start_broker(cluster: Cluster, *flags: str, nofile: int | None = None) -> Proc:
    """A broker without a name server, stopped (and its log attached on failure) by the ``cluster`` fixture."""
    proc = broker_proc(cluster.tmp, "", "broker-a", *flags)
    proc.nofile = nofile
    cluster.procs.append(proc)
    return proc.start()


def rss_anon(proc: Proc) -> int:
    """The process's anonymous resident memory in bytes."""
    assert proc.popen is not None
    with open(f"/proc/{proc.popen.pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no RssAnon in /proc/<pid>/status")


def log_lines(proc: Proc, since: int, text: str) -> list[str]:
    """Lines of the process's log after byte ``since`` that contain ``text``."""
    return [line for line in proc.log_path.read_bytes()[since:].decode(errors="replace").splitlines() if text in line]


def log_size(proc: Proc) -> int:
    return proc.log_path.stat().st_size


def pull_frame(topic: str, queue_id: int, opaque: int) -> bytes:
    """A PULL_MESSAGE frame from offset 0 (answered at once when the queue has messages: up to 32 of them)."""
    header = PullMessageHeader(
        consumer_group="rb-unread",
        topic=topic,
        queue_id=queue_id,
        queue_offset=0,
        max_msg_nums=32,
        sys_flag=pull_sys_flag(commit_offset=False, suspend=False, subscription=True, class_filter=False),
        commit_offset=0,
        suspend_timeout_millis=0,
        subscription="*",
        expression_type="TAG",
        sub_version=0,
    )
    cmd = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_fields())
    cmd.opaque = opaque
    return encode(cmd)


def is_closed(s: socket.socket, wait: float = 0.2) -> bool:
    """True when the broker closed ``s`` (EOF or reset); False when nothing came within ``wait`` seconds."""
    s.settimeout(wait)
    try:
        return s.recv(1 << 16) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


@contextmanager
def sockets() -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    try:
        yield opened
    finally:
        for s in opened:
            s.close()


async def produce_and_pull(broker: Proc, topic: str, body: bytes = b"still served") -> float:
    """A new client sends one message to ``topic`` (queue 0) and pulls it back; returns the seconds it took."""
    start = time.monotonic()
    conn = await connect("127.0.0.1", broker.port)
    try:
        sent = await wire.send_message(conn, topic, body, queue_id=0, timeout=10.0)
        r = await api.pull_message(conn, "rb-check", topic, 0, sent.queue_offset, max_nums=1, timeout=10.0)
        assert r.code == ResponseCode.SUCCESS and r.messages[0].body == body, r
    finally:
        conn.close()
    return time.monotonic() - start


async def test_20000_unread_pulls_keep_memory_bounded_and_others_served(cluster: Cluster) -> None:
    broker = start_broker(cluster)
    conn = await connect("127.0.0.1", broker.port)
    try:
        for _ in range(200):
            await wire.send_message(conn, "RbBig", BODY, queue_id=0)
        warm = await api.pull_message(conn, "rb-warm", "RbBig", 0, 0, max_nums=32)
        assert len(warm.messages) == 32  # so every pull below is answered with ~135 KiB
    finally:
        conn.close()
    base = rss_anon(broker)
    frames = b"".join(pull_frame("RbBig", 0, i) for i in range(1, 20_001))
    loop = asyncio.get_running_loop()
    with sockets() as opened:
        s = socket.create_connection(("127.0.0.1", broker.port))
        opened.append(s)
        s.setblocking(False)
        sender = asyncio.ensure_future(loop.sock_sendall(s, frames))  # and never read an answer
        peak, served_in = base, None
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            peak = max(peak, rss_anon(broker))
            if served_in is None and time.monotonic() > deadline - 4.0:
                served_in = await produce_and_pull(broker, "RbOther")
        sender.cancel()
    growth = peak - base
    # Bound: once 64 MiB (67 MB) of answers wait unsent the broker stops reading and computing answers for this
    # connection, so the growth is that, an answer or two of ~135 KiB and the requests read but not started
    # (one read's worth); 120 MB leaves room for the allocator. Without back-pressure all 20,000 answers
    # (~2.7 GB) are computed and kept.
    assert growth < 120 * MB, f"RssAnon grew by {growth / MB:.0f} MB for one client that reads nothing"
    assert served_in is not None and served_in < 5.0, f"another client's produce+pull took {served_in}s"
    print(f"\nRssAnon growth {growth / MB:.0f} MB; another client's produce+pull took {served_in:.2f}s")


async def test_slow_senders_past_the_budget_are_closed_one_line_each(cluster: Cluster) -> None:
    broker = start_broker(cluster, "--server-partial-frame-budget", str(64 * MiB))
    since, base = log_size(broker), rss_anon(broker)
    peak = base
    head = struct.pack(">ii", 15 * MiB, 200)  # a frame of 15 MiB is announced ...
    part = head + bytes(14 * MiB - len(head))  # ... 14 MiB of it sent, then nothing
    with sockets() as senders:
        for i in range(20):
            s = socket.create_connection(("127.0.0.1", broker.port), source_address=(f"127.0.0.{10 + i}", 0))
            senders.append(s)
            s.settimeout(10.0)
            try:
                s.sendall(part)
            except (ConnectionResetError, BrokenPipeError):
                pass  # closed while sending: it went past the budget
            peak = max(peak, rss_anon(broker))
        deadline = time.monotonic() + 10.0
        closed: list[socket.socket] = []
        while time.monotonic() < deadline:
            closed = [s for s in senders if s in closed or is_closed(s, 0.05)]
            if len(closed) >= 16:
                break
        peak = max(peak, rss_anon(broker))
        # 64 MiB hold at most 4 frames of 14 MiB: the other 16 went past the budget
        assert len(closed) >= 16, f"only {len(closed)} of 20 slow senders were closed"
        still_open = [s for s in senders if s not in closed and not is_closed(s)]
        assert len(still_open) == 20 - len(closed), "a sender within the budget was closed"
        lines = log_lines(broker, since, "past their budget of 64.0 MiB")
        peers = {line.split("closing connection from ")[1].split(":")[0] for line in lines}
        assert len(lines) == len(closed) == len(peers), f"{len(closed)} closed, log lines: {lines}"
        # normal clients are served, a 1 MiB message (an unfinished frame meanwhile) too
        took = await produce_and_pull(broker, "RbBudget", os.urandom(MiB))
        assert took < 5.0, f"a normal client took {took:.1f}s"
    growth = peak - base
    # 64 MiB of budget (plus the bytearrays' over-allocation and freed memory the allocator keeps); without the
    # budget the 20 senders hold 280 MiB.
    assert growth < 110 * MB, f"RssAnon grew by {growth / MB:.0f} MB for 20 slow senders"
    print(f"\n{len(closed)} of 20 slow senders closed; RssAnon growth {growth / MB:.0f} MB")


async def test_a_frame_that_does_not_complete_in_time_closes_its_connection(cluster: Cluster) -> None:
    broker = start_broker(cluster, "--server-frame-timeout-seconds", "1.5")
    since = log_size(broker)
    busy = await connect("127.0.0.1", broker.port)
    with sockets() as stalled:
        for i in range(3):
            s = socket.create_connection(("127.0.0.1", broker.port), source_address=(f"127.0.0.{40 + i}", 0))
            stalled.append(s)
            s.sendall(struct.pack(">ii", MiB, 200) + bytes(100_000))
        start = time.monotonic()
        # a busy client's frames arrive in pieces all along: it is never closed
        while time.monotonic() - start < 3.0:
            await wire.send_message(busy, "RbTimeout", BODY, queue_id=0)
            await asyncio.sleep(0.02)
        assert not busy.is_closed
        assert all(is_closed(s, 2.0) for s in stalled), "a stalled frame was not timed out"
    busy.close()
    lines = log_lines(broker, since, "a frame still incomplete 1.5 s after its first byte")
    assert len(lines) == 3, lines


async def test_out_of_descriptors_refuses_with_an_error_line_and_recovers(cluster: Cluster) -> None:
    broker = start_broker(cluster, "--server-fd-reserve", "48", nofile=256)
    since = log_size(broker)
    good = await connect("127.0.0.1", broker.port)  # a client from before the flood
    await wire.send_message(good, "RbFdOld", BODY, queue_id=0)
    request = encode(RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "RbFdOld", "queueId": 0}))
    outcome = {"served": 0, "closed": 0, "hung": 0}
    try:
        with sockets() as flood:
            for _ in range(300):
                s = socket.create_connection(("127.0.0.1", broker.port), timeout=3.0)
                flood.append(s)
                try:
                    s.sendall(request)
                    answer = s.recv(1 << 16)
                except (ConnectionResetError, BrokenPipeError):
                    answer = b""
                except TimeoutError:
                    outcome["hung"] += 1
                    continue
                outcome["served" if answer else "closed"] += 1
            assert outcome["hung"] == 0 and outcome["closed"] > 0 and outcome["served"] > 100, outcome
            # the store still has descriptors: a new topic's files open while the connections are held
            sent = await wire.send_message(good, "RbFdNew", BODY, queue_id=0, timeout=10.0)
            assert sent.queue_offset == 0
        errors = log_lines(broker, since, "ERROR")
        assert 1 <= len(errors) <= 2, errors  # rate-limited: one line per 10 s
        assert "RLIMIT_NOFILE 256" in errors[0] and "connections open, the cap is" in errors[0], errors
        took = await produce_and_pull(broker, "RbFdAfter")  # descriptors are free again: served
        assert took < 5.0
    finally:
        good.close()
    print(f"\nRLIMIT_NOFILE 256: {outcome}")


async def test_thousands_of_bad_frames_log_a_few_lines(cluster: Cluster) -> None:
    broker = start_broker(cluster)
    since = log_size(broker)
    bad = [
        struct.pack(">ii", -1, 0),  # length out of range
        struct.pack(">ii", 1 << 30, 0),  # too long
        struct.pack(">ii", 12, 5 << 24) + bytes(8),  # unknown serialize type
        struct.pack(">ii", 12, 8) + b"not json",  # header not JSON
    ]
    for i in range(2000):
        with socket.create_connection(("127.0.0.1", broker.port), source_address=(f"127.0.0.{100 + i % 20}", 0)) as s:
            s.sendall(bad[i % len(bad)])
            is_closed(s, 2.0)
    took = await produce_and_pull(broker, "RbFlood")
    assert took < 5.0
    lines = log_lines(broker, since, "")
    warned = [line for line in lines if "closing connection from" in line]
    assert len(lines) < 200, f"{len(lines)} log lines for 2,000 bad frames"
    assert 20 <= len(warned) <= 40, f"{len(warned)} warnings from 20 peers (one per peer per 10 s expected)"
    print(f"\n2,000 bad frames from 20 peers: {len(lines)} log lines")
