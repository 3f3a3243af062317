"""What a transaction costs a producer, and how soon the broker's check settles one left open, in one run.

Fresh processes on 127.0.0.1 (a name server and a broker, ``ASYNC_FLUSH``, stores in a temporary folder), a topic of
4 queues, and three phases:

* **plain sends**: ``--messages`` messages of ``--size`` bytes by ``Producer.send``, ``--inflight`` in flight.
* **transactional sends**: as many by ``TransactionProducer.send_in_transaction`` (half message, a local
  transaction that commits at once, END_TRANSACTION), ``--inflight`` in flight.
* **check-backs**: ``--checks`` transactions answered UNKNOWN, on a broker with ``transactionTimeout`` 0 and
  ``transactionCheckInterval`` ``--check-interval-ms``; the time from a send's answer to the check listener's
  call, and to the committed message being readable.

The plain and transactional phases take turns for ``--rounds`` rounds (medians); the transactional rate is printed
as a ratio to the plain one of the same run, with the broker's CPU per message of each.

    .venv/bin/python bench/bench_transactions.py [--messages 5000] [--inflight 16] [--checks 50]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.procs import Proc, broker_proc, namesrv_proc

from sievemq import Message, Producer, TransactionProducer, TransactionState
from sievemq.admin.api import AdminClient
from sievemq.client import api
from sievemq.protocol.message import MessageExt
from sievemq.remoting.codes import RequestCode
from sievemq.remoting.connection import connect

TOPIC = "BenchTxT"
QUEUES = 4
CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu(p: Proc) -> float:
    """utime + stime of a process in seconds."""
    assert p.popen is not None
    with open(f"/proc/{p.popen.pid}/stat") as f:
        rest = f.read().rpartition(")")[2].split()
    return (int(rest[11]) + int(rest[12])) / CLK_TCK


async def ready(ns: Proc) -> None:
    """The broker registered and the topic made."""
    async with AdminClient(ns.addr) as admin:
        deadline = time.monotonic() + 30
        while not await admin.brokers():
            if time.monotonic() > deadline:
                raise TimeoutError("the broker did not register")
            await asyncio.sleep(0.2)
        await admin.create_topic(TOPIC, queues=QUEUES)


async def run_inflight(n: int, inflight: int, one: Callable[[int], Awaitable[Any]]) -> float:
    """Seconds to run ``one(i)`` for i < n, ``inflight`` at a time."""
    counter = iter(range(n))

    async def worker() -> None:
        for i in counter:
            await one(i)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(inflight)))
    return time.perf_counter() - t0


async def commit(msg: Message, arg: Any) -> TransactionState:
    return TransactionState.COMMIT


async def unknown(msg: Message, arg: Any) -> TransactionState:
    return TransactionState.UNKNOWN


async def never(msg: MessageExt) -> TransactionState:
    return TransactionState.UNKNOWN


async def throughput(args: argparse.Namespace, tmp: Path) -> None:
    ns = namesrv_proc(tmp, "ns").start()
    broker = broker_proc(tmp, ns.addr, "broker-a").start()
    body = b"x" * args.size
    rates: dict[str, list[float]] = {"plain": [], "transactional": []}
    cpu: dict[str, list[float]] = {"plain": [], "transactional": []}
    try:
        await ready(ns)
        async with Producer(ns.addr, "bench-plain") as p, TransactionProducer(
            ns.addr, "bench-tx", check_listener=never
        ) as tp:
            for _ in range(3):  # warm both paths
                await p.send(Message(TOPIC, body))
                await tp.send_in_transaction(Message(TOPIC, body), commit)
            for _round in range(args.rounds):
                for kind in ("plain", "transactional"):
                    c0 = proc_cpu(broker)

                    async def one(i: int, kind: str = kind) -> None:
                        m = Message(TOPIC, body, keys=[f"k{i}"])
                        if kind == "plain":
                            await p.send(m)
                        else:
                            r = await tp.send_in_transaction(m, commit)
                            assert r.end_error is None, r.end_error

                    secs = await run_inflight(args.messages, args.inflight, one)
                    rates[kind].append(args.messages / secs)
                    cpu[kind].append((proc_cpu(broker) - c0) * 1e6 / args.messages)
    finally:
        broker.stop()
        ns.stop()
    plain, tx = statistics.median(rates["plain"]), statistics.median(rates["transactional"])
    print(f"\n{args.messages} x {args.size} B, {args.inflight} in flight, median of {args.rounds} rounds")
    print(f"{'':16}{'msg/s':>10}{'broker CPU µs/msg':>20}{'ratio to plain':>16}")
    print(f"{'plain send':16}{plain:>10,.0f}{statistics.median(cpu['plain']):>20.1f}{1.0:>16.2f}")
    print(f"{'transaction':16}{tx:>10,.0f}{statistics.median(cpu['transactional']):>20.1f}{tx / plain:>16.2f}")


async def check_backs(args: argparse.Namespace, tmp: Path) -> None:
    ns = namesrv_proc(tmp, "ns2").start()
    broker = broker_proc(tmp, ns.addr, "broker-b", "--transaction-timeout", "0", "--transaction-check-interval",
                         str(args.check_interval_ms), label="broker-checks").start()  # fmt: skip
    answered: dict[str, float] = {}
    checked: dict[str, float] = {}

    async def listener(msg: MessageExt) -> TransactionState:
        checked.setdefault(msg.uniq_key or "", time.perf_counter())
        return TransactionState.COMMIT

    try:
        await ready(ns)
        async with TransactionProducer(ns.addr, "bench-check", check_listener=listener, topics=[TOPIC]) as tp:
            for i in range(args.checks):
                r = await tp.send_in_transaction(Message(TOPIC, f"c{i}".encode()), unknown)
                answered[r.send.msg_id] = time.perf_counter()
                await asyncio.sleep(args.check_interval_ms / 1000 / 7)  # spread over the rounds
            deadline = time.monotonic() + 30
            while len(checked) < args.checks and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            conn = await connect("127.0.0.1", broker.port)
            try:
                while time.monotonic() < deadline:
                    n = sum([await api.queue_offset(conn, RequestCode.GET_MAX_OFFSET, TOPIC, q) for q in range(QUEUES)])
                    if n >= args.checks:
                        break
                    await asyncio.sleep(0.05)
                settled_at = time.perf_counter()
            finally:
                conn.close()
    finally:
        broker.stop()
        ns.stop()
    lat = sorted((checked[k] - t) * 1000 for k, t in answered.items() if k in checked)
    interval = args.check_interval_ms
    print(f"\ncheck-backs: {len(lat)}/{args.checks} checked, transactionTimeout 0, interval {interval} ms")
    if lat:
        print(f"  answer -> check listener: p50 {statistics.median(lat):.0f} ms, max {lat[-1]:.0f} ms "
              f"(a round runs every {min(1000, args.check_interval_ms)} ms)")  # fmt: skip
        print(f"  last answer -> all committed and readable: {(settled_at - max(answered.values())) * 1000:.0f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=5000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--inflight", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--checks", type=int, default=50)
    ap.add_argument("--check-interval-ms", type=int, default=1000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-tx-") as d:
        asyncio.run(throughput(args, Path(d)))
        asyncio.run(check_backs(args, Path(d)))


if __name__ == "__main__":
    main()
