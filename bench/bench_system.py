"""The system benchmark: sievemq (broker and client) against Redis Streams, in one run on this machine.

Starts ``sievemq dev`` (name server and broker in one process, ASYNC_FLUSH, store in a temporary folder) and,
when ``redis-server`` is installed, a Redis on 127.0.0.1 (``--save '' --appendonly no``), both on free ports;
runs every phase against both with the same messages (``--size`` bytes of body, a tag -- ``TagA`` on every
10th message, ``TagB`` otherwise -- and three properties ``region``, ``amount``, ``kind``); stops both by PID;
prints one table with each sievemq figure as a ratio to Redis's.

Phases (each against both systems; the client side is one asyncio process on uvloop):

* **produce, single sends**: one message per request, ``--inflight`` requests in flight (sievemq:
  ``Producer.send`` from that many tasks, multiplexed on one connection; Redis: ``XADD`` from that many tasks,
  redis-py's pool opens one connection per task).
* **produce, batches of 32**: 32 messages per request, ``--batch-inflight`` requests in flight (sievemq:
  ``Producer.send_batch`` = one SEND_BATCH_MESSAGE; Redis: a non-transactional pipeline of 32 ``XADD``).
* **consume**: every message of the batch phase, 32 per pull, 4 pulls in flight (sievemq: ``PushConsumer``
  over the topic's 4 queues, ``consume_batch_size=32``, async listener; Redis: 4 consumers of one group, each
  looping ``XACK`` of its previous batch + ``XREADGROUP COUNT 32`` in one pipelined round trip).
* **consume, tag filter 10%**: the same messages for a new group that wants ``TagA`` only (sievemq: the
  broker filters by tag hash, the client re-checks the string; Redis cannot filter on the server, so its
  consumers read everything and filter in the client). Reported: messages delivered per second and the bytes
  the client received (pull / XREADGROUP reply frames) as a share of the unfiltered consume's.
* **latency**: ``--rate`` msg/s for ``--seconds`` (single sends, paced, awaited) while a consumer receives
  (sievemq: ``PushConsumer``, long polling; Redis: ``XREADGROUP BLOCK``); latency = receive time minus a
  ``time.time_ns()`` stamp put in a property just before the send; the first second is warm-up.

Also: broker CPU microseconds per message of each phase (``utime+stime`` of the ``sievemq dev`` process from
/proc, both roles; redis-server's alongside), the client process's CPU per message, and the resident memory
of both servers after the run. ``--low-level`` (default on) repeats produce and consume through
``sievemq.client.api`` (request wrappers on one connection, no Producer/Consumer machinery), labelled
"api.py", to show how much of a figure is the high-level client.

    .venv/bin/python bench/bench_system.py [--messages 100000] [--size 1024] [--rate 2000] [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import itertools
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.procs import Proc, dev_proc, free_port, wait_port

import sievemq
from sievemq import ConsumeFrom, Message, Producer, PushConsumer, Selector
from sievemq.admin.api import AdminClient
from sievemq.client import api
from sievemq.protocol.batch import BatchEntry, encode_batch
from sievemq.protocol.message import MessageExt, properties_to_string
from sievemq.protocol.msgid import UniqIdGenerator
from sievemq.protocol.send_header import SendMessageHeader
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.connection import Connection, connect

QUEUES = 4
PULL_BATCH = 32
REGIONS = ("eu", "us", "apac", "latam")
KINDS = ("a", "b", "c")
CLK_TCK = os.sysconf("SC_CLK_TCK")


# ------------------------------------------------------------------------------------------------ measuring


class Wire:
    """Bytes received by this process, per system, counted where the client code reads its sockets."""

    sieve = 0
    redis = 0


def _install_byte_counters() -> None:
    """Count received bytes: sievemq's ``Connection.data_received`` and asyncio's ``StreamReader.feed_data``
    (redis-py reads through asyncio streams; sievemq's client does not use them)."""
    orig_dr = Connection.data_received

    def data_received(self: Connection, data: bytes) -> None:
        Wire.sieve += len(data)
        orig_dr(self, data)

    Connection.data_received = data_received  # type: ignore[method-assign]
    orig_feed = asyncio.StreamReader.feed_data

    def feed_data(self: asyncio.StreamReader, data: bytes) -> None:
        Wire.redis += len(data)
        orig_feed(self, data)

    asyncio.StreamReader.feed_data = feed_data  # type: ignore[method-assign]


def proc_cpu(pid: int) -> float:
    """utime + stime of a process (all its threads) in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rpartition(")")[2].split()
    return (int(rest[11]) + int(rest[12])) / CLK_TCK


def proc_mem(pid: int) -> dict[str, int]:
    """VmRSS, RssAnon, RssFile of a process in KiB."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmHWM"):
                out[key] = int(value.split()[0])
    return out


@dataclass
class Result:
    """One phase against one system."""

    messages: int = 0
    seconds: float = 0.0
    wire_bytes: int = 0
    server_cpu: float = 0.0
    client_cpu: float = 0.0
    received: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    note: str = ""
    startup: float = 0.0
    """Seconds from the consumer's start to its first message (included in ``seconds``)."""

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    def server_us(self) -> float:
        return self.server_cpu * 1e6 / self.messages if self.messages else 0.0

    def client_us(self) -> float:
        return self.client_cpu * 1e6 / self.messages if self.messages else 0.0

    def pct(self, p: float) -> float:
        xs = sorted(self.latencies_ms)
        if not xs:
            return float("nan")
        return xs[min(len(xs) - 1, max(0, math.ceil(p / 100 * len(xs)) - 1))]  # nearest rank


async def measured(pid: int | None, wire: str, fn: Callable[[Result], Awaitable[None]]) -> Result:
    """Run one phase, recording the server's CPU, this process's CPU and the bytes received."""
    r = Result()
    s0 = proc_cpu(pid) if pid else 0.0
    c0 = time.process_time()
    w0 = getattr(Wire, wire)
    await fn(r)
    r.client_cpu = time.process_time() - c0
    r.server_cpu = (proc_cpu(pid) if pid else 0.0) - s0
    r.wire_bytes = getattr(Wire, wire) - w0
    return r


# ------------------------------------------------------------------------------------------------ messages


def tag_of(i: int) -> str:
    return "TagA" if i % 10 == 0 else "TagB"


def props_of(i: int) -> dict[str, str]:
    return {"region": REGIONS[i % 4], "amount": str(i % 1000), "kind": KINDS[i % 3]}


def n_tag_a(n: int) -> int:
    return (n + 9) // 10


# ------------------------------------------------------------------------------------------------ sievemq


class Sieve:
    """sievemq through its own client (and, for the api.py rows, the request wrappers)."""

    def __init__(self, proc: Proc, body: bytes) -> None:
        self.proc = proc
        self.namesrv = str(proc.extra["namesrv"])
        self.body = body
        self.pid = proc.popen.pid if proc.popen else 0
        self._groups = itertools.count()

    async def create_topics(self, *topics: str) -> None:
        async with AdminClient(self.namesrv) as admin:
            for t in topics:
                await admin.create_topic(t, queues=QUEUES)

    def message(self, topic: str, i: int, extra: dict[str, str] | None = None) -> Message:
        props = props_of(i)
        if extra:
            props.update(extra)
        return Message(topic, self.body, tags=tag_of(i), properties=props)

    # -------------------------------------------------------------------------------- high-level client
    async def produce_single(self, topic: str, n: int, inflight: int, r: Result) -> None:
        async with Producer(self.namesrv, group="bench-producer-single") as p:
            await p.send(self.message(topic, -1))  # route and connection warm
            counter = iter(range(n))
            t0 = time.perf_counter()

            async def worker() -> None:
                for i in counter:
                    await p.send(self.message(topic, i))

            await asyncio.gather(*(worker() for _ in range(inflight)))
            r.seconds = time.perf_counter() - t0
            r.messages = n

    async def produce_batch(self, topic: str, n: int, batch: int, inflight: int, r: Result) -> None:
        async with Producer(self.namesrv, group="bench-producer-batch") as p:
            await p.send_batch([self.message(topic, -1)])
            starts = iter(range(0, n, batch))
            t0 = time.perf_counter()

            async def worker() -> None:
                for s in starts:
                    await p.send_batch([self.message(topic, i) for i in range(s, min(n, s + batch))])

            await asyncio.gather(*(worker() for _ in range(inflight)))
            r.seconds = time.perf_counter() - t0
            r.messages = n

    async def consume(self, topic: str, expected: int, selector: str, r: Result) -> None:
        """PushConsumer from the first offset until ``expected`` messages were delivered."""
        group = f"bench-consume-{next(self._groups)}"
        done = asyncio.Event()
        count = 0
        wrong = 0

        c = PushConsumer(
            self.namesrv,
            group=group,
            consume_from=ConsumeFrom.FIRST,
            consume_batch_size=PULL_BATCH,
            pull_batch_size=PULL_BATCH,
        )
        c.subscribe(topic, Selector.tag(selector))

        first = 0.0

        @c.listener
        async def on_messages(msgs: list[MessageExt]) -> None:
            nonlocal count, wrong, first
            if not count:
                first = time.perf_counter()
            count += len(msgs)
            if selector != "*":
                wrong += sum(1 for m in msgs if m.tags != selector)
            if count >= expected:
                done.set()

        t0 = time.perf_counter()
        await c.start()
        try:
            await asyncio.wait_for(done.wait(), 600)
            r.seconds = time.perf_counter() - t0
            r.messages = count
            r.received = count
            r.startup = first - t0
            if wrong:
                r.note = f"{wrong} messages without the subscribed tag"
        finally:
            await c.close()

    async def latency(self, topic: str, rate: int, seconds: float, r: Result) -> None:
        group = f"bench-latency-{next(self._groups)}"
        lat: list[float] = []
        warm_until = 0

        c = PushConsumer(self.namesrv, group=group, consume_from=ConsumeFrom.LAST, pull_batch_size=PULL_BATCH)
        c.subscribe(topic, "*")

        @c.listener
        async def on_messages(msgs: list[MessageExt]) -> None:
            now = time.time_ns()
            for m in msgs:
                sent = int(m.properties["ts"])
                if sent >= warm_until:
                    lat.append((now - sent) / 1e6)

        await c.start()
        try:
            for _ in range(200):  # wait for the first rebalance to own every queue
                if len(c.assignment()) >= QUEUES:
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)  # pulls parked
            async with Producer(self.namesrv, group="bench-producer-latency") as p:
                await p.send(self.message(topic, -1, {"ts": str(time.time_ns())}))
                n = int(rate * seconds)
                t0 = time.perf_counter()
                warm_until = time.time_ns() + 1_000_000_000
                sent = 0
                while sent < n:
                    due = min(n, int((time.perf_counter() - t0) * rate) + 1)
                    while sent < due:
                        await p.send(self.message(topic, sent, {"ts": str(time.time_ns())}))
                        sent += 1
                    wait = t0 + sent / rate - time.perf_counter()
                    if wait > 0:
                        await asyncio.sleep(wait)
                r.seconds = time.perf_counter() - t0
                r.messages = n
            deadline = time.monotonic() + 10
            expected = n - rate
            while len(lat) < expected and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
        finally:
            await c.close()
        r.latencies_ms = lat
        r.received = len(lat)

    # -------------------------------------------------------------------------------- api.py (low level)
    def _entry(self, i: int, ids: UniqIdGenerator) -> BatchEntry:
        props = props_of(i)
        props["TAGS"] = tag_of(i)
        props["UNIQ_KEY"] = ids.next()
        return BatchEntry(0, self.body, props)

    async def api_produce_single(self, topic: str, n: int, inflight: int, r: Result) -> None:
        conn = await connect("127.0.0.1", self.proc.port)
        ids = UniqIdGenerator()
        try:
            counter = iter(range(n))
            t0 = time.perf_counter()

            async def worker() -> None:
                for i in counter:
                    props = props_of(i)
                    props["TAGS"] = tag_of(i)
                    props["UNIQ_KEY"] = ids.next()
                    props["WAIT"] = "true"
                    header = SendMessageHeader(
                        producer_group="bench-api",
                        topic=topic,
                        queue_id=i % QUEUES,
                        born_timestamp=int(time.time() * 1000),
                        properties=properties_to_string(props),
                    )
                    resp = await api.send_request(conn, header, self.body)
                    if resp.code != ResponseCode.SUCCESS:
                        raise RuntimeError(f"send failed: [{resp.code}] {resp.remark}")

            await asyncio.gather(*(worker() for _ in range(inflight)))
            r.seconds = time.perf_counter() - t0
            r.messages = n
        finally:
            conn.close()

    async def api_produce_batch(self, topic: str, n: int, batch: int, inflight: int, r: Result) -> None:
        conn = await connect("127.0.0.1", self.proc.port)
        ids = UniqIdGenerator()
        try:
            starts = iter(range(0, n, batch))
            t0 = time.perf_counter()

            async def worker() -> None:
                for s in starts:
                    entries = [self._entry(i, ids) for i in range(s, min(n, s + batch))]
                    header = SendMessageHeader(
                        producer_group="bench-api",
                        topic=topic,
                        queue_id=(s // batch) % QUEUES,
                        born_timestamp=int(time.time() * 1000),
                        batch=True,
                    )
                    resp = await api.send_request(
                        conn, header, encode_batch(entries), code=RequestCode.SEND_BATCH_MESSAGE
                    )
                    if resp.code != ResponseCode.SUCCESS:
                        raise RuntimeError(f"send failed: [{resp.code}] {resp.remark}")

            await asyncio.gather(*(worker() for _ in range(inflight)))
            r.seconds = time.perf_counter() - t0
            r.messages = n
        finally:
            conn.close()

    async def api_consume(self, topic: str, expected: int, selector: str, r: Result) -> None:
        """One pull loop per queue (``api.pull_message``, 32 per pull) from offset 0 to the end."""
        group = f"bench-api-consume-{next(self._groups)}"
        conn = await connect("127.0.0.1", self.proc.port)
        count = 0
        wrong = 0

        async def loop(qid: int) -> None:
            nonlocal count, wrong
            offset = 0
            while True:
                pr = await api.pull_message(conn, group, topic, qid, offset, max_nums=PULL_BATCH, subscription=selector)
                if pr.code == ResponseCode.SUCCESS:
                    if selector == "*":
                        count += len(pr.messages)
                    else:
                        ok = sum(1 for m in pr.messages if m.tags == selector)
                        count += ok
                        wrong += len(pr.messages) - ok
                elif pr.code == ResponseCode.PULL_NOT_FOUND:
                    return
                elif pr.code != ResponseCode.PULL_RETRY_IMMEDIATELY:
                    raise RuntimeError(f"pull failed: [{pr.code}] {pr.remark}")
                offset = pr.next_begin_offset

        try:
            t0 = time.perf_counter()
            await asyncio.gather(*(loop(q) for q in range(QUEUES)))
            r.seconds = time.perf_counter() - t0
            r.messages = r.received = count
            if count != expected:
                r.note = f"delivered {count}, expected {expected}"
            if wrong:
                r.note += f" {wrong} with another tag (hash collision re-check)"
        finally:
            conn.close()


# ------------------------------------------------------------------------------------------------ Redis


class RedisPeer:
    """Redis Streams through redis-py's asyncio client."""

    def __init__(self, port: int, pid: int, body: bytes, parser: str) -> None:
        import redis.asyncio as aredis
        from redis._parsers import _AsyncHiredisParser, _AsyncRESP2Parser
        from redis.utils import HIREDIS_AVAILABLE

        self.port = port
        self.pid = pid
        self.body = body
        if parser == "auto":
            parser = "hiredis" if HIREDIS_AVAILABLE else "python"
        if parser == "hiredis" and not HIREDIS_AVAILABLE:
            raise SystemExit("--redis-parser hiredis: the hiredis package is not installed (pip install hiredis)")
        self.parser = parser
        parser_class = _AsyncHiredisParser if parser == "hiredis" else _AsyncRESP2Parser
        self.pool = aredis.ConnectionPool(host="127.0.0.1", port=port, max_connections=256, parser_class=parser_class)
        self.r = aredis.Redis(connection_pool=self.pool)
        self._groups = itertools.count()

    def fields(self, i: int, extra: dict[str, str] | None = None) -> dict[str, Any]:
        f: dict[str, Any] = {"tag": tag_of(i), **props_of(i), "body": self.body}
        if extra:
            f.update(extra)
        return f

    async def close(self) -> None:
        await self.r.aclose()
        await self.pool.disconnect()

    async def produce_single(self, stream: str, n: int, inflight: int, r: Result) -> None:
        await self.r.xadd(stream, self.fields(-1))
        counter = iter(range(n))
        t0 = time.perf_counter()

        async def worker() -> None:
            for i in counter:
                await self.r.xadd(stream, self.fields(i))

        await asyncio.gather(*(worker() for _ in range(inflight)))
        r.seconds = time.perf_counter() - t0
        r.messages = n

    async def produce_batch(self, stream: str, n: int, batch: int, inflight: int, r: Result) -> None:
        starts = iter(range(0, n, batch))
        t0 = time.perf_counter()

        async def worker() -> None:
            for s in starts:
                pipe = self.r.pipeline(transaction=False)
                for i in range(s, min(n, s + batch)):
                    pipe.xadd(stream, self.fields(i))
                await pipe.execute()

        await asyncio.gather(*(worker() for _ in range(inflight)))
        r.seconds = time.perf_counter() - t0
        r.messages = n

    async def consume(self, stream: str, expected: int, selector: str, r: Result) -> None:
        """4 consumers of a new group from the stream's start; XACK + XREADGROUP COUNT 32 per round trip."""
        group = f"bench-consume-{next(self._groups)}"
        await self.r.xgroup_create(stream, group, id="0")
        want = selector.encode()
        delivered = 0
        t0 = time.perf_counter()

        async def consumer(name: str) -> None:
            nonlocal delivered
            ack: list[bytes] = []
            while True:
                pipe = self.r.pipeline(transaction=False)
                if ack:
                    pipe.xack(stream, group, *ack)
                pipe.xreadgroup(group, name, {stream: ">"}, count=PULL_BATCH)
                reply = (await pipe.execute())[-1]
                if not reply:
                    return
                entries = reply[0][1]
                ack = [eid for eid, _ in entries]
                for _eid, f in entries:
                    if selector == "*" or f[b"tag"] == want:
                        delivered += 1

        await asyncio.gather(*(consumer(f"c{k}") for k in range(QUEUES)))
        r.seconds = time.perf_counter() - t0
        r.messages = r.received = delivered
        if delivered != expected:
            r.note = f"delivered {delivered}, expected {expected}"

    async def latency(self, stream: str, rate: int, seconds: float, r: Result) -> None:
        group = f"bench-latency-{next(self._groups)}"
        await self.r.xadd(stream, self.fields(-1, {"ts": str(time.time_ns())}))
        await self.r.xgroup_create(stream, group, id="$")
        lat: list[float] = []
        stop = asyncio.Event()
        warm_until = time.time_ns() + 10**18

        async def consumer() -> None:
            ack: list[bytes] = []
            while not stop.is_set():
                pipe = self.r.pipeline(transaction=False)
                if ack:
                    pipe.xack(stream, group, *ack)
                pipe.xreadgroup(group, "lat", {stream: ">"}, count=PULL_BATCH, block=200)
                reply = (await pipe.execute())[-1]
                now = time.time_ns()
                ack = []
                if not reply:
                    continue
                for eid, f in reply[0][1]:
                    ack.append(eid)
                    sent = int(f[b"ts"])
                    if sent >= warm_until:
                        lat.append((now - sent) / 1e6)

        task = asyncio.create_task(consumer())
        await asyncio.sleep(0.3)
        n = int(rate * seconds)
        t0 = time.perf_counter()
        warm_until = time.time_ns() + 1_000_000_000
        sent = 0
        while sent < n:
            due = min(n, int((time.perf_counter() - t0) * rate) + 1)
            while sent < due:
                await self.r.xadd(stream, self.fields(sent, {"ts": str(time.time_ns())}))
                sent += 1
            wait = t0 + sent / rate - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
        r.seconds = time.perf_counter() - t0
        r.messages = n
        deadline = time.monotonic() + 10
        while len(lat) < n - int(rate * 1.0) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        stop.set()
        await task
        r.latencies_ms = lat
        r.received = len(lat)


def start_redis(tmp: Path) -> tuple[subprocess.Popen[bytes], int]:
    """redis-server on a free port of 127.0.0.1, no persistence (no RDB snapshots, no AOF)."""
    exe = shutil.which("redis-server") or "redis-server"
    port = free_port()
    log = open(tmp / "redis.log", "ab")  # noqa: SIM115 (kept open for the child)
    p = subprocess.Popen(
        [exe, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no", "--dir", str(tmp)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    wait_port(port, proc=p)
    return p, port


def redis_py_version() -> str:
    import redis

    return str(redis.__version__)


def redis_version() -> str:
    try:
        out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True, check=True).stdout
        return out.split("v=")[1].split()[0]
    except Exception:
        return "?"


# ------------------------------------------------------------------------------------------------ report

Row = tuple[str, Result, "Result | None", str]


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}/s"


def ratio(a: float, b: float | None) -> str:
    if not b:
        return "-"
    return f"{a / b:.2f}x"


def mib(n: int) -> str:
    return f"{n / 1048576:,.1f} MiB"


def print_table(rows: list[Row]) -> None:
    head = (
        f"{'phase':52s} {'sievemq':>11s} {'redis':>11s} {'ratio':>6s} {'brk µs/msg':>10s} {'rds µs/msg':>10s} "
        f"{'cli µs/msg':>10s} {'rcli µs/msg':>11s}"
    )
    print(head)
    print("-" * len(head))
    for label, s, rd, kind in rows:
        if kind == "rate":
            sv, rv, rt = fmt_rate(s.rate), fmt_rate(rd.rate) if rd else "-", ratio(s.rate, rd.rate if rd else None)
        else:
            p = 50.0 if kind == "p50" else 99.0
            sv, rv = f"{s.pct(p):.2f} ms", f"{rd.pct(p):.2f} ms" if rd else "-"
            rt = ratio(s.pct(p), rd.pct(p) if rd else None)
        line = f"{label:52s} {sv:>11s} {rv:>11s} {rt:>6s}"
        if kind in ("rate", "p50"):
            line += f" {s.server_us():>10.1f} {(rd.server_us() if rd else 0):>10.1f}"
            line += f" {s.client_us():>10.1f} {(rd.client_us() if rd else 0):>11.1f}"
        print(line)
        if s.note or (rd and rd.note):
            print(f"{'':4s}note: sievemq {s.note or 'ok'}; redis {(rd.note if rd else '') or 'ok'}")


def verdict(ok: bool | None) -> str:
    return "n/a " if ok is None else ("MET " if ok else "MISS")


# ------------------------------------------------------------------------------------------------ main


async def run(args: argparse.Namespace) -> int:
    _install_byte_counters()
    n = args.messages
    body = (os.urandom(16).hex().encode() * (args.size // 32 + 1))[: args.size]
    tmp = Path(tempfile.mkdtemp(prefix="sievemq-bench-system-"))
    dev = dev_proc(tmp)
    redis_proc: subprocess.Popen[bytes] | None = None
    peer: RedisPeer | None = None
    try:
        dev.start()
        sv = Sieve(dev, body)
        await asyncio.sleep(0.5)
        await sv.create_topics("BenchSingle", "BenchBatch", "BenchLatency", "BenchApiSingle", "BenchApiBatch")
        if args.no_redis:
            pass
        elif shutil.which("redis-server") is None:
            print("redis-server is not installed (apt-get install redis-server): sievemq figures only, no ratios")
        elif importlib.util.find_spec("redis") is None:
            print("redis-py is not installed (pip install -e '.[bench]'): sievemq figures only, no ratios")
        else:
            redis_proc, rport = start_redis(tmp)
            peer = RedisPeer(rport, redis_proc.pid, body, args.redis_parser)

        print(f"$ {' '.join([os.path.relpath(sys.executable), *sys.argv])}")
        print(
            f"sievemq {sievemq.__version__}: `sievemq dev` (name server + broker in one process, ASYNC_FLUSH, "
            f"pid {sv.pid}); client: sievemq's asyncio client on uvloop, Python {platform.python_version()}"
        )
        if peer:
            print(
                f"reference: Redis {redis_version()} Streams (pid {peer.pid}, --save '' --appendonly no); "
                f"client: redis-py {redis_py_version()} asyncio on the same loop, {peer.parser} reply parser"
            )
        print(
            f"{n:,} messages of {args.size:,} B body + a tag (TagA on every 10th) + 3 properties; "
            f"{os.cpu_count()} CPUs; load average before the run {os.getloadavg()[0]:.2f}"
        )
        rows: list[Row] = []
        sp, rp = sv.pid, (peer.pid if peer else None)

        async def both(
            label: str, kind: str, sfn: Callable[[Result], Awaitable[None]],
            rfn: Callable[[Result], Awaitable[None]] | None,
        ) -> tuple[Result, Result | None]:  # fmt: skip
            print(f"  ... {label}", file=sys.stderr, flush=True)
            s = await measured(sp, "sieve", sfn)
            rd = await measured(rp, "redis", rfn) if (peer and rfn) else None
            rows.append((label, s, rd, kind))
            return s, rd

        inf, binf, b = args.inflight, args.batch_inflight, 32
        _s_single, r_single = await both(
            f"produce, single sends ({inf} in flight)", "rate",
            lambda r: sv.produce_single("BenchSingle", n, inf, r),
            (lambda r: peer.produce_single("single", n, inf, r)) if peer else None,
        )  # fmt: skip
        s_batch, r_batch = await both(
            f"produce, batches of {b} ({binf} in flight)", "rate",
            lambda r: sv.produce_batch("BenchBatch", n, b, binf, r),
            (lambda r: peer.produce_batch("batch", n, b, binf, r)) if peer else None,
        )  # fmt: skip
        s_all, r_all = await both(
            "consume (32 per pull, 4 in flight)", "rate",
            lambda r: sv.consume("BenchBatch", n + 1, "*", r),
            (lambda r: peer.consume("batch", n, "*", r)) if peer else None,
        )  # fmt: skip
        s_tag, r_tag = await both(
            "consume, tag filter 10%: delivered msg/s", "rate",
            lambda r: sv.consume("BenchBatch", n_tag_a(n), "TagA", r),
            (lambda r: peer.consume("batch", n_tag_a(n), "TagA", r)) if peer else None,
        )  # fmt: skip
        lat_s, lat_r = await both(
            f"latency @ {args.rate:,} msg/s for {args.seconds:g} s: p50", "p50",
            lambda r: sv.latency("BenchLatency", args.rate, args.seconds, r),
            (lambda r: peer.latency("latency", args.rate, args.seconds, r)) if peer else None,
        )  # fmt: skip
        rows.append(("latency: p99", lat_s, lat_r, "p99"))

        api: list[Row] = []
        if args.low_level:
            print("  ... api.py rows", file=sys.stderr, flush=True)
            for label, fn, ref in (
                (f"api.py: produce, single sends ({inf} in flight)",
                 lambda r: sv.api_produce_single("BenchApiSingle", n, inf, r), r_single),
                (f"api.py: produce, batches of {b} ({binf} in flight)",
                 lambda r: sv.api_produce_batch("BenchApiBatch", n, b, binf, r), r_batch),
                ("api.py: consume (32 per pull, 4 in flight)",
                 lambda r: sv.api_consume("BenchApiBatch", n, "*", r), r_all),
                ("api.py: consume, tag filter 10%: delivered msg/s",
                 lambda r: sv.api_consume("BenchApiBatch", n_tag_a(n), "TagA", r), r_tag),
            ):  # fmt: skip
                api.append((label, await measured(sp, "sieve", fn), ref, "rate"))

        print()
        print_table(rows + api)
        print(
            "  brk / rds: CPU time (utime+stime, all threads) of the sievemq dev process / redis-server per message "
            "of the phase;\n  cli / rcli: CPU time of this client process per message; api.py rows: sievemq through "
            "client/api.py request wrappers\n  (no Producer/PushConsumer), against the same Redis figures"
        )
        print()
        s_share = s_tag.wire_bytes / s_all.wire_bytes if s_all.wire_bytes else 0.0
        print(
            f"tag filter, bytes received by the client: sievemq {mib(s_tag.wire_bytes)} = {s_share:.1%} of its "
            f"unfiltered consume ({mib(s_all.wire_bytes)}); delivered {s_tag.received:,} (expected {n_tag_a(n):,})"
        )
        r_share = None
        if r_tag and r_all and r_all.wire_bytes:
            r_share = r_tag.wire_bytes / r_all.wire_bytes
            print(
                f"{'':42s}redis   {mib(r_tag.wire_bytes)} = {r_share:.1%} of its unfiltered consume "
                f"({mib(r_all.wire_bytes)}): it cannot filter on the server"
            )
        if len(api) == 4 and api[2][1].wire_bytes:
            a_all, a_tag = api[2][1], api[3][1]
            print(
                f"{'':42s}api.py  {mib(a_tag.wire_bytes)} = {a_tag.wire_bytes / a_all.wire_bytes:.1%} of its "
                f"unfiltered consume ({mib(a_all.wire_bytes)})"
            )
        print(
            f"latency samples: sievemq {len(lat_s.latencies_ms):,}"
            + (f", redis {len(lat_r.latencies_ms):,}" if lat_r else "")
            + f" of {int(args.rate * args.seconds):,} sent (the first second is warm-up); "
            + f"max sievemq {max(lat_s.latencies_ms, default=0):.1f} ms"
            + (f", redis {max(lat_r.latencies_ms, default=0):.1f} ms" if lat_r else "")
        )
        m = proc_mem(sv.pid)
        line = (
            f"resident memory after the run: sievemq dev {m.get('VmRSS', 0) / 1024:,.0f} MiB "
            f"(anonymous {m.get('RssAnon', 0) / 1024:,.0f} MiB + mapped store files {m.get('RssFile', 0) / 1024:,.0f} "
            f"MiB; peak {m.get('VmHWM', 0) / 1024:,.0f} MiB)"
        )
        if peer:
            rm = proc_mem(peer.pid)
            line += f"; redis-server {rm.get('VmRSS', 0) / 1024:,.0f} MiB (peak {rm.get('VmHWM', 0) / 1024:,.0f} MiB)"
        print(line)

        print()
        print("targets (sievemq against Redis Streams in this run):")
        hl_batch = s_batch.rate / r_batch.rate if r_batch else None
        hl_cons = s_all.rate / r_all.rate if r_all else None
        api_batch = api_cons = ""
        if len(api) == 4 and r_batch and r_all:
            api_batch = f" (api.py: {api[1][1].rate / r_batch.rate:.2f}x)"
            api_cons = f" (api.py: {api[2][1].rate / r_all.rate:.2f}x)"
        only_10 = s_tag.received == n_tag_a(n) and not s_tag.note
        p99 = lat_s.pct(99)
        print(f"  {verdict(hl_batch >= 1.0 if hl_batch else None)} batched produce >= 1.0x: "
              + (f"{hl_batch:.2f}x" if hl_batch else "-") + api_batch)  # fmt: skip
        print(f"  {verdict(hl_cons >= 1.0 if hl_cons else None)} consume >= 1.0x: "
              + (f"{hl_cons:.2f}x" if hl_cons else "-") + api_cons)  # fmt: skip
        print(f"  {verdict(only_10 and s_share <= 0.15)} tag filter delivers only the 10% and moves <= 15% of the "
              f"bytes: {s_tag.received:,} delivered, {s_share:.1%} of the bytes")  # fmt: skip
        print(f"  {verdict(p99 <= 5.0)} p99 latency <= 5 ms at {args.rate:,} msg/s: {p99:.2f} ms")
        async with AdminClient("") as admin:  # how late the broker's loop ran (its last minute, and all-time)
            info = await admin.runtime_info(dev.addr)
        if "eventLoopLagMaxMs" in info:
            print(f"  broker event loop, last minute: p50 {info['eventLoopLagP50Ms']} ms, p99 "
                  f"{info['eventLoopLagP99Ms']} ms; whole run: max {info['eventLoopLagMaxMs']} ms, "
                  f"{info['eventLoopStalls']} stalls >= 10 ms ({info['eventLoopStalledMs']} ms in all)")  # fmt: skip
        return 0
    finally:
        if peer is not None:
            with contextlib.suppress(Exception):
                await peer.close()
        if redis_proc is not None and redis_proc.poll() is None:
            redis_proc.send_signal(signal.SIGTERM)
            try:
                redis_proc.wait(10)
            except subprocess.TimeoutExpired:
                redis_proc.kill()
                redis_proc.wait()
        dev.stop()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"kept {tmp} (store, dev.log, redis.log)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=100_000, help="messages per throughput phase")
    ap.add_argument("--size", type=int, default=1024, help="body bytes")
    ap.add_argument("--rate", type=int, default=2000, help="latency phase: messages per second")
    ap.add_argument("--seconds", type=float, default=10.0, help="latency phase: duration")
    ap.add_argument("--inflight", type=int, default=32, help="single sends in flight")
    ap.add_argument("--batch-inflight", type=int, default=4, help="batches in flight")
    ap.add_argument(
        "--redis-parser",
        choices=("auto", "hiredis", "python"),
        default="auto",
        help="redis-py reply parser (auto: hiredis when installed)",
    )
    ap.add_argument("--no-redis", action="store_true", help="skip the reference peer")
    ap.add_argument("--no-low-level", dest="low_level", action="store_false", help="skip the api.py rows")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (logs, store)")
    args = ap.parse_args()
    try:
        import uvloop
    except ImportError:
        sys.exit(asyncio.run(run(args)))
    sys.exit(uvloop.run(run(args)))


if __name__ == "__main__":
    main()
