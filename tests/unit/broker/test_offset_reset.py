"""Where a reset puts a group (broker/offset_reset.py) and how the offset table holds a reset back from stale
commits (broker/offsets.py), without a broker."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sievemq.broker.offset_reset import LATEST, offset_at_time, reset_to
from sievemq.broker.offsets import RESET_GRACE_SECONDS, RESET_PENDING_SECONDS, ConsumerOffsetManager
from sievemq.store.lookup import offset_by_time


class _Queue:
    """A consume queue's offsets as ``store.lookup.offset_by_time`` reads them (entry i: phy i)."""

    def __init__(self, lo: int, times: list[int]) -> None:
        self.min_offset, self.max_offset = lo, lo + len(times)
        self.times = times

    def entry(self, i: int) -> tuple[int, int, int] | None:
        return (i, 100, 0) if self.min_offset <= i < self.max_offset else None

    def store_time(self, i: int) -> int | None:
        return self.times[i - self.min_offset] if self.min_offset <= i < self.max_offset else None


def _reference(q: _Queue, ts: int) -> int:
    """The first offset stored at or after ``ts``, by looking at every one."""
    if ts < 0:
        return q.max_offset
    return next((o for o in range(q.min_offset, q.max_offset) if (q.store_time(o) or -1) >= ts), q.max_offset)


@settings(max_examples=400, deadline=None)
@given(
    st.integers(0, 50),
    st.lists(st.integers(1, 40), max_size=30).map(lambda gaps: [sum(gaps[: i + 1]) for i in range(len(gaps))]),
    st.lists(st.integers(0, 2), max_size=30),
    st.integers(-1, 700),
)
def test_offset_at_time_is_the_first_message_stored_at_or_after_it(
    lo: int, times: list[int], dups: list[int], ts: int
) -> None:
    stamps = sorted(t for i, t in enumerate(times) for _ in range(1 + (dups[i] if i < len(dups) else 0)))
    q = _Queue(lo, stamps)
    found = offset_at_time(ts, q.min_offset, q.max_offset,
                           lambda t: offset_by_time(q, t, q.store_time), q.store_time)  # fmt: skip
    expected = _reference(q, ts) if ts != 0 else q.min_offset
    assert found == expected, (ts, stamps, found, expected)


def test_ends_of_a_queue() -> None:
    q = _Queue(10, [100, 200, 300])
    search = (lambda t: offset_by_time(q, t, q.store_time), q.store_time)
    assert offset_at_time(LATEST, 10, 13, *search) == 13
    assert offset_at_time(0, 10, 13, *search) == 10
    assert offset_at_time(201, 10, 13, *search) == 12, "after the second message: the third"
    assert offset_at_time(200, 10, 13, *search) == 11, "exactly at the second: the second"
    assert offset_at_time(301, 10, 13, *search) == 13, "after the last: nothing to consume again"
    assert offset_at_time(5, 13, 13, *search) == 13, "an empty queue"


def test_reset_to_moves_back_always_and_forward_only_when_forced() -> None:
    assert reset_to(10, 3, force=False) == 3
    assert reset_to(10, 30, force=False) == 10
    assert reset_to(10, 30, force=True) == 30
    assert reset_to(-1, 30, force=False) == 30, "a group without an offset gets one"


def test_a_pending_reset_holds_back_stale_commits_until_the_group_pulls_from_it(tmp_path: Path) -> None:
    now = [1000.0]
    m = ConsumerOffsetManager(tmp_path)
    m.clock = lambda: now[0]
    m.commit("g", "T", 0, 50)
    m.assign_reset("g", "T", 0, 5)
    assert m.query("g", "T", 0) == 5
    m.commit("g", "T", 0, 51)  # a client still at its old position
    assert m.query("g", "T", 0) == 5, "a commit of before the reset does not undo it"
    assert m.merge_max({"T@g": {"0": 60}}) == 0, "nor does a slave's larger copy"
    assert m.take_reset("g", "T", 0, 50) is None, "a client told of the reset has time to move by itself"
    now[0] += RESET_GRACE_SECONDS
    m.commit("g", "T", 0, 52)
    assert m.query("g", "T", 0) == 5, "its commits stay held back meanwhile"
    assert m.take_reset("g", "T", 0, 50) == 5, "then a pull from elsewhere is told where to go"
    assert m.take_reset("g", "T", 0, 50) == 5, "and again, until the group pulls from the reset offset"
    assert m.take_reset("g", "T", 0, 5) is None, "a pull from the reset offset ends the hold"
    m.commit("g", "T", 0, 7)
    assert m.query("g", "T", 0) == 7
    assert m.take_reset("g", "T", 0, 99) is None
    m.assign_reset("g", "T", 1, 0)
    now[0] += RESET_PENDING_SECONDS
    m.commit("g", "T", 1, 3)
    assert m.query("g", "T", 1) == 3, "the hold expires"
    assert m.take_snapshot() == {"offsetTable": {"T@g": {"0": 7, "1": 3}}}


def test_remove_group_forgets_offsets_and_holds(tmp_path: Path) -> None:
    m = ConsumerOffsetManager(tmp_path)
    m.commit("g", "T", 0, 5)
    m.commit("h", "T", 0, 6)
    m.assign_reset("g", "U", 0, 1)
    assert m.groups() == {"g", "h"}
    assert m.remove_group("g") and not m.remove_group("g")
    assert m.groups() == {"h"} and m.pending_reset("g", "U", 0) is None
    m.commit("g", "U", 0, 9)
    assert m.query("g", "U", 0) == 9
