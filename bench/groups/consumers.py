"""A consumer child of bench_groups: one ``PushConsumer`` per consumer group, many groups on one asyncio loop.

    python -m bench.groups.consumers --namesrv ADDR --first I --count N --m 20 --mix mixed [--topic T]
                                     [--prefix bench-g] [--concurrency 4] [--pull-batch 32] [--shared]

Prints ``ready <cpu>`` once every consumer owns every queue of the topic. Then, per ``expect <end>`` line on stdin
(messages ``0 .. end-1`` will have been sent), prints ``done <t_last> <delivered> <cpu> <wrong> <dups>`` once
every group has every message it matches: ``t_last`` the ``time.monotonic()`` (system-wide) at which the last group
got its last one; since the start: ``delivered`` messages (all groups), ``cpu`` this process's CPU seconds,
``wrong`` messages a group did not ask for, ``dups`` messages delivered twice (totals: a message of the next round
may come before its ``expect`` line is read). ``stop`` (or the end of stdin) closes the consumers and prints
``closed <cpu>``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
import time
from typing import cast

from bench.groups.workload import QUEUES, TOPIC, FilterMix, GroupSpec, groups
from sievemq import ConsumeFrom, PushConsumer
from sievemq.protocol.message import MessageExt

READY_TIMEOUT = 120.0


class Tally:
    """What the groups of this process received."""

    def __init__(self, specs: list[GroupSpec]) -> None:
        self.specs = specs
        self.seen: list[set[int]] = [set() for _ in specs]
        self.want: list[int] = [0] * len(specs)
        self.pending = 0
        """Groups short of ``want``."""
        self.delivered = self.wrong = self.dups = 0
        self.t_last = 0.0
        self.round = asyncio.Event()

    def expect(self, end: int) -> None:
        """A new round: every group should end with its matches among ``0 .. end-1``."""
        self.want = [s.expected(end) for s in self.specs]
        self.t_last = 0.0
        self.round.clear()
        self.pending = sum(1 for i, w in enumerate(self.want) if len(self.seen[i]) < w)
        if not self.pending:
            self.t_last = time.monotonic()
            self.round.set()

    def add(self, i: int, msgs: list[MessageExt]) -> None:
        """Group ``i`` got ``msgs``."""
        now = time.monotonic()
        seen, spec = self.seen[i], self.specs[i]
        before = len(seen)
        for m in msgs:
            k = int(m.properties["k"])
            if k in seen:
                self.dups += 1
            elif not spec.matches(k):
                self.wrong += 1
            seen.add(k)
        self.delivered += len(msgs)
        want = self.want[i]
        if before < want <= len(seen):
            self.pending -= 1
            if not self.pending:
                self.t_last = now
                self.round.set()


def watch_stdin(loop: asyncio.AbstractEventLoop, lines: asyncio.Queue[str]) -> None:
    """Hand stdin's lines to the loop (``stop`` at its end)."""
    try:
        for line in sys.stdin:
            loop.call_soon_threadsafe(lines.put_nowait, line.strip())
        loop.call_soon_threadsafe(lines.put_nowait, "stop")
    except RuntimeError:  # the loop is closed: the consumers stopped already
        pass


def make_consumer(a: argparse.Namespace, i: int, spec: GroupSpec, tally: Tally) -> PushConsumer:
    """The ``PushConsumer`` of group ``spec`` (its own client instance unless ``--shared``)."""
    c = PushConsumer(
        a.namesrv, group=spec.name, consume_from=ConsumeFrom.FIRST, concurrency=a.concurrency,
        consume_batch_size=a.pull_batch, pull_batch_size=a.pull_batch,
        instance_name=f"bench-groups-{a.first}" if a.shared else None,
    )  # fmt: skip
    c.subscribe(a.topic, spec.selector())

    async def on_messages(msgs: list[MessageExt]) -> None:
        tally.add(i, msgs)

    c.listener(on_messages)
    return c


async def run(a: argparse.Namespace) -> None:
    """Start the consumers, serve ``expect`` lines until ``stop``, close them."""
    specs = groups(a.first + a.count, a.m, cast(FilterMix, a.mix), a.prefix)[a.first :]
    tally = Tally(specs)
    consumers = [make_consumer(a, i, s, tally) for i, s in enumerate(specs)]
    lines: asyncio.Queue[str] = asyncio.Queue()
    threading.Thread(target=watch_stdin, args=(asyncio.get_running_loop(), lines), daemon=True).start()
    try:
        await asyncio.gather(*(c.start() for c in consumers))
        deadline = time.monotonic() + READY_TIMEOUT
        while not all(sum(1 for q in c.assignment() if q.topic == a.topic) >= QUEUES for c in consumers):
            if time.monotonic() > deadline:
                raise TimeoutError("the consumers did not get every queue")
            await asyncio.sleep(0.05)
        print(f"ready {time.process_time():.4f}", flush=True)
        while (line := await lines.get()) != "stop":
            if line.startswith("expect "):
                tally.expect(int(line.split()[1]))
                await tally.round.wait()
                print(f"done {tally.t_last:.6f} {tally.delivered} {time.process_time():.4f} {tally.wrong} "
                      f"{tally.dups}", flush=True)  # fmt: skip
    finally:
        await asyncio.gather(*(c.close() for c in consumers), return_exceptions=True)
    print(f"closed {time.process_time():.4f}", flush=True)


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments and run on uvloop (asyncio without it)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--namesrv", required=True)
    ap.add_argument("--topic", default=TOPIC)
    ap.add_argument("--first", type=int, required=True, help="index of this process's first group")
    ap.add_argument("--count", type=int, required=True, help="groups in this process")
    ap.add_argument("--m", type=int, default=20, help="each group wants one tag / region of this many")
    ap.add_argument("--mix", choices=("mixed", "tag", "sql"), default="mixed")
    ap.add_argument("--prefix", default="bench-g")
    ap.add_argument("--concurrency", type=int, default=4, help="listener tasks per consumer")
    ap.add_argument("--pull-batch", type=int, default=32)
    ap.add_argument("--shared", action="store_true", help="one client instance (connection) for every group")
    a = ap.parse_args(argv)
    try:
        import uvloop
    except ImportError:
        asyncio.run(run(a))
    else:
        uvloop.run(run(a))
    return 0


if __name__ == "__main__":
    sys.exit(main())
