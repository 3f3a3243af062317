"""Store-time lookups: ``get_offset_by_time`` (docs/protocol/requests.md §9), earliest and per-offset store times."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from sievemq.store import MessageStore
from sievemq.store import writer as wr

from .conftest import msg

TIMES = [1000, 1000, 2000, 3000, 3000, 5000]


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[list[int]], None]:
    def set_times(times: list[int]) -> None:
        it: Iterator[int] = iter(times)
        monkeypatch.setattr(wr, "_now_ms", lambda: next(it))

    return set_times


@pytest.mark.parametrize(
    ("ts", "lower", "upper"),
    [
        (2000, 2, 2),  # exact
        (1000, 0, 1),  # exact: the first of equal times / the last of them
        (3000, 3, 4),
        (500, 0, 0),  # before everything: the first message / none at or before it, the min offset
        (9000, 6, 5),  # after everything: the max offset (none at or after it) / the last message
        (2400, 3, 2),  # between two: the later one / the earlier one, whichever is nearer
        (2600, 3, 2),
        (4000, 5, 4),
    ],
)
async def test_offset_by_time(
    open_store: Callable[..., MessageStore], clock: Callable[[list[int]], None], ts: int, lower: int, upper: int
) -> None:
    """RocketMQ 5's boundaries: lower (the default) the first offset stored at or after ``ts``, upper the last one
    stored at or before it."""
    s = open_store()
    clock(TIMES)
    for _ in TIMES:
        await s.put_message(msg(body=b"t"))
    assert (s.get_offset_by_time("T", 0, ts), s.get_offset_by_time("T", 0, ts, upper=True)) == (lower, upper)


async def test_store_time_queries(open_store: Callable[..., MessageStore], clock: Callable[[list[int]], None]) -> None:
    s = open_store()
    assert s.get_offset_by_time("T", 0, 1) == 0  # no queue
    assert s.get_earliest_store_time("T", 0) == -1
    clock([*TIMES, 4000])  # the clock steps back for the last one
    for _ in range(7):
        await s.put_message(msg(body=b"t"))
    assert s.get_earliest_store_time("T", 0) == 1000
    assert s.get_store_time("T", 0, 3) == 3000
    assert s.get_store_time("T", 0, 6) == 5000  # store time never goes backwards
    assert s.get_store_time("T", 0, 7) is None


async def test_offset_by_time_after_retention(
    open_store: Callable[..., MessageStore], clock: Callable[[list[int]], None]
) -> None:
    import os

    s = open_store()
    clock(list(range(1000, 1000 + 1000 * 40, 1000)))
    for _ in range(40):
        await s.put_message(msg(body=b"x" * 500))
    for f in s.commitlog.mfq.files[:2]:
        os.utime(f.path, (1.0, 1.0))
    assert await s.clean_expired_files(now=1e9, disk_ratio=0.0) == 2
    lo = s.get_min_offset("T", 0)
    assert lo > 0
    assert s.get_offset_by_time("T", 0, 1000) == lo
    assert s.get_offset_by_time("T", 0, 1000 * (lo + 5) + 1) == lo + 5  # offset i was stored at 1000 * (i + 1)
    assert s.get_offset_by_time("T", 0, 1000 * (lo + 5) + 1, upper=True) == lo + 4
    assert s.get_offset_by_time("T", 0, 1000, upper=True) == lo  # none at or before it: the min offset
