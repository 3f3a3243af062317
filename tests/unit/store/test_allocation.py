"""Files are allocated for real before they are written: new mapped files whole, index files in chunks, spares
ahead of a put; files found sparse are known as such (and their holes are never read through the mapping)."""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path
from typing import Any

import pytest

from sievemq.store.index_file import ENTRY_CHUNK, IndexFile, IndexService
from sievemq.store.mapped_file import MappedFile
from sievemq.store.mapped_file_queue import SPARE_SUFFIX, MappedFileQueue

MIB = 1 << 20


def blocks(path: Path) -> int:
    """Bytes of blocks the file holds."""
    return os.stat(path).st_blocks * 512


def punch_hole(path: Path, offset: int, length: int) -> None:
    """Make a range sparse again (FALLOC_FL_PUNCH_HOLE | KEEP_SIZE), as a file of an older sievemq is."""
    fd = os.open(path, os.O_RDWR)
    try:
        if ctypes.CDLL(None, use_errno=True).fallocate(fd, 3, ctypes.c_long(offset), ctypes.c_long(length)):
            pytest.skip(f"punching holes is not supported here: errno {ctypes.get_errno()}")
    finally:
        os.close(fd)


def no_space(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Make every allocation fail with ENOSPC; returns the (offset, length) asked for."""
    asked: list[tuple[int, int]] = []

    def fail(fd: int, offset: int, length: int) -> None:
        asked.append((offset, length))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", fail)
    return asked


def test_a_new_mapped_file_is_allocated_not_sparse(tmp_path: Path) -> None:
    sparse = tmp_path / "sparse"
    with open(sparse, "wb") as f:
        f.truncate(8 * MIB)  # how files were created before
    mf = MappedFile(tmp_path / f"{0:020d}", 8 * MIB)
    assert blocks(sparse) == 0
    assert blocks(mf.path) >= 8 * MIB and mf.allocated == 8 * MIB
    mf.close()


def test_partial_allocation_and_growth(tmp_path: Path) -> None:
    mf = MappedFile(tmp_path / f"{0:020d}", 8 * MIB, allocate=1 * MIB)
    assert mf.allocated == 1 * MIB and 1 * MIB <= blocks(mf.path) < 2 * MIB
    mf.ensure_allocated(1 * MIB + 1, 2 * MIB)  # in chunks: up to max(upto, allocated + chunk)
    assert mf.allocated == 3 * MIB and blocks(mf.path) >= 3 * MIB
    mf.ensure_allocated(100, 2 * MIB)  # already there: nothing happens
    assert mf.allocated == 3 * MIB
    mf.close()


def test_no_space_at_creation_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    no_space(monkeypatch)
    path = tmp_path / f"{0:020d}"
    with pytest.raises(OSError) as e:
        MappedFile(path, 1 * MIB)
    assert e.value.errno == errno.ENOSPC and not path.exists()


def test_a_write_past_the_allocated_end_allocates_or_raises_never_faults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mf = MappedFile(tmp_path / f"{0:020d}", 1 * MIB, allocate=4096)
    mf.append(b"a" * 4096)
    asked = no_space(monkeypatch)
    with pytest.raises(OSError):
        mf.append(b"b")
    assert asked == [(4096, 4096)] and mf.wrote_position == 4096  # nothing written; it asked one chunk more
    monkeypatch.undo()
    mf.append(b"b")
    assert mf.allocated == 8192  # a file created in chunks grows by its chunk
    whole = MappedFile(tmp_path / f"{1 * MIB:020d}", 1 * MIB, allocate=None)
    assert whole.allocated == 1 * MIB and whole.grow_chunk is None
    whole.close()
    mf.close()


async def test_segments_take_their_data_not_their_size(tmp_path: Path) -> None:
    """A commit-log segment gets blocks a chunk at a time as it fills: a 1 GiB segment with 1 MiB of records
    holds about one chunk (64 MiB), not 1 GiB; each chunk is allocated before a put writes into it."""
    from sievemq.protocol.message import MessageExt
    from sievemq.store import MessageStore, StoreConfig
    from sievemq.store.commitlog import ALLOCATION_CHUNK

    s = MessageStore(StoreConfig(tmp_path / "s", commitlog_file_size=1 << 30, index_hash_slots=16,
                                 index_max_entries=64), ("127.0.0.1", 1))  # fmt: skip
    s.load()
    try:
        for _ in range(8):
            r = await s.put_message(MessageExt("T", b"x" * (128 * 1024), born_host=("1.2.3.4", 1)))
            assert r.ok
        seg = s.commitlog.mfq.files[0]
        assert seg.allocated == ALLOCATION_CHUNK and ALLOCATION_CHUNK <= blocks(seg.path) < 2 * ALLOCATION_CHUNK
        assert s.commitlog.allocation_needed(1000) == 0
        assert s.commitlog.allocation_needed(ALLOCATION_CHUNK) == ALLOCATION_CHUNK  # past the chunk: one more
        s.commitlog.allocate_for(ALLOCATION_CHUNK)
        assert seg.allocated >= seg.wrote_position + ALLOCATION_CHUNK
    finally:
        s.abandon()


def test_a_sparse_file_found_on_disk_knows_where_its_holes_start(tmp_path: Path) -> None:
    path = tmp_path / f"{0:020d}"
    mf = MappedFile(path, 1 * MIB)
    mf.append(b"x" * 10_000)
    mf.close()
    punch_hole(path, 12288, 1 * MIB - 12288)
    again = MappedFile(path, 1 * MIB)
    assert again.allocated == 12288  # the first hole: writing beyond it allocates first
    assert again.read_at(12288, 8) == bytes(8) and again.read_at(0, 2) == b"xx"
    again.close()
    whole = MappedFile(tmp_path / f"{1 * MIB:020d}", 1 * MIB)
    whole.close()
    assert MappedFile(whole.path, 1 * MIB).allocated == 1 * MIB


def test_spares_are_adopted_by_the_stream_and_never_left_behind(tmp_path: Path) -> None:
    mfq = MappedFileQueue(tmp_path / "q", 64 * 1024)
    first = mfq.create_file(0)
    spare = mfq.spare(64 * 1024)
    assert spare.path.name == f"{64 * 1024:020d}{SPARE_SUFFIX}" and blocks(spare.path) >= 64 * 1024
    assert mfq.has_spare(64 * 1024) and mfq.spare(64 * 1024) is spare and mfq.max_offset == 0
    first.wrote_position = first.file_size
    second = mfq.create_file(64 * 1024)
    assert second is spare and second.path.name == f"{64 * 1024:020d}" and second.file_from_offset == 64 * 1024
    assert not mfq.has_spare(64 * 1024) and second.new_file  # its folder gets an fsync with the next flush
    leftover = mfq.spare(128 * 1024)
    mfq.close()
    assert not leftover.path.exists()  # a clean stop deletes spares
    crash = tmp_path / "q" / f"{128 * 1024:020d}{SPARE_SUFFIX}"
    crash.write_bytes(b"")  # a crash left one
    again = MappedFileQueue(tmp_path / "q", 64 * 1024)
    again.load()
    assert not crash.exists() and [f.file_from_offset for f in again.files] == [0, 64 * 1024]
    again.close()


def _index(tmp_path: Path, slots: int = 1000, entries: int = 1_000_000) -> IndexService:
    return IndexService(tmp_path / "index", slots, entries)


def test_index_slots_at_creation_entries_in_chunks(tmp_path: Path) -> None:
    idx = _index(tmp_path)
    head = 48 + 1000 * 4
    idx.put("T#a", 0, 1)
    mf = idx.files[0].mf
    size = IndexFile.file_size(1000, 1_000_000)
    assert mf.file_size == size == head + 24_000_000
    assert mf.allocated == head + ENTRY_CHUNK and blocks(mf.path) < head + ENTRY_CHUNK + 64 * 1024  # not 24 MB
    per_chunk = ENTRY_CHUNK // 24
    assert idx.room() == per_chunk - 1
    for i in range(per_chunk):  # one past the first chunk: the next one is allocated as the entry needs it
        idx.put(f"T#k{i}", i + 1, 1)
    assert mf.allocated == head + 2 * ENTRY_CHUNK and blocks(mf.path) >= head + 2 * ENTRY_CHUNK
    assert idx.lookup("T#k7", 10, 0, 2) == [8]
    idx.close()


def test_index_bytes_needed_and_prepare(tmp_path: Path) -> None:
    idx = _index(tmp_path, slots=16, entries=100)  # tiny files: a chunk is the whole entry area
    first = IndexFile.first_allocation(16, 100, 1)
    assert first == IndexFile.file_size(16, 100)
    assert idx.bytes_needed(1) == first and idx.room() == 0
    idx.prepare(1)  # a spare, named when its first key comes
    assert idx.bytes_needed(1) == 0 and [p.name for p in (tmp_path / "index").iterdir()] == [f"next-1{SPARE_SUFFIX}"]
    idx.put("T#a", 777, 1)
    assert [p.name for p in (tmp_path / "index").iterdir()] == [f"{777:020d}"] and idx.room() == 99
    assert idx.bytes_needed(99) == 0 and idx.bytes_needed(100) == first  # the 100th key rolls to a new file
    assert idx.bytes_needed(250) == 2 * first + IndexFile.first_allocation(16, 100, 51) - first
    idx.close()


def test_index_put_without_space_raises_before_writing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    idx = _index(tmp_path)
    idx.put("T#a", 0, 1)
    f = idx.files[0]
    f.mf.allocated = f._entry_pos(2)  # as if the chunk ended right after the first entry
    f.limit = 1
    no_space(monkeypatch)
    with pytest.raises(OSError):
        idx.put("T#b", 5, 1)
    assert f.count == 1 and idx.lookup("T#b", 10, 0, 2) == []
    idx.close()


def test_reads_of_holes_go_through_pread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mf = MappedFile(tmp_path / f"{0:020d}", 64 * 1024, allocate=4096)
    calls: list[Any] = []
    real = os.pread

    def spy(fd: int, n: int, pos: int) -> bytes:
        calls.append((n, pos))
        return real(fd, n, pos)

    monkeypatch.setattr(os, "pread", spy)
    assert mf.read_at(0, 16) == bytes(16) and calls == []
    assert mf.read_at(8192, 16) == bytes(16) and calls == [(16, 8192)]
    mf.close()
