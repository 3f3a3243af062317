"""Commit log segments: naming, blank end-of-file markers and rolling with tiny (4 KiB) segments."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from sievemq.protocol.message import BLANK_MAGIC, MAGIC_V1, decode_record, encode_record
from sievemq.store import MessageStore, PutStatus
from sievemq.store.mapped_file import MappedFile
from sievemq.store.mapped_file_queue import MappedFileQueue

from .conftest import SEG, msg

HDR = struct.Struct(">iI")


def record_size(body_len: int, topic: str = "T", props: str = "") -> int:
    return 91 + body_len + len(topic.encode()) + len(props.encode())


def segment_bytes(root: Path, start: int) -> bytes:
    with open(root / "commitlog" / f"{start:020d}", "rb") as f:
        return f.read()


async def test_roll_writes_blank_marker_and_continues_in_next_segment(
    open_store: Callable[..., MessageStore],
) -> None:
    s = open_store()
    size = record_size(1000)
    per_seg = (SEG - 8) // size  # records that fit with the 8 spare bytes
    assert per_seg == 3
    results = [await s.put_message(msg(body=bytes([i]) * 1000)) for i in range(7)]
    offsets = [r.msgs[0].commit_log_offset for r in results]
    assert offsets == [0, size, 2 * size, SEG, SEG + size, SEG + 2 * size, 2 * SEG]
    assert [r.msgs[0].queue_offset for r in results] == list(range(7))
    root = s.root
    assert sorted(os.listdir(root / "commitlog")) == [f"{0:020d}", f"{SEG:020d}", f"{2 * SEG:020d}"]
    s.flush()
    seg0 = segment_bytes(root, 0)
    assert len(seg0) == SEG  # pre-sized
    # The blank marker fills the tail exactly: TOTALSIZE = remaining bytes, magic 0xCBD43194.
    assert HDR.unpack_from(seg0, 3 * size) == (SEG - 3 * size, BLANK_MAGIC)
    # Each stored record carries its own physical offset and is byte-identical to what get returns.
    seg1 = segment_bytes(root, SEG)
    m, end = decode_record(seg1, size)
    assert (m.commit_log_offset, m.queue_offset, m.body) == (SEG + size, 4, bytes([4]) * 1000)
    assert end == 2 * size
    assert seg1[3 * size : 3 * size + 8] == HDR.pack(SEG - 3 * size, BLANK_MAGIC)
    got = s.get_message("T", 0, 4, 1, None)
    assert got.records == [seg1[size : 2 * size]]
    assert s.max_phy_offset == 2 * SEG + size


async def test_exact_fit_boundary(open_store: Callable[..., MessageStore]) -> None:
    """A record that leaves exactly 8 bytes stays; one byte more rolls."""
    s = open_store()
    first = await s.put_message(msg(body=b"a" * 100))
    used = first.msgs[0].store_size
    body_fit = SEG - used - 8 - record_size(0)
    r = await s.put_message(msg(body=b"b" * body_fit))
    assert r.msgs[0].commit_log_offset == used
    assert s.max_phy_offset == SEG - 8
    r = await s.put_message(msg(body=b"c"))  # 8 bytes left: needs a roll
    assert r.msgs[0].commit_log_offset == SEG
    s.flush()
    assert HDR.unpack_from(segment_bytes(s.root, 0), SEG - 8) == (8, BLANK_MAGIC)


async def test_record_larger_than_segment_is_illegal(open_store: Callable[..., MessageStore]) -> None:
    s = open_store()
    await s.put_message(msg(body=b"x"))
    before = s.max_phy_offset
    r = await s.put_message(msg(body=b"y" * SEG))
    assert r.status is PutStatus.MESSAGE_ILLEGAL
    assert s.max_phy_offset == before
    assert s.get_max_offset("T", 0) == 1


async def test_batch_rolls_mid_batch_with_contiguous_queue_offsets(open_store: Callable[..., MessageStore]) -> None:
    s = open_store()
    r = await s.put_messages([msg(body=bytes([i]) * 1500, keys=f"b{i}") for i in range(4)])
    assert r.status is PutStatus.PUT_OK
    assert [m.queue_offset for m in r.msgs] == [0, 1, 2, 3]
    phys = [m.commit_log_offset for m in r.msgs]
    size = r.msgs[0].store_size
    assert phys == [0, size, SEG, SEG + size]  # two 1.6 KB records per 4 KiB segment
    # the patched physical offset is what is stored
    for m in r.msgs:
        rec = s.look_message_by_offset(m.commit_log_offset)
        assert rec is not None
        assert decode_record(rec)[0].commit_log_offset == m.commit_log_offset
    assert len(r.message_ids) == 4 and r.message_ids[2].endswith(f"{SEG:016X}")


def test_mapped_file_queue_find_and_set_end(tmp_path: Path) -> None:
    q = MappedFileQueue(tmp_path / "q", 4096)
    a = q.create_file(0)
    a.append(b"\x01" * 4096)
    b = q.create_file(4096)
    b.append(b"\x02" * 1000)
    assert q.find(0) is a and q.find(4095) is a and q.find(4096) is b and q.find(8192) is None
    assert q.max_offset == 5096
    q.set_end(4096 + 10)
    assert q.max_offset == 4106
    assert bytes(b.mm[10:1000]) == bytes(990)  # tail zeroed
    q.set_end(100)
    assert [f.file_from_offset for f in q.files] == [0]
    assert not (tmp_path / "q" / f"{4096:020d}").exists()
    assert bytes(a.mm[100:200]) == bytes(100) and a.mm[99] == 1
    q.close()


def test_encode_of_stored_record_matches_put(tmp_path: Path) -> None:
    """The magic and size at the head of each stored record are the codec's."""
    from sievemq.protocol.message import MessageExt

    rec = encode_record(MessageExt("T", b"abc", store_host=("10.0.0.1", 1)))
    assert HDR.unpack_from(rec, 0) == (len(rec), MAGIC_V1)


def test_set_end_deletes_the_newest_file_first_so_a_crash_leaves_no_gap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash between two deletions of a cut must not leave a gap: ``load`` drops every file before a gap, which
    would be the part of the stream the cut kept."""
    q = MappedFileQueue(tmp_path / "q", 4096)
    for start in (0, 4096, 8192, 12288):
        q.create_file(start).append(b"\x01" * (4096 if start < 12288 else 100))
    destroyed: list[int] = []
    real = MappedFile.destroy

    def crash_on_second(self: MappedFile) -> None:
        if destroyed:
            raise OSError("the process dies here")
        destroyed.append(self.file_from_offset)
        real(self)

    monkeypatch.setattr(MappedFile, "destroy", crash_on_second)
    with pytest.raises(OSError):
        q.set_end(100)
    monkeypatch.undo()
    q.close()
    again = MappedFileQueue(tmp_path / "q", 4096)
    again.load()
    assert again.files and again.files[0].file_from_offset == 0  # the kept part is still there
    again.close()
