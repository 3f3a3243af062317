"""The printed report: per run a throughput table, a CPU table and a latency table; over the runs the range of
the ratios; the processes' memory; what failed, with the driver's error text and response code."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable

from bench.rocketmq.driver import Outcome

SYSTEMS = ("sievemq", "rocketmq")
TITLE = {"sievemq": "sievemq", "rocketmq": "RocketMQ"}
LABEL_W = 44
COL_W = 14
LATENCY_KEYS = (("p50", "p50_ms"), ("p99", "p99_ms"), ("p99.9", "p999_ms"), ("max", "max_ms"))

Results = dict[tuple[str, str], Outcome]
"""(phase, system) -> its outcome."""


def ratio(a: float, b: float) -> float:
    """``a / b``, NaN when either is missing or ``b`` is 0."""
    return a / b if b and not math.isnan(a) and not math.isnan(b) else float("nan")


def fx(x: float) -> str:
    """A ratio as ``1.23x``."""
    return "-" if math.isnan(x) else f"{x:.2f}x"


def fnum(x: float, digits: int = 0) -> str:
    """A number with thousands separators (``-`` for NaN)."""
    return "-" if math.isnan(x) else f"{x:,.{digits}f}"


def _row(label: str, cells: list[str]) -> str:
    return f"{label:{LABEL_W}s}" + "".join(f"{c:>{COL_W}s}" for c in cells)


def _mark(o: Outcome | None) -> str:
    return " (!)" if o is not None and o.failed else ""


def _steady(o: Outcome | None) -> float:
    """A consume phase's rate without its start (the consumer's start-up, rebalance, first pulls)."""
    if o is None:
        return float("nan")
    secs = float(o.line.get("seconds", 0.0)) - float(o.line.get("first_ms", 0.0)) / 1000
    return o.messages / secs if secs > 0 else float("nan")


def _us(o: Outcome | None, role: str) -> str:
    return fnum(o.us_per_msg(role) if o else math.nan, 1)


def print_run(results: Results, phases: list[tuple[str, str]], latency_label: str, firsts: str) -> None:
    """One run's three tables. ``phases``: (key, label) of the throughput phases in order."""
    failed = any(o.failed for o in results.values())
    print(f"first in each phase: {firsts}" + ("; (!): the phase had errors, see PROBLEMS below" if failed else ""))
    print(_row("throughput (msg/s)", ["sievemq", "RocketMQ", "sieve/rmq"]))
    print("-" * (LABEL_W + 3 * COL_W))
    for key, label in phases:
        s, r = results.get((key, "sievemq")), results.get((key, "rocketmq"))
        sv, rv = (o.rate if o else float("nan") for o in (s, r))
        print(_row(label, [fnum(sv) + _mark(s), fnum(rv) + _mark(r), fx(ratio(sv, rv))]))
        if key == "consume":
            sv, rv = (_steady(o) for o in (s, r))
            print(_row("  counted from its first message", [fnum(sv), fnum(rv), fx(ratio(sv, rv))]))
            first = [fnum(float(o.line.get("first_ms", math.nan)), 0) if o else "-" for o in (s, r)]
            print(_row("  first message after start() (ms)", first))
    print()
    heads = ["sievemq", "RocketMQ", "sieve/rmq", "RMQ namesrv", "cli sievemq", "cli RMQ"]
    print(_row("CPU µs per message (timed part)", heads))
    print("-" * (LABEL_W + len(heads) * COL_W))
    for key, label in [*phases, ("latency", latency_label)]:
        s, r = results.get((key, "sievemq")), results.get((key, "rocketmq"))
        sb = s.us_per_msg("broker") if s else float("nan")
        rb = r.us_per_msg("broker") if r else float("nan")
        cells = [fnum(sb, 1), fnum(rb, 1), fx(ratio(sb, rb)), _us(r, "namesrv"), _us(s, "client"), _us(r, "client")]
        print(_row(label, cells))
    print()
    print(_row(latency_label, ["sievemq", "RocketMQ", "sieve/rmq"]))
    print("-" * (LABEL_W + 3 * COL_W))
    s, r = results.get(("latency", "sievemq")), results.get(("latency", "rocketmq"))
    for name, key in LATENCY_KEYS:
        sv, rv = (o.ms(key) if o else float("nan") for o in (s, r))
        print(_row(f"  {name} (ms)", [fnum(sv, 2), fnum(rv, 2), fx(ratio(sv, rv))]))
    over = [f"{o.line.get('over_10ms', 0):,}" if o else "-" for o in (s, r)]
    print(_row("  samples over 10 ms", over))
    samples = [f"{o.line.get('samples', 0):,}/{o.line.get('sent', 0):,}" + _mark(o) if o else "-" for o in (s, r)]
    print(_row("  samples / sent", samples))
    achieved = [fnum(o.rate) if o else "-" for o in (s, r)]
    print(_row("  send rate achieved (msg/s)", achieved))


def ratios_of(results: Results, phases: list[str]) -> dict[str, float]:
    """sievemq / RocketMQ of each throughput phase, and of the latency percentiles (``latency p99`` ...)."""
    out: dict[str, float] = {}
    for key in phases:
        s, r = results.get((key, "sievemq")), results.get((key, "rocketmq"))
        if s is not None and r is not None:
            out[key] = ratio(s.rate, r.rate)
            if key == "consume":
                out["consume steady"] = ratio(_steady(s), _steady(r))
    s, r = results.get(("latency", "sievemq")), results.get(("latency", "rocketmq"))
    if s is not None and r is not None:
        for name, key in LATENCY_KEYS:
            out[f"latency {name}"] = ratio(s.ms(key), r.ms(key))
    return out


def print_summary(per_run: list[dict[str, float]], labels: dict[str, str]) -> None:
    """The range (min, median, max) of each ratio over the runs."""
    print(_row(f"sievemq / RocketMQ over {len(per_run)} runs", ["min", "median", "max"]))
    print("-" * (LABEL_W + 3 * COL_W))
    for key in per_run[0]:
        xs = [r[key] for r in per_run if key in r and not math.isnan(r[key])]
        if not xs:
            continue
        print(_row(labels.get(key, key), [fx(min(xs)), fx(statistics.median(xs)), fx(max(xs))]))
    print("(throughput: above 1 is sievemq faster; latency: below 1 is sievemq lower)")


def print_memory(mem: dict[str, dict[str, int]]) -> None:
    """Resident memory of each process (KiB from /proc/<pid>/status) in MiB."""
    heads = ["VmRSS", "RssAnon", "RssFile+Shm", "VmHWM"]
    print(_row("memory after the run (MiB)", heads))
    print("-" * (LABEL_W + len(heads) * COL_W))
    for name, m in mem.items():
        vals = [m.get("VmRSS", 0), m.get("RssAnon", 0), m.get("RssFile", 0) + m.get("RssShmem", 0), m.get("VmHWM", 0)]
        print(_row(name, [fnum(v / 1024, 0) for v in vals]))


def print_problems(all_results: list[tuple[str, Results]], client_errors: Callable[[], list[str]]) -> bool:
    """Every phase that had errors (``all_results``: (``warm-up`` or ``run N``, its outcomes)): the driver's
    description (exception, response code, request). True if any."""
    bad = [(when, o) for when, res in all_results for o in res.values() if o.failed]
    if not bad:
        return False
    print("PROBLEMS (the Java client against each broker):")
    for when, o in bad:
        ln = o.line
        what = [f"errors {ln.get('errors', 0)}"]
        for k in ("request", "error_code", "statuses", "error", "stall"):
            if ln.get(k) not in (None, "", -1):
                what.append(f"{k} {ln[k]}")
        print(f"  {when}, {o.phase}, {TITLE.get(o.system, o.system)}: " + "; ".join(what))
    lines = client_errors()
    if lines:
        print("  the Java client's log (last warnings):")
        for text in lines:
            print(f"    {text[:300]}")
    return True
