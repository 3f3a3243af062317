"""``PullHoldService.held`` counts parked pulls without walking the queues, through holds, wakes and releases."""

from __future__ import annotations

from sievemq.broker.long_polling import PullHoldService


async def test_held_follows_holds_and_releases() -> None:
    h = PullHoldService()
    futs = [(t, q, h.hold(t, q, 0, None)) for t in ("A", "B") for q in range(3)]
    assert h.held() == 6
    h.on_dispatch("A", 1, 5, 0, {})
    assert h.held() == 6, "a woken pull stays parked until its processor releases it"
    h.release("A", 1, futs[1][2])
    h.release("A", 1, futs[1][2])
    h.release("Z", 0, futs[0][2])
    assert h.held() == 5, "a release twice, or of a queue without pulls, changes nothing"
    h.wake_all()
    for t, q, f in futs:
        assert f.done()
        h.release(t, q, f)
    assert h.held() == 0
