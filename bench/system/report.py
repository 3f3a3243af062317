"""The printed report: the figures table, the CPU table, the details below them and the issue's targets."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from bench.system.measure import SLOW_MS, Result

SYSTEMS = ("sievemq", "baseline", "redis", "tansu")
"""Column order; ``baseline`` is ``sievemq dev`` from ``--baseline DIR``."""
TITLES = {"sievemq": "sievemq", "baseline": "baseline", "redis": "redis", "tansu": "tansu"}
PHASE_W = 50
COL_W = 12
RATIO_W = 9


@dataclass
class Row:
    """One phase: a Result per system. ``kind`` is ``rate`` (throughput) or ``lat`` (a latency phase)."""

    label: str
    kind: str
    results: dict[str, Result] = field(default_factory=dict)
    refs: frozenset[str] = frozenset()
    """Systems whose Result is another row's, repeated for reference (the api.py rows' Redis and Tansu)."""


def fmt_rate(x: float) -> str:
    """``12,345/s``."""
    return f"{x:,.0f}/s"


def fmt_ms(x: float) -> str:
    """``1.23 ms`` (``-`` for NaN)."""
    return "-" if math.isnan(x) else f"{x:.2f} ms"


def ratio(a: float | None, b: float | None) -> str:
    """``a / b`` as ``1.23x`` (``-`` when either is missing, zero or NaN)."""
    if a is None or b is None or not b or math.isnan(a) or math.isnan(b):
        return "-"
    return f"{a / b:.2f}x"


def mib(n: int) -> str:
    """Bytes in MiB."""
    return f"{n / 1048576:,.1f} MiB"


def verdict(ok: bool | None) -> str:
    """``MET`` / ``MISS`` / ``n/a``."""
    return "n/a " if ok is None else ("MET " if ok else "MISS")


def _columns(names: list[str]) -> list[tuple[str, str]]:
    """(title, what) of the figure columns: a system's figure or a ratio ``a/b``."""
    cols = [(TITLES[names[0]], names[0])]
    if "baseline" in names:
        cols += [("baseline", "baseline"), ("new/base", "sievemq/baseline")]
    cols += [(TITLES[n], n) for n in names if n in ("redis", "tansu")]
    cols += [(f"vs {n}", f"sievemq/{n}") for n in names if n in ("redis", "tansu")]
    return cols


def _line(label: str, cols: list[tuple[str, str]], value: Callable[[str], float | None],
          fmt: Callable[[float], str]) -> str:  # fmt: skip
    cells = []
    for _title, what in cols:
        if "/" in what:
            a, b = what.split("/")
            cells.append(f"{ratio(value(a), value(b)):>{RATIO_W}s}")
        else:
            v = value(what)
            cells.append(f"{'-' if v is None else fmt(v):>{COL_W}s}")
    return f"{label:{PHASE_W}s}" + " ".join(cells)


def _getter(res: dict[str, Result], f: Callable[[Result], float]) -> Callable[[str], float | None]:
    """A column's value: ``f`` of that system's Result, None without one."""
    return lambda name: f(res[name]) if name in res else None


def _head(cols: list[tuple[str, str]], first: str) -> str:
    cells = [f"{t:>{RATIO_W if '/' in w else COL_W}s}" for t, w in cols]
    return f"{first:{PHASE_W}s}" + " ".join(cells)


LATENCY_LINES: list[tuple[str, Callable[[Result], float], Callable[[float], str]]] = [
    ("p50", lambda r: r.pct(50), fmt_ms),
    ("p99", lambda r: r.pct(99), fmt_ms),
    ("p99.9", lambda r: r.pct(99.9), fmt_ms),
    ("max", lambda r: r.max_ms(), fmt_ms),
    (f"over {SLOW_MS:g} ms (count)", lambda r: float(r.slow()), lambda x: f"{x:,.0f}"),
]


def print_figures(rows: list[Row], names: list[str]) -> None:
    """The figures table: each system's throughput or latency and the ratios (above 1 better for throughput,
    below 1 for latency)."""
    cols = _columns(names)
    head = _head(cols, "phase")
    print(head)
    print("-" * len(head))
    for row in rows:
        res = row.results
        if row.kind == "rate":
            print(_line(row.label, cols, _getter(res, lambda r: r.rate), fmt_rate))
        else:
            for sub, f, fmt in LATENCY_LINES:
                label = f"{row.label}: {sub}" if sub == "p50" else f"{'':8s}{sub}"
                print(_line(label, cols, _getter(res, f), fmt))
            share = [f"{n} {res[n].slow() / len(res[n].latencies_ms):.2%}" for n in names
                     if n in res and res[n].latencies_ms]  # fmt: skip
            print(f"{'':8s}share over {SLOW_MS:g} ms: " + ", ".join(share))
        notes = [f"{n}: {res[n].note}" for n in names if n in res and res[n].note and n not in row.refs]
        if notes:
            print(f"{'':4s}note: " + "; ".join(notes))


def print_cpu(rows: list[Row], names: list[str]) -> None:
    """CPU microseconds per message of each phase: the servers', then the clients'."""
    servers = [(f"{TITLES[n]} srv", n) for n in names]
    if "baseline" in names:
        servers.insert(2, ("new/base", "sievemq/baseline"))
    clients = [(f"{TITLES[n]} cli", n) for n in names]
    cols = servers + clients
    head = _head(cols, "CPU µs per message")
    print(head)
    print("-" * len(head))
    for row in rows:
        res = row.results
        label = row.label
        cells = []
        for i, (_title, what) in enumerate(cols):
            server = i < len(servers)
            if "/" in what:
                a, b = (res.get(x) for x in what.split("/"))
                cells.append(f"{ratio(a.server_us() if a else None, b.server_us() if b else None):>{RATIO_W}s}")
                continue
            r = res.get(what)
            v = "-" if r is None or what in row.refs else f"{(r.server_us() if server else r.client_us()):.1f}"
            cells.append(f"{v:>{COL_W}s}")
        print(f"{label:{PHASE_W}s}" + " ".join(cells))
