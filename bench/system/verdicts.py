"""Below the tables: what the columns mean, received bytes, start-up, latency samples, memory, and the issues'
targets with MET / MISS."""

from __future__ import annotations

import argparse
import contextlib
import math
from collections.abc import Sequence

from bench.system import looplag
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
Target = tuple[str, float, str]
"""(text, limit, unit): ``x`` figures must reach the limit, the others stay at or below it."""
TARGETS_12: dict[str, Target] = {
    "batch_x": ("batched produce >= {:.1f}x Redis", 2.0, "x"),
    "consume_x": ("consume >= {:.1f}x Redis", 1.5, "x"),
    "batch_us": ("broker CPU per batched produced message <= {:g} µs", 10.0, "µs"),
    "consume_us": ("broker CPU per consumed message <= {:g} µs", 3.0, "µs"),
    "p99": ("p99 latency <= {:g} ms at {rate:,} msg/s, awaited sends", 5.0, "ms"),
    "p999": ("p99.9 latency <= {:g} ms at {rate:,} msg/s, awaited sends", 15.0, "ms"),
}
"""Issue 12's goals for sievemq."""
TARGETS_30: dict[str, Target] = {
    "conc_p99": ("p99 latency <= {:g} ms at {rate:,} msg/s with concurrent senders", 3.0, "ms"),
    "conc_p999": ("p99.9 latency <= {:g} ms at {rate:,} msg/s with concurrent senders", 10.0, "ms"),
    "loop_p99": ("broker event-loop lag p99 <= {:g} ms during each throughput phase", 5.0, "ms"),
    "single_us": ("broker CPU per single send <= {:g} µs", 35.0, "µs"),
    "batch_us_30": ("broker CPU per batched produced message <= {:g} µs", 6.0, "µs"),
    "consume_us_30": ("broker CPU per consumed message <= {:g} µs", 2.0, "µs"),
    "batch_xt": ("batched produce >= {:.1f}x Tansu", 1.0, "x"),
    "consume_xt": ("consume >= {:.1f}x Tansu", 2.0, "x"),
}
"""Issue 30's goals for sievemq."""
TARGETS: dict[str, Target] = {**TARGETS_12, **TARGETS_30}
THROUGHPUT = (("single", "single sends"), ("batch", "batched"), ("consume", "consume"), ("tag", "tag filter"))
"""The throughput phases' rows, as the loop-lag target names them."""


def print_details(args: argparse.Namespace, names: list[str], rows: dict[str, Row], peers: Sequence[Peer]) -> None:
    """The legend, then per system: tag-filter bytes, consumer start-up, latency samples, resident memory."""
    print("  srv: CPU time of the server process per message of the phase (utime+stime of all its threads and of the"
          " children it waited for;\n  sievemq: the dev process, name server included); cli: this client process"
          " (all threads, librdkafka's too; latency rows: the whole phase, plus the consumer child)")  # fmt: skip
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
    lat, conc = rows["latency"].results, rows["latency_conc"].results
    print("latency samples (every message, the first second included), awaited / concurrent senders: "
          + ", ".join(f"{n} {lat[n].received:,} / {conc[n].received:,}" for n in names)
          + f" of {int(args.rate * args.seconds):,} sent each")  # fmt: skip
    print("concurrent senders: sends unfinished when one started (itself included), mean / max: "
          + ", ".join(f"{n} {conc[n].inflight_mean:.2f} / {conc[n].inflight_max}" for n in names)
          + " (tansu: produced minus delivery reports served, which are served at each produce)")  # fmt: skip
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


def loop_lag_p99(rows: dict[str, Row], name: str) -> tuple[float | None, str]:
    """The highest p99 bucket bound (ms) of a sievemq column's broker loop lag over the throughput phases (None
    when a phase has none), and each phase's p99 bucket and samples as text."""
    worst: float | None = 0.0
    parts = []
    for key, what in THROUGHPUT:
        r = rows[key].results.get(name)
        lag = r.loop_lag if r else None
        got = lag.pct_bucket(99) if lag else None
        if lag is None or got is None:
            worst = None
            parts.append(f"{what} -")
            continue
        if worst is not None:
            worst = max(worst, got[1] * 1000)
        parts.append(f"{what} {looplag.fmt_bucket(got)} ({lag.samples})")
    return worst, "p99 (samples): " + ", ".join(parts)


def figures(rows: dict[str, Row], name: str) -> dict[str, float | None]:
    """The targets' figures of one sievemq column (``sievemq`` or ``baseline``)."""
    one, b, c, lat, conc = (rows[k].results.get(name) for k in ("single", "batch", "consume", "latency",
                                                                    "latency_conc"))  # fmt: skip
    return {
        "batch_x": _x(b, rows["batch"].results.get("redis")),
        "consume_x": _x(c, rows["consume"].results.get("redis")),
        "batch_us": b.server_us() if b else None,
        "consume_us": c.server_us() if c else None,
        "p99": lat.pct(99) if lat else None,
        "p999": lat.pct(99.9) if lat else None,
        "conc_p99": conc.pct(99) if conc else None,
        "conc_p999": conc.pct(99.9) if conc else None,
        "loop_p99": loop_lag_p99(rows, name)[0],
        "single_us": one.server_us() if one else None,
        "batch_us_30": b.server_us() if b else None,
        "consume_us_30": c.server_us() if c else None,
        "batch_xt": _x(b, rows["batch"].results.get("tansu")),
        "consume_xt": _x(c, rows["consume"].results.get("tansu")),
    }


def _met(key: str, v: float | None) -> bool | None:
    if v is None or math.isnan(v):
        return None
    _text, limit, unit = TARGETS[key]
    return v >= limit if unit == "x" else v <= limit


def _target_lines(args: argparse.Namespace, rows: dict[str, Row], targets: dict[str, Target],
                  new_f: dict[str, float | None], base_f: dict[str, float | None] | None) -> None:  # fmt: skip
    """One MET / MISS line per target; the loop-lag one with its phases' p99 buckets."""
    for key, (text, limit, unit) in targets.items():
        fig = _fig(new_f[key], unit)
        if key == "loop_p99":
            v = new_f[key]
            fig = ("worst " + ("-" if v is None else f"<= {v:g} ms") + "; "
                   + loop_lag_p99(rows, "sievemq")[1])  # fmt: skip
        line = f"  {verdict(_met(key, new_f[key]))} {text.format(limit, rate=args.rate)}: {fig}"
        if base_f is not None:
            b = base_f.get(key)
            line += f"  [{('-' if b is None else f'<= {b:g} ms') if key == 'loop_p99' else _fig(b, unit)}]"
        print(line)


async def print_targets(args: argparse.Namespace, rows: dict[str, Row], new: Sieve | None,
                        base: Sieve | None) -> None:  # fmt: skip
    """Issue 30's and issue 12's targets for sievemq (the baseline's figure in brackets), the ratios to Tansu, the
    brokers' event-loop lag."""
    new_f = figures(rows, "sievemq")
    base_f = figures(rows, "baseline") if base else None
    bracket = ", the baseline's figure in brackets):" if base else "):"
    print("targets of issue 30 (sievemq in this run" + bracket)
    _target_lines(args, rows, TARGETS_30, new_f, base_f)
    print("targets of issue 12 (sievemq in this run" + bracket)
    _target_lines(args, rows, TARGETS_12, new_f, base_f)
    tag, all_ = rows["tag"].results["sievemq"], rows["consume"].results["sievemq"]
    share = tag.wire_bytes / all_.wire_bytes if all_.wire_bytes else math.nan
    only = tag.received == n_tag_a(args.messages) and not tag.note
    print(f"  {verdict(only and share <= 0.15)} tag filter delivers only the 10% and moves <= 15% of the bytes: "
          f"{tag.received:,} delivered, {share:.1%} of the bytes")  # fmt: skip
    if "tansu" in rows["batch"].results:
        parts = [f"{what} {_fig(_x(rows[k].results['sievemq'], rows[k].results['tansu']), 'x')}"
                 for k, what in (("single", "single sends"), ("batch", "batched produce"), ("consume", "consume"),
                                 ("tag", "tag filter"))]  # fmt: skip
        for k, how in (("latency", "awaited"), ("latency_conc", "concurrent")):
            lat = rows[k].results
            for p, what in ((99.0, "p99"), (99.9, "p99.9")):
                t = lat["tansu"].pct(p)
                parts.append(f"{how} {what} {_fig(lat['sievemq'].pct(p) / t if t else None, 'x')}")
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
