"""bench_groups' tables: one row per number of groups, the ratio of each figure to the first row's, and flags
where a figure falls off a cliff."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from bench.groups.scrape import Pulls

Kind = Literal["rate", "cost", "flat", "info"]
"""How a figure should move with the number of groups G:

- ``rate`` (higher is better): CLIFF when it falls faster than 1/G between two rows, WARN below 0.5x of the first;
- ``cost`` (may grow up to linearly with G): CLIFF when it grows faster than G between two rows;
- ``flat`` (a cost per delivered message: should not grow): CLIFF when it grows faster than G, WARN above 2x;
- ``info``: no flag."""


@dataclass
class Phase:
    """One phase (single or batched sends) of one row."""

    produced: int = 0
    produce_s: float = 0.0
    delivered: int = 0
    expected: int = 0
    all_done_s: float = 0.0
    """From the first send until every group had every message it matches."""
    catch_up_s: float = 0.0
    """From the last send's answer until then."""
    broker_cpu: float = 0.0
    """Broker (dev process) CPU seconds from the first send until every group was done."""
    broker_cpu_produce: float = 0.0
    """... until the last send's answer."""
    consumer_cpu: float = 0.0
    producer_cpu: float = 0.0
    """This process (the producer) from the first send until every group was done."""
    machine_cpu: float = 0.0
    """CPU seconds of the whole machine meanwhile (/proc/stat)."""
    wrong: int = 0
    dups: int = 0
    pulls: Pulls = field(default_factory=Pulls)
    """The broker's pull answers during the phase and their service time."""

    @property
    def produce_rate(self) -> float:
        """Messages sent per second."""
        return self.produced / self.produce_s if self.produce_s else 0.0

    @property
    def others_cpu(self) -> float:
        """CPU seconds of processes not in the bench (the machine's less the broker's, consumers', producer's)."""
        return max(0.0, self.machine_cpu - self.broker_cpu - self.consumer_cpu - self.producer_cpu)

    def pct(self, cpu: float) -> float:
        """``cpu`` seconds as % of one core over ``all_done_s``."""
        return cpu / self.all_done_s * 100 if self.all_done_s else math.nan

    @property
    def deliver_rate(self) -> float:
        """Messages delivered (all groups) per second of ``all_done_s``."""
        return self.delivered / self.all_done_s if self.all_done_s else 0.0


@dataclass
class Row:
    """Everything measured with G groups."""

    groups: int
    children: int = 0
    tag_groups: int = 0
    sql_groups: int = 0
    idle_cpu_pct: float = 0.0
    """Broker CPU with the groups subscribed and nothing sent (long polls parked, heartbeats), % of one core."""
    rss_mib: float = 0.0
    hwm_mib: float = 0.0
    phases: dict[str, Phase] = field(default_factory=dict)
    filter_counts: dict[str, int] = field(default_factory=dict)
    """The broker's filter counts of the groups (``FilterCounts``), added up."""
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Column:
    """A figure of the table."""

    title: str
    get: Callable[[list[Row], int], float | None]
    """The figure of row ``i`` (None: not defined for that row)."""
    fmt: str
    kind: Kind


def us(cpu: float, n: int) -> float:
    """Microseconds per message."""
    return cpu * 1e6 / n if n else math.nan


def _per(a: float, b: float) -> float:
    return a / b if b else math.nan


def marginal(rows: list[Row], i: int, phase: str) -> float | None:
    """Broker µs per delivered message added since the previous row: (CPU(G) - CPU(G')) / (delivered(G) -
    delivered(G')); constant when the broker's cost grows linearly with the deliveries."""
    if i == 0:
        return None
    a, b = rows[i - 1].phases[phase], rows[i].phases[phase]
    extra = b.delivered - a.delivered
    return us(b.broker_cpu - a.broker_cpu, extra) if extra > 0 else None


def phase_columns(phase: str) -> list[Column]:
    """The columns of one phase's table."""

    def p(rows: list[Row], i: int) -> Phase:
        return rows[i].phases[phase]

    return [
        Column("produce msg/s", lambda r, i: p(r, i).produce_rate, "{:,.0f}", "rate"),
        Column("delivered", lambda r, i: p(r, i).delivered, "{:,.0f}", "info"),
        Column("deliv msg/s", lambda r, i: p(r, i).deliver_rate, "{:,.0f}", "rate"),
        Column("all done s", lambda r, i: p(r, i).all_done_s, "{:.2f}", "cost"),
        Column("catch-up s", lambda r, i: p(r, i).catch_up_s, "{:.2f}", "info"),
        Column("brk us/prod", lambda r, i: us(p(r, i).broker_cpu, p(r, i).produced), "{:.1f}", "cost"),
        Column("brk us/deliv", lambda r, i: us(p(r, i).broker_cpu, p(r, i).delivered), "{:.1f}", "info"),
        Column("brk us/+deliv", lambda r, i: marginal(r, i, phase), "{:.1f}", "flat"),
        Column("deliv/pull", lambda r, i: _per(p(r, i).delivered, p(r, i).pulls.count), "{:.2f}", "info"),
        Column("pull us", lambda r, i: us(p(r, i).pulls.seconds, int(p(r, i).pulls.count)), "{:.0f}", "flat"),
        Column("cons us/deliv", lambda r, i: us(p(r, i).consumer_cpu, p(r, i).delivered), "{:.1f}", "flat"),
        Column("brk %cpu", lambda r, i: p(r, i).pct(p(r, i).broker_cpu), "{:.0f}", "info"),
        Column("others %cpu", lambda r, i: p(r, i).pct(p(r, i).others_cpu), "{:.0f}", "info"),
    ]


ROW_COLUMNS = [
    Column("broker RSS MiB", lambda r, i: r[i].rss_mib, "{:.0f}", "flat"),
    Column("peak RSS MiB", lambda r, i: r[i].hwm_mib, "{:.0f}", "flat"),
    Column("idle broker %cpu", lambda r, i: r[i].idle_cpu_pct, "{:.1f}", "cost"),
]


def _flag(kind: Kind, g0: int, g1: int, r_prev: float, r_first: float) -> str:
    grow = g1 / g0
    if kind == "rate":
        if r_prev < 1 / grow:
            return f"CLIFF: x{r_prev:.2f} from G={g0} to G={g1}, falls faster than 1/G"
        if r_first < 0.5:
            return f"WARN: x{r_first:.2f} of the first row"
    elif kind == "cost":
        if r_prev > grow:
            return f"CLIFF: x{r_prev:.2f} from G={g0} to G={g1}, grows faster than G (x{grow:g})"
    elif kind == "flat":
        if r_prev > grow:
            return f"CLIFF: x{r_prev:.2f} from G={g0} to G={g1}, grows faster than G (x{grow:g})"
        if r_first > 2:
            return f"WARN: x{r_first:.2f} of the first row (should not grow with G)"
    return ""


def table(
    title: str, rows: list[Row], columns: list[Column], disturbed: dict[int, float] | None = None
) -> tuple[list[str], list[str]]:
    """Lines of a table (figures, then each figure's ratio to its first row) and its flags; ``disturbed``: G ->
    % of a core other processes used during the row (its flags say so)."""
    width = [max(len(c.title), 9) for c in columns]
    head = f"  {'G':>5} " + " ".join(f"{c.title:>{w}}" for c, w in zip(columns, width, strict=True))
    out = [title, head]
    values = [[c.get(rows, i) for c in columns] for i in range(len(rows))]
    for i, row in enumerate(rows):
        cells = []
        for c, w, v in zip(columns, width, values[i], strict=True):
            cells.append(f"{'-' if v is None or math.isnan(v) else c.fmt.format(v):>{w}}")
        out.append(f"  {row.groups:>5} " + " ".join(cells))
    out.append("  ratio to the first row with the figure:")
    flags: list[str] = []
    for i, row in enumerate(rows):
        cells = []
        for j, (c, w) in enumerate(zip(columns, width, strict=True)):
            firsts = [(k, values[k][j]) for k in range(len(rows)) if _ok(values[k][j])]
            v = values[i][j]
            if not firsts or not _ok(v) or firsts[0][1] == 0:
                cells.append(f"{'-':>{w}}")
                continue
            assert v is not None
            k0, v0 = firsts[0]
            assert v0 is not None
            cells.append(f"{'x' + format(v / v0, '.2f'):>{w}}")
            prev = values[i - 1][j] if i > 0 else None
            if i > k0 and _ok(prev) and prev:
                f = _flag(c.kind, rows[i - 1].groups, row.groups, v / prev, v / v0)
                if f:
                    busy = (disturbed or {}).get(row.groups)
                    note = f" (disturbed: other processes used {busy:.0f}% of a core)" if busy else ""
                    flags.append(f"{title.split(':')[0]}, {c.title}, G={row.groups}: {f}{note}")
        out.append(f"  {row.groups:>5} " + " ".join(cells))
    return out, flags


def _ok(v: float | None) -> bool:
    return v is not None and not math.isnan(v)
