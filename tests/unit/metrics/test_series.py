"""Bounding a family's label sets: totals stay exact, counters keep a stable prefix, gauges keep the largest."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sievemq.metrics.series import OTHER, first_n, top_n

items = st.lists(st.tuples(st.text(max_size=3), st.integers(min_value=0, max_value=10**9)), max_size=60)
limits = st.integers(min_value=1, max_value=30)


@given(items, limits)
def test_first_n_keeps_the_first_ones_and_sums_the_rest(xs: list[tuple[str, int]], limit: int) -> None:
    kept, rest = first_n(xs, limit)
    assert kept == xs[:limit]
    assert rest == (sum(v for _, v in xs[limit:]) if len(xs) > limit else None)


@given(items, limits)
def test_top_n_keeps_the_largest_and_the_total(xs: list[tuple[str, int]], limit: int) -> None:
    kept, rest = top_n(xs, limit)
    assert len(kept) == min(limit, len(xs))
    assert sum(v for _, v in kept) + (rest or 0) == sum(v for _, v in xs)
    assert (rest is None) == (len(xs) <= limit)
    values = [v for _, v in kept]
    assert values == sorted(values, reverse=True)
    dropped = list(xs)
    for item in kept:
        dropped.remove(item)
    assert all(d <= min(values) for _, d in dropped), "a dropped value is larger than a kept one"


@given(items, limits, items)
def test_a_counter_family_only_grows_as_counts_grow(xs: list[tuple[str, int]], limit: int,
                                                     more: list[tuple[str, int]]) -> None:  # fmt: skip
    """Counts grow and new label sets arrive at the end (the broker's counters are ordered by first count): every
    series exported before, ``(other)`` included, is as large or larger after."""
    before = dict(xs)
    after = dict(before)
    for key, add in more:
        after[key] = after.get(key, 0) + add
    kept0, rest0 = first_n(before.items(), limit)
    kept1, rest1 = first_n(after.items(), limit)
    now = dict(kept1)
    for key, value in kept0:
        assert now[key] >= value
    assert (rest1 or 0) >= (rest0 or 0)


def test_other_is_no_possible_name() -> None:
    from sievemq.protocol.names import NAME_RE

    assert not NAME_RE.match(OTHER), "a topic or group could be named like the overflow series"
