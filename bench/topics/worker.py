"""A load child of bench_topics.py: produce to or consume from a slice of the topics over raw remoting.

    python -m bench.topics.worker --addr HOST:PORT --mode produce|consume --first I --count C [...]

It connects (``--conns`` connections, ``--inflight`` requests in flight on each), prints ``ready``, waits for a
line on stdin, runs and prints one JSON line: ``t0`` and ``t1`` (``time.monotonic()``, one clock for every process
of the machine), ``messages``, ``requests``, ``errors`` and the first few errors' texts. Produce: ``--per-queue``
SEND_MESSAGE_V2 to every queue of topics ``first .. first+count-1``, one message per request. Consume: PULL_MESSAGE
of every such queue from offset 0 (no long polling, no offset commit) until it has given ``--per-queue`` messages.
After ``--max-errors`` failed requests it stops (a broker out of mappings would otherwise take a timeout per queue).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Iterator

import orjson

from sievemq.client import api
from sievemq.protocol.message import properties_to_string
from sievemq.protocol.send_header import SendMessageHeader
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.connection import Connection, connect

PRODUCER_GROUP = "bench-topics-p"
CONSUMER_GROUP = "bench-topics-c"
MAX_ERRORS_KEPT = 5
PULL_BATCH = 32


def topic_name(prefix: str, i: int) -> str:
    """The ``i``-th topic of a run."""
    return f"{prefix}{i:06d}"


class Tally:
    """What one child did."""

    def __init__(self) -> None:
        self.messages = 0
        self.requests = 0
        self.errors = 0
        self.samples: list[str] = []

    def error(self, text: str) -> None:
        """Count an error, keep the first few texts."""
        self.errors += 1
        if len(self.samples) < MAX_ERRORS_KEPT:
            self.samples.append(text)


async def produce(conns: list[Connection], items: Iterator[tuple[str, int]], a: argparse.Namespace,
                  t: Tally) -> None:  # fmt: skip
    """Every (topic, queue) of ``items``, ``--per-queue`` sends each, from ``--inflight`` tasks per connection."""
    body = b"x" * a.size
    props = properties_to_string({"WAIT": "true"})
    sends = ((topic, q) for topic, q in items for _ in range(a.per_queue))

    async def task(conn: Connection) -> None:
        for topic, q in sends:
            if t.errors >= a.max_errors:
                return
            header = SendMessageHeader(producer_group=PRODUCER_GROUP, topic=topic, queue_id=q,
                                       born_timestamp=int(time.time() * 1000), properties=props)  # fmt: skip
            t.requests += 1
            try:
                await api.send_request(conn, header, body, timeout=a.timeout)
                t.messages += 1
            except Exception as e:  # counted, the run goes on
                t.error(f"send {topic}/{q}: {type(e).__name__}: {e}")

    await asyncio.gather(*(task(c) for c in conns for _ in range(a.inflight)))


async def consume(conns: list[Connection], items: Iterator[tuple[str, int]], a: argparse.Namespace,
                  t: Tally) -> None:  # fmt: skip
    """Pull every (topic, queue) of ``items`` from offset 0 until it gave ``--per-queue`` messages: one work item
    per ``PULL_BATCH`` offsets, so that a few queues of many messages are pulled as concurrently as many queues
    of a few."""
    spans = ((topic, q, s, min(a.per_queue, s + PULL_BATCH)) for topic, q in items
             for s in range(0, a.per_queue, PULL_BATCH))  # fmt: skip

    async def task(conn: Connection) -> None:
        for topic, q, offset, end in spans:
            if t.errors >= a.max_errors:
                return
            got, want = 0, end - offset
            while got < want:
                t.requests += 1
                try:
                    r = await api.pull_message(conn, CONSUMER_GROUP, topic, q, offset, max_nums=want - got,
                                               timeout=a.timeout)  # fmt: skip
                except Exception as e:
                    t.error(f"pull {topic}/{q}@{offset}: {type(e).__name__}: {e}")
                    break
                if r.code != ResponseCode.SUCCESS or not r.messages:
                    t.error(f"pull {topic}/{q}@{offset}: code {r.code} {r.remark or ''} (got {got})")
                    break
                got += len(r.messages)
                offset = r.next_begin_offset
            t.messages += got

    await asyncio.gather(*(task(c) for c in conns for _ in range(a.inflight)))


async def main(a: argparse.Namespace) -> int:
    """Connect, say ready, wait for the go line, run, print the tally."""
    host, _, port = a.addr.rpartition(":")
    conns = [await connect(host, int(port)) for _ in range(a.conns)]
    items = ((topic_name(a.prefix, i), q) for i in range(a.first, a.first + a.count) for q in range(a.queues))
    t = Tally()
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    t0 = time.monotonic()
    try:
        await (produce if a.mode == "produce" else consume)(conns, items, a, t)
    finally:
        t1 = time.monotonic()
        for c in conns:
            c.close()
    out = {"t0": t0, "t1": t1, "messages": t.messages, "requests": t.requests, "errors": t.errors,
           "samples": t.samples}  # fmt: skip
    print(orjson.dumps(out).decode(), flush=True)
    return 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--addr", required=True, help="the broker, host:port")
    ap.add_argument("--mode", choices=("produce", "consume"), required=True)
    ap.add_argument("--prefix", default="BenchT")
    ap.add_argument("--first", type=int, required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--queues", type=int, default=4)
    ap.add_argument("--per-queue", type=int, default=2)
    ap.add_argument("--size", type=int, default=100, help="body bytes")
    ap.add_argument("--conns", type=int, default=1)
    ap.add_argument("--inflight", type=int, default=32, help="requests in flight per connection")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds a request may take")
    ap.add_argument("--max-errors", type=int, default=200, help="stop after this many failed requests")
    return ap.parse_args(argv)


if __name__ == "__main__":
    args = parse()
    try:
        import uvloop
    except ImportError:
        sys.exit(asyncio.run(main(args)))
    sys.exit(uvloop.run(main(args)))
