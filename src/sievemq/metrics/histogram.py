"""Latency histograms as plain fixed-bucket counters: what the broker updates per request (docs/metrics.md §3).

``observe`` is one ``bisect`` over the bucket bounds and two additions: no lock (every caller runs on the role's
event-loop thread), no label lookup, no object per sample. The cumulative form Prometheus wants (``le`` buckets)
is computed only when ``/metrics`` is scraped (``cumulative``).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from itertools import pairwise

__all__ = ["LATENCY_BUCKETS", "LatencyHistogram"]

LATENCY_BUCKETS: tuple[float, ...] = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
"""Upper bounds in seconds, 100 µs to 10 s: a send or pull served from memory lands in the first few, a sync
flush or a SYNC_MASTER wait in the middle ones, a stalled disk in the last."""


class LatencyHistogram:
    """Counts of samples per bucket (``counts[i]``: samples ``<= bounds[i]`` and above the bound before; the last
    count: above every bound) and their sum."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float] = LATENCY_BUCKETS) -> None:
        """``bounds``: finite upper bounds, strictly increasing (ValueError otherwise)."""
        b = tuple(float(x) for x in bounds)
        if not b or any(not math.isfinite(x) for x in b) or any(x >= y for x, y in pairwise(b)):
            raise ValueError(f"bucket bounds must be finite and strictly increasing, not {bounds!r}")
        self.bounds = b
        self.counts = [0] * (len(b) + 1)
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        """One sample of ``seconds``."""
        self.counts[bisect_left(self.bounds, seconds)] += 1
        self.sum += seconds

    @property
    def count(self) -> int:
        """Samples observed."""
        return sum(self.counts)

    def cumulative(self) -> list[tuple[float, int]]:
        """``(upper bound, samples <= it)`` for every bound, then ``(inf, all samples)``: Prometheus's buckets."""
        out: list[tuple[float, int]] = []
        running = 0
        for bound, n in zip((*self.bounds, math.inf), self.counts, strict=True):
            running += n
            out.append((bound, running))
        return out
