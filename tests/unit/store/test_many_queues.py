"""Many queues in one store (docs/many-topics.md): disk in proportion to what a queue holds, mapped files within a
budget (queues parked and mapped again), start-up and retention that do not map every queue at once."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from sievemq.protocol.message import decode_record
from sievemq.store import MessageStore, PutStatus
from sievemq.store.consume_queue import CQ_UNIT, FIRST_ALLOCATION, GROW_MAX
from sievemq.store.limits import MIN_BUDGET, mapped_files_budget
from sievemq.store.mapped_file import MappedFile
from sievemq.store.queue_summary import SUMMARY_NAME
from tests.unit.store.conftest import make_config, msg
from tests.unit.store.test_allocation import no_space

BUDGET = MIN_BUDGET
TOPICS = 50  # x 4 queues: three times the budget


def blocks(path: Path) -> int:
    return os.stat(path).st_blocks * 512


def bodies(store: MessageStore, topic: str, qid: int) -> list[bytes]:
    return [decode_record(rec)[0].body for rec in store.get_message(topic, qid, 0, 32, None).records]


def store_mapped(store: MessageStore) -> int:
    """Files this store maps now (the process-wide count includes other tests' leftovers)."""
    cl = sum(1 for _ in store.commitlog.mfq)
    return cl + len(store.index.files) + sum(cq.mapped_files for cq in store.queues.all())


async def fill(store: MessageStore, topics: int = TOPICS, per_queue: int = 1) -> None:
    for t in range(topics):
        for q in range(4):
            for i in range(per_queue):
                r = await store.put_message(msg(f"T{t}", f"{t}-{q}-{i}".encode(), q))
                assert r.status == PutStatus.PUT_OK


def test_the_budget_is_half_the_tighter_limit() -> None:
    assert mapped_files_budget(0, nofile=1024, map_count=65530) == 256, "two descriptors a file, half of them"
    assert mapped_files_budget(0, nofile=1 << 20, map_count=65530) == 32765
    assert mapped_files_budget(1000, nofile=1 << 20, map_count=65530) == 1000
    assert mapped_files_budget(100_000, nofile=1024, map_count=65530) == 256, "a setting past the limits is cut"
    assert mapped_files_budget(0, nofile=10, map_count=65530) == MIN_BUDGET


async def test_a_small_queue_takes_a_page_of_disk_and_grows_by_doubling(
    open_store: Callable[..., MessageStore],
) -> None:
    s = open_store(cq_entries_per_file=300_000, commitlog_file_size=1 << 20)
    await fill(s, topics=1, per_queue=3)
    f = s.config.root / "consumequeue" / "T0" / "0" / ("0" * 20)
    assert os.stat(f).st_size == 300_000 * CQ_UNIT, "the file keeps RocketMQ's size (offsets are arithmetic)"
    assert blocks(f) == FIRST_ALLOCATION, "three entries take one page, not 6 MB"
    cq = s.queues.find("T0", 0)
    assert cq is not None
    for i in range(3, 1000):
        assert (await s.put_message(msg("T0", b"x", 0))).status == PutStatus.PUT_OK, i
    assert cq.max_offset == 1000
    steps = [FIRST_ALLOCATION]
    while sum(steps) < 1000 * CQ_UNIT:
        steps.append(min(GROW_MAX, max(FIRST_ALLOCATION, sum(steps))))
    assert cq.mfq.files[0].allocated == sum(steps) == blocks(f), "each step doubles what the file holds"
    assert bodies(s, "T0", 0)[:3] == [b"0-0-0", b"0-0-1", b"0-0-2"]


async def test_a_put_whose_queue_must_grow_is_refused_whole_on_a_full_disk(
    open_store: Callable[..., MessageStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    s = open_store(cq_entries_per_file=300_000, commitlog_file_size=1 << 20)
    for _ in range(FIRST_ALLOCATION // CQ_UNIT):
        assert (await s.put_message(msg("T", b"x", 0))).status == PutStatus.PUT_OK
    end = s.max_phy_offset
    asked = no_space(monkeypatch)
    r = await s.put_message(msg("T", b"one too many", 0))
    assert r.status == PutStatus.SERVICE_NOT_AVAILABLE and r.disk_full is not None
    assert asked, "the queue's next step was asked for before anything was written"
    assert s.max_phy_offset == end, "no record without its consume-queue entry"
    assert s.get_max_offset("T", 0) == FIRST_ALLOCATION // CQ_UNIT


async def test_queues_past_the_budget_are_parked_and_read_and_written_as_before(
    open_store: Callable[..., MessageStore],
) -> None:
    s = open_store(max_mapped_files=BUDGET)
    await fill(s)
    await asyncio.sleep(0)  # the trim runs between callbacks
    assert s.queues.parks > 0
    assert store_mapped(s) <= BUDGET
    for t in range(TOPICS):
        for q in range(4):
            assert bodies(s, f"T{t}", q) == [f"{t}-{q}-0".encode()], (t, q)
            await asyncio.sleep(0)
    assert store_mapped(s) <= BUDGET
    parked = next(cq for cq in s.queues.all() if cq.parked)
    assert s.get_max_offset(parked.topic, parked.queue_id) == 1 and parked.parked, "offsets without mapping it"
    r = await s.put_message(msg(parked.topic, b"again", parked.queue_id))
    assert r.status == PutStatus.PUT_OK and r.msgs[0].queue_offset == 1
    assert bodies(s, parked.topic, parked.queue_id)[-1] == b"again"


async def test_a_parked_queue_with_unflushed_entries_is_synced_by_path(
    open_store: Callable[..., MessageStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    s = open_store()
    await fill(s, topics=2)
    cq = s.queues.find("T1", 2)
    assert cq is not None and cq.mfq.flushed_offset < cq.mfq.max_offset
    assert cq.park()
    synced: list[Path] = []
    import sievemq.store.flush as flush

    real = flush.sync_path

    def spy(path: Path) -> None:
        synced.append(path)
        real(path)

    monkeypatch.setattr(flush, "sync_path", spy)
    await s.flusher.flush_all()
    assert cq.mfq.files[0].path in synced
    assert cq.mfq.flushed_offset == cq.mfq.max_offset and cq.parked


async def test_a_queue_in_a_sync_round_is_not_parked(open_store: Callable[..., MessageStore]) -> None:
    s = open_store()
    await fill(s, topics=1)
    cq = s.queues.find("T0", 0)
    assert cq is not None
    cq.pins += 1  # what the flusher does while its job holds the descriptors of the queue's extension files
    assert not cq.park() and not cq.parked
    cq.pins -= 1
    assert cq.park() and cq.parked


@pytest.mark.parametrize("crash", [False, True])
async def test_start_up_with_more_queues_than_the_budget(tmp_path: Path, crash: bool) -> None:
    cfg = make_config(tmp_path / "store", max_mapped_files=BUDGET)
    s = MessageStore(cfg, ("10.1.2.3", 10911))
    s.load()
    await fill(s, per_queue=2)
    if crash:
        s.abandon()
    else:
        await s.shutdown()
    before = MappedFile.open_files
    s = MessageStore(cfg, ("10.1.2.3", 10911))
    s.load()
    try:
        assert s.recovery_report is not None and s.recovery_report.abnormal == crash
        assert MappedFile.open_files - before <= BUDGET, "start-up maps queues one after the other"
        assert len(s.queues.all()) == TOPICS * 4
        for t in range(TOPICS):
            for q in range(4):
                assert s.get_max_offset(f"T{t}", q) == 2
                assert bodies(s, f"T{t}", q) == [f"{t}-{q}-0".encode(), f"{t}-{q}-1".encode()]
        r = await s.put_message(msg("T3", b"after", 1))
        assert r.status == PutStatus.PUT_OK and r.msgs[0].queue_offset == 2
    finally:
        await s.shutdown()


async def test_retention_maps_only_the_parked_queues_it_changes(open_store: Callable[..., MessageStore]) -> None:
    s = open_store(max_mapped_files=BUDGET, file_reserved_hours=0.0001)
    await fill(s)  # many 4 KiB segments: the early topics' messages are in the oldest ones
    await s.flusher.flush_all()
    for cq in s.queues.all():
        cq.park()
    oldest = s.min_phy_offset
    deleted = await s.clean_expired_files(now=10**10, force=True)
    assert deleted > 0 and s.min_phy_offset > oldest
    opened = [cq for cq in s.queues.all() if not cq.parked]
    assert opened, "the queues whose messages went were mapped to correct them"
    for cq in opened:
        assert cq.floor_phy < s.min_phy_offset
    for cq in s.queues.all():
        if cq.parked:
            assert cq.floor_phy >= s.min_phy_offset, "a parked queue whose entries all stay was not mapped"
    t0 = s.queues.find("T0", 0)
    assert t0 is not None and s.get_min_offset("T0", 0) == 1 == t0.max_offset, "its only message is gone"


async def test_a_clean_stop_leaves_a_summary_that_the_next_start_opens_no_queue_for(tmp_path: Path) -> None:
    cfg = make_config(tmp_path / "store", max_mapped_files=BUDGET)
    s = MessageStore(cfg, ("10.1.2.3", 10911))
    s.load()
    await fill(s, per_queue=2)
    await s.shutdown()
    summary = cfg.root / "consumequeue" / SUMMARY_NAME
    assert summary.is_file()
    s = MessageStore(cfg, ("10.1.2.3", 10911))
    s.load()
    try:
        assert not summary.exists(), "read once, then deleted before anything is written"
        assert all(cq.known and cq.parked for cq in s.queues.all()), "no queue was opened"
        assert len(s.queues.all()) == TOPICS * 4
        for t in range(TOPICS):
            for q in range(4):
                assert s.get_max_offset(f"T{t}", q) == 2 and s.get_min_offset(f"T{t}", q) == 0
        assert bodies(s, "T7", 3) == [b"7-3-0", b"7-3-1"]
        r = await s.put_message(msg("T7", b"after", 3))
        assert r.status == PutStatus.PUT_OK and r.msgs[0].queue_offset == 2
    finally:
        s.abandon()
    s = MessageStore(cfg, ("10.1.2.3", 10911))  # a crash: no summary, every queue looked at
    s.load()
    try:
        assert not any(cq.known for cq in s.queues.all())
        assert bodies(s, "T7", 3) == [b"7-3-0", b"7-3-1", b"after"]
    finally:
        await s.shutdown()


@pytest.mark.parametrize("damage", ["torn", "foreign", "climbing", "stale"])
async def test_a_summary_that_does_not_fit_is_ignored(tmp_path: Path, damage: str) -> None:
    cfg = make_config(tmp_path / "store")
    s = MessageStore(cfg, ("10.1.2.3", 10911))
    s.load()
    await fill(s, topics=3)
    await s.shutdown()
    path = cfg.root / "consumequeue" / SUMMARY_NAME
    raw = path.read_bytes()
    if damage == "torn":
        path.write_bytes(raw[: len(raw) // 2])
    elif damage == "foreign":
        path.write_bytes(b'{"version": 1, "queues": 7}')
    elif damage == "climbing":
        path.write_bytes(raw.replace(b'"T1"', b'".."'))
    else:  # the store changed after the summary was written (a put and a stop without one)
        s = MessageStore(cfg, ("10.1.2.3", 10911))
        s.load()
        await s.put_message(msg("T1", b"later", 0))
        await s.flusher.flush_all()
        s.abandon()
        (cfg.root / "abort").unlink()
        path.write_bytes(raw)
    s = MessageStore(cfg, ("10.1.2.3", 10911))
    s.load()
    try:
        assert not path.exists()
        assert not any(cq.known for cq in s.queues.all())
        assert len(s.queues.all()) == 12
        assert bodies(s, "T1", 0)[0] == b"1-0-0"
        assert s.get_max_offset("T1", 0) == (2 if damage == "stale" else 1)
    finally:
        await s.shutdown()
