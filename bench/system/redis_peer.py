"""The Redis Streams peer: ``redis-server`` with AOF (``appendfsync everysec``) and redis-py's asyncio client."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import itertools
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.support.procs import free_port, wait_port

from bench.system.common import PULL_BATCH, QUEUES, key_of, props_of, tag_of
from bench.system.latency import LatencyChild, paced, paced_tasks, stamp
from bench.system.measure import Result

SETTINGS = ("--save", "", "--appendonly", "yes", "--appendfsync", "everysec")
"""No RDB snapshots; every write appended to the AOF, which is fsynced once a second (like sievemq's
ASYNC_FLUSH: answered from memory, flushed every 500 ms)."""


WARM_CONNECTIONS = 4
"""Concurrent senders: XADDs sent at once before the phase so the pool holds that many connections."""
MAX_CONNECTIONS = 256
"""Connections of a client's pool (one per command in flight)."""


def unavailable() -> str | None:
    """Why the Redis peer cannot run here, or None."""
    if shutil.which("redis-server") is None:
        return "redis-server is not installed (apt-get install redis-server)"
    if importlib.util.find_spec("redis") is None:
        return "redis-py is not installed (pip install -e '.[bench]')"
    return None


def parser_class(parser: str) -> tuple[Any, str]:
    """redis-py's asyncio reply parser class for ``auto`` / ``hiredis`` / ``python``, and its name."""
    from redis._parsers import _AsyncHiredisParser, _AsyncRESP2Parser
    from redis.utils import HIREDIS_AVAILABLE

    if parser == "auto":
        parser = "hiredis" if HIREDIS_AVAILABLE else "python"
    if parser == "hiredis" and not HIREDIS_AVAILABLE:
        raise SystemExit("--redis-parser hiredis: the hiredis package is not installed (pip install hiredis)")
    return (_AsyncHiredisParser if parser == "hiredis" else _AsyncRESP2Parser), parser


def versions() -> str:
    """redis-server's and redis-py's versions."""
    import redis

    try:
        out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True, check=True).stdout
        server = out.split("v=")[1].split()[0]
    except (OSError, IndexError, subprocess.CalledProcessError):
        server = "?"
    return f"Redis {server} (redis-py {redis.__version__})"


def start_redis(tmp: Path) -> tuple[subprocess.Popen[bytes], int]:
    """redis-server on a free port of 127.0.0.1 with ``SETTINGS``, its AOF and log under ``tmp/redis``."""
    exe = shutil.which("redis-server") or "redis-server"
    port = free_port()
    where = tmp / "redis"
    where.mkdir(parents=True, exist_ok=True)
    log = open(where / "redis.log", "ab")  # noqa: SIM115 (kept open for the child)
    p = subprocess.Popen(
        [exe, "--bind", "127.0.0.1", "--port", str(port), *SETTINGS, "--dir", str(where)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    wait_port(port, proc=p)
    return p, port


def stop_process(p: subprocess.Popen[bytes]) -> None:
    """SIGTERM, wait, SIGKILL after 10 s (this one process only)."""
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


class RedisPeer:
    """Redis Streams through redis-py's asyncio client."""

    name = "redis"
    wire = "redis"

    def __init__(self, popen: subprocess.Popen[bytes], port: int, body: bytes, tmp: Path, *, parser: str,
                 pipeline: int, batch_inflight: int, keys: bool) -> None:  # fmt: skip
        import redis.asyncio as aredis

        self.popen = popen
        self.port = port
        self.pid = popen.pid
        self.body = body
        self.tmp = tmp
        self.pipeline = pipeline
        self.batch_inflight = batch_inflight
        self.keys = keys
        cls, self.parser = parser_class(parser)
        self.pool = aredis.ConnectionPool(host="127.0.0.1", port=port, max_connections=MAX_CONNECTIONS,
                                           parser_class=cls)  # fmt: skip
        self.r = aredis.Redis(connection_pool=self.pool)
        self._groups = itertools.count()

    @property
    def settings(self) -> str:
        """The server's command-line settings, as printed in the header."""
        return " ".join(x or "''" for x in SETTINGS)

    async def setup(self) -> None:
        """Check the server answers (streams are created by their first XADD)."""
        await self.r.ping()

    async def close(self) -> None:
        """Close the client, then stop the server."""
        with contextlib.suppress(Exception):
            await self.r.aclose()
            await self.pool.disconnect()
        stop_process(self.popen)

    def fields(self, i: int, extra: dict[str, str] | None = None) -> dict[Any, Any]:
        """Message ``i`` as stream fields: tag, key, the three properties, body (and ``extra``)."""
        f: dict[Any, Any] = {"tag": tag_of(i), **props_of(i), "body": self.body}
        if self.keys:
            f["key"] = key_of(i)
        if extra:
            f.update(extra)
        return f

    async def produce_single(self, n: int, inflight: int, r: Result) -> None:
        """``XADD`` from ``inflight`` tasks (redis-py's pool: one connection per task)."""
        stream = "single"
        await self.r.xadd(stream, self.fields(-1))
        counter = iter(range(n))
        t0 = time.perf_counter()

        async def worker() -> None:
            for i in counter:
                await self.r.xadd(stream, self.fields(i))

        await asyncio.gather(*(worker() for _ in range(inflight)))
        r.seconds = time.perf_counter() - t0
        r.messages = n

    async def produce_batch(self, n: int, r: Result) -> None:
        """Non-transactional pipelines of ``pipeline`` XADDs, ``batch_inflight`` in flight."""
        stream, batch = "batch", self.pipeline
        await self.r.xadd(stream, self.fields(-1))
        starts = iter(range(0, n, batch))
        t0 = time.perf_counter()

        async def worker() -> None:
            for s in starts:
                pipe = self.r.pipeline(transaction=False)
                for i in range(s, min(n, s + batch)):
                    pipe.xadd(stream, self.fields(i))
                await pipe.execute()

        await asyncio.gather(*(worker() for _ in range(self.batch_inflight)))
        r.seconds = time.perf_counter() - t0
        r.messages = n

    async def consume(self, expected: int, tag: str | None, r: Result) -> None:
        """``QUEUES`` consumers of a new group from the stream's start, each looping XACK of its previous batch +
        ``XREADGROUP COUNT 32`` in one round trip; ``tag``: keep only that tag (in the client)."""
        stream = "batch"
        group = f"bench-consume-{next(self._groups)}"
        await self.r.xgroup_create(stream, group, id="0")
        want = tag.encode() if tag else b""
        delivered = 0
        first = 0.0
        t0 = time.perf_counter()

        async def consumer(name: str) -> None:
            nonlocal delivered, first
            ack: list[bytes] = []
            while True:
                pipe = self.r.pipeline(transaction=False)
                if ack:
                    pipe.xack(stream, group, *ack)
                pipe.xreadgroup(group, name, {stream: ">"}, count=PULL_BATCH)
                reply = (await pipe.execute())[-1]
                if not reply:
                    return
                if not first:
                    first = time.perf_counter()
                entries = reply[0][1]
                ack = [eid for eid, _ in entries]
                delivered += len(entries) if not tag else sum(1 for _eid, f in entries if f[b"tag"] == want)

        await asyncio.gather(*(consumer(f"c{k}") for k in range(QUEUES)))
        r.seconds = time.perf_counter() - t0
        r.messages = r.received = delivered
        r.startup = first - t0
        if delivered != expected:
            r.note = f"delivered {delivered}, expected {expected}"

    async def latency(self, rate: int, seconds: float, r: Result) -> None:
        """Paced, awaited XADDs stamped with ``ts``, received by ``XREADGROUP BLOCK`` in a child process."""
        stream = "latency"
        n = int(rate * seconds)
        child = LatencyChild(self.tmp, "redis", f"127.0.0.1:{self.port}", stream, "bench-latency", n,
                             "--redis-parser", self.parser)  # fmt: skip
        try:
            await child.start()
            await self.r.xadd(stream, self.fields(-1))  # connection warm (no ts: not a sample)

            async def send(i: int) -> None:
                await self.r.xadd(stream, self.fields(i, {"ts": stamp()}))

            r.messages, r.seconds = await paced(rate, seconds, send)
            await child.finish(r)
        finally:
            child.kill()

    async def latency_concurrent(self, rate: int, seconds: float, r: Result) -> None:
        """Concurrent senders: each XADD (stamped with ``ts``) a task of its own, started on schedule without waiting
        for the earlier ones; the same child consumer. redis-py sends one command per connection at a time: a pool
        of its own opens one per XADD in flight, up to ``MAX_CONNECTIONS``, beyond which a send waits for one (in
        its latency) rather than fail as the shared pool's would."""
        import redis.asyncio as aredis

        stream = "latency-concurrent"
        n = int(rate * seconds)
        child = LatencyChild(self.tmp, "redis", f"127.0.0.1:{self.port}", stream, "bench-latency-conc", n,
                             "--redis-parser", self.parser)  # fmt: skip
        pool = aredis.BlockingConnectionPool(host="127.0.0.1", port=self.port, max_connections=MAX_CONNECTIONS,
                                             timeout=None, parser_class=parser_class(self.parser)[0])  # fmt: skip
        client = aredis.Redis(connection_pool=pool)
        try:
            await child.start()
            # connections warm (no ts: not samples): a few in the pool before the first timed XADD
            await asyncio.gather(*(client.xadd(stream, self.fields(-1)) for _ in range(WARM_CONNECTIONS)))

            async def send(i: int) -> None:
                await client.xadd(stream, self.fields(i, {"ts": stamp()}))

            await paced_tasks(rate, seconds, send, r)
            await child.finish(r)
        finally:
            child.kill()
            await client.aclose()
            await pool.disconnect()
