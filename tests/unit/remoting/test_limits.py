"""The pure decisions of limits.py: the per-connection FlowGate, the partial-frame budget and each peer's share of it,
peer keys, the connection caps per peer and in all, the header screen of large frames."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import pytest

from sievemq.remoting.limits import (
    FlowGate,
    GivenUp,
    MiB,
    Over,
    PartialFrames,
    PeerSlots,
    Screen,
    ServerLimits,
    connection_cap,
    evictable,
    overdue,
    screen_step,
)
from sievemq.remoting.peers import peer_key


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


@dataclass(eq=False)
class Holder:
    peer_key: str = "10.0.0.1"
    partial_bytes: int = 0
    partial_since: float = 0.0


def _given(out: list[GivenUp[Holder]]) -> list[tuple[Holder, Over]]:
    return [(g.conn, g.why) for g in out]


def test_partial_frames_count_every_connection_against_one_budget() -> None:
    budget: PartialFrames[Holder] = PartialFrames(100)
    a, b = Holder("10.0.0.1"), Holder("10.0.0.2")
    assert budget.hold(a, 60, False, 1.0) == []
    assert budget.hold(b, 40, False, 2.0) == []  # exactly the budget: fine
    assert budget.total == 100 and budget.by_peer == {"10.0.0.1": 60, "10.0.0.2": 40}
    assert _given(budget.hold(b, 41, False, 2.5)) == [(a, Over.BUDGET)]  # a holds the most: it gives way
    assert budget.total == 41 and a.partial_bytes == 0 and a.partial_since == 0
    assert budget.hold(b, 0, True, 3.0) == []  # b's frame completed
    assert budget.total == 0 and b.partial_since == 0 and budget.by_peer == {} and budget.holders == {}


def test_past_the_budget_the_peer_holding_the_most_gives_way_not_the_newcomer() -> None:
    budget: PartialFrames[Holder] = PartialFrames(100, ip_budget=60)
    stalled = [Holder("10.0.0.1"), Holder("10.0.0.1"), Holder("10.0.0.2"), Holder("10.0.0.3")]
    for i, (h, n) in enumerate(zip(stalled, (25, 30, 30, 10), strict=True)):
        assert budget.hold(h, n, False, float(i)) == []
    assert budget.total == 95
    admin = Holder("10.9.9.9")
    given = budget.hold(admin, 8, False, 10.0)  # 103: 10.0.0.1 holds the most (55): its largest (30) goes
    assert _given(given) == [(stalled[1], Over.BUDGET)]
    assert given[0].held == 30 and given[0].peer_held == 55
    assert budget.hold(admin, 30, False, 10.5) == []  # 95: within the budget again
    assert budget.hold(admin, 0, True, 11.0) == []  # the admin's frame completed
    assert budget.total == 65 and budget.by_peer == {"10.0.0.1": 25, "10.0.0.2": 30, "10.0.0.3": 10}


def test_equal_peers_the_oldest_gives_way_and_a_newcomer_holding_the_most_is_closed_itself() -> None:
    budget: PartialFrames[Holder] = PartialFrames(100, ip_budget=100)
    old, young = Holder("10.0.0.1"), Holder("10.0.0.2")
    budget.hold(old, 40, False, 1.0)
    budget.hold(young, 40, False, 2.0)
    newcomer = Holder("10.0.0.3")
    assert _given(budget.hold(newcomer, 21, False, 3.0)) == [(old, Over.BUDGET)]  # 40 = 40: the older
    assert _given(budget.hold(newcomer, 61, False, 3.5)) == [(newcomer, Over.BUDGET)]  # it holds the most now
    assert budget.total == 40 and budget.by_peer == {"10.0.0.2": 40}


def test_one_peer_holds_at_most_its_share_its_largest_frame_goes_first() -> None:
    budget: PartialFrames[Holder] = PartialFrames(1000, ip_budget=100)
    a, b, c = Holder("10.0.0.1"), Holder("10.0.0.1"), Holder("10.0.0.1")
    other = Holder("10.0.0.2")
    assert budget.hold(other, 100, False, 0.5) == []  # another peer holds its whole share
    assert budget.hold(a, 50, False, 1.0) == [] and budget.hold(b, 40, False, 2.0) == []
    given = budget.hold(c, 30, False, 3.0)  # 120 > 100: a (50) goes, even though c is the newcomer
    assert _given(given) == [(a, Over.PEER_SHARE)] and given[0].peer_held == 120
    assert budget.by_peer["10.0.0.1"] == 70 and other.partial_bytes == 100
    assert _given(budget.hold(c, 90, False, 3.5)) == [(c, Over.PEER_SHARE)]  # 130: c is the largest now


def test_the_share_of_a_peer_leaves_room_for_one_whole_frame() -> None:
    assert ServerLimits().partial_frame_ip_budget == 64 * MiB  # a quarter of 256 MiB
    assert ServerLimits(partial_frame_budget=32 * MiB).partial_frame_ip_budget == 16 * MiB + 4  # 8 MiB: too few
    assert ServerLimits(partial_frame_budget=MiB).partial_frame_ip_budget == MiB  # never past the budget
    assert ServerLimits(partial_frame_ip_percent=100).partial_frame_ip_budget == 256 * MiB
    with pytest.raises(ValueError):
        ServerLimits(partial_frame_ip_percent=101)


def test_peer_keys_are_addresses_and_ipv6_64_networks() -> None:
    assert peer_key("192.0.2.7") == "192.0.2.7"
    assert peer_key("2001:db8:1:2:aaaa::1") == peer_key("2001:db8:1:2:bbbb::9") == "2001:db8:1:2::/64"
    assert peer_key("2001:db8:1:3::1") != peer_key("2001:db8:1:2::1")
    assert peer_key("::ffff:192.0.2.7") == "192.0.2.7"
    assert peer_key("not an address") == "not an address"


def test_peer_slots_cap_each_peer() -> None:
    slots = PeerSlots(2)
    for _ in range(2):
        assert not slots.full("a")
        slots.take("a")
    assert slots.full("a") and not slots.full("b") and slots.total == 2
    slots.give_back("a")
    assert not slots.full("a") and slots.counts == {"a": 1} and slots.total == 1
    slots.give_back("a")
    assert slots.counts == {} and slots.total == 0
    unlimited = PeerSlots(0)
    for _ in range(10_000):
        unlimited.take("a")
    assert not unlimited.full("a")


@dataclass(eq=False)
class Unproven:
    peer_key: str


def test_at_the_cap_an_unproven_connection_of_a_bigger_peer_gives_way() -> None:
    conns = [Unproven("big") for _ in range(3)] + [Unproven("mid"), Unproven("mid")]
    counts = {"big": 5, "mid": 2, "small": 1}
    assert evictable(conns, counts, "new") is conns[0]  # the oldest of a peer with more than the newcomer's 1
    assert evictable(conns, counts, "small") is conns[0]  # small would hold 2: big (5) still has more
    assert evictable(conns, counts, "mid") is conns[0]  # mid would hold 3 < 5
    assert evictable(conns, counts, "big") is None  # the biggest peer cannot push anyone out
    assert evictable(conns[3:], counts, "small") is None  # mid (2) is not above small's 2
    assert evictable(conns[3:], counts, "new") is conns[3]
    assert evictable(conns, counts, "new", scan=0) is None  # the scan is bounded


def test_only_large_frames_are_screened_once_their_header_is_in() -> None:
    limit = 64 * 1024
    assert screen_step(limit - 4, 100, 8, limit) is Screen.PASS  # 64 KiB in all: read as any frame
    assert screen_step(limit - 3, 100, 8, limit) is Screen.WAIT
    assert screen_step(limit - 3, 100, 107, limit) is Screen.WAIT
    assert screen_step(limit - 3, 100, 108, limit) is Screen.CHECK
    assert screen_step(15 * MiB, limit + 1, 8, limit) is Screen.HEADER_TOO_LONG  # refused before it is read
    assert screen_step(15 * MiB, limit, 8 + limit, limit) is Screen.CHECK


def test_the_frame_timer_starts_at_a_frames_first_byte() -> None:
    budget: PartialFrames[Holder] = PartialFrames(1 << 30)
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
    assert (limits.max_connections_per_ip, limits.first_frame_timeout, limits.idle_timeout) == (2000, 30.0, 120.0)
    assert (limits.partial_frame_ip_percent, limits.screen_bytes) == (25, 64 * 1024)
    ServerLimits(max_connections=0, fd_reserve=0, max_connections_per_ip=0, idle_timeout=0.0)
    for bad in ({"max_requests_in_flight": 0}, {"frame_timeout": 0.0}, {"fd_reserve": -1}, {"screen_bytes": 0},
                {"first_frame_timeout": 0.0}, {"partial_frame_ip_percent": 0}):  # fmt: skip
        with pytest.raises(ValueError):
            ServerLimits(**bad)  # type: ignore[arg-type]
