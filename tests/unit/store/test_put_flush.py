"""Put validation, dispatch listeners, SYNC_FLUSH group commit / timeout, ASYNC flush, lifecycle."""

from __future__ import annotations

import asyncio
import mmap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sievemq.filter.tags import tag_code
from sievemq.protocol.message import decode_record
from sievemq.protocol.msgid import parse_offset_msg_id
from sievemq.store import MessageStore, PutStatus, StoreError
from sievemq.store import flush as fl
from sievemq.store.checkpoint import CheckpointFile

from .conftest import HOST, SEG, make_config, msg


def read_commitlog(root: Path, phy: int, size: int) -> bytes:
    start = phy - phy % SEG
    with open(root / "commitlog" / f"{start:020d}", "rb") as f:
        f.seek(phy - start)
        return f.read(size)


async def test_put_assigns_offsets_time_and_host(open_store: Callable[..., MessageStore]) -> None:
    s = open_store()
    r1 = await s.put_message(msg(tags="TagA"))
    r2 = await s.put_message(msg(tags="TagA"))
    m1, m2 = r1.msgs[0], r2.msgs[0]
    assert (m1.queue_offset, m2.queue_offset) == (0, 1)
    assert m2.commit_log_offset == m1.store_size
    assert m1.store_host == HOST and m1.store_timestamp > 0 and m2.store_timestamp >= m1.store_timestamp
    assert parse_offset_msg_id(r2.message_ids[0]) == (HOST[0], HOST[1], m2.commit_log_offset)
    stored, _ = decode_record(s.look_message_by_offset(m2.commit_log_offset) or b"")
    assert (stored.store_host, stored.store_timestamp, stored.queue_offset) == (HOST, m2.store_timestamp, 1)


async def test_put_validation(open_store: Callable[..., MessageStore]) -> None:
    s = open_store(max_message_size=100)
    assert (await s.put_message(msg(body=b"x" * 101))).status is PutStatus.MESSAGE_ILLEGAL
    assert (await s.put_message(msg(body=b"x" * 100))).status is PutStatus.PUT_OK
    big = msg(body=b"", big="v" * 32_767)
    assert (await s.put_message(big)).status is PutStatus.PROPERTIES_SIZE_EXCEEDED
    assert (await s.put_message(msg("t" * 128))).status is PutStatus.MESSAGE_ILLEGAL
    assert (await s.put_message(msg("a/b"))).status is PutStatus.MESSAGE_ILLEGAL
    assert (await s.put_messages([msg("A"), msg("B")])).status is PutStatus.MESSAGE_ILLEGAL
    assert (await s.put_message(msg(queue_id=-1))).status is PutStatus.MESSAGE_ILLEGAL
    assert (await s.put_message(msg(queue_id=1 << 31))).status is PutStatus.MESSAGE_ILLEGAL
    assert (await s.put_message(msg(**{"bad\x02key": "v"}))).status is PutStatus.MESSAGE_ILLEGAL
    assert s.get_max_offset("T", 0) == 1 and s.topic_queues() == {"T": [0]}


async def test_service_not_available_before_load_and_after_shutdown(tmp_path: Path) -> None:
    s = MessageStore(make_config(tmp_path), HOST)
    assert (await s.put_message(msg())).status is PutStatus.SERVICE_NOT_AVAILABLE
    s.load()
    await s.start()
    assert (await s.put_message(msg())).status is PutStatus.PUT_OK
    await s.shutdown()
    assert (await s.put_message(msg())).status is PutStatus.SERVICE_NOT_AVAILABLE


async def test_dispatch_listener(open_store: Callable[..., MessageStore]) -> None:
    s = open_store()
    calls: list[tuple[Any, ...]] = []

    def failing(*a: object) -> None:
        raise ZeroDivisionError

    s.add_dispatch_listener(lambda *a: calls.append(a))
    s.add_dispatch_listener(failing)  # a failing listener does not fail the put
    r = await s.put_message(msg("T", b"x", 2, tags="TagB", keys="a b"))
    assert r.status is PutStatus.PUT_OK
    assert calls == [("T", 2, 0, tag_code("TagB"), {"TAGS": "TagB", "KEYS": "a b"})]


async def test_one_process_per_folder(open_store: Callable[..., MessageStore]) -> None:
    s = open_store()
    other = MessageStore(s.config, HOST)
    with pytest.raises(StoreError):
        other.load()


async def test_sync_flush_put_is_on_disk(
    open_store: Callable[..., MessageStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    s = open_store(flush_disk_type="SYNC_FLUSH")
    await s.start()
    synced: list[int] = []
    real = fl.sync_fd

    def spy(fd: int) -> None:
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(fl, "sync_fd", spy)
    r = await s.put_message(msg(body=b"durable", tags="X"))
    assert r.status is PutStatus.PUT_OK
    m = r.msgs[0]
    seg_fd = s.commitlog.mfq.files[0].fd
    assert seg_fd in synced  # fsync happened before the put returned
    raw = read_commitlog(s.root, m.commit_log_offset, m.store_size)
    got, _ = decode_record(raw)
    assert (got.body, got.commit_log_offset) == (b"durable", m.commit_log_offset)
    await s.shutdown()


async def test_group_commit_one_fsync_serves_many(
    open_store: Callable[..., MessageStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    # (the periodic flush is pushed out of the way so that only group commits run)
    s = open_store(flush_disk_type="SYNC_FLUSH", commitlog_file_size=1 << 20, flush_interval_ms=600_000)
    await s.start()
    gate = threading.Event()
    jobs: list[int] = []
    real = fl.sync_job

    def job(fds: list[int], *rest: Any) -> None:
        jobs.append(len(fds))
        gate.wait(10)
        real(fds, *rest)

    monkeypatch.setattr(fl, "sync_job", job)
    first = asyncio.create_task(s.put_message(msg(body=b"first")))
    for _ in range(5000):  # wait (bounded) until the first fsync is in progress (blocked on the gate)
        if jobs:
            break
        await asyncio.sleep(0.001)
    assert jobs, "the first put never started an fsync"
    rest = [asyncio.create_task(s.put_message(msg(body=b"m%d" % i))) for i in range(50)]
    await asyncio.sleep(0)
    gate.set()
    results = await asyncio.gather(first, *rest)
    assert all(r.status is PutStatus.PUT_OK for r in results)
    assert len(jobs) == 2  # one fsync for the first, one for the 50 that queued behind it
    await s.shutdown()


async def test_sync_flush_timeout(open_store: Callable[..., MessageStore], monkeypatch: pytest.MonkeyPatch) -> None:
    s = open_store(flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=50)
    await s.start()
    gate = threading.Event()
    real = fl.sync_job

    def job(*a: Any) -> None:
        gate.wait(10)
        real(*a)

    monkeypatch.setattr(fl, "sync_job", job)
    r = await s.put_message(msg(body=b"slow disk"))
    assert r.status is PutStatus.FLUSH_DISK_TIMEOUT
    assert r.ok  # stored, just not confirmed on disk in time
    gate.set()
    got = s.get_message("T", 0, 0, 1, None)
    assert decode_record(got.records[0])[0].body == b"slow disk"
    await s.shutdown()


async def test_async_flush_writes_checkpoint(open_store: Callable[..., MessageStore]) -> None:
    s = open_store(flush_interval_ms=10)
    await s.start()
    r = await s.put_message(msg(body=b"async"))
    end = s.max_phy_offset
    cp_file = CheckpointFile(s.root / "checkpoint")
    try:
        for _ in range(1000):  # wait for the background flush (bounded)
            if cp_file.read().physic_offset >= end:
                break
            await asyncio.sleep(0.005)
        cp = cp_file.read()
    finally:
        cp_file.close()
    assert cp.physic_offset == cp.logics_offset == cp.index_offset == end
    assert cp.physic_timestamp >= r.msgs[0].store_timestamp
    await s.shutdown()


async def test_shutdown_marks_clean_and_checkpoints_end(open_store: Callable[..., MessageStore]) -> None:
    s = open_store()
    await s.start()
    assert (s.root / "abort").exists()
    for i in range(5):
        await s.put_message(msg(body=b"%d" % i))
    end = s.max_phy_offset
    await s.shutdown()
    assert not (s.root / "abort").exists()
    cp_file = CheckpointFile(s.root / "checkpoint")
    assert cp_file.read().physic_offset == end
    cp_file.close()


def test_prefault_changes_no_bytes(tmp_path: Path) -> None:
    from sievemq.store.mapped_file import MappedFile, file_name, prefault_supported

    mf = MappedFile(tmp_path / file_name(0), 1 << 20)
    try:
        mf.append(b"abc")
        ok = mf.prefault(1, 1 << 19)
        assert ok == prefault_supported()
        assert mf.prefault(1 << 20, 4096) is prefault_supported()  # an empty range past the end
        assert mf.mm[:3] == b"abc"
        assert mf.mm[3 : 1 << 20].count(0) == (1 << 20) - 3
    finally:
        mf.close()
    assert mf.prefault(0, 4096) is False  # closed


def test_prefault_leaves_a_written_and_synced_page_clean(tmp_path: Path) -> None:
    """Prefaulting from a write position inside a page starts at the next page: the page holding the record
    stays clean after its fsync (the first SYNC_FLUSH send of a new segment showed a dirty page otherwise)."""
    from sievemq.store.mapped_file import MappedFile, file_name, prefault_supported
    from tests.integration.helpers import dirty_pages

    if not prefault_supported():
        pytest.skip("MADV_POPULATE_WRITE needs Linux >= 5.14")
    mf = MappedFile(tmp_path / file_name(0), 1 << 20)
    try:
        mf.append(b"r" * 300)
        mf.sync()
        assert dirty_pages(mf.path, 0, 300) == 0, "precondition: the fsync wrote the record's page back"
        assert mf.prefault(300, 1 << 16)
        assert dirty_pages(mf.path, 0, 300) == 0, "prefault dirtied the page holding the synced record"
        assert dirty_pages(mf.path, mmap.PAGESIZE, 1 << 15) > 0, "the pages ahead were not faulted in"
    finally:
        mf.close()


async def test_prefault_ahead_across_segment_rolls(open_store: Callable[..., MessageStore]) -> None:
    """With a helper thread faulting pages in ahead of the writer, every record reads back intact."""
    s = open_store(commitlog_file_size=64 * 1024, commitlog_prefault_bytes=16 * 1024)
    await s.start()
    bodies = [bytes([i % 251]) * (300 + i) for i in range(400)]  # ~10 segments
    for i in range(0, len(bodies), 8):
        r = await s.put_messages([msg(body=b, uniq=f"u{i + k}") for k, b in enumerate(bodies[i : i + 8])])
        assert r.ok
    got: list[bytes] = []
    offset = 0
    while offset < len(bodies):
        res = s.get_message("T", 0, offset, 32, None)
        got.extend(decode_record(rec)[0].body for rec in res.records)
        offset = res.next_begin_offset
    assert got == bodies
    await s.shutdown()
    assert not s.prefaulter.running
