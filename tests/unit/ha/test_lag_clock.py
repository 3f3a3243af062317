"""``LagClock``: a slave's lag in seconds from its reports (times and offsets given; no clock, no sockets)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sievemq.ha.lag import LagClock


def test_caught_up_reads_zero_and_a_stalled_slave_grows_from_its_last_covered_mark() -> None:
    clock = LagClock(now=0.0, end=0)
    clock.report(acked=0, end=0, now=1.0)
    assert clock.seconds(acked=0, end=0, now=5.0) == 0.0, "holding the whole log is no lag"
    # the master writes 100 bytes at t=2; the slave stops reporting
    assert clock.seconds(acked=0, end=100, now=10.0) == 9.0, "behind since it last held everything (t=1)"


def test_steady_streaming_keeps_the_figure_near_the_delay() -> None:
    """The master's log grows 10 bytes a second; the slave reports, each second, what the master had one second
    before: it is about one second behind, whatever the run's length."""
    clock = LagClock(now=0.0, end=0)
    for t in range(1, 1000):
        end = 10 * t
        clock.report(acked=end - 10, end=end, now=float(t))
    assert clock.seconds(acked=9980, end=9990, now=999.0) <= 2.0


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50), st.floats(0, 5)), max_size=40))
def test_never_negative_and_zero_when_caught_up(steps: list[tuple[int, int, float]]) -> None:
    clock = LagClock(now=0.0, end=0)
    now, end, acked = 0.0, 0, 0
    for grow, ack, dt in steps:
        now += dt
        end += grow
        acked = min(end, acked + ack)
        clock.report(acked, end, now)
        assert clock.seconds(acked, end, now) >= 0.0
        assert clock.caught_up_at <= now
        if acked >= end:
            assert clock.seconds(acked, end, now) == 0.0
