"""Recovery after clean and unclean stops: torn commit-log tails, CRC damage, lost queues and index."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from sievemq.protocol.message import MessageExt, decode_record
from sievemq.store import GetStatus, MessageStore, PutStatus
from sievemq.store.consume_queue import CQ_ENTRY
from sievemq.store.dispatch import Dispatcher
from sievemq.store.queue_summary import SUMMARY_NAME

from .conftest import SEG, msg

TOPICS = [("T", 0), ("T", 1), ("U", 0)]


async def fill(s: MessageStore, n: int, start: int = 0) -> list[MessageExt]:
    """``n`` messages over three queues, ~300-byte records, each with a key and a unique key."""
    out = []
    for i in range(start, start + n):
        topic, qid = TOPICS[i % 3]
        r = await s.put_message(msg(topic, b"body-%04d" % i + b"." * 200, qid, tags=f"t{i % 2}", keys=f"k{i} kk{i}",
                                    uniq=f"U{i:06d}"))  # fmt: skip
        assert r.status is PutStatus.PUT_OK
        out.append(r.msgs[0])
    return out


def cq_bytes(s: MessageStore) -> dict[tuple[str, int], list[tuple[int, int, int]]]:
    return {(t, q): s.read_cq_entries(t, q, 0, 10_000) for t, qs in s.topic_queues().items() for q in qs}


def assert_intact(s: MessageStore, msgs: list[MessageExt]) -> None:
    for m in msgs:
        rec = s.look_message_by_offset(m.commit_log_offset)
        assert rec is not None, m.commit_log_offset
        got, _ = decode_record(rec)
        assert (got.body, got.queue_offset, got.topic, got.queue_id) == (m.body, m.queue_offset, m.topic, m.queue_id)
        r = s.get_message(m.topic, m.queue_id, m.queue_offset, 1, None)
        assert r.status is GetStatus.FOUND and r.records == [rec]


def patch_file(path: Path, pos: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(data)


def segment_path(s: MessageStore, phy: int) -> tuple[Path, int]:
    start = phy - phy % SEG
    return s.root / "commitlog" / f"{start:020d}", phy - start


async def test_clean_restart_redoes_nothing(open_store: Callable[..., MessageStore]) -> None:
    s = open_store()
    msgs = await fill(s, 30)
    before = cq_bytes(s)
    await s.shutdown()
    assert not (s.root / "abort").exists()
    s = open_store()
    assert s.recovery_report is not None
    assert (s.recovery_report.abnormal, s.recovery_report.records_redone) == (False, 0)
    assert (s.root / "abort").exists()
    assert cq_bytes(s) == before
    assert_intact(s, msgs)


async def test_crash_without_damage_loses_nothing(open_store: Callable[..., MessageStore]) -> None:
    s = open_store()
    msgs = await fill(s, 10)
    s.flush()
    msgs += await fill(s, 20, 10)
    before = cq_bytes(s)
    s.abandon()  # as kill -9: the page cache keeps what was written, abort stays
    s = open_store()
    assert s.recovery_report is not None and s.recovery_report.abnormal
    assert s.recovery_report.records_redone == 20  # everything after the checkpoint is re-dispatched
    assert cq_bytes(s) == before
    assert_intact(s, msgs)
    assert [decode_record(r)[0].body for r in s.query_message("T", "k25", 10, 0, 1 << 62)] == [msgs[25].body]


@pytest.mark.parametrize("damage", ["crc", "torn", "file_cut"])
async def test_unclean_stop_truncates_at_first_bad_record(open_store: Callable[..., MessageStore], damage: str) -> None:
    s = open_store()
    msgs = await fill(s, 12)
    s.flush()  # checkpoint covers the first 12
    msgs += await fill(s, 30, 12)
    bad = msgs[20]
    later_segments = {m.commit_log_offset - m.commit_log_offset % SEG for m in msgs[21:]}
    bad_seg = bad.commit_log_offset - bad.commit_log_offset % SEG
    assert later_segments - {bad_seg}, "the test needs segments after the damaged one"
    s.abandon()
    path, pos = segment_path(s, bad.commit_log_offset)
    if damage == "crc":
        patch_file(path, pos + 100, b"XX")  # inside the body: only the CRC can tell
    elif damage == "torn":
        patch_file(path, pos + bad.store_size // 2, bytes(bad.store_size - bad.store_size // 2))
    else:
        os.truncate(path, pos + 50)
    s = open_store()
    # Everything before is intact ...
    assert_intact(s, msgs[:20])
    # ... the commit log ends where the bad record started, later segments are gone, the tail is zero.
    assert s.max_phy_offset == bad.commit_log_offset
    assert sorted(os.listdir(s.root / "commitlog"))[-1] == f"{bad_seg:020d}"
    with open(path, "rb") as f:
        f.seek(pos)
        assert f.read() == bytes(SEG - pos)
    # Consume-queue entries beyond are gone; other queues were cut at the same point.
    for topic, qid in TOPICS:
        expect = [m for m in msgs[:20] if (m.topic, m.queue_id) == (topic, qid)]
        assert s.get_max_offset(topic, qid) == len(expect)
        assert [e[0] for e in s.read_cq_entries(topic, qid, 0, 100)] == [m.commit_log_offset for m in expect]
    # The index forgot the lost messages and still knows the kept ones.
    assert s.query_message("U", "k23", 10, 0, 1 << 62) == []
    assert len(s.query_message("T", "U000019", 10, 0, 1 << 62)) == 1
    # New puts continue at the right offsets.
    r = await s.put_message(msg(bad.topic, b"again", bad.queue_id))
    m = r.msgs[0]
    assert (m.commit_log_offset, m.queue_offset) == (bad.commit_log_offset, bad.queue_offset)
    got = s.get_message(bad.topic, bad.queue_id, bad.queue_offset, 32, None)
    assert [decode_record(x)[0].body for x in got.records] == [b"again"]
    await s.shutdown()
    s = open_store()
    assert_intact(s, [*msgs[:20], m])


async def test_crash_after_blank_marker_before_next_segment(open_store: Callable[..., MessageStore]) -> None:
    s = open_store()
    msgs = [(await s.put_message(msg(body=b"z" * 1000))).msgs[0] for _ in range(4)]  # 4th rolled
    assert msgs[3].commit_log_offset == SEG
    s.abandon()
    os.unlink(s.root / "commitlog" / f"{SEG:020d}")  # the new segment never made it
    s = open_store()
    assert s.max_phy_offset == SEG and s.get_max_offset("T", 0) == 3
    r = await s.put_message(msg(body=b"next"))
    assert (r.msgs[0].commit_log_offset, r.msgs[0].queue_offset) == (SEG, 3)


@pytest.mark.parametrize("clean", [True, False])
async def test_missing_consume_queue_folder_is_rebuilt(open_store: Callable[..., MessageStore], clean: bool) -> None:
    s = open_store()
    msgs = await fill(s, 40)
    before = cq_bytes(s)
    if clean:
        await s.shutdown()
    else:
        s.abandon()
    shutil.rmtree(s.root / "consumequeue")
    s = open_store()
    assert cq_bytes(s) == before
    assert_intact(s, msgs)
    f = s.get_message("T", 0, 0, 32, None)
    assert f.next_begin_offset == len([m for m in msgs if (m.topic, m.queue_id) == ("T", 0)])


async def test_rebuilt_queue_after_retention_starts_at_min_offset(open_store: Callable[..., MessageStore]) -> None:
    s = open_store()
    msgs = await fill(s, 60)
    old = 1_000_000.0
    for f in s.commitlog.mfq.files[:2]:
        os.utime(f.path, (old, old))
    assert await s.clean_expired_files(now=old + 73 * 3600, disk_ratio=0.0) == 2
    mins = {(t, q): s.get_min_offset(t, q) for t, q in TOPICS}
    assert all(v > 0 for v in mins.values())
    await s.shutdown()
    shutil.rmtree(s.root / "consumequeue")
    s = open_store()
    for (t, q), lo in mins.items():
        assert s.get_min_offset(t, q) == lo
        r = s.get_message(t, q, 0, 32, None)
        assert (r.status, r.next_begin_offset) == (GetStatus.OFFSET_TOO_SMALL, lo)
    survivors = [m for m in msgs if m.commit_log_offset >= s.min_phy_offset]
    assert_intact(s, survivors)


@pytest.mark.parametrize("clean", [True, False])
async def test_torn_last_cq_entry(open_store: Callable[..., MessageStore], clean: bool) -> None:
    s = open_store()
    msgs = await fill(s, 30)
    before = cq_bytes(s)
    if clean:
        await s.shutdown()
    else:
        s.abandon()
    last = [m for m in msgs if (m.topic, m.queue_id) == ("U", 0)][-1]
    qdir = s.root / "consumequeue" / "U" / "0"
    files = sorted(qdir.iterdir())
    if clean:  # a clean stop's summary vouches for the files (queue_summary.py): without it, every tail is checked
        (s.root / "consumequeue" / SUMMARY_NAME).unlink()
    pos = (last.queue_offset * 20) % (16 * 20)
    # The last entry's tags never landed and 7 bytes of a following entry did.
    patch_file(files[-1], pos + 12, b"\xde\xad\xbe\xef\x00\x00\x00\x00")
    patch_file(files[-1], pos + 20, b"\x00\x00\x00\x00\x00\x00\x7f")
    s = open_store()
    assert cq_bytes(s) == before
    assert s.get_max_offset("U", 0) == last.queue_offset + 1
    assert (files[-1].read_bytes()[pos : pos + 20]) == CQ_ENTRY.pack(last.commit_log_offset, last.store_size, 3645)
    assert files[-1].read_bytes()[pos + 20 :].count(0) == len(files[-1].read_bytes()[pos + 20 :])
    assert_intact(s, msgs)


@pytest.mark.parametrize("clean", [True, False])
async def test_index_rebuilt(open_store: Callable[..., MessageStore], clean: bool) -> None:
    s = open_store()
    msgs = await fill(s, 50)  # 150 index entries: several index files of 64
    s.flush()
    assert len(os.listdir(s.root / "index")) >= 3
    if clean:
        await s.shutdown()
        shutil.rmtree(s.root / "index")
    else:
        s.abandon()  # unclean: index entries after the checkpoint are dropped and re-added
    s = open_store()
    for i in (0, 17, 49):
        m = msgs[i]
        for key in (f"k{i}", f"kk{i}", f"U{i:06d}"):
            got = s.query_message(m.topic, key, 10, 0, 1 << 62)
            assert [decode_record(r)[0].commit_log_offset for r in got] == [m.commit_log_offset], key
    assert s.query_message("T", "k2", 10, 0, 1 << 62) == []  # k2 is a U message


async def test_crash_during_rebuild_is_redone_next_start(
    open_store: Callable[..., MessageStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    s = open_store()
    msgs = await fill(s, 40)
    before = cq_bytes(s)
    await s.shutdown()
    shutil.rmtree(s.root / "consumequeue")
    real = Dispatcher.redo
    count = 0

    def dying_redo(self: Dispatcher, *a: object) -> None:
        nonlocal count
        count += 1
        if count == 15:
            raise RuntimeError("power cut")
        real(self, *a)  # type: ignore[arg-type]

    monkeypatch.setattr(Dispatcher, "redo", dying_redo)
    half = MessageStore(s.config, s.store_host)
    with pytest.raises(RuntimeError):
        half.load()
    half.flush = lambda: None  # type: ignore[method-assign]
    for cq in half.queues.all():  # what was rebuilt so far reaches the disk
        for f in cq.mfq.files:
            f.sync()
    half.abandon()
    monkeypatch.undo()
    assert (s.root / "consumequeue").is_dir()  # a partial rebuild is on disk
    s = open_store()
    assert s.recovery_report is not None and s.recovery_report.abnormal
    assert cq_bytes(s) == before
    assert_intact(s, msgs)
