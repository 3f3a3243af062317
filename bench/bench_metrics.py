"""What the metrics cost: ``sievemq dev`` with its HTTP port scraped, against the same with the port off (and,
with ``--baseline DIR``, against a checkout from before the metrics), in one run on this machine.

Each configuration gets a fresh ``sievemq dev`` (ASYNC_FLUSH, store in a temporary folder) and the same phases on a
topic of 4 queues:

* **single sends**: ``--messages`` messages of ``--size`` bytes, one per request, ``--inflight`` in flight;
* **batches of 32**: ``--batch-messages`` messages by ``Producer.send_batch``, ``--batch-inflight`` in flight;
* **consume**: a ``PushConsumer`` of a new group reads the batches' messages from the first offset (pulls of 32).

Configurations: ``metrics`` (``--http-port`` set, and this process scraping ``/metrics`` every
``--scrape-interval`` seconds during every phase: Prometheus scrapes every 15-60 s, so 1 s exaggerates the
scrapes' share), ``port 0`` (``--http-port 0``: no HTTP port; the per-request counters and latency histograms still
run, they are not switched off) and ``baseline`` (``--baseline DIR``: ``DIR/src`` on ``PYTHONPATH``, e.g. a
``git worktree`` of the commit before the metrics, with its compiled codec built: the per-request counting
itself). They take turns for ``--rounds`` rounds; each figure is the median of its rounds, and the ratios are to
``port 0`` of the same run. The dev process's CPU time per message (utime + stime from ``/proc``) is printed too.

A micro-benchmark first prints the cost of one latency sample: ``LatencyHistogram.observe`` (what the broker runs
per send and per pull), against prometheus_client's ``Histogram.observe`` and against an empty loop.

    .venv/bin/python bench/bench_metrics.py [--messages 20000] [--batch-messages 64000] [--size 256]
                                            [--rounds 3] [--scrape-interval 1.0] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import timeit
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.procs import Proc, dev_proc

from sievemq import ConsumeFrom, Message, Producer, PushConsumer
from sievemq.admin.api import AdminClient
from sievemq.protocol.message import MessageExt

TOPIC = "BenchMetrics"
QUEUES = 4
BATCH = 32
PULL_BATCH = 32
CLK_TCK = os.sysconf("SC_CLK_TCK")
PHASES = ("single", "batch", "consume")


@dataclass
class Figure:
    """One phase of one configuration in one round."""

    messages: int = 0
    seconds: float = 0.0
    cpu: float = 0.0
    """The dev process's CPU seconds during the phase."""

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds else 0.0

    @property
    def us_per_msg(self) -> float:
        return self.cpu * 1e6 / self.messages if self.messages else 0.0


@dataclass
class Config:
    """A configuration and its figures over the rounds."""

    name: str
    http: bool | None
    scrape: bool
    src: Path | None = None
    figures: dict[str, list[Figure]] = field(default_factory=lambda: {p: [] for p in PHASES})
    scrapes: int = 0
    scraped_bytes: int = 0


def proc_cpu(p: Proc) -> float:
    """utime + stime of a process (all its threads) in seconds."""
    assert p.popen is not None
    with open(f"/proc/{p.popen.pid}/stat") as f:
        rest = f.read().rpartition(")")[2].split()
    return (int(rest[11]) + int(rest[12])) / CLK_TCK


def micro() -> None:
    """The cost of one latency sample, three ways."""
    from prometheus_client import CollectorRegistry, Histogram

    from sievemq.metrics.histogram import LATENCY_BUCKETS, LatencyHistogram

    ours = LatencyHistogram()
    theirs = Histogram("bench_seconds", "a benchmark's histogram", buckets=LATENCY_BUCKETS,
                       registry=CollectorRegistry())  # fmt: skip
    n = 1_000_000
    values = [((i * 7919) % 10_000) / 1e6 for i in range(1000)]

    def empty() -> None:
        for _v in values:
            pass

    def observe_ours() -> None:
        for v in values:
            ours.observe(v)

    def observe_theirs() -> None:
        for v in values:
            theirs.observe(v)

    base = min(timeit.repeat(empty, number=n // 1000, repeat=5)) / n
    mine = min(timeit.repeat(observe_ours, number=n // 1000, repeat=5)) / n
    prom = min(timeit.repeat(observe_theirs, number=n // 1000, repeat=5)) / n
    print(f"one latency sample: LatencyHistogram.observe {(mine - base) * 1e9:.0f} ns, prometheus_client "
          f"Histogram.observe {(prom - base) * 1e9:.0f} ns ({(prom - base) / max(mine - base, 1e-12):.1f}x), "
          f"empty loop {base * 1e9:.0f} ns per item")  # fmt: skip


async def scraper(url: str, interval: float, cfg: Config, stop: asyncio.Event) -> None:
    """GET ``url`` every ``interval`` seconds (in a thread) until ``stop``."""

    def get() -> int:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return len(resp.read())

    while not stop.is_set():
        cfg.scraped_bytes += await asyncio.to_thread(get)
        cfg.scrapes += 1
        try:
            await asyncio.wait_for(stop.wait(), interval)
        except TimeoutError:
            pass


def message(body: bytes, i: int) -> Message:
    return Message(TOPIC, body, tags="TagA" if i % 10 == 0 else "TagB", keys=[f"k{i}"])


async def single_sends(p: Producer, body: bytes, n: int, inflight: int) -> Figure:
    counter = iter(range(n))

    async def worker() -> None:
        for i in counter:
            await p.send(message(body, i))

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(inflight)))
    return Figure(n, time.perf_counter() - t0)


async def batches(p: Producer, body: bytes, n: int, inflight: int) -> Figure:
    starts = iter(range(0, n, BATCH))

    async def worker() -> None:
        for s in starts:
            await p.send_batch([message(body, i) for i in range(s, min(n, s + BATCH))])

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(inflight)))
    return Figure(n, time.perf_counter() - t0)


async def consume(namesrv: str, expected: int, group: str) -> Figure:
    done = asyncio.Event()
    count = 0
    c = PushConsumer(namesrv, group=group, consume_from=ConsumeFrom.FIRST, consume_batch_size=PULL_BATCH,
                     pull_batch_size=PULL_BATCH)  # fmt: skip
    c.subscribe(TOPIC)

    @c.listener
    async def on_messages(msgs: list[MessageExt]) -> None:
        nonlocal count
        count += len(msgs)
        if count >= expected:
            done.set()

    t0 = time.perf_counter()
    await c.start()
    try:
        await asyncio.wait_for(done.wait(), 300)
        return Figure(count, time.perf_counter() - t0)
    finally:
        await c.close()


async def one_round(cfg: Config, args: argparse.Namespace, tmp: Path, rnd: int) -> None:
    dev = dev_proc(tmp / f"{cfg.name.replace(' ', '-')}-{rnd}", http=cfg.http)
    if cfg.src is not None:
        dev.env["PYTHONPATH"] = str(cfg.src)
    dev.start()
    stop = asyncio.Event()
    task = None
    try:
        namesrv = str(dev.extra["namesrv"])
        async with AdminClient(namesrv) as admin:
            await admin.create_topic(TOPIC, queues=QUEUES)
        if cfg.scrape:
            task = asyncio.create_task(scraper(str(dev.extra["http"]) + "/metrics", args.scrape_interval, cfg, stop))
        body = os.urandom(args.size)
        async with Producer(namesrv, "bench-metrics-p") as p:
            await p.send(message(body, 0))  # routes and connection warm
            phases = (("single", lambda: single_sends(p, body, args.messages, args.inflight)),
                      ("batch", lambda: batches(p, body, args.batch_messages, args.batch_inflight)))  # fmt: skip
            for phase, work in phases:
                c0 = proc_cpu(dev)
                f = await work()
                f.cpu = proc_cpu(dev) - c0
                cfg.figures[phase].append(f)
        c0 = proc_cpu(dev)
        f = await consume(namesrv, 1 + args.messages + args.batch_messages, f"bench-metrics-c{rnd}")
        f.cpu = proc_cpu(dev) - c0
        cfg.figures["consume"].append(f)
    finally:
        stop.set()
        if task is not None:
            await task
        dev.stop()


def report(configs: list[Config]) -> None:
    ref = next(c for c in configs if c.name == "port 0")
    print()
    print(f"{'phase':8} {'configuration':14} {'msg/s':>10} {'ratio':>7} {'dev CPU µs/msg':>15} {'ratio':>7}")
    for phase in PHASES:
        ref_rate = statistics.median(f.rate for f in ref.figures[phase])
        ref_us = statistics.median(f.us_per_msg for f in ref.figures[phase])
        for c in configs:
            rate = statistics.median(f.rate for f in c.figures[phase])
            us = statistics.median(f.us_per_msg for f in c.figures[phase])
            print(f"{phase:8} {c.name:14} {rate:10,.0f} {rate / ref_rate:6.2f}x {us:15.1f} {us / ref_us:6.2f}x")
    for c in configs:
        if c.scrapes:
            print(f"{c.name}: {c.scrapes} scrapes of /metrics, {c.scraped_bytes / c.scrapes / 1024:.1f} KiB each")


async def main(args: argparse.Namespace) -> None:
    micro()
    configs = [Config("metrics", True, True), Config("port 0", False, False)]
    if args.baseline:
        src = Path(args.baseline).resolve() / "src"
        if not (src / "sievemq" / "__init__.py").is_file():
            raise SystemExit(f"--baseline {args.baseline}: no src/sievemq there")
        configs.append(Config("baseline", None, False, src))
        print(f"baseline: sievemq dev with PYTHONPATH={src}")
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as d:
        for rnd in range(args.rounds):
            order = configs if rnd % 2 == 0 else list(reversed(configs))
            for cfg in order:
                await one_round(cfg, args, Path(d), rnd)
                print(f"round {rnd + 1}: {cfg.name} done", flush=True)
    report(configs)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--batch-messages", type=int, default=64_000)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--inflight", type=int, default=32)
    ap.add_argument("--batch-inflight", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scrape-interval", type=float, default=1.0)
    ap.add_argument("--baseline", default="", help="a checkout from before the metrics (its src/ is used)")
    asyncio.run(main(ap.parse_args()))
