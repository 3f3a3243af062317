"""The sievemq broker's event-loop lag per phase, from the broker's own figures.

The broker measures its loop with a timer that asks to wake every 50 ms and records how late each wake-up came
(``sievemq.metrics.loop_lag``). GET_BROKER_RUNTIME_INFO gives only the p50 / p99 of the last 1,200 samples (the
last minute) and whole-run totals, which cannot be split by phase; ``/metrics`` on the HTTP port exports every
sample since the start as the cumulative histogram ``sievemq_event_loop_lag_seconds`` (bounds 1, 2.5, 5, 10, 25 ms
...) and the all-time maximum. The bench reads those (only them: ``name[]``) right before and right after each
phase of a sievemq column; the bucket counts' differences are the phase's samples. Percentiles are therefore known
to the bucket (p99 "2.5-5 ms"), which decides a "p99 <= 5 ms" target exactly (5 ms is a bound); the mean is exact
(the sum's difference); the maximum is exact when the all-time maximum rose during the phase, else bounded.
"""

from __future__ import annotations

import asyncio
import math
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass

from bench.system.measure import Result

HIST = "sievemq_event_loop_lag_seconds"
MAX = "sievemq_event_loop_lag_max_seconds"
QUERY = "&".join(f"name%5B%5D={n}" for n in (f"{HIST}_bucket", f"{HIST}_count", f"{HIST}_sum", MAX))
TICK_MS = 50
"""The broker's lag timer's interval: a phase of T seconds holds about T * 20 samples."""


@dataclass(frozen=True)
class LagSnapshot:
    """The broker's lag histogram at one moment: (upper bound s, samples <= it) with +Inf last, sum, maximum."""

    buckets: tuple[tuple[float, int], ...]
    count: int
    sum_s: float
    max_s: float


def parse(text: str) -> LagSnapshot:
    """A snapshot from ``/metrics`` text (the Prometheus exposition format)."""
    buckets: list[tuple[float, int]] = []
    count, sum_s, max_s = -1, 0.0, 0.0
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_labels, _, value = line.rpartition(" ")
        name, _, labels = name_labels.partition("{")
        if name == f"{HIST}_bucket":
            le = labels.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((math.inf if le == "+Inf" else float(le), int(float(value))))
        elif name == f"{HIST}_count":
            count = int(float(value))
        elif name == f"{HIST}_sum":
            sum_s = float(value)
        elif name == MAX:
            max_s = float(value)
    if count < 0 or not buckets:
        raise RuntimeError(f"no {HIST} in the broker's /metrics")
    return LagSnapshot(tuple(sorted(buckets)), count, sum_s, max_s)


def _get(url: str) -> str:
    with urllib.request.urlopen(f"{url}/metrics?{QUERY}", timeout=10) as resp:
        body: bytes = resp.read()
    return body.decode()


async def snapshot(url: str) -> LagSnapshot:
    """The broker's lag figures from ``url``'s ``/metrics`` (``http://host:port``), read in a worker thread."""
    return parse(await asyncio.to_thread(_get, url))


@dataclass(frozen=True)
class PhaseLag:
    """The lag samples of one phase: per bucket (upper bound s, samples in it, above the previous bound)."""

    buckets: tuple[tuple[float, int], ...]
    sum_s: float
    max_s: float
    """The phase's maximum when ``max_exact``, else an upper bound of it."""
    max_exact: bool

    @property
    def samples(self) -> int:
        """Lag samples taken during the phase (one per 50 ms)."""
        return sum(n for _b, n in self.buckets)

    def mean_ms(self) -> float:
        """The mean lag in ms (NaN without samples)."""
        return self.sum_s * 1000 / self.samples if self.samples else math.nan

    def pct_bucket(self, p: float) -> tuple[float, float] | None:
        """(lower, upper) bound in seconds of the bucket holding the nearest-rank ``p``-th percentile."""
        n = self.samples
        if not n:
            return None
        rank = max(1, math.ceil(p / 100 * n))
        running, lower = 0, 0.0
        for bound, k in self.buckets:
            running += k
            if running >= rank:
                return lower, bound
            lower = bound
        return lower, math.inf

    def over(self, bound_s: float) -> int:
        """Samples above ``bound_s`` (one of the bucket bounds)."""
        return sum(n for b, n in self.buckets if b > bound_s)


def diff(a: LagSnapshot, b: LagSnapshot) -> PhaseLag:
    """The samples taken between snapshot ``a`` and the later ``b``."""
    prev_a = prev_b = 0
    per: list[tuple[float, int]] = []
    for (bound, ca), (bound_b, cb) in zip(a.buckets, b.buckets, strict=True):
        assert bound == bound_b, "the lag histogram's buckets changed"
        per.append((bound, (cb - prev_b) - (ca - prev_a)))
        prev_a, prev_b = ca, cb
    exact = b.max_s > a.max_s
    top = max((bound for bound, n in per if n), default=0.0)
    return PhaseLag(tuple(per), b.sum_s - a.sum_s, b.max_s if exact else min(top, a.max_s), exact)


def fmt_bucket(lo_hi: tuple[float, float] | None) -> str:
    """A bucket as ``<= 1 ms``, ``2.5-5 ms`` or ``> 5000 ms``."""
    if lo_hi is None:
        return "-"
    lo, hi = (x * 1000 for x in lo_hi)
    if math.isinf(hi):
        return f"> {lo:g} ms"
    return f"<= {hi:g} ms" if lo == 0 else f"{lo:g}-{hi:g} ms"


def fmt_max(lag: PhaseLag) -> str:
    """The phase's maximum: exact, or ``<=`` a bound."""
    ms = lag.max_s * 1000
    return f"{ms:.1f} ms" if lag.max_exact else f"<= {ms:.1f} ms"


def print_table(rows: Sequence[tuple[str, dict[str, Result]]], names: Sequence[str]) -> None:
    """Per phase (label, results) and sievemq column: the broker's lag samples, mean, p50 and p99 (their buckets),
    samples over 5 and 10 ms, maximum."""
    cols = [n for n in names if any(n in res and res[n].loop_lag is not None for _l, res in rows)]
    if not cols:
        print("broker event-loop lag per phase: no sievemq column with an HTTP port (/metrics) to read it from")
        return
    print(f"broker event-loop lag per phase (the broker's {TICK_MS} ms timer, how late each wake-up came: buckets "
          f"of {HIST} on /metrics read before and after the phase;\n  p50 / p99 nearest rank, shown as the bucket "
          "holding it; a phase of T s has ~20*T samples: below 100 the p99 is the phase's maximum)")  # fmt: skip
    head = (f"{'phase':50s}{'system':>9s}{'samples':>8s}{'mean':>10s}{'p50':>14s}{'p99':>14s}{'> 5 ms':>8s}"
            f"{'> 10 ms':>8s}{'max':>13s}")  # fmt: skip
    print(head)
    print("-" * len(head))
    for label, res in rows:
        for n in cols:
            lag = res[n].loop_lag if n in res else None
            if lag is None:
                continue
            print(f"{label[:49]:50s}{n:>9s}{lag.samples:>8d}{lag.mean_ms():>7.2f} ms"
                  f"{fmt_bucket(lag.pct_bucket(50)):>14s}{fmt_bucket(lag.pct_bucket(99)):>14s}{lag.over(0.005):>8d}"
                  f"{lag.over(0.010):>8d}{fmt_max(lag):>13s}")  # fmt: skip
