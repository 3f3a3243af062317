"""The pull scan on its own: raw entries, fake commit-log files and filters, no store and no disk."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from sievemq.store import AcceptingFilter, BitmapProbe, CqExtUnit, GetStatus
from sievemq.store.consume_queue import BLANK_SIZE, CQ_ENTRY
from sievemq.store.consume_queue_ext import encode_address
from sievemq.store.scan import ScanLimits, Window, position_status, scan_window, window_result

BASE = 1000
"""Commit-log offset of the fake file's first byte."""


@dataclass
class FakeFile:
    """A commit-log file: records are bytes whose first byte is their entry number."""

    mm: bytes
    file_from_offset: int
    wrote_position: int


def log_of(sizes: list[int]) -> tuple[FakeFile, list[tuple[int, int]]]:
    """A file holding one record per size, back to back; returns it and each record's (phy, size)."""
    data = bytearray()
    spots = []
    for i, n in enumerate(sizes):
        spots.append((BASE + len(data), n))
        data += bytes([i]) * n
    return FakeFile(bytes(data), BASE, len(data)), spots


def block_of(rows: list[tuple[int, int, int]]) -> bytes:
    return b"".join(CQ_ENTRY.pack(*r) for r in rows)


def finder(f: FakeFile) -> Any:
    def find(phy: int) -> FakeFile | None:
        return f if f.file_from_offset <= phy < f.file_from_offset + len(f.mm) else None

    return find


def numbers(w: Window) -> list[int]:
    return [r[0] for r in w.records]


BIG = ScanLimits(32, 1 << 20)


# ------------------------------------------------------------------------------------------------ position table
def test_position_status_rows() -> None:
    assert position_status(0, 0, 0) == position_status(5, 0, 0)
    assert position_status(0, 0, 0).status is GetStatus.NO_MESSAGE_IN_QUEUE  # type: ignore[union-attr]
    r = position_status(2, 5, 9)
    assert r is not None and (r.status, r.next_begin_offset) == (GetStatus.OFFSET_TOO_SMALL, 5)
    r = position_status(9, 5, 9)
    assert r is not None and (r.status, r.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, 9)
    r = position_status(12, 5, 9)
    assert r is not None and (r.status, r.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 9)
    assert position_status(5, 5, 9) is None and position_status(8, 5, 9) is None


def test_window_result_status() -> None:
    assert window_result(Window([b"x"], 1, 3, True), 10, 0, 20).status is GetStatus.FOUND
    r = window_result(Window([], 0, 3, True), 10, 0, 20)
    assert (r.status, r.next_begin_offset) == (GetStatus.MESSAGE_WAS_REMOVING, 13)
    assert window_result(Window([], 0, 3, False), 10, 0, 20).status is GetStatus.NO_MATCHED_MESSAGE


# ------------------------------------------------------------------------------------------------ scan
def test_every_record_without_filter_and_blanks_skipped() -> None:
    f, spots = log_of([10, 20, 30])
    rows = [(spots[0][0], BLANK_SIZE, 0), *[(p, n, 0) for p, n in spots]]
    w = scan_window(block_of(rows), find=finder(f), log_min=BASE, ext=None, flt=None, limits=BIG)
    assert numbers(w) == [0, 1, 2] and w.total == 60 and w.scanned == 4 and not w.removing


def test_limits_stop_before_the_entry_that_does_not_fit() -> None:
    f, spots = log_of([10, 10, 10, 10])
    block = block_of([(p, n, 0) for p, n in spots])
    w = scan_window(block, find=finder(f), log_min=BASE, ext=None, flt=None, limits=ScanLimits(2, 1 << 20))
    assert (numbers(w), w.scanned) == ([0, 1], 2)
    w = scan_window(block, find=finder(f), log_min=BASE, ext=None, flt=None, limits=ScanLimits(32, 25))
    assert (numbers(w), w.scanned) == ([0, 1], 2)
    w = scan_window(block, find=finder(f), log_min=BASE, ext=None, flt=None, limits=ScanLimits(32, 1))
    assert numbers(w) == [0]  # the first record always goes
    w = scan_window(block, find=finder(f), log_min=BASE, ext=None, flt=None, limits=ScanLimits(0, 1 << 20))
    assert numbers(w) == [0]  # at least one message per pull


def test_entries_below_the_log_or_past_its_end_count_as_removing() -> None:
    f, spots = log_of([10, 10])
    rows = [(BASE - 50, 10, 0), (spots[1][0] + 5, 10, 0)]  # deleted; straddles the written end
    w = scan_window(block_of(rows), find=finder(f), log_min=BASE, ext=None, flt=None, limits=BIG)
    assert w.records == [] and w.removing and w.scanned == 2


class Tags(AcceptingFilter):
    def __init__(self, *codes: int) -> None:
        self.codes = set(codes)
        self.cq: list[tuple[int, CqExtUnit | None]] = []
        self.rec = 0

    def match_cq(self, tags_code: int, ext: CqExtUnit | None) -> bool:
        self.cq.append((tags_code, ext))
        return tags_code in self.codes

    def match_record(self, record: memoryview) -> bool:
        self.rec += 1
        return True


def test_cq_stage_decides_before_the_record_is_read() -> None:
    f, spots = log_of([10, 10, 10])
    rows = [(p, n, t) for (p, n), t in zip(spots, (7, 8, 7), strict=True)]
    flt = Tags(7)
    w = scan_window(block_of(rows), find=finder(f), log_min=BASE, ext=None, flt=flt, limits=BIG)
    assert numbers(w) == [0, 2] and flt.rec == 2 and [c for c, _u in flt.cq] == [7, 8, 7]


class RecordOnly(AcceptingFilter):
    ignores_cq = True

    def match_cq(self, tags_code: int, ext: CqExtUnit | None) -> bool:
        raise AssertionError("ignores_cq: never asked")

    def match_record(self, record: memoryview) -> bool:
        return record[0] % 2 == 1


def test_record_stage_and_ignores_cq() -> None:
    f, spots = log_of([5] * 6)
    block = block_of([(p, n, 0) for p, n in spots])
    w = scan_window(block, find=finder(f), log_min=BASE, ext=None, flt=RecordOnly(), limits=BIG)
    assert numbers(w) == [1, 3, 5]


@dataclass
class FakeExt:
    """Units by address; the probe rejects the addresses listed in ``reject``."""

    units: dict[int, CqExtUnit]
    reject: set[int] = field(default_factory=set)
    probed: list[list[int]] = field(default_factory=list)

    def get(self, address: int) -> CqExtUnit | None:
        return self.units.get(address)

    def probe_reject(self, addresses: Any, probe: BitmapProbe) -> Any:
        self.probed.append(addresses.tolist())
        return np.array([a in self.reject for a in addresses.tolist()], dtype=np.bool_)


class Probing(Tags):
    def __init__(self) -> None:
        super().__init__()
        self.rejected = 0

    def bitmap_probe(self) -> BitmapProbe | None:
        return BitmapProbe(b"\x01", 0)

    def on_probe_rejected(self, n: int) -> None:
        self.rejected += n

    def match_cq(self, tags_code: int, ext: CqExtUnit | None) -> bool:
        self.cq.append((tags_code, ext))
        return True


def test_units_resolve_tag_codes_and_the_probe_skips_entries() -> None:
    f, spots = log_of([10] * 5)
    addrs = [encode_address(i * 24) for i in range(5)]
    units = {a: CqExtUnit(100 + i, 1, b"\x01") for i, a in enumerate(addrs)}
    rows = [(p, n, a) for (p, n), a in zip(spots, addrs, strict=True)]
    rows[4] = (spots[4][0], spots[4][1], 55)  # a plain tag code among units
    ext = FakeExt(units, reject={addrs[1], addrs[3]})
    flt = Probing()
    w = scan_window(block_of(rows), find=finder(f), log_min=BASE, ext=ext, flt=flt, limits=BIG)
    assert numbers(w) == [0, 2, 4]
    assert flt.rejected == 2 and ext.probed == [addrs[:4]]
    assert [(c, u.tags_code if u else None) for c, u in flt.cq] == [(100, 100), (102, 102), (55, None)]
    # the same filter without extension files: no probe, every entry passes the CQ stage as a plain slot
    w = scan_window(block_of(rows), find=finder(f), log_min=BASE, ext=None, flt=Probing(), limits=BIG)
    assert numbers(w) == [0, 1, 2, 3, 4]


def test_scans_that_resume_where_the_last_stopped_count_each_rejected_entry_once() -> None:
    """A batch that fills up stops the scan; the rejected entries after that point are scanned (and counted) again by
    the next pull, so they are not counted by this one (they were twice, inflating ``group filters``)."""
    f, spots = log_of([10] * 10)
    addrs = [encode_address(i * 24) for i in range(10)]
    units = {a: CqExtUnit(100 + i, 1, b"\x01") for i, a in enumerate(addrs)}
    ext = FakeExt(units, reject={a for i, a in enumerate(addrs) if i % 2})  # odd entries rejected
    block = block_of([(p, n, a) for (p, n), a in zip(spots, addrs, strict=True)])
    flt, offset, delivered = Probing(), 0, []
    while offset < 10:
        w = scan_window(block[offset * CQ_ENTRY.size :], find=finder(f), log_min=BASE, ext=ext, flt=flt,
                        limits=ScanLimits(2, 1 << 20))  # fmt: skip
        delivered += numbers(w)
        offset += w.scanned
    assert delivered == [0, 2, 4, 6, 8]
    assert flt.rejected == 5, f"5 entries rejected, counted {flt.rejected} times"


def test_probe_skipped_entries_below_the_log_still_say_removing() -> None:
    f, _spots = log_of([10])
    addr = encode_address(0)
    ext = FakeExt({addr: CqExtUnit(1, 1, b"\x00")}, reject={addr})
    w = scan_window(block_of([(BASE - 10, 10, addr)]), find=finder(f), log_min=BASE, ext=ext, flt=Probing(), limits=BIG)
    assert w.records == [] and w.removing


def test_a_lost_unit_passes_the_cq_stage() -> None:
    f, spots = log_of([10])
    flt = Tags()  # matches no code: only a skipped CQ stage lets the record through
    ext = FakeExt({})
    w = scan_window(block_of([(spots[0][0], 10, encode_address(0))]), find=finder(f), log_min=BASE, ext=ext, flt=flt,
                    limits=BIG)  # fmt: skip
    assert numbers(w) == [0] and flt.cq == []


@given(st.lists(st.tuples(st.integers(1, 40), st.booleans(), st.booleans()), max_size=40), st.integers(1, 8),
       st.integers(1, 200))  # fmt: skip
def test_scan_agrees_with_a_plain_loop(spec: list[tuple[int, bool, bool]], max_msgs: int, max_bytes: int) -> None:
    """Against the rule written as the simplest loop: which records, how many entries consumed."""
    f, spots = log_of([n for n, _b, _m in spec])
    rows = [(p, BLANK_SIZE, 0) if blank else (p, n, 1 if match else 2) for (p, n), (_n, blank, match) in
            zip(spots, spec, strict=True)]  # fmt: skip
    w = scan_window(block_of(rows), find=finder(f), log_min=BASE, ext=None, flt=Tags(1), limits=ScanLimits(max_msgs,
                    max_bytes))  # fmt: skip
    want: list[int] = []
    total, scanned = 0, len(rows)
    for i, (_p, n, t) in enumerate(rows):
        if n == BLANK_SIZE:
            continue
        if want and (len(want) >= max_msgs or total + n > max_bytes):
            scanned = i
            break
        if t == 1:
            want.append(i)
            total += n
    assert (numbers(w), w.scanned, w.total) == (want, scanned, total)
