"""The pure decisions of limits.py: the per-connection FlowGate, the partial-frame budget, the connection cap."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import pytest

from sievemq.remoting.limits import FlowGate, PartialFrames, ServerLimits, connection_cap, overdue


def test_gate_starts_up_to_the_limit_then_queues_in_order_and_pauses_reading() -> None:
    gate: FlowGate[int] = FlowGate(3)
    assert [gate.offer(i) for i in range(5)] == [True, True, True, False, False]
    assert gate.in_flight == 3 and gate.waiting == 2
    assert gate.reading_change() is False  # pause
    assert gate.reading_change() is None  # already paused
    assert gate.finished() == [3]  # the oldest waiting one starts
    assert gate.reading_change() is None  # 4 still waits
    assert gate.finished() == [4]
    assert gate.reading_change() is None  # full again: 3 in flight
    assert gate.finished() == []
    assert gate.reading_change() is True  # room and nothing waits: resume
    assert gate.in_flight == 2
    assert gate.finished() is None  # reading goes on: nothing to do


def test_gate_pauses_while_output_is_over_the_mark_and_never_drops() -> None:
    gate: FlowGate[str] = FlowGate(100)
    assert gate.offer("a")
    gate.pause_writing()
    assert gate.reading_change() is False
    assert not gate.offer("b") and not gate.offer("c")  # nothing starts while the peer does not read
    assert gate.finished() == []  # a done: still paused for writing
    assert gate.reading_change() is None
    assert gate.resume_writing() == ["b", "c"]
    assert gate.in_flight == 2 and gate.waiting == 0
    assert gate.reading_change() is True


def test_gate_resume_writing_respects_the_in_flight_limit() -> None:
    gate: FlowGate[int] = FlowGate(2)
    gate.pause_writing()
    for i in range(5):
        gate.offer(i)
    assert gate.resume_writing() == [0, 1]
    assert gate.reading_change() is False
    gate.clear()  # the connection is gone
    assert gate.waiting == 0 and gate.finished() == []  # still paused (2 were in flight): nothing starts


def test_a_gate_that_never_filled_never_changes_reading() -> None:
    gate: FlowGate[int] = FlowGate(1024)
    for i in range(64):  # a client's held pulls, one per queue, and heartbeats
        assert gate.offer(i)
        assert gate.reading_change() is None
    for _ in range(64):
        assert gate.finished() is None
        assert gate.reading_change() is None


@dataclass
class Holder:
    partial_bytes: int = 0
    partial_since: float = 0.0


def test_partial_frames_count_every_connection_against_one_budget() -> None:
    budget = PartialFrames(100)
    a, b = Holder(), Holder()
    assert budget.hold(a, 60, False, 1.0)
    assert budget.hold(b, 40, False, 2.0)  # exactly the budget: fine
    assert budget.total == 100
    assert not budget.hold(b, 41, False, 2.5)  # b would go past it
    budget.release(b)
    assert budget.total == 60 and b.partial_bytes == 0 and b.partial_since == 0
    assert budget.hold(a, 0, True, 3.0)  # a's frame completed
    assert budget.total == 0 and a.partial_since == 0


def test_the_frame_timer_starts_at_a_frames_first_byte() -> None:
    budget = PartialFrames(1 << 30)
    c = Holder()
    budget.hold(c, 10, False, 5.0)
    assert c.partial_since == 5.0
    budget.hold(c, 500, False, 8.0)  # more of the same frame: the timer keeps its start
    assert c.partial_since == 5.0
    budget.hold(c, 7, True, 9.0)  # a frame completed and the next one began in that data
    assert c.partial_since == 9.0
    assert not overdue(c, 39.0, 30.0) and overdue(c, 39.1, 30.0)
    c.partial_since = 0.0  # suspended (reading paused) or nothing held
    assert not overdue(c, 1e9, 30.0)


def test_connection_cap() -> None:
    # RLIMIT_NOFILE 1024, 300 descriptors open of which 200 are this server's connections, reserve 128
    assert connection_cap(0, 1024, 300, 200, 128) == 1024 - 100 - 128
    assert connection_cap(500, 1024, 300, 200, 128) == 500  # a configured cap below what the limit allows
    assert connection_cap(5000, 1024, 300, 200, 128) == 796  # ... above it: the limit wins
    assert connection_cap(0, None, 300, 200, 128) == sys.maxsize  # no limit
    assert connection_cap(0, 1024, None, 0, 128) == 896  # unknown open count: the limit less the reserve
    assert connection_cap(0, 100, 150, 0, 10) == 0  # other uses already took everything


def test_server_limits_defaults_and_checks() -> None:
    limits = ServerLimits()
    assert (limits.max_unsent_bytes, limits.max_requests_in_flight) == (64 << 20, 1024)
    assert (limits.partial_frame_budget, limits.frame_timeout) == (256 << 20, 30.0)
    ServerLimits(max_connections=0, fd_reserve=0)
    for bad in ({"max_requests_in_flight": 0}, {"frame_timeout": 0.0}, {"fd_reserve": -1}):
        with pytest.raises(ValueError):
            ServerLimits(**bad)  # type: ignore[arg-type]
