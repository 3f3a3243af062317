"""What FIFO order costs a POP consumer group (docs/pop.md §5), in one run: orderly POP against plain POP.

Fresh processes on 127.0.0.1 (a name server and a broker, ``ASYNC_FLUSH``, stores in a temporary folder), a topic of
``--queues`` queues holding ``--messages`` messages, and per round two phases, each with a new group that starts at
the oldest message: ``--consumers`` tasks POP queue -1 (batches of ``--batch``, plain or with ``order``) and ack
every message, until the group consumed them all. Orderly POP hands out one batch per queue at a time, so at most
``--queues`` batches are out at once; plain POP has no such bound. The orderly rate is printed as a ratio to the
plain one of the same round, with the broker's CPU per message of each; the rounds alternate and the figures are
medians.

    .venv/bin/python bench/bench_pop_orderly.py [--messages 4000] [--queues 4] [--consumers 8] [--batch 16]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.procs import Proc, broker_proc, namesrv_proc

from bench.bench_transactions import proc_cpu
from sievemq import Message, Producer
from sievemq.admin.api import AdminClient
from sievemq.client import pop_api
from sievemq.remoting.connection import connect

TOPIC = "BenchFifo"


async def prepare(ns: Proc, messages: int, queues: int) -> None:
    async with AdminClient(ns.addr) as admin:
        deadline = time.monotonic() + 30
        while not await admin.brokers():
            if time.monotonic() > deadline:
                raise TimeoutError("the broker did not register")
            await asyncio.sleep(0.2)
        await admin.create_topic(TOPIC, queues=queues)
    async with Producer(ns.addr, "bench-fifo-p") as p:
        sem = asyncio.Semaphore(32)

        async def one(i: int) -> None:
            async with sem:
                await p.send(Message(TOPIC, b"x" * 256), shard_key=f"group-{i % 64}")

        await asyncio.gather(*(one(i) for i in range(messages)))


async def consume(broker: Proc, group: str, order: bool, messages: int, consumers: int, batch: int) -> float:
    """Seconds for ``consumers`` tasks to POP and ack all ``messages``."""
    left = messages
    done = asyncio.Event()

    async def worker() -> None:
        nonlocal left
        conn = await connect("127.0.0.1", broker.port)
        try:
            while not done.is_set():
                r = await pop_api.pop_message(conn, group, TOPIC, -1, max_nums=batch, invisible_ms=60_000,
                                              poll_ms=1000, from_latest=False, order=order)  # fmt: skip
                for m in r.messages:
                    await pop_api.ack_message(conn, group, m.handle)
                left -= len(r.messages)
                if left <= 0:
                    done.set()
        finally:
            conn.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(consumers)))
    return time.perf_counter() - t0


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-fifo-") as tmp:
        ns = namesrv_proc(Path(tmp)).start()
        broker = broker_proc(Path(tmp), ns.addr, "broker-a").start()
        try:
            await prepare(ns, args.messages, args.queues)
            rates: dict[bool, list[float]] = {False: [], True: []}
            cpus: dict[bool, list[float]] = {False: [], True: []}
            ratios = []
            for r in range(args.rounds):
                for order in (r % 2 == 1, r % 2 == 0):  # alternate which goes first
                    cpu0 = proc_cpu(broker)
                    s = await consume(broker, f"bench-{r}-{int(order)}", order, args.messages, args.consumers,
                                      args.batch)  # fmt: skip
                    rates[order].append(args.messages / s)
                    cpus[order].append((proc_cpu(broker) - cpu0) / args.messages * 1e6)
                ratios.append(rates[True][-1] / rates[False][-1])
            print(f"{args.messages} messages of 256 B in {args.queues} queues, {args.consumers} consumers, batches "
                  f"of {args.batch}, POP of queue -1, ack each; medians of {args.rounds} rounds")  # fmt: skip
            for order, name in ((False, "plain POP"), (True, "orderly POP")):
                print(f"  {name:12} {statistics.median(rates[order]):8.0f} msg/s   broker CPU "
                      f"{statistics.median(cpus[order]):6.1f} us/msg")  # fmt: skip
            print(f"  orderly / plain: {statistics.median(ratios):.2f}")
        finally:
            broker.stop()
            ns.stop()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=4000)
    p.add_argument("--queues", type=int, default=4)
    p.add_argument("--consumers", type=int, default=8)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--rounds", type=int, default=3)
    asyncio.run(main(p.parse_args()))
