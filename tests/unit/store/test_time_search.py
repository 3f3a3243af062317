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
    ("ts", "expect"),
    [
        (2000, 2),  # exact
        (1000, 0),  # exact, first of equal times
        (3000, 3),
        (500, 0),  # before everything: the only neighbour is on the right
        (9000, 5),  # after everything: the last message
        (2400, 2),  # nearer to 2000
        (2600, 3),  # nearer to 3000
        (4000, 4),  # equidistant: the left one (as Java)
    ],
)
async def test_offset_by_time(
    open_store: Callable[..., MessageStore], clock: Callable[[list[int]], None], ts: int, expect: int
) -> None:
    s = open_store()
    clock(TIMES)
    for _ in TIMES:
        await s.put_message(msg(body=b"t"))
    assert s.get_offset_by_time("T", 0, ts) == expect


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
    assert s.get_offset_by_time("T", 0, 1000 * (lo + 5) + 1) == lo + 4  # offset i was stored at 1000 * (i + 1)
