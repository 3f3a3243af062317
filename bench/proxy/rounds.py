"""The rounds: every row of every phase, the systems taking turns, each row's figures kept for the report."""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sievemq import Message, Producer, Selector
from sievemq.admin.api import AdminClient
from sievemq.errors import SieveError

from . import direct
from .client5 import BenchError, Driver
from .direct import BATCH, INVISIBLE_S
from .measure import Sample, Servers

QUEUES = 4
WARMUP = 20
SQL = "a > 5 AND b = 'x'"
MATCH_TAG, OTHER_TAG = "TagA", "TagB"
PRODUCE_TOPIC = "BxProduce"
LABELS = {
    "sync5": "5.x Producer.send, via proxy",
    "sync4": "4.x Producer.send, direct",
    "async5": "5.x Producer.send_async, via proxy",
    "async4": "4.x Producer.send, direct",
    "cons5": "5.x SimpleConsumer, via proxy",
    "cons4": "4.x PullConsumer poll + commit, direct",
    "consP": "POP + ACK each, direct (pop_api)",
    "sql5": "5.x SimpleConsumer SQL92, via proxy",
    "tag5": "5.x SimpleConsumer TAG, via proxy",
    "sql4": "4.x PullConsumer SQL92, direct",
}
"""Row key -> what the row runs."""


def matches(i: int) -> bool:
    """Message i of the filtered backlog matches ``a > 5 AND b = 'x'``: a > 5 for 4 of every 10, b = 'x' for one
    ten of every four (10% in all)."""
    return i % 10 > 5 and (i // 10) % 4 == 0


def filter_message(topic: str, i: int, body: bytes) -> Message:
    """Message i of the filtered backlog: properties a, b and w (1 when it matches), tag TagA when it matches."""
    hit = matches(i)
    props = {"a": str(i % 10), "b": "x" if (i // 10) % 4 == 0 else "y", "w": "1" if hit else "0"}
    return Message(topic, body, tags=MATCH_TAG if hit else OTHER_TAG, properties=props)


@dataclass
class Startup:
    """Start-up times, none of them in a timed part."""

    ready: list[float] = field(default_factory=list)
    """5.x: from the driver's launch to its ready line."""
    startup: list[float] = field(default_factory=list)
    """5.x: ``startup()``."""
    warmup: list[float] = field(default_factory=list)
    """5.x producer: the warm-up sends."""
    first_receive: list[float] = field(default_factory=list)
    """5.x consumer: the receive of the empty topic."""
    pull_start: list[float] = field(default_factory=list)
    """4.x: ``PullConsumer.start()``."""
    version: str = ""


class Rounds:
    """The servers, the 4.x producer, the rows of every round and their samples."""

    def __init__(self, args: argparse.Namespace, tmp: Path, python: Path) -> None:
        self.args, self.tmp, self.python = args, tmp, python
        self.servers = Servers(tmp)
        self.samples: dict[str, list[Sample]] = {}
        self.startup = Startup()
        self.filter_counts: list[str] = []
        self.body = b"x" * args.size
        self.producer: Producer | None = None
        self.drivers: list[Driver] = []

    async def run(self, started: Callable[[], None]) -> None:
        """Start everything (then call ``started``), run the rounds, stop everything (also after an error)."""
        try:
            self.servers.start()
            started()
            await self.prepare()
            for r in range(self.args.rounds):
                await self.round(r)
        finally:
            for d in self.drivers:
                d.stop()
            if self.producer is not None:
                await self.producer.close()
            self.servers.stop()

    async def prepare(self) -> None:
        """The topics of every round; the 4.x producer started and warmed."""
        topics = [PRODUCE_TOPIC] + [f"Bx{kind}{r}" for r in range(self.args.rounds) for kind in ("Consume", "Filter")]
        async with AdminClient(self.servers.ns.addr) as admin:
            deadline = time.monotonic() + 30
            while not await admin.brokers():
                if time.monotonic() > deadline:
                    raise BenchError("the broker did not register with the name server")
                await asyncio.sleep(0.2)
            for t in topics:
                await admin.create_topic(t, queues=QUEUES)
            while not await self._routed(admin, topics[-1]):  # the name server learns of topics from the broker
                if time.monotonic() > deadline:
                    raise BenchError(f"the name server has no route of {topics[-1]} after 30 s")
                await asyncio.sleep(0.2)
        self.producer = Producer(self.servers.ns.addr, "bench-proxy-4x")
        await self.producer.start()
        await direct.sends(self.producer, WARMUP, 1, self.plain)

    @staticmethod
    async def _routed(admin: AdminClient, topic: str) -> bool:
        try:
            return bool((await admin.route(topic)).queue_datas)
        except SieveError:
            return False

    def plain(self, i: int, topic: str = PRODUCE_TOPIC) -> Message:
        """A message of the produce and consume phases."""
        return Message(topic, self.body, tags=MATCH_TAG)

    def record(self, row: str, s: Sample) -> None:
        self.samples.setdefault(row, []).append(s)
        print(f"  {LABELS[row]:<42}{s.rate:>9,.0f} msg/s  ({s.count} in {s.elapsed:.2f} s)", flush=True)

    async def rows(self, r: int, rows: list[tuple[str, Callable[[], Awaitable[Sample]]]]) -> None:
        """One phase's rows in turn: as listed in even rounds, reversed in odd ones."""
        for name, run in rows if r % 2 == 0 else rows[::-1]:
            self.record(name, await run())

    # ------------------------------------------------------------------------------------------ a round
    async def round(self, r: int) -> None:
        """Every phase once."""
        a, n, k = self.args, self.args.messages, self.args.inflight
        srv = self.servers
        assert self.producer is not None
        p = self.producer
        print(f"round {r + 1}/{a.rounds}", flush=True)
        await self.rows(r, [
            ("sync5", lambda: self.produce_5x(a.sync_messages, 1)),
            ("sync4", lambda: direct.produce(srv, p, a.sync_messages, 1, self.plain)),
        ])  # fmt: skip
        await self.rows(r, [
            ("async5", lambda: self.produce_5x(n, k)),
            ("async4", lambda: direct.produce(srv, p, n, k, self.plain)),
        ])  # fmt: skip

        topic, ftopic = f"BxConsume{r}", f"BxFilter{r}"
        m = sum(1 for i in range(n) if matches(i))
        d, sql, tag = await self.consumers_5x([  # launched together: their imports overlap, before any timed row
            ("consume", topic, f"BxC{r}G5", n, ()),
            ("filter-sql", ftopic, f"BxF{r}G5S", m, ("--sql", SQL, "--want-prop", "w=1")),
            ("filter-tag", ftopic, f"BxF{r}G5T", m, ("--tag-expr", MATCH_TAG, "--want-prop", "w=1")),
        ])  # fmt: skip
        await self.fill(topic, n, lambda i: self.plain(i, topic))
        started = self.startup.pull_start
        await self.rows(r, [
            ("cons5", lambda: self.consume_5x(d, n, n)),
            ("cons4", lambda: direct.pull(srv, topic, f"BxC{r}G4", n, n, Selector.tag("*"), started)),
            ("consP", lambda: direct.pop(srv, topic, f"BxC{r}GP", n)),
        ])  # fmt: skip

        await direct.register_sql(srv, ftopic, f"BxF{r}G4S", SQL)
        await self.fill(ftopic, n, lambda i: filter_message(ftopic, i, self.body))
        await self.rows(r, [
            ("sql5", lambda: self.consume_5x(sql, m, n)),
            ("tag5", lambda: self.consume_5x(tag, m, n)),
            ("sql4", lambda: direct.pull(srv, ftopic, f"BxF{r}G4S", m, n, Selector.sql(SQL), started)),
        ])  # fmt: skip
        if r == a.rounds - 1:
            await self.read_filter_counts([f"BxF{r}G5S", f"BxF{r}G4S"])

    async def fill(self, topic: str, n: int, make: Callable[[int], Message]) -> None:
        """A backlog of ``n`` messages (not timed)."""
        assert self.producer is not None
        failed = await direct.sends(self.producer, n, self.args.inflight, make)
        if failed:
            raise BenchError(f"filling {topic}: {len(failed)} sends answered {failed[0]}")

    async def read_filter_counts(self, groups: list[str]) -> None:
        """How the broker filtered these SQL groups (skips by bitmap show that their Bloom bits were used)."""
        async with AdminClient(self.servers.ns.addr) as admin:
            for group in groups:
                for broker in await admin.group_filters(group):
                    for f in broker.get("filters", []):
                        c = f.get("counts") or {}
                        self.filter_counts.append(
                            f"{group}: matched {c.get('matched')}, skipped by bitmap {c.get('filtered_by_bitmap')}, "
                            f"evaluated and not matching {c.get('filtered_by_evaluation')}"
                        )

    # ------------------------------------------------------------------------------------------ 5.x rows
    def driver(self, name: str, *args: str) -> Driver:
        d = Driver(self.python, [*args, "--endpoints", self.servers.proxy.addr], self.tmp / f"driver-{name}.log",
                   self.tmp / "client-home")  # fmt: skip
        self.drivers.append(d)
        return d

    async def ready(self, d: Driver) -> dict[str, Any]:
        """Wait for the driver's ready line; keep its start-up times."""
        r = await d.aexpect("ready", 120)
        self.startup.ready.append(time.perf_counter() - d.launched)
        self.startup.startup.append(r["startup_s"])
        self.startup.version = r["version"]
        return r

    async def timed_5x(self, d: Driver, count: int, scanned: int) -> tuple[Sample, dict[str, Any]]:
        """The driver's timed part, with the servers' CPU over it; then its done line."""
        b0, p0 = self.servers.cpu()
        d.go()
        t = await d.aexpect("timed")
        b1, p1 = self.servers.cpu()
        done = await d.aexpect("done", 120)
        try:
            await asyncio.to_thread(d.popen.wait, 30)
        except subprocess.TimeoutExpired:
            raise BenchError(f"5.x driver {d.name} did not exit 30 s after its last line") from None
        return Sample(count, scanned, t["elapsed_s"], b1 - b0, p1 - p0, t["cpu_s"]), {**t, **done}

    async def produce_5x(self, n: int, inflight: int) -> Sample:
        """A 5.x Producer process: warmed, then ``n`` sends timed."""
        d = self.driver(f"produce-{inflight}", "produce", "--topic", PRODUCE_TOPIC, "--count", str(n), "--size",
                        str(self.args.size), "--inflight", str(inflight), "--warmup", str(WARMUP))  # fmt: skip
        self.startup.warmup.append((await self.ready(d))["warmup_s"])
        s, r = await self.timed_5x(d, n, n)
        if r["failed"] or r["sent"] != n:
            raise BenchError(f"5.x producer: {r['sent']} of {n} sent, {r['failed']} failed: {r['first_error']}")
        return s

    async def consumers_5x(self, specs: list[tuple[str, str, str, int, tuple[str, ...]]]) -> list[Driver]:
        """5.x SimpleConsumer processes of (name, topic, group, count, filter flags), ready: their groups registered,
        their cursors at the end of the (still empty) topics."""
        drivers = [
            self.driver(name, "consume", "--topic", topic, "--group", group, "--count", str(count),
                        "--batch", str(BATCH), "--invisible", str(INVISIBLE_S), "--await", str(self.args.await_s),
                        *expr)
            for name, topic, group, count, expr in specs
        ]  # fmt: skip
        for d, (_, _, group, _, _) in zip(drivers, specs, strict=True):
            r = await self.ready(d)
            self.startup.first_receive.append(r["first_receive_s"])
            if r["early"]:
                raise BenchError(f"5.x consumer {group}: the receive of the empty topic got {r['early']} messages")
        return drivers

    async def consume_5x(self, d: Driver, expected: int, scanned: int) -> Sample:
        """The consumer's timed receive + ack of ``expected`` messages; exactly those, each once."""
        s, r = await self.timed_5x(d, expected, scanned)
        s.note = f"{r['receives']} receives, {r['empty_receives']} empty"
        problems = [f"{k} {r[k]}" for k in ("errors", "unwanted", "extra") if r[k]]
        if not r["acked"] == r["received"] == r["unique"] == expected:
            problems.append(f"received {r['received']} ({r['unique']} distinct), acked {r['acked']}, "
                            f"expected {expected}")  # fmt: skip
        if problems:
            raise BenchError(f"5.x consumer {d.name}: {'; '.join(problems)}; first error: {r['first_error'] or '-'}")
        return s
