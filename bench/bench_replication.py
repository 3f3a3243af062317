"""What replication costs a producer: one broker alone against an ASYNC_MASTER and a SYNC_MASTER with a slave, in
one run on this machine.

Each configuration gets fresh processes on 127.0.0.1 (a name server, the master, and for the two replicated ones a
slave, all ``ASYNC_FLUSH`` with their stores in a temporary folder), a topic of 4 queues, and the same phases:

* **single sends**: ``--messages`` messages of ``--size`` bytes, one per request, ``--inflight`` in flight.
* **batches of 32**: ``--batch-messages`` messages by ``Producer.send_batch`` of 32, ``--batch-inflight`` in
  flight. During this phase the slave's lag (the master's commit-log end minus the slave's, from each one's
  runtime info) is sampled every 50 ms; after it, the time until the slave holds everything is measured.
* **latency**: one awaited send at a time, paced at ``--rate`` msg/s for ``--seconds``: the send's round trip
  (under SYNC_MASTER that includes the slave's acknowledgement).

The three configurations take turns for ``--rounds`` rounds; each figure is the median of its rounds. Every send
must answer SEND_OK (a SYNC_MASTER send that answers FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE is
counted and printed). Figures are ratios to the single broker of the same run.

    .venv/bin/python bench/bench_replication.py [--messages 20000] [--batch-messages 60000] [--rate 500]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.procs import Proc, broker_proc, namesrv_proc

from sievemq import Message, Producer
from sievemq.admin.api import AdminClient
from sievemq.client.message import SendResult

TOPIC = "BenchReplT"
QUEUES = 4
BATCH = 32
CONFIGS = ("single", "ASYNC_MASTER", "SYNC_MASTER")
CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass
class Phase:
    """One phase of one configuration."""

    messages: int = 0
    seconds: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    master_cpu: float = 0.0
    slave_cpu: float = 0.0
    client_cpu: float = 0.0

    def us(self, cpu: float) -> float:
        """Microseconds of ``cpu`` seconds per message."""
        return cpu * 1e6 / self.messages if self.messages else 0.0

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    def pct(self, p: float) -> float:
        xs = sorted(self.latencies_ms)
        if not xs:
            return float("nan")
        return xs[min(len(xs) - 1, max(0, math.ceil(p / 100 * len(xs)) - 1))]  # nearest rank

    def count(self, results: list[SendResult]) -> None:
        self.statuses.update(r.status.name for r in results)


@dataclass
class Outcome:
    """Every phase of one configuration, and the slave's lag."""

    single: Phase
    batch: Phase
    latency: Phase
    max_lag_bytes: int = 0
    catch_up_s: float = 0.0


class Cluster:
    """A name server and a master, and a slave unless ``role`` is ``single``."""

    def __init__(self, tmp: Path, role: str) -> None:
        self.ns = namesrv_proc(tmp, "ns")
        master_role = "ASYNC_MASTER" if role == "single" else role
        self.master = broker_proc(tmp, self.ns.addr, "broker-a", "--broker-role", master_role, label="master")
        self.slave: Proc | None = None
        if role != "single":
            self.slave = broker_proc(tmp, self.ns.addr, "broker-a", "--broker-role", "SLAVE", "--broker-id", "1",
                                     label="slave")  # fmt: skip

    def start(self) -> None:
        self.ns.start()
        for p in (self.master, self.slave):
            if p is not None:
                p.start()

    def stop(self) -> None:
        for p in (self.slave, self.master, self.ns):
            if p is not None:
                p.stop()

    async def ends(self, admin: AdminClient) -> tuple[int, int]:
        """The master's and the slave's commit-log ends."""
        assert self.slave is not None
        m = await admin.runtime_info(self.master.addr)
        s = await admin.runtime_info(self.slave.addr)
        return int(m.get("commitLogMaxOffset", 0)), int(s.get("commitLogMaxOffset", 0))

    async def ready(self) -> None:
        """The topic on the master (and the slave), the slave connected."""
        async with AdminClient(self.ns.addr) as admin:
            deadline = time.monotonic() + 30
            while True:
                brokers = await admin.brokers()
                ids = {i for b in brokers for i in b.addrs}
                if ids >= ({0, 1} if self.slave else {0}):
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"brokers did not register: {brokers}")
                await asyncio.sleep(0.2)
            await admin.create_topic(TOPIC, queues=QUEUES)
            while self.slave is not None:
                info = await admin.runtime_info(self.master.addr)
                if int(info.get("haConnectedSlaves", 0)) >= 1:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the slave did not connect: {info}")
                await asyncio.sleep(0.2)


def proc_cpu(p: Proc | None) -> float:
    """utime + stime of a process (all its threads) in seconds."""
    if p is None or p.popen is None:
        return 0.0
    with open(f"/proc/{p.popen.pid}/stat") as f:
        rest = f.read().rpartition(")")[2].split()
    return (int(rest[11]) + int(rest[12])) / CLK_TCK


async def cpu_of(cluster: Cluster, work: Awaitable[Phase]) -> Phase:
    """Run ``work``, recording the CPU time the master, the slave and this process spent on it."""
    m0, s0, c0 = proc_cpu(cluster.master), proc_cpu(cluster.slave), time.process_time()
    ph = await work
    ph.master_cpu = proc_cpu(cluster.master) - m0
    ph.slave_cpu = proc_cpu(cluster.slave) - s0
    ph.client_cpu = time.process_time() - c0
    return ph


def message(body: bytes, i: int) -> Message:
    return Message(TOPIC, body, tags="TagA" if i % 10 == 0 else "TagB", keys=[f"k{i}"])


async def single_sends(p: Producer, body: bytes, n: int, inflight: int) -> Phase:
    ph = Phase(messages=n)
    counter = iter(range(n))
    results: list[SendResult] = []

    async def worker() -> None:
        for i in counter:
            results.append(await p.send(message(body, i)))

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(inflight)))
    ph.seconds = time.perf_counter() - t0
    ph.count(results)
    return ph


async def batches(p: Producer, body: bytes, n: int, inflight: int) -> Phase:
    ph = Phase(messages=n)
    starts = iter(range(0, n, BATCH))
    results: list[SendResult] = []

    async def worker() -> None:
        for s in starts:
            results.append(await p.send_batch([message(body, i) for i in range(s, min(n, s + BATCH))]))

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(inflight)))
    ph.seconds = time.perf_counter() - t0
    ph.count(results)
    return ph


async def paced(p: Producer, body: bytes, rate: int, seconds: float) -> Phase:
    ph = Phase()
    results: list[SendResult] = []
    n = int(rate * seconds)
    t0 = time.perf_counter()
    for i in range(n):
        due = t0 + i / rate
        wait = due - time.perf_counter()
        if wait > 0:
            await asyncio.sleep(wait)
        s = time.perf_counter()
        results.append(await p.send(message(body, i)))
        ph.latencies_ms.append((time.perf_counter() - s) * 1000)
    ph.seconds = time.perf_counter() - t0
    ph.messages = n
    ph.count(results)
    return ph


async def sampling_lag(cluster: Cluster, work: Callable[[], Awaitable[Phase]]) -> tuple[Phase, int, float]:
    """Run ``work`` while sampling the slave's lag; then wait until the slave holds everything."""
    if cluster.slave is None:
        return await work(), 0, 0.0
    worst = 0
    done = asyncio.Event()
    async with AdminClient("") as admin:

        async def sample() -> None:
            nonlocal worst
            while not done.is_set():
                m, s = await cluster.ends(admin)
                worst = max(worst, m - s)
                await asyncio.sleep(0.05)

        sampler = asyncio.create_task(sample())
        try:
            ph = await work()
        finally:
            done.set()
            await sampler
        t0 = time.perf_counter()
        while True:
            m, s = await cluster.ends(admin)
            worst = max(worst, m - s)
            if s >= m:
                return ph, worst, time.perf_counter() - t0
            await asyncio.sleep(0.01)


async def measure(role: str, args: argparse.Namespace, body: bytes, tmp: Path) -> Outcome:
    cluster = Cluster(tmp / role.lower(), role)
    cluster.start()
    try:
        await cluster.ready()
        async with Producer(cluster.ns.addr, group="bench-replication", send_timeout=10.0) as p:
            await p.send(message(body, -1))  # route and connection warm
            one = await cpu_of(cluster, single_sends(p, body, args.messages, args.inflight))
            many, lag, catch_up = await sampling_lag(
                cluster, lambda: cpu_of(cluster, batches(p, body, args.batch_messages, args.batch_inflight))
            )
            lat = await cpu_of(cluster, paced(p, body, args.rate, args.seconds))
        return Outcome(one, many, lat, lag, catch_up)
    finally:
        cluster.stop()


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


Figure = Callable[[Outcome], float]


def figures() -> list[tuple[str, Figure, str, bool]]:
    """(label, how to read it from one outcome, format, whether to print ratios)."""
    out: list[tuple[str, Figure, str, bool]] = [
        ("single sends, msg/s", lambda x: x.single.rate, ",.0f", True),
        ("batches of 32, msg/s", lambda x: x.batch.rate, ",.0f", True),
        ("paced send p50, ms", lambda x: x.latency.pct(50), ".2f", True),
        ("paced send p99, ms", lambda x: x.latency.pct(99), ".2f", True),
        ("paced send p99.9, ms", lambda x: x.latency.pct(99.9), ".2f", True),
    ]
    for name, pick in (("single sends", _single), ("batches", _batch)):
        out += [
            (f"{name}: master CPU µs/msg", _cpu(pick, "master"), ".1f", True),
            (f"{name}: slave CPU µs/msg", _cpu(pick, "slave"), ".1f", False),
            (f"{name}: client CPU µs/msg", _cpu(pick, "client"), ".1f", False),
            (f"{name}: all three, CPU µs/msg", _cpu(pick, "master", "slave", "client"), ".1f", True),
        ]
    out += [
        ("slave lag in batches, max KiB", lambda x: x.max_lag_bytes / 1024, ",.0f", False),
        ("slave catch-up after, ms", lambda x: x.catch_up_s * 1000, ",.1f", False),
    ]
    return out


def _cpu(pick: Callable[[Outcome], Phase], *who: str) -> Figure:
    """CPU microseconds per message of the phase ``pick`` chooses, summed over the processes ``who``."""

    def read(x: Outcome) -> float:
        ph = pick(x)
        return ph.us(sum(getattr(ph, f"{w}_cpu") for w in who))

    return read


def _single(x: Outcome) -> Phase:
    return x.single


def _batch(x: Outcome) -> Phase:
    return x.batch


def report(out: dict[str, list[Outcome]]) -> None:
    """One row per figure: each configuration's median over the rounds, and the ratios to the single broker."""
    head = f"{'figure (median of rounds)':34s}" + "".join(f"{c:>16s}" for c in CONFIGS)
    head += f"{'async/single':>14s}{'sync/single':>13s}"
    print(head)
    print("-" * len(head))
    medians: dict[str, list[float]] = {}
    for label, read, fmt, ratios in figures():
        values = [statistics.median(read(x) for x in out[c]) for c in CONFIGS]
        medians[label] = values
        line = f"{label:34s}" + "".join(f"{format(v, fmt):>16s}" for v in values)
        if ratios:
            line += f"{ratio(values[1], values[0]):>14s}{ratio(values[2], values[0]):>13s}"
        print(line)
    for c, xs in out.items():
        bad: Counter[str] = Counter()
        for x in xs:
            for ph in (x.single, x.batch, x.latency):
                bad.update({k: v for k, v in ph.statuses.items() if k != "SEND_OK"})
        if bad:
            print(f"  {c}: sends not SEND_OK: {dict(bad)}")
    rounds = len(out["single"])
    print()
    each = zip(out["single"], out["ASYNC_MASTER"], out["SYNC_MASTER"], strict=True)
    per_round = ", ".join(f"{a.batch.rate / b.batch.rate:.2f}/{s.batch.rate / b.batch.rate:.2f}" for b, a, s in each)
    print(f"  Batches in each round, async/single and sync/single: {per_round}")
    print(f"  The client, the master and the slave share this machine's {os.cpu_count()} cores: the slave's copy work "
          "(writing and dispatching every record again) takes CPU the single broker has for itself. On hosts of "
          "their own, the master's CPU per message is what carries over.")  # fmt: skip
    one, bat = medians["single sends, msg/s"], medians["batches of 32, msg/s"]
    print(f"  ASYNC_MASTER single sends {one[1] / one[0]:.2f}x, batches {bat[1] / bat[0]:.2f}x of one broker alone "
          f"(aim: >= 0.9x); medians of {rounds} rounds")  # fmt: skip
    print(f"  SYNC_MASTER single sends {one[2] / one[0]:.2f}x, batches {bat[2] / bat[0]:.2f}x of one broker alone "
          f"(aim with batches: >= 0.6x)")  # fmt: skip


async def run(args: argparse.Namespace) -> None:
    body = (os.urandom(16).hex().encode() * (args.size // 32 + 1))[: args.size]
    tmp = Path(tempfile.mkdtemp(prefix="sievemq-bench-replication-"))
    print(f"sievemq replication benchmark: {args.messages:,} single sends ({args.inflight} in flight), "
          f"{args.batch_messages:,} in batches of {BATCH} ({args.batch_inflight} in flight), paced {args.rate}/s "
          f"for {args.seconds:g} s; {args.size} B bodies; {args.rounds} rounds of the three configurations in turn; "
          f"127.0.0.1, {os.cpu_count()} cores; store {tmp}")  # fmt: skip
    out: dict[str, list[Outcome]] = {c: [] for c in CONFIGS}
    for r in range(args.rounds):
        for role in CONFIGS:
            out[role].append(await measure(role, args, body, tmp / f"round{r}"))
            print(f"  round {r + 1}: {role} done", flush=True)
    print()
    report(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=20_000, help="single sends per configuration")
    ap.add_argument("--batch-messages", type=int, default=60_000, help="messages sent in batches of 32")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the three configurations (medians reported)")
    ap.add_argument("--size", type=int, default=1024, help="body bytes")
    ap.add_argument("--inflight", type=int, default=32, help="single sends in flight")
    ap.add_argument("--batch-inflight", type=int, default=4, help="batches in flight")
    ap.add_argument("--rate", type=int, default=500, help="paced sends per second (latency phase)")
    ap.add_argument("--seconds", type=float, default=5.0, help="length of the latency phase")
    args = ap.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
