"""RateLimitedLog: one line per key per interval, counts of what was held back, bounded keys (clock injected)."""

from __future__ import annotations

import pytest

from sievemq.util.ratelimit import OVERFLOW_KEY, RateLimitedLog, suppressed_note


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_one_line_per_key_per_interval_then_the_count_held_back() -> None:
    clock = Clock()
    rl = RateLimitedLog(10.0, clock=clock)
    assert rl.allow("10.0.0.1") == 0
    assert [rl.allow("10.0.0.1") for _ in range(5)] == [None] * 5
    assert rl.allow("10.0.0.2") == 0  # keys are independent
    clock.now += 9.99
    assert rl.allow("10.0.0.1") is None
    clock.now += 0.01
    assert rl.allow("10.0.0.1") == 6  # the next line reports the six held back
    assert rl.allow("10.0.0.1") is None
    clock.now += 10
    assert rl.allow("10.0.0.1") == 1


def test_prune_forgets_quiet_keys_and_hands_back_unreported_counts() -> None:
    clock = Clock()
    rl = RateLimitedLog(10.0, clock=clock)
    rl.allow("a")
    rl.allow("b")
    rl.allow("b")
    rl.allow("b")
    clock.now += 5
    rl.allow("c")
    assert rl.prune() == [] and len(rl) == 3  # nobody's interval is over yet
    clock.now += 5
    assert sorted(rl.prune()) == [("b", 2)]  # a had nothing held back; c's interval is not over
    assert len(rl) == 1
    assert rl.allow("b") == 0  # b starts afresh: its count was handed back by prune


def test_keys_are_bounded_new_ones_share_the_overflow_key() -> None:
    clock = Clock()
    rl = RateLimitedLog(10.0, max_keys=3, clock=clock)
    assert [rl.allow(f"k{i}") for i in range(3)] == [0, 0, 0]
    assert rl.allow("k3") == 0  # counted under the overflow key: the first line of it is written
    assert [rl.allow(f"k{i}") for i in range(4, 1000)] == [None] * 996
    assert len(rl) == 4
    clock.now += 10
    assert dict(rl.prune()) == {OVERFLOW_KEY: 996}
    assert len(rl) == 0


def test_zero_interval_allows_everything_and_bad_arguments_are_refused() -> None:
    rl = RateLimitedLog(0.0, clock=Clock())
    assert [rl.allow("x") for _ in range(3)] == [0, 0, 0]
    with pytest.raises(ValueError):
        RateLimitedLog(-1.0)
    with pytest.raises(ValueError):
        RateLimitedLog(1.0, max_keys=0)


def test_suppressed_note() -> None:
    assert suppressed_note(0) == ""
    assert suppressed_note(1) == " (1 similar line suppressed)"
    assert suppressed_note(7) == " (7 similar lines suppressed)"
