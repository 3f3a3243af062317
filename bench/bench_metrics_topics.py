"""What one ``/metrics`` scrape of a broker with many topics costs: its time (the scrape runs on the broker's event
loop, so its time is the time every request waits), its page's size and series, and the broker's CPU.

For each ``--topics`` count a fresh name server and broker (ASYNC_FLUSH, store in a temporary folder under
``--dir``, /dev/shm by default), topics of ``--queues`` queues created by UPDATE_AND_CREATE_TOPIC_LIST (18) in lists
of ``--list`` topics, one message sent to each queue (``--per-topic 1``: one per topic, to one of its queues), then
``--scrapes`` scrapes of ``/metrics``, each one only after the last answered. The group ``BenchGroup`` commits
offsets of every ``--commit-every``-th topic's queues (lag series). Printed per count: topics, creation
and send time, median and largest scrape time, broker CPU per scrape, page bytes, series (sample lines), the
broker's resident memory, and each scrape's time.

    .venv/bin/python bench/bench_metrics_topics.py [--topics 1000 10000 100000] [--queues 4] [--scrapes 5]
                                                   [--per-topic 1] [--send-max 100000] [--max-series 500]

Each queue that holds messages is a file: with a store that keeps every queue's file open, RLIMIT_NOFILE bounds
``--send-max`` (topics sent to). ``--in-process`` times the broker's collectors in this process instead, over
counters of every topic and a group's offsets on every queue, without a store or a broker process.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.procs import Proc, broker_proc, free_port, namesrv_proc
from tests.support.wire import send_message

from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import connect

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def cpu_s(pid: int) -> float:
    """utime + stime of ``pid`` in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` in MB."""
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE / 1e6


async def populate(addr: str, topics: int, queues: int, per_list: int, per_topic: int, inflight: int,
                   commit_every: int, send_max: int) -> tuple[float, float]:  # fmt: skip
    """Create the topics and send; (seconds creating, seconds sending)."""
    host, _, port = addr.rpartition(":")
    conn = await connect(host, int(port))
    names = [f"T{i:06d}" for i in range(topics)]
    t0 = time.monotonic()
    for i in range(0, topics, per_list):
        rows = [
            {
                "topicName": n,
                "readQueueNums": queues,
                "writeQueueNums": queues,
                "perm": 6,
                "topicFilterType": "SINGLE_TAG",
                "topicSysFlag": 0,
                "order": False,
            }
            for n in names[i : i + per_list]
        ]
        cmd = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC_LIST, {},
                                      orjson.dumps({"topicConfigList": rows}))  # fmt: skip
        resp = await conn.request(cmd, 600)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    t1 = time.monotonic()
    jobs = [(n, q) for n in names[:send_max] for q in (range(queues) if per_topic == 0 else [hash(n) % queues])]
    sem = asyncio.Semaphore(inflight)

    async def one(topic: str, q: int) -> None:
        async with sem:
            await send_message(conn, topic, b"x" * 64, queue_id=q, properties={"WAIT": "false"})

    await asyncio.gather(*(one(t, q) for t, q in jobs))
    if commit_every:
        for n in names[::commit_every]:
            for q in range(queues):
                cmd = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                    "consumerGroup": "BenchGroup", "topic": n, "queueId": q, "commitOffset": 0})  # fmt: skip
                conn.send_oneway(cmd)
        await conn.request(RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {}), 60)
    t2 = time.monotonic()
    conn.close()
    return t1 - t0, t2 - t1


def scrape(url: str) -> tuple[float, int, int]:
    """(seconds, bytes, sample lines) of one scrape."""
    t = time.monotonic()
    with urllib.request.urlopen(url, timeout=600) as resp:
        text = resp.read()
    took = time.monotonic() - t
    lines = sum(1 for ln in text.split(b"\n") if ln and not ln.startswith(b"#"))
    return took, len(text), lines


def run(n: int, args: argparse.Namespace) -> None:
    """One broker with ``n`` topics: populate, scrape, print."""
    with tempfile.TemporaryDirectory(prefix="bench-mt-", dir=args.dir) as tmp:
        ns = namesrv_proc(Path(tmp)).start()
        http = free_port()
        extra = [
            "--max-topics",
            str(n + 100),
            "--http-listen-port",
            str(http),
            "--mapped-file-size-consume-queue-entries",
            "100",
            *(["--http-metrics-max-series", str(args.max_series)] if args.max_series else []),
        ]
        br: Proc = broker_proc(Path(tmp), f"127.0.0.1:{ns.port}", "broker-a", *extra)
        br.start()
        try:
            assert br.popen is not None
            pid = br.popen.pid
            made, sent = asyncio.run(populate(br.addr, n, args.queues, args.list, args.per_topic, args.inflight,
                                              args.commit_every, args.send_max))  # fmt: skip
            url = f"http://127.0.0.1:{http}/metrics"
            times, sizes, series = [], [], []
            c0 = cpu_s(pid)
            for _ in range(args.scrapes):
                took, size, lines = scrape(url)
                times.append(took)
                sizes.append(size)
                series.append(lines)
            cpu = (cpu_s(pid) - c0) / args.scrapes
            print(f"{n:>7} topics x {args.queues}: create {made:6.1f} s, send {sent:6.1f} s | scrape median "
                  f"{statistics.median(times) * 1000:7.1f} ms, max {max(times) * 1000:7.1f} ms, cpu "
                  f"{cpu * 1000:7.1f} ms | page {statistics.median(sizes) / 1e3:8.1f} kB, "
                  f"{statistics.median(series):7.0f} series | rss {rss_mb(pid):6.0f} MB | each (ms): "
                  f"{' '.join(f'{t * 1000:.0f}' for t in times)}", flush=True)  # fmt: skip
        finally:
            br.stop(120)
            ns.stop()


def in_process(n: int, args: argparse.Namespace) -> None:
    """The broker's collectors in this process (a ``BrokerController`` not started: no store files) over counters of
    ``n`` topics (a message in on each queue, one out to a group) and the group's offsets on every queue."""
    from prometheus_client import CollectorRegistry, generate_latest

    from sievemq.broker.config import BrokerConfig
    from sievemq.broker.controller import BrokerController
    from sievemq.broker.metrics import broker_metrics

    with tempfile.TemporaryDirectory(prefix="bench-mt-", dir=args.dir) as tmp:
        limit = {"http_metrics_max_series": args.max_series} if args.max_series else {}
        b = BrokerController(BrokerConfig(store_path_root_dir=tmp, **limit))
        for i in range(n):
            t = f"T{i:06d}"
            for _ in range(args.queues):
                b.stats.put(t, 1, 200)
            b.stats.get(t, 1, 200, group="G")
            for q in range(args.queues):
                b.offsets.commit("G", t, q, 0)
        registry = CollectorRegistry(auto_describe=False)
        for c in broker_metrics(b).collectors:
            registry.register(c)
        times = []
        page = b""
        for _ in range(args.scrapes):
            t0 = time.perf_counter()
            page = generate_latest(registry)
            times.append(time.perf_counter() - t0)
        lines = sum(1 for ln in page.split(b"\n") if ln and not ln.startswith(b"#"))
        print(
            f"{n:>7} topics x {args.queues}, in process: scrape median {statistics.median(times) * 1000:7.1f} ms, "
            f"max {max(times) * 1000:7.1f} ms | page {len(page) / 1e3:8.1f} kB, {lines:7d} series",
            flush=True,
        )


def main() -> None:
    """Parse the arguments and run each topic count."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--topics", type=int, nargs="+", default=[1000, 10000, 100000])
    p.add_argument("--queues", type=int, default=4)
    p.add_argument("--list", type=int, default=1000, help="topics per UPDATE_AND_CREATE_TOPIC_LIST")
    p.add_argument("--per-topic", type=int, default=0, help="1: one message per topic; 0: one per queue")
    p.add_argument("--inflight", type=int, default=64)
    p.add_argument("--commit-every", type=int, default=10, help="a group commits offsets of every n-th topic")
    p.add_argument("--scrapes", type=int, default=5)
    p.add_argument(
        "--send-max",
        type=int,
        default=4000,
        help="topics sent to at most (each queue with messages is an open file: RLIMIT_NOFILE bounds them)",
    )
    p.add_argument("--dir", default="/dev/shm", help="where the store goes")
    p.add_argument("--max-series", type=int, default=None, help="the broker's httpMetricsMaxSeries (default: its own)")
    p.add_argument("--in-process", action="store_true", help="the collectors in this process over counters only")
    args = p.parse_args()
    for n in args.topics:
        (in_process if args.in_process else run)(n, args)


if __name__ == "__main__":
    main()
