"""``LatencyHistogram`` against a plain reference count, and its cumulative (Prometheus) form."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sievemq.metrics.histogram import LATENCY_BUCKETS, LatencyHistogram

samples = st.lists(st.floats(min_value=0, max_value=100, allow_nan=False), max_size=200)


def reference_buckets(bounds: tuple[float, ...], values: list[float]) -> list[int]:
    """Cumulative counts the slow way: for each bound, the samples at or below it; then all of them."""
    return [sum(1 for v in values if v <= b) for b in bounds] + [len(values)]


@given(samples)
def test_cumulative_counts_are_the_reference_ones(values: list[float]) -> None:
    h = LatencyHistogram()
    for v in values:
        h.observe(v)
    cumulative = h.cumulative()
    assert [b for b, _ in cumulative] == [*LATENCY_BUCKETS, math.inf]
    assert [n for _, n in cumulative] == reference_buckets(LATENCY_BUCKETS, values)
    assert h.count == len(values)
    assert h.sum == pytest.approx(sum(values))


@given(st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), min_size=1, max_size=8, unique=True),
       samples)  # fmt: skip
def test_any_increasing_bounds(raw: list[float], values: list[float]) -> None:
    bounds = tuple(sorted(raw))
    h = LatencyHistogram(bounds)
    for v in values:
        h.observe(v)
    assert [n for _, n in h.cumulative()] == reference_buckets(bounds, values)


def test_a_sample_on_a_bound_counts_in_that_bucket() -> None:
    h = LatencyHistogram((0.1, 1.0))
    h.observe(0.1)
    h.observe(1.0)
    h.observe(1.5)
    assert h.counts == [1, 1, 1]
    assert h.cumulative() == [(0.1, 1), (1.0, 2), (math.inf, 3)]


@pytest.mark.parametrize("bounds", [(), (1.0, 1.0), (2.0, 1.0), (1.0, math.inf), (math.nan,)])
def test_bad_bounds_are_refused(bounds: tuple[float, ...]) -> None:
    with pytest.raises(ValueError, match="strictly increasing"):
        LatencyHistogram(bounds)
