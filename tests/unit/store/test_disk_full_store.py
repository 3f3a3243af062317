"""The store on a (nearly) full disk, with an injected free-space measure and injected allocation / sync failures:
refused puts write nothing, batches are all or nothing, start-up goes read-only and finishes by itself, failed flushes
mark nothing durable; and how the broker answers a refusal."""

from __future__ import annotations

import asyncio
import ctypes
import errno
import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import sievemq.store.flush as fl
from sievemq.broker.config import BrokerConfig
from sievemq.broker.processors.send import stored_code
from sievemq.broker.store_settings import store_config
from sievemq.errors import RemotingError
from sievemq.protocol.message import MessageExt
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import ResponseCode
from sievemq.settings import load_config
from sievemq.store import AcceptingFilter, GetStatus, MessageStore, PutResult, PutStatus
from sievemq.store.checkpoint import Checkpoint
from sievemq.store.jsonfile import atomic_write_json, read_json
from sievemq.store.results import DiskFull
from tests.unit.store.conftest import HOST, make_config, msg

TB = 1 << 40
BODY = b"b" * 500


class Space:
    """An injected free-space measure for a store (its reserve stays the default)."""

    def __init__(self, s: MessageStore, free: int = TB) -> None:
        self.free = free
        s.disk.free_fn = lambda root: self.free
        s.disk.recheck_s = 0.0  # every check measures: the tests need no waiting

    def none_left(self, s: MessageStore) -> None:
        self.free = s.disk.reserve  # nothing more may be allocated


def state(s: MessageStore) -> tuple[Any, ...]:
    """Everything a put changes: offsets, index counts, the files on disk."""
    names = sorted(str(p.relative_to(s.root)) for p in s.root.rglob("*") if p.name != "checkpoint")
    cqs = sorted((cq.topic, cq.queue_id, cq.max_offset) for cq in s.queues.all())
    return s.max_phy_offset, cqs, [f.count for f in s.index.files], names


def fail_allocation(monkeypatch: pytest.MonkeyPatch, after: int = 0) -> list[int]:
    """Let ``after`` allocations through, then fail every one with ENOSPC; returns the lengths asked for."""
    asked: list[int] = []
    real = os.posix_fallocate

    def alloc(fd: int, offset: int, length: int) -> None:
        asked.append(length)
        if len(asked) > after:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd, offset, length)

    monkeypatch.setattr(os, "posix_fallocate", alloc)
    return asked


async def test_a_put_that_needs_a_new_file_is_refused_and_writes_nothing(
    open_store: Callable[..., MessageStore],
) -> None:
    s = open_store()
    space = Space(s)
    assert (await s.put_message(msg(body=BODY, keys="k0"))).status is PutStatus.PUT_OK
    space.none_left(s)
    stored = 1
    for i in range(1, 100):
        before = state(s)
        r = await s.put_message(msg(body=BODY, keys=f"k{i}"))
        if r.status is PutStatus.PUT_OK:  # it needed no new file: the files in use are allocated
            assert before[3] == state(s)[3], "an accepted put created a file"
            stored += 1
            continue
        assert r.status is PutStatus.SERVICE_NOT_AVAILABLE and r.disk_full is not None
        assert r.disk_full.need_bytes > 0 and not r.disk_full.read_only and r.message_ids == []
        assert state(s) == before, "a refused put changed the store"
        break
    else:
        pytest.fail("no put was refused")
    space.free = TB  # space is back: no restart
    assert (await s.put_message(msg(body=BODY, keys="again"))).status is PutStatus.PUT_OK
    got = s.get_message("T", 0, 0, 200, None)
    assert got.message_count == stored + 1 and s.query_message("T", "again", 4, 0, 2**62)


async def test_a_batch_is_all_or_nothing(open_store: Callable[..., MessageStore]) -> None:
    s = open_store()
    space = Space(s)
    assert (await s.put_message(msg(body=BODY))).status is PutStatus.PUT_OK
    space.none_left(s)
    batch = [msg(body=BODY, keys=f"b{i}") for i in range(12)]  # ~7 KiB: rolls the 4 KiB segment
    before = state(s)
    r = await s.put_messages(batch)
    assert r.status is PutStatus.SERVICE_NOT_AVAILABLE and r.disk_full is not None
    assert state(s) == before
    space.free = TB
    r = await s.put_messages([msg(body=BODY, keys=f"b{i}") for i in range(12)])
    assert r.status is PutStatus.PUT_OK and s.get_max_offset("T", 0) == 13


async def test_allocation_failing_after_the_decision_refuses_cleanly(
    open_store: Callable[..., MessageStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    s = open_store()
    Space(s)  # the measure says there is room, but the filesystem disagrees (another process took it)
    assert (await s.put_message(msg(body=BODY))).status is PutStatus.PUT_OK
    fail_allocation(monkeypatch)
    for _ in range(20):
        before = state(s)
        r = await s.put_message(msg(body=BODY, keys="x"))
        if r.status is not PutStatus.PUT_OK:
            break
    assert r.disk_full is not None and "allocating failed" in r.disk_full.detail
    assert state(s) == before and not list(s.root.rglob("*.spare"))
    monkeypatch.undo()
    assert (await s.put_message(msg(body=BODY))).status is PutStatus.PUT_OK


def _punch_tail(path: Path, data_end: int) -> None:
    """Make the file sparse after ``data_end`` (page-rounded), as a store of an older sievemq left it."""
    start = -(-data_end // 4096) * 4096
    size = path.stat().st_size
    if start >= size:
        return
    fd = os.open(path, os.O_RDWR)
    try:
        if ctypes.CDLL(None, use_errno=True).fallocate(fd, 3, ctypes.c_long(start), ctypes.c_long(size - start)):
            pytest.skip(f"punching holes is not supported here: errno {ctypes.get_errno()}")
    finally:
        os.close(fd)


async def _stored_then_stopped(
    open_store: Callable[..., MessageStore], n: int, **over: Any
) -> tuple[MessageStore, int]:
    """A store that held ``n`` messages (queue T/0, keys k<i>), stopped cleanly; and its commit-log end."""
    s = open_store(**over)
    for i in range(n):
        assert (await s.put_message(msg(body=b"m%d" % i, keys=f"k{i}"))).status is PutStatus.PUT_OK
    end = s.max_phy_offset
    await s.shutdown()
    return s, end


async def test_start_on_a_full_disk_is_read_only_then_writable_by_itself(
    open_store: Callable[..., MessageStore], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    old, end = await _stored_then_stopped(open_store, 5, commitlog_file_size=64 * 1024)
    _punch_tail(old.root / "commitlog" / f"{0:020d}", end)  # sparse after its data, as an older version's file
    fail_allocation(monkeypatch)
    s = MessageStore(old.config, HOST)
    with caplog.at_level(logging.ERROR, "sievemq.store"):
        s.load()
    await s.start()
    try:
        assert s.disk.read_only is not None and "allocating" in s.disk.read_only and "READ-ONLY" in caplog.text
        got = s.get_message("T", 0, 0, 32, AcceptingFilter())
        assert got.status is GetStatus.FOUND and got.message_count == 5, got  # reads are served
        assert s.query_message("T", "k3", 4, 0, 2**62) and s.get_max_offset("T", 0) == 5
        r = await s.put_message(msg(body=b"no"))
        assert r.status is PutStatus.SERVICE_NOT_AVAILABLE and r.disk_full is not None and r.disk_full.read_only
        monkeypatch.undo()  # space is back
        s.disk.recheck_s = 0.01
        s.disk.free_fn = lambda root: TB
        await asyncio.wait_for(_writable(s), 5)
        assert (await s.put_message(msg(body=b"yes"))).status is PutStatus.PUT_OK
        assert s.get_max_offset("T", 0) == 6
    finally:
        await s.shutdown()


async def _writable(s: MessageStore) -> None:
    while s.disk.read_only is not None:
        await asyncio.sleep(0.01)


def _checkpoint(root: Path) -> Checkpoint:
    cp = Checkpoint.decode((root / "checkpoint").read_bytes())
    assert cp is not None
    return cp


async def test_an_interrupted_rebuild_waits_read_only_and_resumes_without_duplicates(
    open_store: Callable[..., MessageStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    old, _end = await _stored_then_stopped(open_store, 100)  # 100 keys: two 64-entry index files
    shutil.rmtree(old.root / "index")  # lost: start-up rebuilds it from the commit log
    fail_allocation(monkeypatch, after=1)  # the first index file gets its blocks, the second does not
    s = MessageStore(old.config, HOST)
    s.load()
    try:
        assert s.disk.read_only is not None and "rebuilding" in s.disk.read_only
        s.flush()  # checkpoints keep the index's redo point meanwhile: a restart now would rebuild it again
        cp = _checkpoint(s.root)
        assert cp.index_offset == 0 and cp.logics_offset == cp.physic_offset == s.max_phy_offset
        assert s.get_max_offset("T", 0) == 100 and s.get_message("T", 0, 96, 32, None).message_count == 4
        monkeypatch.undo()
        assert s.startup is not None and s.startup.run() and s.disk.read_only is None
        for i in (0, 63, 64, 99):
            assert len(s.query_message("T", f"k{i}", 8, 0, 2**62)) == 1, f"k{i}"
        s.flush()
        assert _checkpoint(s.root).index_offset == s.max_phy_offset
    finally:
        s.abandon()


async def test_a_failed_fsync_is_never_put_ok_and_marks_nothing_durable(
    open_store: Callable[..., MessageStore], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    s = open_store(flush_disk_type="SYNC_FLUSH", flush_interval_ms=600_000)
    await s.start()
    assert (await s.put_message(msg(body=b"before"))).status is PutStatus.PUT_OK
    s.flush()
    good = _checkpoint(s.root)
    redirtied: list[tuple[int, int]] = []
    real_redirty = type(s.commitlog.mfq.files[0]).redirty

    def spy(mf: Any, pos: int, end: int) -> None:
        redirtied.append((pos, end))
        real_redirty(mf, pos, end)

    monkeypatch.setattr(type(s.commitlog.mfq.files[0]), "redirty", spy)

    def eio(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(fl, "sync_fd", eio)
    flushed = s.commitlog.mfq.flushed_offset
    with caplog.at_level(logging.ERROR, "sievemq.store"):
        t = time.monotonic()
        r1 = await s.put_message(msg(body=b"during 1"))
        r2 = await s.put_message(msg(body=b"during 2"))
    assert (r1.status, r2.status) == (PutStatus.FLUSH_DISK_TIMEOUT, PutStatus.FLUSH_DISK_TIMEOUT)
    assert time.monotonic() - t < 2.0, "answered when the fsync failed, not after sync_flush_timeout_ms"
    assert s.commitlog.mfq.flushed_offset == flushed and redirtied and redirtied[0][1] > redirtied[0][0]
    assert caplog.text.count("store flush failed") == 1  # rate-limited
    monkeypatch.setattr(fl, "sync_fd", fl.sync_fd.__wrapped__ if hasattr(fl.sync_fd, "__wrapped__") else _sync)
    assert (await s.put_message(msg(body=b"after"))).status is PutStatus.PUT_OK
    s.flush()
    cp = _checkpoint(s.root)
    assert cp.physic_offset == s.max_phy_offset  # the re-dirtied commit log was synced again
    assert (cp.logics_offset, cp.index_offset) == (good.logics_offset, good.index_offset)  # rebuilt at next start
    await s.shutdown()
    assert not (s.root / "abort").exists()


def _sync(fd: int) -> None:
    os.fdatasync(fd)


async def test_a_failed_last_flush_keeps_the_store_marked_unclean(
    open_store: Callable[..., MessageStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    s = open_store()
    await s.start()
    assert (await s.put_message(msg(body=b"x"))).status is PutStatus.PUT_OK

    def eio(*a: Any) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(fl, "sync_job", eio)
    await s.shutdown()
    assert (s.root / "abort").exists() and not s.available


async def test_extension_units_are_skipped_without_room(open_store: Callable[..., MessageStore]) -> None:
    s = open_store()
    s.set_bitmap_calculator(lambda topic, props, tags: bytes(14))
    s.dispatcher.room = lambda n: False  # the disk cannot give the extension its first file
    r = await s.put_message(msg(body=b"x", tags="TagA"))
    assert r.status is PutStatus.PUT_OK
    cq = s.queues.find("T", 0)
    assert cq is not None and cq.ext is not None and not cq.ext.has_files
    assert s.read_cq_entries("T", 0, 0, 1)[0][2] != 0 and s.get_cq_ext_unit("T", 0, 0) is None


def test_a_json_write_on_a_full_disk_leaves_the_document_and_no_tmp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "topics.json"
    atomic_write_json(path, {"v": 1})

    def full(fd: int, data: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError):
        atomic_write_json(path, {"v": 2})
    monkeypatch.undo()
    assert read_json(path) == {"v": 1} and not path.with_name("topics.json.tmp").exists()
    assert json.loads(path.read_text()) == {"v": 1}


def test_the_broker_answers_code_14_with_reason_disk_full() -> None:
    info = DiskFull("/data/store", 4096, 1 << 30, 128 << 20)
    m = MessageExt("T", b"x")
    with pytest.raises(RemotingError) as e:
        stored_code(PutResult(PutStatus.SERVICE_NOT_AVAILABLE, [m], disk_full=info))
    assert (e.value.code, e.value.reason) == (ResponseCode.SERVICE_NOT_AVAILABLE, Reason.DISK_FULL)
    assert "/data/store" in e.value.remark and "4096 bytes free" in e.value.remark and "Free space" in e.value.remark
    with pytest.raises(RemotingError) as other:  # not the disk: as before
        stored_code(PutResult(PutStatus.SERVICE_NOT_AVAILABLE, [m]))
    assert (other.value.code, other.value.reason) == (ResponseCode.SERVICE_NOT_AVAILABLE, None)


def test_the_broker_passes_the_disk_settings_on(tmp_path: Path) -> None:
    cfg = load_config(BrokerConfig, None, {}, {"store_path_root_dir": str(tmp_path), "diskFullReserveBytes": 4096,
                                               "maxHashSlotNum": 100, "maxIndexNum": 400,
                                               "diskSpaceCleanForciblyRatio": 100})  # fmt: skip
    sc = store_config(cfg)
    assert (sc.disk_full_reserve_bytes, sc.index_hash_slots, sc.index_max_entries) == (4096, 100, 400)
    assert sc.disk_force_clean_ratio == 1.0
    default = store_config(BrokerConfig(store_path_root_dir=str(tmp_path)))
    assert default == make_config(tmp_path).__class__(root=tmp_path, bitmap_length_bytes=14)
