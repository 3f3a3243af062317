"""Consume-queue extension (docs/protocol/consume-queue.md §8-§11): units, addresses, pulls, recovery, retention."""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sievemq.filter.tags import tag_code
from sievemq.protocol.message import MessageExt, read_record_summary
from sievemq.store import (
    SCHEDULE_TOPIC,
    AcceptingFilter,
    BitmapCalculator,
    BitmapProbe,
    CqExtUnit,
    GetStatus,
    MessageStore,
    is_ext_address,
)
from sievemq.store.consume_queue import CQ_ENTRY, ConsumeQueue, last_ext_address
from sievemq.store.consume_queue_ext import (
    EXT_UNIT_HEAD,
    ConsumeQueueExt,
    decode_address,
    encode_address,
)

from .conftest import HOST, SEG, make_config, msg

BM_LEN = 14
MASK = bytes([0x20]) + bytes(BM_LEN - 1)  # "the group": bit 5
YES = bytes([0x20]) + bytes(BM_LEN - 1)
NO = bytes(BM_LEN)
UNIT = 20 + BM_LEN


class Calc:
    """A bitmap calculator: sets the group's bit when property ``a`` is "1" or "fp" (a Bloom false positive)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None, str | None]] = []

    def __call__(self, topic: str, props: dict[str, str], tags: str | None) -> bytes | None:
        self.calls.append((topic, props.get("a"), tags))
        if topic == "Plain":
            return None  # a topic without SQL groups
        return YES if props.get("a") in ("1", "fp") else NO


class BloomSql(AcceptingFilter):
    """SQL ``a = '1'`` with Bloom data: bitmap test on the CQ, the expression on the record."""

    def __init__(self, *, probe: bool, born: int = 0) -> None:
        self.probe = probe
        self.born = born
        self.cq_calls: list[tuple[int, CqExtUnit | None]] = []
        self.record_calls: list[int] = []

    def bitmap_probe(self) -> BitmapProbe | None:
        return BitmapProbe(MASK, self.born) if self.probe else None

    def match_cq(self, tags_code: int, ext: CqExtUnit | None) -> bool:
        self.cq_calls.append((tags_code, ext))
        if ext is None or len(ext.bitmap) != BM_LEN or ext.store_time <= self.born:
            return True
        return all(b & m == m for b, m in zip(ext.bitmap, MASK, strict=True))

    def match_record(self, record: memoryview) -> bool:
        s = read_record_summary(record)
        self.record_calls.append(s.queue_offset)
        return s.properties.get("a") == "1"


class TagsOnly(AcceptingFilter):
    def __init__(self, *tags: str) -> None:
        self.codes = {tag_code(t) for t in tags}
        self.cq_calls: list[tuple[int, CqExtUnit | None]] = []

    def match_cq(self, tags_code: int, ext: CqExtUnit | None) -> bool:
        self.cq_calls.append((tags_code, ext))
        return tags_code in self.codes

    def match_record(self, record: memoryview) -> bool:
        return True


def a_value(i: int) -> str:
    """Message i's property a: "1" every 7th, "fp" every 11th (not 7th), else "0"."""
    return "1" if i % 7 == 0 else "fp" if i % 11 == 0 else "0"


async def put_n(s: MessageStore, n: int, start: int = 0, *, topic: str = "T", qid: int = 0) -> list[MessageExt]:
    out = []
    for i in range(start, start + n):
        r = await s.put_message(msg(topic, b"body%d" % i, qid, tags=f"Tag{i % 3}", a=a_value(i)))
        assert r.ok
        out.append(r.msgs[0])
    return out


@pytest.fixture
def ext_open(tmp_path: Path) -> Iterator[Callable[..., MessageStore]]:
    """Factory: ``ext_open(calc, **config)`` sets the calculator *before* ``load()`` (as the broker does)."""
    opened: list[MessageStore] = []

    def factory(calc: BitmapCalculator | None = None, **over: Any) -> MessageStore:
        over.setdefault("mapped_file_size_cq_ext", 1024)
        s = MessageStore(make_config(tmp_path / "store", **over), HOST)
        s.set_bitmap_calculator(calc)
        s.load()
        opened.append(s)
        return s

    yield factory
    for s in opened:
        if s.available:
            s.abandon()


def raw_slots(s: MessageStore, topic: str = "T", qid: int = 0) -> list[int]:
    cq = s.queues.find(topic, qid)
    assert cq is not None
    out: list[int] = []
    while block := cq.read_block(len(out), 10_000):
        out += [t for _p, _s, t in CQ_ENTRY.iter_unpack(block)]
    return out


def pull_all(s: MessageStore, flt: object, max_msgs: int = 32, topic: str = "T") -> tuple[list[int], list[int]]:
    """Queue offsets delivered and the next_begin_offsets seen, pulling from 0 to the end."""
    got: list[int] = []
    nexts: list[int] = []
    off = 0
    while off < s.get_max_offset(topic, 0):
        r = s.get_message(topic, 0, off, max_msgs, flt)  # type: ignore[arg-type]
        assert r.status in (GetStatus.FOUND, GetStatus.NO_MATCHED_MESSAGE), r.status
        got += [read_record_summary(rec).queue_offset for rec in r.records]
        nexts.append(r.next_begin_offset)
        off = r.next_begin_offset
    return got, nexts


# ------------------------------------------------------------------------------------------------ layout
def test_unit_layout_fixed_vector(tmp_path: Path) -> None:
    u = CqExtUnit(2598919, 0x0000018F_2B3C4D5E, bytes(range(1, 15)))
    want = bytes.fromhex("0022 000000000027a807 0000018f2b3c4d5e 000e 0102030405060708090a0b0c0d0e")
    assert u.encode() == want and len(want) == 34
    assert CqExtUnit(-784543840, 1, b"").encode() == bytes.fromhex("0014 ffffffffd13ccfa0 0000000000000001 0000")
    assert EXT_UNIT_HEAD.size == 20
    ext = ConsumeQueueExt(tmp_path, "T", 3, 4096)
    a0 = ext.put(2598919, 0x0000018F_2B3C4D5E, bytes(range(1, 15)))
    a1 = ext.put(0, 7, b"")
    assert (a0, a1) == (encode_address(0), encode_address(34))
    ext.close()
    raw = (tmp_path / "T" / "3" / f"{0:020d}").read_bytes()
    assert len(raw) == 4096
    assert raw[:34] == want and raw[34:54] == CqExtUnit(0, 7).encode() and raw[54:] == bytes(4096 - 54)
    ext = ConsumeQueueExt(tmp_path, "T", 3, 4096)
    ext.load()
    assert ext.get(a0) == u and ext.get(a1) == CqExtUnit(0, 7, b"")
    assert ext.data_end() == 54
    assert ext.get(encode_address(54)) is None  # size 0: end of data
    ext.close()


def test_address_encoding() -> None:
    assert encode_address(0) == -(1 << 63)
    assert encode_address(48 * 1024 * 1024) == -(1 << 63) + 50331648
    for off in (0, 1, 34, 50331648, (1 << 63) - (1 << 31) - 1):
        assert decode_address(encode_address(off)) == off
        assert is_ext_address(encode_address(off))
    assert encode_address((1 << 63) - (1 << 31) - 1) == -2147483649
    assert is_ext_address(-2147483649)
    assert not is_ext_address(-2147483648)  # the smallest real tag code (Java int min)
    assert not is_ext_address(tag_code("polygenelubricants"))  # hashes to -2**31
    assert not is_ext_address(0) and not is_ext_address(2598919)


def test_roll_writes_minus_one_and_keeps_four_spare_bytes(tmp_path: Path) -> None:
    ext = ConsumeQueueExt(tmp_path, "T", 0, 100)
    addrs = [ext.put(i, 1000 + i, YES) for i in range(5)]
    # 34-byte units: 0 and 34 fit (68 + 34 + 4 > 100 for the third), so the third rolls to file 100.
    offs = [decode_address(a) for a in addrs if a is not None]
    assert offs == [0, 34, 100, 134, 200]
    ext.close()
    first = (tmp_path / "T" / "0" / f"{0:020d}").read_bytes()
    assert first[68:70] == b"\xff\xff" and first[70:] == bytes(30)
    assert struct.unpack_from(">h", first, 68)[0] == -1
    assert sorted(os.listdir(tmp_path / "T" / "0")) == [f"{n:020d}" for n in (0, 100, 200)]
    ext = ConsumeQueueExt(tmp_path, "T", 0, 100)
    ext.load()
    assert [ext.get(encode_address(o)) for o in offs] == [CqExtUnit(i, 1000 + i, YES) for i in range(5)]
    assert ext.get(encode_address(68)) is None  # the -1 marker is not a unit
    assert ext.data_end() == 234
    # A unit that can never fit a file is refused (the caller stores the plain tag code).
    assert ext.put(1, 1, bytes(100)) is None
    ext.close()


def test_file_size_too_small_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        ConsumeQueueExt(tmp_path, "T", 0, 23)


# ------------------------------------------------------------------------------------------------ dispatch
async def test_dispatch_writes_units_and_addresses(ext_open: Callable[..., MessageStore]) -> None:
    calc = Calc()
    s = ext_open(calc)
    msgs = await put_n(s, 40)
    assert calc.calls[:2] == [("T", "1", "Tag0"), ("T", "0", "Tag1")] and len(calc.calls) == 40
    slots = raw_slots(s)
    assert all(is_ext_address(v) for v in slots)
    assert [decode_address(v) for v in slots[:3]] == [0, UNIT, 2 * UNIT]
    # Real tag codes come back from read_cq_entries; units carry the store time and the bitmap.
    entries = s.read_cq_entries("T", 0, 0, 100)
    assert [t for _p, _s, t in entries] == [tag_code(f"Tag{i % 3}") for i in range(40)]
    for i, m in enumerate(msgs):
        u = s.get_cq_ext_unit("T", 0, i)
        assert u == CqExtUnit(tag_code(f"Tag{i % 3}"), m.store_timestamp, YES if a_value(i) != "0" else NO)
    assert s.get_cq_ext_unit("T", 0, 40) is None
    # Units of 1 KiB files roll: the stream is continuous and flushed with the queue.
    ext_dir = s.root / "consumequeue_ext" / "T" / "0"
    assert len(os.listdir(ext_dir)) == 2
    s.flush()
    cq = s.queues.find("T", 0)
    assert cq is not None and cq.ext is not None
    assert cq.ext.mfq.flushed_offset == cq.ext.mfq.max_offset > 1024


async def test_no_bitmap_no_unit(ext_open: Callable[..., MessageStore]) -> None:
    """None from the calculator (no SQL group), the schedule topic, a disabled extension: plain tag codes."""
    calc = Calc()
    s = ext_open(calc)
    await put_n(s, 3, topic="Plain")
    assert raw_slots(s, "Plain") == [tag_code(f"Tag{i}") for i in range(3)]
    assert not (s.root / "consumequeue_ext" / "Plain").exists()
    r = await s.put_message(msg(SCHEDULE_TOPIC, b"x", 2, tags="TagA", REAL_TOPIC="T", REAL_QID="0"))
    assert [c[0] for c in calc.calls] == ["Plain"] * 3  # never asked for the schedule topic
    ((_p, _sz, slot),) = s.read_cq_entries(SCHEDULE_TOPIC, 2, 0, 1)
    assert slot == r.msgs[0].store_timestamp + 10_000
    s.abandon()

    calc2 = Calc()
    s = ext_open(calc2, enable_consume_queue_ext=False)
    await put_n(s, 2, 3)
    assert calc2.calls == [] and not is_ext_address(raw_slots(s)[0])


async def test_bad_calculator_results_fall_back_to_tag_codes(ext_open: Callable[..., MessageStore]) -> None:
    s = ext_open()
    s.set_bitmap_calculator(lambda t, p, tg: b"\x01")  # wrong length
    await put_n(s, 1)

    def boom(t: str, p: dict[str, str], tg: str | None) -> bytes | None:
        raise RuntimeError("calculator bug")

    s.set_bitmap_calculator(boom)
    await put_n(s, 1, 1)
    s.set_bitmap_calculator(None)
    await put_n(s, 1, 2)
    assert raw_slots(s) == [tag_code("Tag0"), tag_code("Tag1"), tag_code("Tag2")]


async def test_dispatch_listener_gets_real_tag_code(ext_open: Callable[..., MessageStore]) -> None:
    s = ext_open(Calc())
    seen: list[tuple[str, int, int, int, str]] = []
    s.add_dispatch_listener(lambda t, q, o, code, props: seen.append((t, q, o, code, props["a"])))
    await put_n(s, 3)
    assert all(is_ext_address(v) for v in raw_slots(s))
    assert seen == [("T", 0, i, tag_code(f"Tag{i % 3}"), a_value(i)) for i in range(3)]


# ------------------------------------------------------------------------------------------------ pulls
async def test_filter_gets_unit_and_bitmap_no_skips_commit_log(ext_open: Callable[..., MessageStore]) -> None:
    s = ext_open(Calc())
    msgs = await put_n(s, 100)
    flt = BloomSql(probe=False)
    got, _ = pull_all(s, flt)
    assert got == [i for i in range(100) if a_value(i) == "1"]
    # Every entry was offered to match_cq with its real tag code and unit...
    assert [c[0] for c in flt.cq_calls] == [tag_code(f"Tag{i % 3}") for i in range(100)]
    assert [c[1] for c in flt.cq_calls] == [s.get_cq_ext_unit("T", 0, i) for i in range(100)]
    assert flt.cq_calls[5][1] == CqExtUnit(tag_code("Tag2"), msgs[5].store_timestamp, NO)
    # ...but only entries whose bitmap said yes (matches and Bloom false positives) read the commit log.
    assert flt.record_calls == [i for i in range(100) if a_value(i) != "0"]


async def test_probe_skips_match_cq_and_agrees_with_per_entry_path(ext_open: Callable[..., MessageStore]) -> None:
    s = ext_open(Calc(), max_cq_scan_entries=50)
    await put_n(s, 230)  # several CQ files (16 entries) and ext files (1 KiB = 29 units)
    for max_msgs in (1, 3, 32):
        slow, fast = BloomSql(probe=False), BloomSql(probe=True)
        a = pull_all(s, slow, max_msgs)
        b = pull_all(s, fast, max_msgs)
        assert a[0] == b[0] == [i for i in range(230) if a_value(i) == "1"]
        if max_msgs == 32:  # batches never fill: both paths end every pull at the window's end
            assert a[1] == b[1]
        else:  # a full batch: the probe path also steps over the rejected entries that follow it
            assert len(b[1]) <= len(a[1])
        yes = [i for i in range(230) if a_value(i) != "0"]
        assert fast.record_calls == slow.record_calls == yes
        # With the probe, rejected entries never reach match_cq.
        assert all(u is not None and u.bitmap == YES for _c, u in fast.cq_calls)
        assert len(slow.cq_calls) >= 230


async def test_probe_trusts_only_units_stored_after_born_time(ext_open: Callable[..., MessageStore]) -> None:
    s = ext_open(Calc())
    msgs = await put_n(s, 30)
    cut = msgs[14].store_timestamp
    flt = BloomSql(probe=True, born=cut)
    got, _ = pull_all(s, flt)
    # Units stored at or before born time pass the bitmap test: their records are evaluated.
    older = [i for i, m in enumerate(msgs) if m.store_timestamp <= cut]
    assert set(older) <= set(flt.record_calls)
    assert got == [i for i in range(30) if a_value(i) == "1"]


async def test_probe_slow_path_for_mixed_units(ext_open: Callable[..., MessageStore]) -> None:
    """Units of another bitmap length (a Bloom parameter change) and entries without units mix in."""
    s = ext_open()
    state = {"n": 0}

    def calc(topic: str, props: dict[str, str], tags: str | None) -> bytes | None:
        state["n"] += 1
        if state["n"] % 5 == 0:
            return None  # no unit
        return YES if props.get("a") in ("1", "fp") else NO

    s.set_bitmap_calculator(calc)
    await put_n(s, 60)
    cq = s.queues.find("T", 0)
    assert cq is not None and cq.ext is not None
    # An odd unit (20 bytes, no bitmap, as RocketMQ writes for topics without SQL groups) in the
    # middle: never rejected, and it breaks the uniform layout.
    s.dispatcher._bitmap = lambda calc, topic, props, tags: b""  # type: ignore[method-assign]
    odd = (await s.put_message(msg("T", b"odd", 0, tags="Tag0", a="0"))).msgs[0]
    del s.dispatcher._bitmap
    assert s.get_cq_ext_unit("T", 0, 60) == CqExtUnit(tag_code("Tag0"), odd.store_timestamp, b"")
    await put_n(s, 30, 61)
    a, b = BloomSql(probe=False), BloomSql(probe=True)
    assert pull_all(s, a) == pull_all(s, b)
    assert a.record_calls == b.record_calls
    assert [u for _c, u in b.cq_calls if u is not None and u.bitmap == b""] == [
        CqExtUnit(tag_code("Tag0"), odd.store_timestamp, b"")
    ]


async def test_tag_filter_sees_real_codes_and_lost_units_pass(ext_open: Callable[..., MessageStore]) -> None:
    s = ext_open(Calc())
    await put_n(s, 9)
    flt = TagsOnly("Tag1")
    r = s.get_message("T", 0, 0, 32, flt)
    assert [read_record_summary(x).queue_offset for x in r.records] == [1, 4, 7]
    assert {c[0] for c in flt.cq_calls} == {tag_code(f"Tag{i}") for i in range(3)}
    # Units that can no longer be read: the entry passes the CQ stage (Java: unknown tag code -> pass).
    cq = s.queues.find("T", 0)
    assert cq is not None and cq.ext is not None
    cq.ext.mfq.set_end(cq.ext.mfq.min_offset)
    flt = TagsOnly("Tag1")
    r = s.get_message("T", 0, 0, 32, flt)
    assert r.message_count == 9 and flt.cq_calls == []
    r = s.get_message("T", 0, 0, 32, BloomSql(probe=True))
    assert r.message_count == 9 // 7 + 1  # evaluated on the record only: offsets 0 and 7


# ------------------------------------------------------------------------------------------------ recovery
async def test_clean_restart_drops_orphan_units(ext_open: Callable[..., MessageStore]) -> None:
    s = ext_open(Calc())
    await put_n(s, 10)
    before = s.read_cq_entries("T", 0, 0, 100)
    cq = s.queues.find("T", 0)
    assert cq is not None and cq.ext is not None
    orphan = cq.ext.put(1, 2, YES)  # a unit whose CQ entry never got written
    assert orphan is not None and decode_address(orphan) == 10 * UNIT
    await s.shutdown()
    calc = Calc()
    s = ext_open(calc)
    assert s.recovery_report is not None and s.recovery_report.records_redone == 0 and calc.calls == []
    assert s.read_cq_entries("T", 0, 0, 100) == before
    await put_n(s, 1, 10)
    assert decode_address(raw_slots(s)[10]) == 10 * UNIT  # the orphan's space is reused
    assert s.get_cq_ext_unit("T", 0, 10) == CqExtUnit(tag_code("Tag1"), s.get_store_time("T", 0, 10) or 0, NO)


async def test_torn_ext_tail_is_rebuilt(ext_open: Callable[..., MessageStore]) -> None:
    s = ext_open(Calc(), mapped_file_size_cq_ext=4096)
    await put_n(s, 12)
    s.flush()  # the checkpoint covers every entry: only the validator can notice the lost unit
    before = s.read_cq_entries("T", 0, 0, 100)
    units = [s.get_cq_ext_unit("T", 0, i) for i in range(12)]
    path = s.root / "consumequeue_ext" / "T" / "0" / f"{0:020d}"
    s.abandon()
    with open(path, "r+b") as f:  # the last unit's page never reached the disk
        f.seek(11 * UNIT)
        f.write(bytes(UNIT))
    calc = Calc()
    s = ext_open(calc, mapped_file_size_cq_ext=4096)
    rep = s.recovery_report
    assert rep is not None and rep.abnormal and rep.records_redone >= 1
    assert ("T", a_value(11), "Tag2") in calc.calls
    assert s.read_cq_entries("T", 0, 0, 100) == before
    assert [s.get_cq_ext_unit("T", 0, i) for i in range(12)] == units
    assert all(is_ext_address(v) for v in raw_slots(s))


async def test_unit_with_wrong_tag_code_is_redone(ext_open: Callable[..., MessageStore]) -> None:
    s = ext_open(Calc(), mapped_file_size_cq_ext=4096)
    await put_n(s, 5)
    s.flush()
    path = s.root / "consumequeue_ext" / "T" / "0" / f"{0:020d}"
    s.abandon()
    with open(path, "r+b") as f:
        f.seek(4 * UNIT + 2)
        f.write(struct.pack(">q", 12345))
    s = ext_open(Calc(), mapped_file_size_cq_ext=4096)
    assert s.read_cq_entries("T", 0, 4, 1)[0][2] == tag_code("Tag1")


@pytest.mark.parametrize("with_calc", [True, False])
async def test_lost_ext_folder_is_rebuilt(ext_open: Callable[..., MessageStore], with_calc: bool) -> None:
    s = ext_open(Calc())
    await put_n(s, 40)
    await put_n(s, 5, topic="Plain")
    before = s.read_cq_entries("T", 0, 0, 100)
    want = pull_all(s, BloomSql(probe=False))[0]
    await s.shutdown()
    shutil.rmtree(s.root / "consumequeue_ext")
    calc = Calc()
    s = ext_open(calc if with_calc else None)  # the broker sets the calculator before load
    rep = s.recovery_report
    assert rep is not None and not rep.abnormal and rep.records_redone >= 40
    assert s.read_cq_entries("T", 0, 0, 100) == before
    slots = raw_slots(s)
    if with_calc:
        assert len([c for c in calc.calls if c[0] == "T"]) == 40
        assert all(is_ext_address(v) for v in slots)
        flt = BloomSql(probe=True)
        assert pull_all(s, flt)[0] == want
        assert flt.record_calls == [i for i in range(40) if a_value(i) != "0"]
    else:
        assert slots == [tag_code(f"Tag{i % 3}") for i in range(40)]
        assert pull_all(s, BloomSql(probe=True))[0] == want
    # And the rebuilt state is stable across a clean restart.
    await s.shutdown()
    s = ext_open(Calc())
    assert s.recovery_report is not None and s.recovery_report.records_redone == 0
    assert raw_slots(s) == slots


async def test_crash_redo_recomputes_bitmaps(ext_open: Callable[..., MessageStore]) -> None:
    s = ext_open(Calc())
    await put_n(s, 10)
    s.flush()
    await put_n(s, 10, 10)  # not flushed: redone from the checkpoint after the crash
    units = [s.get_cq_ext_unit("T", 0, i) for i in range(20)]
    s.abandon()
    calc = Calc()
    s = ext_open(calc)
    assert s.recovery_report is not None and s.recovery_report.abnormal
    assert [c[1] for c in calc.calls] == [a_value(i) for i in range(10, 20)]
    assert [s.get_cq_ext_unit("T", 0, i) for i in range(20)] == units
    assert decode_address(raw_slots(s)[10]) == 10 * UNIT  # units after the kept entries were cut, then rewritten


# ------------------------------------------------------------------------------------------------ retention, topics
async def test_retention_deletes_ext_files_below_min_offset(ext_open: Callable[..., MessageStore]) -> None:
    s = ext_open(Calc(), mapped_file_size_cq_ext=10 * UNIT + 4)  # 10 units per file
    msgs: list[MessageExt] = []
    for i in range(120):
        r = await s.put_message(msg("T", b"%05d" % i + b"-" * 200, 0, tags="Tag0", a=a_value(i)))
        msgs.append(r.msgs[0])
    ext_dir = s.root / "consumequeue_ext" / "T" / "0"
    assert len(os.listdir(ext_dir)) == 12
    for i, f in enumerate(s.commitlog.mfq.files):
        t = 1_000_000.0 if i < 3 else 2_000_000.0
        os.utime(f.path, (t, t))
    assert await s.clean_expired_files(now=1_000_000.0 + 72 * 3600 + 60, disk_ratio=0.1) == 3
    first_alive = next(m.queue_offset for m in msgs if m.commit_log_offset >= 3 * SEG)
    assert s.get_min_offset("T", 0) == first_alive
    names = sorted(os.listdir(ext_dir))
    min_unit = first_alive * UNIT  # every entry has a unit: unit k sits at k * UNIT... within its file
    min_file = (first_alive // 10) * (10 * UNIT + 4)
    assert names[0] == f"{min_file:020d}" and len(names) == 12 - first_alive // 10
    assert min_unit >= 0
    assert s.get_cq_ext_unit("T", 0, first_alive) is not None
    flt = BloomSql(probe=True)
    r = s.get_message("T", 0, first_alive, 32, flt)
    assert r.status in (GetStatus.FOUND, GetStatus.NO_MATCHED_MESSAGE)
    # A clean restart does not mistake the deleted units of gone messages for lost ones.
    await s.shutdown()
    s = ext_open(Calc(), mapped_file_size_cq_ext=10 * UNIT + 4)
    assert s.recovery_report is not None and s.recovery_report.records_redone == 0
    assert sorted(os.listdir(ext_dir)) == names


async def test_delete_topics_removes_ext_dirs(ext_open: Callable[..., MessageStore]) -> None:
    s = ext_open(Calc())
    await put_n(s, 5)
    await put_n(s, 5, topic="U", qid=1)
    base = s.root / "consumequeue_ext"
    assert (base / "T" / "0").is_dir() and (base / "U" / "1").is_dir()
    s.delete_topics({"T"})
    assert not (base / "T").exists() and not (s.root / "consumequeue" / "T").exists()
    assert (base / "U" / "1").is_dir()
    # A new queue under the same name starts a fresh extension.
    await put_n(s, 2)
    assert [decode_address(v) for v in raw_slots(s)] == [0, UNIT]


async def test_stale_ext_dir_of_unknown_queue_is_replaced(ext_open: Callable[..., MessageStore]) -> None:
    s = ext_open(Calc())
    stale = s.root / "consumequeue_ext" / "T" / "0"
    stale.mkdir(parents=True)
    (stale / f"{0:020d}").write_bytes(CqExtUnit(99, 99, YES).encode() * 20)
    await put_n(s, 1)
    assert s.get_cq_ext_unit("T", 0, 0) == CqExtUnit(tag_code("Tag0"), s.get_store_time("T", 0, 0) or 0, YES)
    assert (stale / f"{0:020d}").read_bytes()[UNIT : 2 * UNIT] == bytes(UNIT)


def test_consume_queue_without_ext_still_works(tmp_path: Path) -> None:
    cq = ConsumeQueue(tmp_path, "T", 0, 8)
    assert cq.ext is None and cq.append(0, 0, 100, 7)
    assert cq.resolve(7) == 7 and cq.ext_unit(0) is None and last_ext_address(cq) is None
    cq.close()


def test_probe_reject_vectorised_matches_per_unit(tmp_path: Path) -> None:
    """``probe_reject`` on random bitmaps over several files agrees with a straightforward check."""
    rng = np.random.default_rng(7)
    ext = ConsumeQueueExt(tmp_path, "T", 0, 40 * UNIT + 4)
    addrs = []
    bitmaps = []
    for i in range(300):
        bm = rng.integers(0, 256, BM_LEN, dtype=np.uint8).tobytes() if i % 13 else b""
        a = ext.put(0, 1000 + i, bm)
        assert a is not None
        addrs.append(a)
        bitmaps.append(bm)
    mask = bytes([0x21, 0, 0x80] + [0] * (BM_LEN - 3))
    for born in (0, 1100):
        got = ext.probe_reject(np.array(addrs, dtype=np.int64), BitmapProbe(mask, born))
        want = [
            len(bm) == BM_LEN and 1000 + i > born and not all(b & m == m for b, m in zip(bm, mask, strict=True))
            for i, bm in enumerate(bitmaps)
        ]
        assert got.tolist() == want
    ext.close()
