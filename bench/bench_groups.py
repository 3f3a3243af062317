"""How the broker's cost grows with the number of consumer groups (issue 30), in one run.

For each G of ``--groups`` (1, 10, 100): a fresh ``sievemq dev`` (name server and broker in one process,
``ASYNC_FLUSH``, store in a temporary folder), one topic of 4 queues and G consumer groups, each with its own
filter: with ``--mix mixed`` even groups subscribe the tag ``T{i % m}``, odd ones the SQL92 selector
``region = 'r{i % m}' AND amount > 10`` (``--one-in`` m, 20). Message ``k`` carries the tag ``T{k % m}`` and the
properties ``region = r{k % m}``, ``amount``, ``k``, so each group gets about one message in m (a SQL92 group
89% of that). The groups run in child processes (``bench/groups/consumers.py``, ``--per-child`` groups each, one
``PushConsumer`` per group on one uvloop loop), the producer in this process. Phases per G, each while the groups
consume:

* **single sends**: ``--messages`` ``Producer.send``, ``--inflight`` in flight;
* **batched sends**: ``--batch-messages`` in ``Producer.send_batch`` of ``--batch``, ``--batch-inflight`` in flight.

Per phase: produce rate; messages delivered (all groups) and their rate over the time from the first send until
every group has every message it matches; the broker's CPU (``/proc/<pid>/stat`` of the dev process) per produced
and per delivered message, and per delivered message added since the previous G; the consumers' CPU per delivered
message; pulls (from the broker's ``/metrics``); the CPU other processes took meanwhile. Per G: the broker's RSS,
its idle CPU with the groups subscribed and its filter counts. Each figure's ratio to the first row,
and flags where one falls off a cliff (bench/README.md). ``--profile``: one more run of the largest G with py-spy
on the broker (not in the table), printing where its time goes.

    .venv/bin/python bench/bench_groups.py [--groups 1,10,100] [--messages 20000] [--batch-messages 60000]
                                           [--one-in 20] [--mix mixed|tag|sql] [--size 256] [--per-child 25]
                                           [--profile] [--keep]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.procs import Proc, dev_proc

from bench.groups.children import Children
from bench.groups.profile import PySpy, summarize
from bench.groups.report import ROW_COLUMNS, Phase, Row, phase_columns, table
from bench.groups.scrape import pulls
from bench.groups.workload import QUEUES, TOPIC, FilterMix, GroupSpec, groups, make_body, message
from bench.system.measure import CLK_TCK, proc_cpu, proc_mem
from sievemq import Message, Producer
from sievemq.admin.api import AdminClient

PHASES = ("single", "batch")
FILTER_COUNTS = ("tag_matched", "filtered_by_tag", "sql_matched", "filtered_by_bitmap", "filtered_by_evaluation",
                 "bitmap_false_positives")  # fmt: skip
DISTURBED_PCT = 25.0
"""A phase during which processes outside the bench used more than this % of a core is marked disturbed."""


def machine_busy() -> float:
    """CPU seconds the whole machine (every core, every process) has been busy: /proc/stat's first line less idle
    and iowait (guest time is already in user)."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / CLK_TCK


def log(text: str) -> None:
    """A progress line on stderr (the report goes to stdout)."""
    print(f"  ... {text}", file=sys.stderr, flush=True)


async def send_single(p: Producer, start: int, n: int, a: argparse.Namespace, body: bytes) -> None:
    """Messages ``start .. start+n-1``, one per request, ``--inflight`` tasks."""
    ks = iter(range(start, start + n))

    async def worker() -> None:
        for k in ks:
            await p.send(message(k, a.one_in, body))

    await asyncio.gather(*(worker() for _ in range(a.inflight)))


async def send_batches(p: Producer, start: int, n: int, a: argparse.Namespace, body: bytes) -> None:
    """Messages ``start .. start+n-1`` in batches of ``--batch``, ``--batch-inflight`` in flight."""
    firsts = iter(range(start, start + n, a.batch))

    async def worker() -> None:
        for s in firsts:
            await p.send_batch([message(k, a.one_in, body) for k in range(s, min(start + n, s + a.batch))])

    await asyncio.gather(*(worker() for _ in range(a.batch_inflight)))


async def run_phase(kind: str, p: Producer, kids: Children, specs: list[GroupSpec], dev: Proc, start: int, n: int,
                    a: argparse.Namespace, body: bytes, spy: PySpy | None) -> Phase:  # fmt: skip
    """One phase: messages ``start .. start+n-1`` sent while the groups consume, until every group has everything
    it matches."""
    end = start + n
    pid, url = dev.popen.pid if dev.popen else 0, str(dev.extra["http"])
    ph = Phase(produced=n, expected=sum(s.expected(end) - s.expected(start) for s in specs))
    kids.expect(end)
    pulls0 = await pulls(url)
    if spy is not None:
        spy.start()
    cpu0, pc0, m0, t0 = proc_cpu(pid), time.process_time(), machine_busy(), time.monotonic()
    await (send_single if kind == "single" else send_batches)(p, start, n, a, body)
    t1, cpu1 = time.monotonic(), proc_cpu(pid)
    r = await kids.done(a.timeout)
    cpu2, ph.machine_cpu = proc_cpu(pid), machine_busy() - m0
    ph.producer_cpu = time.process_time() - pc0
    if spy is not None:
        spy.stop()
    ph.pulls = await pulls(url) - pulls0
    ph.produce_s, ph.broker_cpu_produce, ph.broker_cpu = t1 - t0, cpu1 - cpu0, cpu2 - cpu0
    ph.delivered, ph.consumer_cpu, ph.wrong, ph.dups = r.delivered, r.cpu, r.wrong, r.dups
    ph.all_done_s, ph.catch_up_s = r.t_last - t0, max(0.0, r.t_last - t1)
    return ph


async def run_row(a: argparse.Namespace, tmp: Path, g: int, body: bytes, profile: bool = False) -> Row:
    """Everything with ``g`` groups, on a fresh ``sievemq dev``."""
    mix = cast(FilterMix, a.mix)
    specs = groups(g, a.one_in, mix)
    name = f"g{g}" + ("-profile" if profile else "")
    tags = sum(1 for s in specs if s.kind == "tag")
    row = Row(g, tag_groups=tags, sql_groups=g - tags)
    dev = dev_proc(tmp / name)  # with an HTTP port: /metrics counts the pulls
    namesrv = str(dev.extra["namesrv"])
    extra = ["--m", str(a.one_in), "--mix", mix, "--concurrency", str(a.concurrency), "--topic", TOPIC]
    kids = Children(tmp / name, namesrv, g, a.per_child, extra + (["--shared"] if a.shared else []))
    row.children = len(kids.kids)
    try:
        dev.start()
        pid = dev.popen.pid if dev.popen else 0
        async with AdminClient(namesrv) as admin:
            await admin.create_topic(TOPIC, queues=QUEUES)
        t = time.monotonic()
        await kids.start()
        log(f"G={g}: dev pid {pid}, {row.children} consumer processes {kids.pids} ready in "
            f"{time.monotonic() - t:.1f} s")  # fmt: skip
        c0, t0 = proc_cpu(pid), time.monotonic()
        await asyncio.sleep(a.idle)
        row.idle_cpu_pct = (proc_cpu(pid) - c0) / (time.monotonic() - t0) * 100
        async with Producer(namesrv, group="bench-groups-producer") as p:
            await p.send(Message(TOPIC, body, tags="Warm"))  # route, connection; no group wants it
            await p.send_batch([Message(TOPIC, body, tags="Warm")])
            start = 0
            for kind in PHASES:
                n = a.messages if kind == "single" else a.batch_messages
                spy = PySpy(pid, tmp / f"{name}-{kind}.txt", a.profile_rate) if profile else None
                ph = row.phases[kind] = await run_phase(kind, p, kids, specs, dev, start, n, a, body, spy)
                start += n
                if ph.wrong or ph.dups or ph.delivered != ph.expected:
                    row.notes.append(f"{kind}: {ph.delivered} delivered of {ph.expected} expected, {ph.wrong} "
                                     f"not asked for, {ph.dups} twice")  # fmt: skip
                log(f"G={g} {kind}: {ph.produce_rate:,.0f} msg/s produced, {ph.delivered:,} delivered in "
                    f"{ph.all_done_s:.2f} s, broker {ph.broker_cpu:.2f} s CPU")  # fmt: skip
                if spy is not None:
                    print(f"\nprofile of the broker (pid {pid}), G={g}, {kind} sends:")
                    print("\n".join(summarize(spy.out, a.profile_top)))
        row.filter_counts = await filter_counts(namesrv, specs)
        mem = proc_mem(pid)
        row.rss_mib, row.hwm_mib = mem.get("VmRSS", 0) / 1024, mem.get("VmHWM", 0) / 1024
    finally:
        await kids.stop()
        dev.stop()
    return row


async def filter_counts(namesrv: str, specs: list[GroupSpec]) -> dict[str, int]:
    """The broker's filter counts of every group's subscription of the topic, added up (``sievemq group filters``)."""
    total: dict[str, int] = {}
    async with AdminClient(namesrv) as admin:
        for spec in specs:
            for doc in await admin.group_filters(spec.name):
                for item in doc.get("filters") or []:
                    if item.get("topic") == TOPIC:
                        for k, v in (item.get("counts") or {}).items():
                            total[k] = total.get(k, 0) + int(v)
    return total


def header(a: argparse.Namespace, gs: list[int]) -> list[str]:
    """What ran, with which settings."""
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return [
        f"bench_groups: {' '.join(sys.argv)}",
        f"  G = {', '.join(map(str, gs))} consumer groups ({a.mix}: "
        + {"mixed": "even groups a tag, odd ones SQL92", "tag": "tags only", "sql": "SQL92 only"}[a.mix]
        + f"), each wanting ~1/{a.one_in} of the messages; topic of {QUEUES} queues; fresh `sievemq dev` per G",
        f"  {a.messages:,} single sends ({a.inflight} in flight), {a.batch_messages:,} in batches of {a.batch} "
        f"({a.batch_inflight} in flight), {a.size} B bodies; consumers: {a.per_child} groups per process, concurrency "
        f"{a.concurrency}, {'one shared client instance per process' if a.shared else 'a client instance per group'}",
        f"  {os.cpu_count()} CPUs, load average {load}",
    ]


async def main(a: argparse.Namespace) -> int:
    """Run every row, print the tables."""
    gs = [int(x) for x in a.groups.split(",") if x.strip()]
    body = make_body(a.size)
    tmp = Path(tempfile.mkdtemp(prefix="bench-groups-"))
    rows: list[Row] = []
    ok = False
    try:
        print("\n".join(header(a, gs)), flush=True)
        for g in gs:
            rows.append(await run_row(a, tmp, g, body))
        report(rows)
        if a.profile:
            await run_row(a, tmp, max(gs), body, profile=True)
        ok = True
    finally:
        if a.keep or not ok:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


def report(rows: list[Row]) -> None:
    """The tables and flags."""
    flags: list[str] = []
    for kind, title in (("single", "single sends"), ("batch", "batched sends")):
        busy = {r.groups: r.phases[kind].pct(r.phases[kind].others_cpu) for r in rows}
        disturbed = {g: pct for g, pct in busy.items() if pct > DISTURBED_PCT}
        lines, f = table(f"{title}: while the G groups consume", rows, phase_columns(kind), disturbed)
        print("\n" + "\n".join(lines))
        flags += f
    lines, f = table("per G: the broker process", rows, ROW_COLUMNS)
    print("\n" + "\n".join(lines))
    flags += f
    print("\n  groups: " + ", ".join(f"G={r.groups}: {r.tag_groups} tag + {r.sql_groups} SQL92 in {r.children} "
                                    f"process(es)" for r in rows))  # fmt: skip
    print("  broker filter counts (every group's, both phases):")
    for r in rows:
        print(f"    G={r.groups}: " + ", ".join(f"{k} {r.filter_counts.get(k, 0):,}" for k in FILTER_COUNTS))
    for r in rows:
        for n in r.notes:
            print(f"  NOTE G={r.groups}: {n}")
        for kind, ph in r.phases.items():
            if ph.pct(ph.others_cpu) > DISTURBED_PCT:
                print(f"  NOTE G={r.groups} {kind}: other processes used {ph.pct(ph.others_cpu):.0f}% of a core "
                      "meanwhile: its rates and times are disturbed (CPU per message less so)")  # fmt: skip
    print("\nflags:" if flags else "\nflags: none (no figure falls off a cliff)")
    for flag in flags:
        print(f"  {flag}")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", default="1,10,100", help="numbers of consumer groups, one row each")
    ap.add_argument("--messages", type=int, default=20_000, help="messages of the single sends phase")
    ap.add_argument("--batch-messages", type=int, default=60_000, help="messages of the batched sends phase")
    ap.add_argument("--one-in", type=int, default=20, help="each group wants one tag / region of this many")
    ap.add_argument("--mix", choices=("mixed", "tag", "sql"), default="mixed")
    ap.add_argument("--size", type=int, default=256, help="body bytes")
    ap.add_argument("--inflight", type=int, default=32)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--batch-inflight", type=int, default=4)
    ap.add_argument("--per-child", type=int, default=25, help="consumer groups per consumer process")
    ap.add_argument("--concurrency", type=int, default=4, help="listener tasks per consumer")
    ap.add_argument("--shared", action="store_true", help="the groups of a process share one client instance")
    ap.add_argument("--idle", type=float, default=2.0, help="seconds of idle broker CPU sampled per G")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds a phase may take")
    ap.add_argument("--profile", action="store_true", help="then the largest G again with py-spy on the broker")
    ap.add_argument("--profile-rate", type=int, default=200, help="py-spy samples per second")
    ap.add_argument("--profile-top", type=int, default=15)
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (stores, logs, profiles)")
    return ap.parse_args(argv)


if __name__ == "__main__":
    args = parse()
    try:
        import uvloop
    except ImportError:
        sys.exit(asyncio.run(main(args)))
    sys.exit(uvloop.run(main(args)))
