"""Below the tables: what the columns mean, received bytes, start-up, latency samples, memory, and the issue's
targets with MET / MISS."""

from __future__ import annotations

import argparse
import contextlib
import math
from collections.abc import Sequence

from bench.system.common import Peer, n_tag_a
from bench.system.measure import Result, proc_mem
from bench.system.report import Row, mib, verdict
from bench.system.sieve import Sieve

HOW_COUNTED = {
    "sievemq": "pull response frames, counted in Connection.data_received",
    "baseline": "the same",
    "redis": "RESP replies, counted in asyncio's StreamReader.feed_data; it cannot filter on the server",
    "tansu": "librdkafka's rx_bytes statistic, every byte read from the broker; Kafka cannot filter on the server",
}
TARGETS: dict[str, tuple[str, float, str]] = {
    "batch_x": ("batched produce >= {:.1f}x Redis", 2.0, "x"),
    "consume_x": ("consume >= {:.1f}x Redis", 1.5, "x"),
    "batch_us": ("broker CPU per batched produced message <= {:g} µs", 10.0, "µs"),
    "consume_us": ("broker CPU per consumed message <= {:g} µs", 3.0, "µs"),
    "p99": ("p99 latency <= {:g} ms at {rate:,} msg/s", 5.0, "ms"),
    "p999": ("p99.9 latency <= {:g} ms at {rate:,} msg/s", 15.0, "ms"),
}
"""Issue 12's goals for sievemq: (text, limit, unit); ``x`` figures must reach the limit, the others stay below."""


def print_details(args: argparse.Namespace, names: list[str], rows: dict[str, Row], peers: Sequence[Peer]) -> None:
    """The legend, then per system: tag-filter bytes, consumer start-up, latency samples, resident memory."""
    print("  srv: CPU time of the server process per message of the phase (utime+stime of all its threads and of the"
          " children it waited for;\n  sievemq: the dev process, name server included); cli: this client process"
          " (all threads, librdkafka's too; latency row: plus the consumer child)")  # fmt: skip
    print("  ratios: sievemq / the other (throughput: above 1 is better; latency, CPU: below 1 is better); new/base:"
          " this tree / --baseline")  # fmt: skip
    print("bytes the consuming client received, tag filter 10% as a share of the unfiltered consume:")
    for n in names:
        tag, all_ = rows["tag"].results[n], rows["consume"].results[n]
        share = tag.wire_bytes / all_.wire_bytes if all_.wire_bytes else math.nan
        print(f"  {n:9s}{mib(tag.wire_bytes):>11s} = {share:6.1%} of {mib(all_.wire_bytes)} ({HOW_COUNTED[n]})")
    c, t = rows["consume"].results, rows["tag"].results
    starts = [f"{n} {c[n].startup:.2f} / {t[n].startup:.2f} s" for n in names]
    if "tansu" in names:
        starts[-1] += f" (after a group join of {c['tansu'].join:.2f} / {t['tansu'].join:.2f} s, not in its figures)"
    print("consumers' start to their first message, consume / tag filter (in the figures; sievemq: from start(), "
          "redis: from the first XREADGROUP, tansu: from the assignment):\n  " + ", ".join(starts))  # fmt: skip
    lat = rows["latency"].results
    print("latency samples (every message, the first second included): "
          + ", ".join(f"{n} {lat[n].received:,}" for n in names)
          + f" of {int(args.rate * args.seconds):,} sent each")  # fmt: skip
    parts = []
    for p in peers:
        with contextlib.suppress(OSError):
            m = proc_mem(p.pid)
            mem = f"{p.name} {m.get('VmRSS', 0) / 1024:,.0f} MiB (peak {m.get('VmHWM', 0) / 1024:,.0f}"
            if p.name in ("sievemq", "baseline"):
                mem += f"; mapped store files {m.get('RssFile', 0) / 1024:,.0f}"
            parts.append(mem + ")")
    print("resident memory after the run: " + ", ".join(parts))


def _x(a: Result | None, b: Result | None) -> float | None:
    """Throughput ratio a / b."""
    return a.rate / b.rate if a and b and b.rate else None


def _fig(x: float | None, unit: str) -> str:
    if x is None or math.isnan(x):
        return "-"
    return f"{x:.2f}x" if unit == "x" else f"{x:.2f} {unit}"


def figures(rows: dict[str, Row], name: str) -> dict[str, float | None]:
    """The targets' figures of one sievemq column (``sievemq`` or ``baseline``)."""
    b, c, lat = (rows[k].results.get(name) for k in ("batch", "consume", "latency"))
    return {
        "batch_x": _x(b, rows["batch"].results.get("redis")),
        "consume_x": _x(c, rows["consume"].results.get("redis")),
        "batch_us": b.server_us() if b else None,
        "consume_us": c.server_us() if c else None,
        "p99": lat.pct(99) if lat else None,
        "p999": lat.pct(99.9) if lat else None,
    }


def _met(key: str, v: float | None) -> bool | None:
    if v is None or math.isnan(v):
        return None
    _text, limit, unit = TARGETS[key]
    return v >= limit if unit == "x" else v <= limit


async def print_targets(args: argparse.Namespace, rows: dict[str, Row], new: Sieve | None,
                        base: Sieve | None) -> None:  # fmt: skip
    """Issue 12's targets for sievemq (the baseline's figure in brackets), the ratios to Tansu, the brokers'
    event-loop lag."""
    new_f = figures(rows, "sievemq")
    base_f = figures(rows, "baseline") if base else {}
    print("targets (issue 12; sievemq in this run" + (", the baseline's figure in brackets):" if base else "):"))
    for key, (text, limit, unit) in TARGETS.items():
        line = f"  {verdict(_met(key, new_f[key]))} {text.format(limit, rate=args.rate)}: {_fig(new_f[key], unit)}"
        if base:
            line += f"  [{_fig(base_f.get(key), unit)}]"
        print(line)
    tag, all_ = rows["tag"].results["sievemq"], rows["consume"].results["sievemq"]
    share = tag.wire_bytes / all_.wire_bytes if all_.wire_bytes else math.nan
    only = tag.received == n_tag_a(args.messages) and not tag.note
    print(f"  {verdict(only and share <= 0.15)} tag filter delivers only the 10% and moves <= 15% of the bytes: "
          f"{tag.received:,} delivered, {share:.1%} of the bytes")  # fmt: skip
    if "tansu" in rows["batch"].results:
        parts = [f"{what} {_fig(_x(rows[k].results['sievemq'], rows[k].results['tansu']), 'x')}"
                 for k, what in (("single", "single sends"), ("batch", "batched produce"), ("consume", "consume"),
                                 ("tag", "tag filter"))]  # fmt: skip
        lat = rows["latency"].results
        for p, what in ((99.0, "p99"), (99.9, "p99.9")):
            t = lat["tansu"].pct(p)
            parts.append(f"{what} {_fig(lat['sievemq'].pct(p) / t if t else None, 'x')}")
        print("sievemq / Tansu in this run (no targets; latency: below 1 is better): " + ", ".join(parts))
    for sv in (new, base):
        if sv is None:
            continue
        info = await sv.runtime_info()
        if "eventLoopLagMaxMs" in info:
            print(f"{sv.name} broker event loop, last minute: p50 {info['eventLoopLagP50Ms']} ms, p99 "
                  f"{info['eventLoopLagP99Ms']} ms; whole run: max {info['eventLoopLagMaxMs']} ms, "
                  f"{info['eventLoopStalls']} stalls >= 10 ms ({info['eventLoopStalledMs']} ms in all)")  # fmt: skip
        else:
            print(f"{sv.name} broker: no event-loop lag in its runtime info")
