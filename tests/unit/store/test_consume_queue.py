"""Consume-queue entry layout (20 bytes ``>qiq``), file naming, tag codes and the schedule topic slot."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from sievemq.protocol.delay_levels import delay_ms_for_level
from sievemq.store import MessageStore, parse_levels
from sievemq.store.consume_queue import BLANK_SIZE, CQ_ENTRY, ConsumeQueue
from sievemq.store.queue_recovery import recover_queue

from .conftest import CQ_PER_FILE, msg


def test_entry_struct_fixed_vectors() -> None:
    assert CQ_ENTRY.size == 20
    assert CQ_ENTRY.pack(0x0102030405060708, 0x11223344, -1) == bytes.fromhex(
        "0102030405060708 11223344 ffffffffffffffff"
    )
    assert CQ_ENTRY.pack(4096, 187, 2598919) == bytes.fromhex("0000000000001000 000000bb 000000000027a807")
    # Negative Java hash codes are sign-extended to 64 bits.
    assert CQ_ENTRY.pack(0, 1, -784543840)[12:] == struct.pack(">q", -784543840) == bytes.fromhex("ffffffffd13ccfa0")


async def test_entries_on_disk(open_store: Callable[..., MessageStore]) -> None:
    s = open_store()
    rs = [await s.put_message(msg("TopicX", b"b" * 10, 3, tags=t)) for t in ["TagA", None, "中文"] * 7]
    s.flush()
    qdir = s.root / "consumequeue" / "TopicX" / "3"
    names = sorted(p.name for p in qdir.iterdir())
    assert names == [f"{0:020d}", f"{CQ_PER_FILE * 20:020d}"]
    raw = (qdir / names[0]).read_bytes() + (qdir / names[1]).read_bytes()
    assert len(raw) == 2 * CQ_PER_FILE * 20
    codes = {"TagA": 2598919, None: 0, "中文": 646394}
    for i, r in enumerate(rs):
        m = r.msgs[0]
        want = CQ_ENTRY.pack(m.commit_log_offset, m.store_size, codes[m.properties.get("TAGS")])
        assert raw[i * 20 : i * 20 + 20] == want
    assert raw[21 * 20 :] == bytes(len(raw) - 21 * 20)  # zero after the last entry
    assert s.read_cq_entries("TopicX", 3, 15, 3) == [CQ_ENTRY.unpack(raw[j * 20 : j * 20 + 20]) for j in (15, 16, 17)]


async def test_schedule_topic_tags_slot_holds_delivery_time(open_store: Callable[..., MessageStore]) -> None:
    s = open_store()
    r = await s.put_message(msg("SCHEDULE_TOPIC_XXXX", b"x", 2, tags="TagA", REAL_TOPIC="T", REAL_QID="0"))
    m = r.msgs[0]
    ((phy, size, slot),) = s.read_cq_entries("SCHEDULE_TOPIC_XXXX", 2, 0, 1)
    assert (phy, size) == (m.commit_log_offset, m.store_size)
    assert slot == m.store_timestamp + 10_000  # level 3 = queue 2 = 10 s


def test_parse_levels() -> None:
    levels = parse_levels("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h")
    assert len(levels) == 18
    assert levels[:4] == [1000, 5000, 10_000, 30_000] and levels[-2:] == [3_600_000, 7_200_000]
    assert parse_levels("1d 2s") == [86_400_000, 2000]
    assert delay_ms_for_level(levels, 99) == 7_200_000 and delay_ms_for_level(levels, 0) == 1000
    for bad in ["", "5", "1x", "s", "-1s"]:
        with pytest.raises(ValueError):
            parse_levels(bad)


def test_append_at_non_zero_offset_fills_blanks(tmp_path: Path) -> None:
    cq = ConsumeQueue(tmp_path, "T", 0, 8)
    assert cq.append(11, 5000, 100, 7)
    assert (cq.min_offset, cq.max_offset) == (11, 12)
    assert cq.entry(8) == (5000, BLANK_SIZE, 0)  # file starts at 8: slots 8..10 are blanks
    assert cq.entry(11) == (5000, 100, 7)
    assert not cq.append(11, 5000, 100, 7)  # already there
    assert cq.append(12, 5100, 100, 7)
    cq.correct_min_offset(0)
    assert cq.min_offset == 11
    cq.truncate_from_phy(5100)
    assert cq.max_offset == 12
    cq.close()


def test_recover_finds_end_and_drops_torn_tail(tmp_path: Path) -> None:
    cq = ConsumeQueue(tmp_path, "T", 0, 8)
    for i in range(5):
        cq.append(i, 100 * i, 50, i)
    path = cq.mfq.files[0].path
    cq.close()
    data = bytearray(path.read_bytes())
    # A torn 6th entry: size landed, phy only partly (its low bytes), tags not at all.
    data[5 * 20 : 5 * 20 + 12] = bytes.fromhex("0000000000000001 00000032")
    path.write_bytes(bytes(data))
    cq = ConsumeQueue(tmp_path, "T", 0, 8)
    cq.load()
    seen: list[int] = []

    def validate(qoff: int, phy: int, size: int, tags: int) -> bool:
        seen.append(qoff)
        return size == 50 and phy == 100 * qoff

    assert recover_queue(cq, validate) == 1
    assert cq.max_offset == 5 and seen == [5, 4]
    assert path.read_bytes()[100:] == bytes(60)  # torn bytes zeroed
    cq.close()


async def test_read_cq_entries_hides_blank_slots(open_store: Callable[..., MessageStore]) -> None:
    s = open_store()
    await s.put_message(msg(body=b"x"))
    cq = s.queues.find("T", 0)
    assert cq is not None
    assert cq.append(4, 999_999, 100, 7)  # a gap (offsets 1..3) gets blank slots
    assert s.read_cq_entries("T", 0, 1, 4) == [(-1, 0, 0)] * 3 + [(999_999, 100, 7)]
    assert s.look_message_by_offset(-1) is None
