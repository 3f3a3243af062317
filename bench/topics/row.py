"""One row of bench_topics.py: a fresh name server and broker, N topics of 4 queues created, a few messages
produced to every queue (twice: to new queues, then to existing ones) and consumed, the broker's /proc and disk
figures, a clean restart and a kill -9."""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from tests.support.procs import Proc

from bench.topics.load import LoadResult, run_load
from bench.topics.procs import (
    BROKER,
    DiskUse,
    Peaks,
    ProcStats,
    disk_use,
    kill9,
    launch,
    listening,
    pid_of,
    proc_stats,
    servers,
    stop,
    wait_for,
)
from bench.topics.worker import CONSUMER_GROUP, topic_name
from sievemq.admin.api import AdminClient
from sievemq.client import api
from sievemq.errors import RemotingError
from sievemq.protocol.names import AUTO_CREATE_TOPIC_KEY
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.connection import connect

QUEUES = 4
ROUTE_SAMPLES = 200
GONE_TIMEOUT = 60.0
"""Seconds the name server may keep routing a stopped broker's topic before its route times are left out."""


def log(text: str) -> None:
    """A progress line on stderr (the report goes to stdout)."""
    import sys

    print(f"  ... {time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


@dataclass
class Restart:
    """One stop and start of the broker, each time from the new process's start."""

    stop_s: float = 0.0
    """Clean stop: from SIGTERM to its exit (0 for kill -9)."""
    gone_s: float | None = None
    """From the stop until the name server no longer routed the last topic (None: it still did)."""
    listen_s: float = 0.0
    answer_s: float = 0.0
    """Until a pull of the last topic's last queue from offset 0 gave its messages."""
    route_s: float | None = None
    """Until the name server routed the last topic to the broker again (None when it never stopped routing it)."""
    broker: ProcStats = field(default_factory=ProcStats)
    """The new process once it answered."""
    cq: DiskUse = field(default_factory=DiskUse)
    """The consume queues' files then (recovery may have allocated or written more of them)."""


@dataclass
class Row:
    """Everything measured with ``n`` topics."""

    n: int
    per_queue: int = 0
    create_mode: str = ""
    create_requests: int = 0
    create_s: float = 0.0
    route_after_create_s: float = 0.0
    first_start_s: float = 0.0
    produce: LoadResult = field(default_factory=LoadResult)
    """The first messages of every queue (their files are created as they come)."""
    produce2: LoadResult = field(default_factory=LoadResult)
    """As many again, to queues that exist."""
    consume: LoadResult = field(default_factory=LoadResult)
    broker_cpu_produce: float = 0.0
    broker_cpu_produce2: float = 0.0
    broker_cpu_consume: float = 0.0
    broker: ProcStats = field(default_factory=ProcStats)
    peak_fds: int = 0
    peak_maps: int = 0
    peak_rss_kib: int = 0
    """The broker's highest figures in samples every 0.5 s from its first start until after the consume phase."""
    namesrv: ProcStats = field(default_factory=ProcStats)
    cq: DiskUse = field(default_factory=DiskUse)
    store: DiskUse = field(default_factory=DiskUse)
    route_ms_p50: float = 0.0
    route_ms_p99: float = 0.0
    restart: Restart = field(default_factory=Restart)
    kill9: Restart = field(default_factory=Restart)
    took_s: float = 0.0
    load: float = 0.0
    """The machine's 1-minute load average at the row's end (other work on the 2 cores moves every figure)."""
    skipped: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def queues(self) -> int:
        """Queues of the row's topics."""
        return self.n * QUEUES

    def per_queue_bytes(self) -> float:
        """Consume-queue bytes allocated per queue."""
        return self.cq.allocated / self.queues if self.queues else 0.0


def broker_config(path: Path, n: int, a: argparse.Namespace) -> Path:
    """The broker's TOML: room for ``n`` topics (and a few of its own), and ``--cq-entries`` when given."""
    lines = [f"maxTopics = {n + 100}"]
    if a.cq_entries:
        lines.append(f"mappedFileSizeConsumeQueueEntries = {a.cq_entries}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def topic_json(name: str) -> dict[str, Any]:
    """A TopicConfig of 4 queues in RocketMQ's JSON form."""
    return {"topicName": name, "readQueueNums": QUEUES, "writeQueueNums": QUEUES, "perm": 6,
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}  # fmt: skip


async def create_topics(admin: AdminClient, addr: str, n: int, a: argparse.Namespace, row: Row) -> None:
    """Topics ``0 .. n-1`` on the broker: UPDATE_AND_CREATE_TOPIC_LIST (18) of ``--create-batch`` configs each,
    or one UPDATE_AND_CREATE_TOPIC (17) per topic with ``--one-by-one``."""
    t0 = time.monotonic()
    if a.one_by_one:
        row.create_mode = "17 one by one"
        for i in range(n):
            await admin.create_topic(topic_name(a.prefix, i), queues=QUEUES, broker=addr)
            row.create_requests += 1
    else:
        row.create_mode = f"18 lists of {a.create_batch}"
        for s in range(0, n, a.create_batch):
            body = orjson.dumps({"topicConfigList": [topic_json(topic_name(a.prefix, i))
                                                     for i in range(s, min(n, s + a.create_batch))]})  # fmt: skip
            await admin.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC_LIST, {"defaultTopic": AUTO_CREATE_TOPIC_KEY},
                             body)  # fmt: skip
            row.create_requests += 1
            if row.create_requests % 10 == 0:
                log(f"N={n}: {min(n, s + a.create_batch):,} topics created in {time.monotonic() - t0:.1f} s")
    row.create_s = time.monotonic() - t0


async def routed(admin: AdminClient, topic: str, broker_addr: str) -> bool:
    """Whether the name server routes ``topic`` to ``broker_addr`` with queues."""
    r = await admin.route(topic)
    return bool(r.queue_datas) and any(broker_addr in b.broker_addrs.values() for b in r.broker_datas)


async def not_routed(admin: AdminClient, topic: str) -> bool:
    """Whether the name server has no route of ``topic`` (TOPIC_NOT_EXIST)."""
    try:
        r = await admin.route(topic)
    except RemotingError as e:
        return e.code == ResponseCode.TOPIC_NOT_EXIST
    return not r.queue_datas


async def answers(port: int, topic: str, want: int) -> bool:
    """Whether a pull of ``topic``'s last queue from offset 0 gives ``want`` messages (at most 32)."""
    conn = await connect("127.0.0.1", port)
    try:
        r = await api.pull_message(conn, CONSUMER_GROUP, topic, QUEUES - 1, 0, max_nums=min(32, want), timeout=10)
        return r.code == ResponseCode.SUCCESS and len(r.messages) == min(32, want)
    finally:
        conn.close()


async def route_latency(admin: AdminClient, a: argparse.Namespace, n: int, row: Row) -> None:
    """GET_ROUTEINFO_BY_TOPIC of ``ROUTE_SAMPLES`` random topics, one at a time: p50 and p99 in ms."""
    rnd = random.Random(n)
    times = []
    for _ in range(ROUTE_SAMPLES):
        t0 = time.perf_counter()
        await admin.route(topic_name(a.prefix, rnd.randrange(n)))
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    row.route_ms_p50 = statistics.median(times)
    row.route_ms_p99 = times[min(len(times) - 1, int(len(times) * 0.99))]


async def restart(broker: Proc, store: Path, admin: AdminClient, last: str, want: int, hard: bool,
                  timeout: float) -> Restart:  # fmt: skip
    """Stop the broker (SIGTERM, or SIGKILL when ``hard``), wait until the name server drops its route, start it
    again on the same store and time it: listening, answering a pull of ``last``, routed again (TimeoutError past
    ``timeout`` seconds)."""
    out = Restart()
    if hard:
        kill9(broker)
    else:
        out.stop_s = stop(broker)
    try:
        out.gone_s = await wait_for("route dropped", lambda: not_routed(admin, last), GONE_TIMEOUT, every=0.05)
    except TimeoutError:
        out.gone_s = None
    t0 = time.monotonic()
    launch(broker)

    async def since(what: str, check: Callable[[], Awaitable[bool]]) -> float:
        await wait_for(what, check, timeout, broker)
        return time.monotonic() - t0

    addr = broker.addr
    waits = [since("listening", lambda: listening(broker.port)), since("answer", lambda: answers(broker.port, last,
             want)), since("route", lambda: routed(admin, last, addr))]  # fmt: skip
    out.listen_s, out.answer_s, route_s = await asyncio.gather(*waits)
    out.route_s = route_s if out.gone_s is not None else None
    out.broker = proc_stats(pid_of(broker))
    out.cq = disk_use(store / "consumequeue")
    return out


async def run_row(a: argparse.Namespace, tmp: Path, n: int, no_restart: str = "") -> Row:
    """Everything with ``n`` topics on a fresh name server and broker under ``tmp``; ``no_restart``: why the
    restarts are left out ('' to measure them)."""
    t_row = time.monotonic()
    row = Row(n, per_queue=max(a.per_queue, -(-a.min_messages // (n * QUEUES))))
    ns, broker = servers(tmp, broker_config(tmp / "broker.toml", n, a))
    if a.src:
        ns.env["PYTHONPATH"] = broker.env["PYTHONPATH"] = str(Path(a.src) / "src")
    last = topic_name(a.prefix, n - 1)
    extra = ["--prefix", a.prefix, "--queues", str(QUEUES), "--size", str(a.size), "--inflight", str(a.inflight)]
    sampler: asyncio.Task[None] | None = None
    try:
        launch(ns)
        await wait_for("name server listening", lambda: listening(ns.port), 60, ns)
        async with AdminClient(ns.addr, timeout=a.request_timeout) as admin:
            t0 = time.monotonic()
            launch(broker)
            await wait_for("broker registered", lambda: registered(admin, broker.addr), a.start_timeout, broker)
            row.first_start_s = time.monotonic() - t0
            peaks = Peaks(pid_of(broker))
            sampler = asyncio.create_task(peaks.run())
            log(f"N={n}: name server pid {pid_of(ns)}, broker pid {pid_of(broker)} ({row.first_start_s:.1f} s)")
            await create_topics(admin, broker.addr, n, a, row)
            row.route_after_create_s = await wait_for(
                "route of the last topic", lambda: routed(admin, last, broker.addr), a.start_timeout, broker
            )
            log(f"N={n}: {n:,} topics created in {row.create_s:.1f} s ({row.create_mode}); routed "
                f"{row.route_after_create_s:.1f} s later")  # fmt: skip
            bpid = pid_of(broker)
            for phase, mode, k in (("produce", "produce", row.per_queue), ("produce again", "produce", row.per_queue),
                                   ("consume", "consume", 2 * row.per_queue)):  # fmt: skip
                c0 = proc_stats(bpid).cpu_s
                res = await run_load(mode, broker.addr, n, tmp, a.senders, [*extra, "--per-queue", str(k)],
                                     a.phase_timeout)  # fmt: skip
                cpu = proc_stats(bpid).cpu_s - c0
                if phase == "produce":
                    row.produce, row.broker_cpu_produce = res, cpu
                elif phase == "produce again":
                    row.produce2, row.broker_cpu_produce2 = res, cpu
                else:
                    row.consume, row.broker_cpu_consume = res, cpu
                log(f"N={n}: {phase} {res.messages:,} messages in {res.seconds:.1f} s ({res.rate:,.0f} msg/s, "
                    f"{res.requests:,} requests, {res.errors} errors), broker {cpu:.1f} s CPU")  # fmt: skip
                for s in res.samples:
                    row.notes.append(f"{phase}: {s}")
            sampler.cancel()
            peaks.sample()
            row.peak_fds, row.peak_maps, row.peak_rss_kib = peaks.fds, peaks.maps, peaks.rss_kib
            row.broker, row.namesrv = proc_stats(bpid), proc_stats(pid_of(ns))
            store = tmp / BROKER
            row.cq, row.store = disk_use(store / "consumequeue"), disk_use(store)
            await route_latency(admin, a, n, row)
            want = 2 * row.per_queue
            stored, expected = row.produce.messages + row.produce2.messages, row.queues * want
            if stored != expected and not no_restart:  # the last topic's pull would never answer
                no_restart = f"the produce phases stored {stored:,} of {expected:,} messages"
            if a.no_restart or no_restart:
                row.notes.append(f"restarts not measured: {no_restart or '--no-restart'}")
            else:
                row.restart = await restart(broker, store, admin, last, want, hard=False, timeout=a.start_timeout)
                log(f"N={n}: clean restart answered in {row.restart.answer_s:.1f} s")
                row.kill9 = await restart(broker, store, admin, last, want, hard=True, timeout=a.start_timeout)
                log(f"N={n}: kill -9 recovery answered in {row.kill9.answer_s:.1f} s")
    except Exception as e:
        row.notes.insert(0, f"FAILED: {type(e).__name__}: {e}")
        log(f"N={n}: FAILED: {type(e).__name__}: {e}")
    finally:
        if sampler is not None:
            sampler.cancel()
        stop(broker)
        stop(ns)
    row.took_s, row.load = time.monotonic() - t_row, os.getloadavg()[0]
    return row


async def registered(admin: AdminClient, addr: str) -> bool:
    """Whether the name server knows the broker at ``addr``."""
    return any(addr in b.addrs.values() for b in await admin.brokers())
