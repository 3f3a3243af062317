"""Bounding the label sets one metric family exports per scrape (docs/metrics.md §2). Pure: no I/O.

A family labelled by names clients choose (topics, groups, queues) could otherwise grow without limit: every
auto-created topic or group would add series, and each scrape would cost the broker and Prometheus more. So each
labelled family keeps at most ``limit`` series and adds the rest into one series whose every label is ``(other)``
(no topic, group or queue name can be that: parentheses are not among their characters):

- ``first_n`` for counters: the first label sets in a stable order (the order the broker first counted them) keep
  their own series, so every exported counter, ``(other)`` included, still only grows;
- ``top_n`` for gauges (lag, in-flight messages): the largest values keep their own series, the ones worth a look.

Either way the sum over a family's series is the sum over all label sets: totals stay exact.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable
from typing import TypeVar

__all__ = ["OTHER", "first_n", "top_n"]

OTHER = "(other)"
"""The label value of the series that adds up the label sets beyond the limit."""

K = TypeVar("K", bound=Hashable)


def first_n(items: Iterable[tuple[K, float]], limit: int) -> tuple[list[tuple[K, float]], float | None]:
    """The first ``limit`` items as given, and the sum of the others (None when none was left out)."""
    kept: list[tuple[K, float]] = []
    rest: float | None = None
    for key, value in items:
        if len(kept) < limit:
            kept.append((key, value))
        else:
            rest = (rest or 0) + value
    return kept, rest


def top_n(items: Iterable[tuple[K, float]], limit: int) -> tuple[list[tuple[K, float]], float | None]:
    """The ``limit`` items of largest value (largest first; ties in the order given), and the sum of the others
    (None when none was left out)."""
    every = list(items)
    if len(every) <= limit:
        return sorted(every, key=lambda kv: -kv[1]), None
    order = heapq.nsmallest(limit, range(len(every)), key=lambda i: (-every[i][1], i))
    chosen = set(order)
    rest = sum(v for i, (_, v) in enumerate(every) if i not in chosen)
    return [every[i] for i in order], rest
