"""Bounded work per scrape over counters with one entry per topic (docs/metrics.md §2): a broker may hold 100,000
topics, and ``/metrics`` runs on its event loop, so a scrape must not walk them all.

A counter family keeps the label sets counted first (``series.first_n``); the counters are dicts in the order first
counted, entries never removed, so the kept ones are the table's first ``limit`` entries and the ``(other)`` series is
the table's running total less them: ``head`` reads ``limit`` entries, whatever the table's size. The same for a
histogram family (``head_histograms``), with a running total histogram.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from itertools import islice
from typing import TypeVar

from sievemq.metrics.histogram import LatencyHistogram

__all__ = ["head", "head_histograms", "histogram_lines", "minus"]

K = TypeVar("K", bound=Hashable)


def head(table: Mapping[K, int], limit: int, total: int) -> tuple[list[tuple[K, int]], int | None]:
    """The first ``limit`` entries of ``table`` and ``total`` (the sum of every entry, kept by the counter's owner)
    less theirs: None when no entry was left out. Reads at most ``limit`` entries."""
    if len(table) <= limit:
        return list(table.items()), None
    kept = list(islice(table.items(), limit))
    return kept, max(0, total - sum(n for _, n in kept))


def minus(total: LatencyHistogram, parts: Sequence[LatencyHistogram]) -> LatencyHistogram:
    """``total`` less ``parts`` (histograms of the same bounds), bucket by bucket."""
    out = LatencyHistogram(total.bounds)
    counts = list(total.counts)
    s = total.sum
    for h in parts:
        counts = [a - b for a, b in zip(counts, h.counts, strict=True)]
        s -= h.sum
    out.counts = [max(0, n) for n in counts]
    out.sum = max(0.0, s)
    return out


def histogram_lines(bounds: Sequence[float]) -> int:
    """Sample lines one histogram series writes: a bucket per bound, ``+Inf``, ``_count`` and ``_sum``."""
    return len(bounds) + 3


Histograms = tuple[list[tuple[K, LatencyHistogram]], LatencyHistogram | None]


def head_histograms(table: Mapping[K, LatencyHistogram], limit: int, total: LatencyHistogram) -> Histograms[K]:
    """The first series of ``table`` that fit in ``limit`` sample lines (at least one), and ``total`` less them
    (None when none was left out)."""
    keep = max(1, limit // histogram_lines(total.bounds))
    if len(table) <= keep:
        return list(table.items()), None
    kept = list(islice(table.items(), keep))
    return kept, minus(total, [h for _, h in kept])
