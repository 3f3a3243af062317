"""The report: the header, each phase's rows (median of the rounds, ratio to the direct 4.x row, CPU per message),
each round's ratios, and the start-up times no row contains."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

from .measure import Sample, pid
from .rounds import LABELS, SQL, Rounds


def phases(args: argparse.Namespace, matched: int) -> list[tuple[str, str, list[str], str]]:
    """(name, title, rows, the row the ratios are to) of each phase."""
    n, k = args.messages, args.inflight
    return [
        ("produce 1", f"produce {args.sync_messages}, one send at a time", ["sync5", "sync4"], "sync4"),
        (f"produce {k}", f"produce {n}, {k} sends in flight", ["async5", "async4"], "async4"),
        ("consume", f"consume {n}: receive 32, ack each", ["cons5", "cons4", "consP"], "cons4"),
        ("filter", f"filtered receive: {matched} of {n} match {SQL!r} (tag TagA); CPU per topic message",
         ["sql5", "tag5", "sql4"], "sql4"),
    ]  # fmt: skip


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def header(rounds: Rounds, args: argparse.Namespace, python: Path) -> None:
    """What runs where."""
    s = rounds.servers
    loop = "uvloop" if "uvloop" in sys.modules else "asyncio"
    print(f"bench_proxy: {args.messages} messages of {args.size} B ({args.sync_messages} for one-at-a-time sends), "
          f"{args.inflight} in flight, receives of 32; median of {args.rounds} rounds, the systems taking turns")
    print(f"servers on 127.0.0.1: name server pid {pid(s.ns)}, broker pid {pid(s.broker)} (ASYNC_FLUSH, store in "
          f"{rounds.tmp}), proxy pid {pid(s.proxy)} (gRPC {s.proxy.addr})")
    print(f"5.x client: rocketmq-python-client under {python}, one process per row; 4.x client: sievemq's asyncio "
          f"client in this process (pid {os.getpid()}, {loop})")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)  # fmt: skip


def report(rounds: Rounds, args: argparse.Namespace, matched: int) -> None:
    """Every phase's table, then the per-round ratios and the start-up times."""
    samples = rounds.samples
    print(f"\nrocketmq-python-client {rounds.startup.version}; median of {args.rounds} rounds; µs: CPU time per "
          f"message of the broker, the proxy, and the client process (utime + stime, clock ticks of "
          f"{1000 // os.sysconf('SC_CLK_TCK')} ms)")
    print(f"{'':44}{'msg/s':>9}{'vs 4.x':>8}{'broker µs':>11}{'proxy µs':>10}{'client µs':>11}")
    for _, title, rows, ref in phases(args, matched):
        print(title)
        ref_rate = _median([x.rate for x in samples[ref]])
        for key in rows:
            xs = samples[key]
            rate = _median([x.rate for x in xs])
            cpu = [_median([x.us(getattr(x, f)) for x in xs]) for f in ("broker_cpu", "proxy_cpu", "client_cpu")]
            proxy = f"{cpu[1]:>10.0f}" if key.endswith("5") else f"{'-':>10}"  # the 5.x rows' keys end in 5
            print(f"  {LABELS[key]:<42}{rate:>9,.0f}{rate / ref_rate:>7.2f}x{cpu[0]:>11.0f}{proxy}{cpu[2]:>11.0f}"
                  f"  {xs[-1].note}".rstrip())  # fmt: skip
    print("\neach round's ratio to the phase's direct 4.x row:")
    for name, _, rows, ref in phases(args, matched):
        for key in rows:
            if key != ref:
                per = " ".join(f"{a.rate / b.rate:.3f}" for a, b in zip(samples[key], samples[ref], strict=True))
                print(f"  {name:<11}{LABELS[key]:<42}{per}")
    print(f"\nthrough the proxy, SQL92 / TAG: {_ratio(samples, 'sql5', 'tag5'):.2f}x; "
          f"5.x SimpleConsumer / POP direct: {_ratio(samples, 'cons5', 'consP'):.2f}x (what gRPC, the proxy hop and "
          f"the 5.x client add to POP)")
    if rounds.filter_counts:
        print("the broker's filter counts of the last round's SQL92 groups (`sievemq group filters`; each "
              "non-matching message skipped by its bitmap once):")
    for line in rounds.filter_counts:
        print(f"  {line}")
    _startup(rounds, args.await_s)


def _ratio(samples: dict[str, list[Sample]], a: str, b: str) -> float:
    return _median([x.rate for x in samples[a]]) / _median([x.rate for x in samples[b]])


def _startup(rounds: Rounds, await_s: int) -> None:
    st = rounds.startup
    print(f"\nstart-up, in no timed part: a 5.x driver's launch to ready p50 {_median(st.ready):.2f} s, of which "
          f"startup() p50 {_median(st.startup) * 1000:.0f} ms (route query, telemetry stream and settings; a "
          f"Producer or SimpleConsumer does not wait for the server's settings), a producer's warm-up sends p50 "
          f"{_median(st.warmup) * 1000:.0f} ms, a consumer's receive of the empty topic p50 "
          f"{_median(st.first_receive):.2f} s (long polling {await_s} s); 4.x PullConsumer.start() p50 "
          f"{_median(st.pull_start) * 1000:.0f} ms")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
