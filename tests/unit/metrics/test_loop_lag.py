"""The event-loop lag figures: LagStats from given samples, and LoopLagMonitor on a real loop that is blocked."""

from __future__ import annotations

import asyncio
import time

from sievemq.metrics.loop_lag import STALL_S, LagStats, LoopLagMonitor


def test_percentiles_maximum_and_stalls_from_samples() -> None:
    s = LagStats(window=100)
    for i in range(100):
        s.record(i / 1000)  # 0..99 ms
    s.record(-0.5)  # a clock step backwards counts as on time (and pushes the 0 ms sample out)
    assert s.percentile(50) == 0.049 and s.percentile(99) == 0.098
    assert s.max_s == 0.099 and s.samples == 101
    assert s.stalls == 90 and round(s.stalled_s, 3) == round(sum(i / 1000 for i in range(10, 100)), 3)
    t = s.table()
    assert t["eventLoopLagMaxMs"] == "99.000" and t["eventLoopStalls"] == "90"


def test_no_samples_reads_as_zero() -> None:
    assert LagStats().table()["eventLoopLagP99Ms"] == "0.000"


async def test_a_blocked_loop_shows_as_a_stall() -> None:
    m = LoopLagMonitor(interval=0.01)
    m.start()
    try:
        await asyncio.sleep(0.05)
        assert m.stats.samples > 0
        time.sleep(0.08)  # blocks the loop, as a synchronous fsync would
        await asyncio.sleep(0.05)
    finally:
        await m.stop()
    assert m.stats.max_s >= 0.06 and m.stats.stalls >= 1 and m.stats.stalled_s >= STALL_S
