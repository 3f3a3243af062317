"""Queue locks of orderly consumers: one holder per queue, renewal, expiry, unlock by the holder only (pure)."""

from __future__ import annotations

from sievemq.broker.locks import QueueLocks

Q1, Q2 = ("T", "broker-a", 0), ("T", "broker-a", 1)


def test_one_holder_per_queue_renewal_and_expiry() -> None:
    locks = QueueLocks(max_live=60.0)
    assert locks.lock("g", "c1", [Q1, Q2], now=0.0) == [Q1, Q2]
    assert locks.lock("g", "c2", [Q1, Q2], now=30.0) == [], "held by c1"
    assert locks.lock("g", "c1", [Q1], now=50.0) == [Q1], "renewed"
    assert locks.lock("g", "c2", [Q1, Q2], now=100.0) == [Q2], "Q2 expired at 60 s, Q1 was renewed at 50 s"
    assert locks.holder("g", Q1, now=100.0) == "c1" and locks.holder("g", Q2, now=100.0) == "c2"
    assert locks.lock("other-group", "c3", [Q1], now=100.0) == [Q1], "groups lock independently"


def test_unlock_releases_only_the_callers_locks() -> None:
    locks = QueueLocks()
    locks.lock("g", "c1", [Q1], now=0.0)
    locks.lock("g", "c2", [Q2], now=0.0)
    locks.unlock("g", "c1", [Q1, Q2])
    assert locks.holder("g", Q1, now=1.0) is None and locks.holder("g", Q2, now=1.0) == "c2"
