"""In-flight tracking and the committable offset of one queue (ProcessQueue): pure, no sockets."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from sievemq.client.process_queue import ProcessQueue
from sievemq.protocol.message import MessageExt


def msgs(*offsets: int, size: int = 10) -> list[MessageExt]:
    return [MessageExt("T", b"x" * size, queue_offset=o) for o in offsets]


def test_nothing_in_flight_commits_the_next_pull_offset() -> None:
    pq = ProcessQueue(5)
    assert pq.commit_offset == 5 and pq.count == 0 and pq.span == 0
    pq.advance(9)  # PULL_NOT_FOUND / filtered run
    assert pq.commit_offset == 9


def test_commit_stops_at_the_oldest_unfinished_message() -> None:
    pq = ProcessQueue(0)
    fresh = pq.add(msgs(0, 1, 2, 3), 4)
    assert [m.queue_offset for m in fresh] == [0, 1, 2, 3]
    assert pq.commit_offset == 0
    assert pq.complete([2, 3]) == 0  # 0 and 1 still running
    assert pq.complete([0]) == 1
    assert pq.complete([1]) == 4  # all done: the next offset to pull
    assert pq.count == 0 and pq.size_bytes == 0


def test_messages_dropped_by_the_client_filter_do_not_hold_the_commit() -> None:
    pq = ProcessQueue(10)
    pq.add(msgs(10, 13), 16)  # 11, 12, 14, 15 were filtered out (tag re-check) and never tracked
    assert pq.complete([10]) == 13
    assert pq.complete([13]) == 16


def test_duplicates_and_stale_offsets_are_not_tracked_twice() -> None:
    pq = ProcessQueue(0)
    pq.add(msgs(0, 1), 2)
    assert pq.add(msgs(1, 2), 3) == msgs(2)
    assert pq.count == 3
    pq.complete([0, 1, 2])
    assert pq.add(msgs(0, 1, 2), 3) == []  # a late duplicate of finished messages
    assert pq.commit_offset == 3


def test_completing_unknown_offsets_is_harmless() -> None:
    pq = ProcessQueue(0)
    pq.add(msgs(0), 1)
    assert pq.complete([7, 0, 0]) == 1
    assert pq.size_bytes == 0


def test_offset_moved_backwards_with_nothing_in_flight_accepts_the_messages_again() -> None:
    pq = ProcessQueue(0)
    pq.add(msgs(0, 1, 2), 3)
    pq.complete([0, 1, 2])
    pq.advance(1)  # PULL_OFFSET_MOVED to an earlier offset
    assert pq.commit_offset == 1
    assert [m.queue_offset for m in pq.add(msgs(1, 2), 3)] == [1, 2]


def test_reset_forgets_everything() -> None:
    pq = ProcessQueue(0)
    pq.add(msgs(0, 1, 2), 3)
    pq.reset(1)
    assert pq.count == 0 and pq.commit_offset == 1 and pq.size_bytes == 0
    assert [m.queue_offset for m in pq.add(msgs(1), 2)] == [1]


def test_flow_control_limits() -> None:
    pq = ProcessQueue(0)
    pq.add(msgs(*range(5), size=100), 5)
    assert pq.count == 5 and pq.size_bytes == 500 and pq.span == 4
    assert pq.over_limits(max_count=5, max_bytes=10_000, max_span=100)
    assert pq.over_limits(max_count=100, max_bytes=500, max_span=100)
    assert pq.over_limits(max_count=100, max_bytes=10_000, max_span=4)
    assert not pq.over_limits(max_count=6, max_bytes=501, max_span=5)
    pq.complete([0])
    assert pq.span == 3 and pq.is_inflight(1) and not pq.is_inflight(0)


@settings(max_examples=300)
@given(st.data())
def test_committed_offset_never_passes_an_unfinished_message(data: st.DataObject) -> None:
    """Random pulls (with gaps from filtering) and completions in random order: at every step the committable
    offset is the smallest unfinished offset, or the next pull offset once nothing is unfinished; it never goes
    backwards; at the end it reaches the next pull offset."""
    start = data.draw(st.integers(0, 1000))
    pq = ProcessQueue(start)
    unfinished: set[int] = set()
    next_offset = start
    committed = pq.commit_offset
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    for _ in range(data.draw(st.integers(1, 40))):
        if data.draw(st.booleans()):
            n = data.draw(st.integers(0, 8))
            span = n + data.draw(st.integers(0, 5))
            picked = sorted(rng.sample(range(next_offset, next_offset + span), n)) if span else []
            next_offset += span
            pq.add(msgs(*picked), next_offset)
            unfinished.update(picked)
        elif unfinished:
            done = rng.sample(sorted(unfinished), data.draw(st.integers(1, len(unfinished))))
            pq.complete(done)
            unfinished.difference_update(done)
        expected = min(unfinished) if unfinished else next_offset
        assert pq.commit_offset == expected
        assert all(pq.commit_offset <= u for u in unfinished)
        assert pq.commit_offset >= committed
        committed = pq.commit_offset
        assert pq.count == len(unfinished) and pq.size_bytes == 10 * len(unfinished)
    pq.complete(list(unfinished))
    assert pq.commit_offset == next_offset
