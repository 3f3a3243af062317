"""The sievemq side: ``sievemq dev`` processes (this tree's and, with ``--baseline``, another checkout's) and the
phases through sievemq's own asyncio client (``Producer``, ``PushConsumer``)."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.support.procs import Proc, dev_proc

from bench.system.common import PHASE_TIMEOUT, PULL_BATCH, QUEUES, key_of, props_of, tag_of
from bench.system.latency import LatencyChild, paced, paced_tasks, stamp
from bench.system.measure import Result
from sievemq import ConsumeFrom, Message, Producer, PushConsumer, Selector
from sievemq.admin.api import AdminClient
from sievemq.protocol.message import MessageExt

TOPICS = ("BenchSingle", "BenchBatch", "BenchLatency", "BenchLatencyConc", "BenchApiSingle", "BenchApiBatch")


def start_dev(tmp: Path, name: str, src: Path | None = None) -> Proc:
    """``sievemq dev`` (name server + broker, ASYNC_FLUSH) with its store and log under ``tmp/name``; ``src``:
    run another checkout's ``src`` (``PYTHONPATH``) with this venv's interpreter. With an HTTP port on a free port
    (``/metrics``: the event-loop lag histogram, read only before and after each phase); a baseline whose ``dev``
    has no ``--http-port`` is given no flag (and has none)."""
    http = True if src is None or supports_http_port(src) else None
    dev = dev_proc(tmp / name, http=http)
    if src is not None:
        dev.env["PYTHONPATH"] = str(src)
    return dev.start()


def supports_http_port(src: Path) -> bool:
    """Whether ``sievemq dev`` of the checkout whose ``src`` this is takes ``--http-port``."""
    out = subprocess.run([sys.executable, "-m", "sievemq.cli", "dev", "--help"], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(src)}, timeout=60)  # fmt: skip
    return "--http-port" in out.stdout


def imported_from(src: Path | None) -> str:
    """Where ``import sievemq`` resolves with ``src`` first on ``PYTHONPATH``, as in a started dev process."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    out = subprocess.run(
        [sys.executable, "-c", "import sievemq; print(sievemq.__file__)"], env=env, capture_output=True, text=True
    )
    return out.stdout.strip() or out.stderr.strip()[-300:]


def process_pythonpath(pid: int) -> str:
    """The ``PYTHONPATH`` a running process was started with ('' when unset)."""
    with open(f"/proc/{pid}/environ", "rb") as f:
        for var in f.read().split(b"\0"):
            if var.startswith(b"PYTHONPATH="):
                return var.partition(b"=")[2].decode()
    return ""


def git_rev(tree: Path) -> str:
    """``git describe``-like short revision of a checkout, ``+dirty`` when its work tree has changes."""
    try:
        rev = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return rev + ("+dirty" if dirty else "")


class Sieve:
    """One ``sievemq dev`` process through sievemq's high-level client."""

    wire = "sieve"

    def __init__(
        self, name: str, proc: Proc, body: bytes, tmp: Path, *, batch: int, batch_inflight: int, keys: bool
    ) -> None:
        self.name = name
        self.proc = proc
        self.namesrv = str(proc.extra["namesrv"])
        self.body = body
        self.tmp = tmp
        self.batch = batch
        self.batch_inflight = batch_inflight
        self.keys = keys
        self.pid = proc.popen.pid if proc.popen else 0
        http = proc.extra.get("http")
        self.metrics_url = str(http) if http else None
        """``http://host:port`` of its HTTP port (``/metrics``), None without one."""
        self._groups = itertools.count()

    async def setup(self) -> None:
        """Create the topics, ``QUEUES`` queues each."""
        async with AdminClient(self.namesrv) as admin:
            for t in TOPICS:
                await admin.create_topic(t, queues=QUEUES)

    async def close(self) -> None:
        """Nothing to close: every phase opens and closes its own clients."""

    async def runtime_info(self) -> dict[str, str]:
        """The broker's runtime info (counters, event-loop lag)."""
        async with AdminClient("") as admin:
            return await admin.runtime_info(self.proc.addr)

    def message(self, topic: str, i: int, extra: dict[str, str] | None = None) -> Message:
        """Message ``i``: body, tag, key, the three properties (and ``extra``)."""
        props = props_of(i)
        if extra:
            props.update(extra)
        return Message(topic, self.body, tags=tag_of(i), keys=key_of(i) if self.keys else None, properties=props)

    async def produce_single(self, n: int, inflight: int, r: Result) -> None:
        """``Producer.send`` from ``inflight`` tasks (multiplexed on one connection)."""
        topic = "BenchSingle"
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

    async def produce_batch(self, n: int, r: Result) -> None:
        """``Producer.send_batch`` of ``batch`` messages (one SEND_BATCH_MESSAGE), ``batch_inflight`` in flight."""
        topic, batch = "BenchBatch", self.batch
        async with Producer(self.namesrv, group="bench-producer-batch") as p:
            await p.send_batch([self.message(topic, -1)])
            starts = iter(range(0, n, batch))
            t0 = time.perf_counter()

            async def worker() -> None:
                for s in starts:
                    await p.send_batch([self.message(topic, i) for i in range(s, min(n, s + batch))])

            await asyncio.gather(*(worker() for _ in range(self.batch_inflight)))
            r.seconds = time.perf_counter() - t0
            r.messages = n

    async def consume(self, expected: int, tag: str | None, r: Result) -> None:
        """A ``PushConsumer`` of a new group from the first offset of the batch topic until ``expected`` messages
        were delivered; ``tag``: subscribe to that tag only (the broker filters by tag hash)."""
        group = f"bench-consume-{next(self._groups)}"
        done = asyncio.Event()
        count = wrong = 0
        first = 0.0
        c = PushConsumer(
            self.namesrv, group=group, consume_from=ConsumeFrom.FIRST, consume_batch_size=PULL_BATCH,
            pull_batch_size=PULL_BATCH,
        )  # fmt: skip
        c.subscribe("BenchBatch", Selector.tag(tag or "*"))

        @c.listener
        async def on_messages(msgs: list[MessageExt]) -> None:
            nonlocal count, wrong, first
            if not count:
                first = time.perf_counter()
            count += len(msgs)
            if tag is not None:
                wrong += sum(1 for m in msgs if m.tags != tag)
            if count >= expected:
                done.set()

        t0 = time.perf_counter()
        await c.start()
        try:
            await asyncio.wait_for(done.wait(), PHASE_TIMEOUT)
            r.seconds = time.perf_counter() - t0
            r.messages = r.received = count
            r.startup = first - t0
            if wrong:
                r.note = f"{wrong} messages without the subscribed tag"
        finally:
            await c.close()

    async def latency(self, rate: int, seconds: float, r: Result) -> None:
        """Paced, awaited ``Producer.send``s stamped with ``ts``, received by a ``PushConsumer`` in a child."""
        topic = "BenchLatency"
        n = int(rate * seconds)
        child = LatencyChild(self.tmp, "sievemq", self.namesrv, topic, f"bench-latency-{self.name}", n)
        try:
            await child.start()
            async with Producer(self.namesrv, group="bench-producer-latency") as p:
                await p.send(self.message(topic, -1))  # route and connection warm (no ts: not a sample)

                async def send(i: int) -> None:
                    await p.send(self.message(topic, i, {"ts": stamp()}))

                r.messages, r.seconds = await paced(rate, seconds, send)
            await child.finish(r)
        finally:
            child.kill()

    async def latency_concurrent(self, rate: int, seconds: float, r: Result) -> None:
        """Concurrent senders: each ``Producer.send`` (stamped with ``ts``) a task of its own, started on schedule
        without waiting for the earlier ones (all on the producer's one connection); the same child consumer."""
        topic = "BenchLatencyConc"
        n = int(rate * seconds)
        child = LatencyChild(self.tmp, "sievemq", self.namesrv, topic, f"bench-latency-conc-{self.name}", n)
        try:
            await child.start()
            async with Producer(self.namesrv, group="bench-producer-latency-conc") as p:
                await p.send(self.message(topic, -1))  # route and connection warm (no ts: not a sample)

                async def send(i: int) -> None:
                    await p.send(self.message(topic, i, {"ts": stamp()}))

                await paced_tasks(rate, seconds, send, r)
            await child.finish(r)
        finally:
            child.kill()
