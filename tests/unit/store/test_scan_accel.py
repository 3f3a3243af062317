"""The compiled pull scan (``store/_scan.pyx``) against the pure-Python reference (``store/scan.py``), call for call.

Both run on the same generated windows -- real records, blanks, deleted and torn entries, sizes that are not the
record's, broken entries (sizes of zero or less, 64-bit extremes), extension addresses with and without units, probe
masks, filters at both stages, limits, several commit-log files, mappings shorter than their written position, a
``find`` that answers a file starting after the record, arguments the twin hands to the reference -- and what comes
back is compared: the window (records, joined or not, totals, where the scan stopped, "removing"), or the error,
and every call made to ``find``, the extension and the filter, in order. Then whole pulls of a real store with tiny
files (ends of commit-log segments and of consume-queue files, extension units, a deleted segment).
``scripts/test.sh`` makes sure the compiled module is built, so CI always runs these.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sievemq.protocol import accel
from sievemq.protocol.message import read_record_summary
from sievemq.store import AcceptingFilter, BitmapProbe, CqExtUnit, GetResult, MessageStore
from sievemq.store import scan as scan_mod
from sievemq.store.consume_queue import BLANK_SIZE, CQ_ENTRY
from sievemq.store.consume_queue_ext import encode_address
from sievemq.store.scan import ScanLimits, Window, scan_window

from .conftest import HOST, make_config, msg

compiled = accel.scan()
pytestmark = pytest.mark.skipif(
    compiled is None, reason="the compiled scan is not built here (no C compiler, or SIEVEMQ_PURE_PYTHON=1)"
)

REF: Any = scan_mod.REFERENCE["walk_entries"]
SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BASE = 4096
"""Commit-log offset of the first fake file."""
FILE = 300
"""Bytes per fake commit-log file."""
ADDRS = [encode_address(i * 34) for i in range(6)]
"""Extension addresses; the units of the first four exist."""
CODES = [0, 1, 7, 13, -5, 2**31 - 1, -(2**31)]


@dataclass
class FakeFile:
    """A commit-log file: ``mm`` may be shorter than ``wrote_position`` (a slice of it then ends early)."""

    mm: bytes
    file_from_offset: int
    wrote_position: int


@dataclass
class World:
    """A fake commit log and extension, and the log of every call the scan made into them and the filter."""

    files: list[FakeFile]
    records: list[tuple[int, int]]
    units: dict[int, CqExtUnit]
    accept_codes: set[int]
    raise_on: int | None
    sloppy: bool = False
    """``find`` also answers a file for offsets up to 50 bytes before it (the commit log's never does)."""
    calls: list[tuple[Any, ...]] = field(default_factory=list)

    def find(self, phy: int) -> FakeFile | None:
        self.calls.append(("find", phy))
        for f in self.files:
            if f.file_from_offset - (50 if self.sloppy else 0) <= phy < f.file_from_offset + FILE:
                return f
        return None

    def ext_get(self, address: int) -> CqExtUnit | None:
        self.calls.append(("ext", address))
        return self.units.get(address)

    def match_cq(self, code: int, unit: CqExtUnit | None) -> bool:
        self.calls.append(("cq", code, unit))
        if code == self.raise_on:
            raise ValueError(f"filter broke on {code}")
        return code in self.accept_codes

    def match_record(self, record: memoryview) -> bool:
        data = bytes(record)
        self.calls.append(("record", data))
        return not data or data[0] % 3 != 0


@st.composite
def worlds(draw: st.DrawFn) -> World:
    files: list[FakeFile] = []
    records: list[tuple[int, int]] = []
    n_rec = 0
    for k in range(draw(st.integers(1, 3))):
        start = BASE + k * FILE
        data = bytearray()
        while True:
            size = draw(st.integers(1, 90))
            if len(data) + size > FILE:
                break
            records.append((start + len(data), size))
            data += bytes([n_rec % 256]) * size
            n_rec += 1
            if draw(st.integers(0, 9)) == 7:  # (not 0: what hypothesis draws most)
                break
        wrote = draw(st.sampled_from([len(data), len(data), max(0, len(data) - 5)]))
        mm = bytes(data) + bytes(FILE - len(data))
        if draw(st.integers(0, 9)) == 7:
            mm = mm[: max(0, wrote - 7)]  # a mapping shorter than its written end
        files.append(FakeFile(mm, start, wrote))
    units = {a: CqExtUnit(CODES[i % len(CODES)], 10 + i, b"\x01") for i, a in enumerate(ADDRS[:4])}
    accept = set(draw(st.lists(st.sampled_from(CODES), max_size=5)))
    raise_on = draw(st.one_of(st.none(), st.just(13)))
    return World(files, records, units, accept, raise_on, draw(st.booleans()))


@st.composite
def entry(draw: st.DrawFn, w: World) -> tuple[int, int, int]:
    kind = draw(st.sampled_from(["record"] * 6 + ["resized", "blank", "below", "random", "broken"]))
    tags = draw(st.one_of(st.sampled_from(CODES), st.sampled_from(ADDRS)))
    if kind in ("record", "resized") and w.records:
        phy, size = draw(st.sampled_from(w.records))
        if kind == "resized":
            size = max(1, size + draw(st.integers(-4, 40)))
        return phy, size, tags
    if kind == "blank":
        return draw(st.integers(BASE - 100, BASE + 4 * FILE)), BLANK_SIZE, 0
    if kind == "below":
        return draw(st.integers(0, BASE - 1)), draw(st.integers(1, 50)), tags
    if kind == "broken":  # sizes of zero or less (a first one "inside" the empty file read last), 64-bit extremes
        broken = [(BASE, 0), (BASE + 20, -3), (0, 0), (3, -5), (2**62, 5), (-(2**62), 5), (2**63 - 1, 2**31 - 2),
                  (-(2**63), -(2**31))]  # fmt: skip
        return (*draw(st.sampled_from(broken)), tags)
    return draw(st.integers(BASE - 20, BASE + 4 * FILE)), draw(st.integers(1, 120)), tags


def outcome(fn: Callable[..., Window], *args: Any) -> tuple[str, Any]:
    """What a walk gives: the window's fields, or the error's type and text."""
    try:
        win = fn(*args)
    except Exception as e:
        return "error", (type(e).__name__, str(e))
    return "ok", (win.records, win.total, win.scanned, win.removing, win.found)


def run_both(w: World, args: tuple[Any, ...]) -> None:
    """Walk ``args`` with the reference and with the twin (fresh call logs each) and compare outcome and calls."""
    w.calls = []
    want = outcome(REF, *args)
    want_calls, w.calls = w.calls, []
    got = outcome(compiled.walk_entries, *args)  # type: ignore[union-attr]
    assert got == want
    assert w.calls == want_calls


# ------------------------------------------------------------------------------------------ walk_entries
@SETTINGS
@given(data=st.data())
def test_walk_twins(data: st.DataObject) -> None:
    w = data.draw(worlds())
    rows = data.draw(st.lists(entry(w), max_size=40))
    block = b"".join(CQ_ENTRY.pack(*r) for r in rows)
    if data.draw(st.integers(0, 19)) == 7:
        block += b"\x00" * data.draw(st.integers(1, 19))  # not whole entries
    keep = data.draw(st.one_of(st.none(), st.binary(min_size=len(rows), max_size=len(rows)), st.binary(max_size=5)))
    keep = keep if keep is None else bytes(b % 2 for b in keep)
    as_view = data.draw(st.booleans())
    log_min = data.draw(st.sampled_from([0, BASE, BASE + 30]))
    use_ext, use_cq, use_record = data.draw(st.booleans()), data.draw(st.booleans()), data.draw(st.booleans())
    limit_msgs = data.draw(st.integers(-1, 40))
    limit_bytes = data.draw(st.one_of(st.integers(0, 400), st.just(1 << 20)))
    joined = data.draw(st.booleans())

    stages = (w.ext_get if use_ext else None, w.match_cq if use_cq else None, w.match_record if use_record else None)
    run_both(
        w, (memoryview(block) if as_view else block, keep, w.find, log_min, *stages, limit_msgs, limit_bytes, joined)
    )


@SETTINGS
@given(data=st.data())
def test_odd_arguments_go_to_the_reference(data: st.DataObject) -> None:
    """Limits out of range or not plain ints, masks that are not bytes: the reference answers (or raises)."""
    w = data.draw(worlds())
    rows = [(p, s, 7) for p, s in w.records[:5]]
    block = b"".join(CQ_ENTRY.pack(*r) for r in rows)
    keep = data.draw(st.sampled_from([None, [1] * len(rows), bytearray(b"\x01" * len(rows)), "x"]))
    log_min = data.draw(st.sampled_from([BASE, 2**70, -(2**70), True, 4.5]))
    limit_msgs = data.draw(st.sampled_from([3, 2**63, True]))
    run_both(w, (block, keep, w.find, log_min, None, None, None, limit_msgs, 1 << 20, True))


def test_a_block_that_is_no_buffer_goes_to_the_reference() -> None:
    w = World([FakeFile(b"x" * 10, BASE, 10)], [(BASE, 10)], {}, set(), None)
    run_both(w, (object(), None, w.find, 0, None, None, None, 32, 1 << 20, True))


@pytest.mark.parametrize("joined", [False, True])
def test_odd_entries_and_files_twin(joined: bool) -> None:
    """Entries whose size is zero or less, before any file was read (the reference's slice of no mapping fails) and
    after; a ``find`` that answers a file starting after the record (Python's negative slice indexes)."""
    data = bytes(range(200))
    w = World([FakeFile(data, BASE, 200)], [], {}, set(), None, sloppy=True)
    blocks = [
        [(3, -5, 0)],
        [(BASE + 10, 10, 0), (BASE + 20, 0, 0), (BASE + 25, -4, 0), (BASE + 30, 10, 0)],
        [(BASE - 30, 10, 0), (BASE - 8, 12, 0), (BASE, 10, 0)],
    ]
    for rows in blocks:
        block = b"".join(CQ_ENTRY.pack(*r) for r in rows)
        for record_stage in (None, w.match_record):
            run_both(w, (block, None, w.find, 0, None, None, record_stage, 32, 1 << 20, joined))


def test_the_common_case_never_reaches_the_reference() -> None:
    """Whole entries of positive sizes with plain limits are walked by the compiled code alone (no hidden fallback)."""
    assert compiled is not None
    files = [FakeFile(bytes(range(200)) + bytes(100), BASE + k * FILE, 200) for k in range(2)]
    w = World(files, [], {ADDRS[0]: CqExtUnit(7, 1, b"")}, {7, 1}, None)
    rows = [(BASE + 10 * i, 10, 7) for i in range(8)] + [(BASE + FILE, 20, ADDRS[0]), (BASE + FILE + 20, 30, 1),
            (BASE, BLANK_SIZE, 0), (0, 5, 7), (BASE + 195, 10, 7)]  # fmt: skip
    block = b"".join(CQ_ENTRY.pack(*r) for r in rows)
    cases = [(keep, joined) for keep in (None, b"\x01\x00" * 7) for joined in (False, True)]
    wants = []
    for keep, joined in cases:
        w.calls = []
        wants.append((REF(block, keep, w.find, BASE, w.ext_get, w.match_cq, w.match_record, 32, 1 << 20, joined),
                      w.calls))  # fmt: skip

    def refuse(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("the compiled scan fell back to the reference")

    compiled.init_scan(SimpleNamespace(Window=Window, REFERENCE={"walk_entries": refuse}))
    try:
        for (keep, joined), want in zip(cases, wants, strict=True):
            w.calls = []
            got = compiled.walk_entries(block, keep, w.find, BASE, w.ext_get, w.match_cq, w.match_record, 32,
                                        1 << 20, joined)  # fmt: skip
            assert (got, w.calls) == want
    finally:
        compiled.init_scan(scan_mod)


def test_the_module_runs_the_compiled_twin() -> None:
    assert compiled is not None
    assert scan_mod.walk_entries is compiled.walk_entries


def test_a_joined_window_is_one_copy_of_contiguous_records() -> None:
    """A joined scan's records are the bytes of the mapping from the first record to the last, when contiguous."""
    data = bytes(range(256)) * 4
    f = FakeFile(data, BASE, len(data))
    block = b"".join(CQ_ENTRY.pack(BASE + 100 * i, 100, 0) for i in range(10))
    win = compiled.walk_entries(block, None, lambda phy: f, BASE, None, None, None, 32, 1 << 20, True)  # type: ignore[union-attr]
    assert win.records == [data[:1000]] and (win.found, win.total, win.scanned) == (10, 1000, 10)


# ------------------------------------------------------------------------------------------ scan_window with probes
@dataclass
class FakeExt:
    """Units by address; the probe rejects the addresses listed in ``reject``."""

    units: dict[int, CqExtUnit]
    reject: set[int]

    def get(self, address: int) -> CqExtUnit | None:
        return self.units.get(address)

    def probe_reject(self, addresses: Any, probe: BitmapProbe) -> Any:
        return np.array([a in self.reject for a in addresses.tolist()], dtype=np.bool_)


class Probing(AcceptingFilter):
    """A filter with a bitmap probe that counts what it is told and sees."""

    def __init__(self, accept: set[int]) -> None:
        self.accept = accept
        self.seen: list[Any] = []

    def bitmap_probe(self) -> BitmapProbe | None:
        return BitmapProbe(b"\x01", 0)

    def on_probe_rejected(self, n: int) -> None:
        self.seen.append(("rejected", n))

    def match_cq(self, tags_code: int, ext: CqExtUnit | None) -> bool:
        self.seen.append(("cq", tags_code))
        return tags_code in self.accept

    def match_record(self, record: memoryview) -> bool:
        self.seen.append(("record", bytes(record)))
        return True


@SETTINGS
@given(data=st.data())
def test_scan_window_with_probes_twins(data: st.DataObject) -> None:
    w = data.draw(worlds())
    rows = data.draw(st.lists(entry(w), max_size=30))
    block = b"".join(CQ_ENTRY.pack(*r) for r in rows)
    ext = FakeExt(w.units, set(data.draw(st.lists(st.sampled_from(ADDRS), max_size=4))))
    accept = set(data.draw(st.lists(st.sampled_from(CODES), max_size=5)))
    limits = ScanLimits(data.draw(st.integers(0, 10)), data.draw(st.integers(1, 600)))
    joined = data.draw(st.booleans())
    log_min = data.draw(st.sampled_from([0, BASE, BASE + 30]))
    got = []
    for walk in (REF, compiled.walk_entries):  # type: ignore[union-attr]
        flt = Probing(accept)
        with walking(walk):
            result = outcome(partial(scan_window, block, find=w.find, log_min=log_min, ext=ext, flt=flt, limits=limits,
                                     joined=joined))  # fmt: skip
        got.append((result, flt.seen))
    assert got[0] == got[1]


@contextmanager
def walking(walk: Any) -> Iterator[None]:
    """``scan.walk_entries`` (what ``scan_window`` calls) set to ``walk`` for a while."""
    original = scan_mod.walk_entries
    scan_mod.walk_entries = walk
    try:
        yield
    finally:
        scan_mod.walk_entries = original


# ------------------------------------------------------------------------------------------ whole pulls
class Sql(AcceptingFilter):
    """Bloom-style filter: the probe and ``match_cq`` reject units without bit 0; the record stage wants a = 1."""

    def __init__(self, probe: bool) -> None:
        self.probe = probe
        self.seen: list[Any] = []

    def bitmap_probe(self) -> BitmapProbe | None:
        return BitmapProbe(b"\x01" + bytes(13), 0) if self.probe else None

    def on_probe_rejected(self, n: int) -> None:
        self.seen.append(("rejected", n))

    def match_cq(self, tags_code: int, ext: CqExtUnit | None) -> bool:
        self.seen.append(("cq", tags_code))
        return ext is None or not ext.bitmap or bool(ext.bitmap[0] & 1)

    def match_record(self, record: memoryview) -> bool:
        s = read_record_summary(record)
        self.seen.append(("record", s.queue_offset))
        return s.properties.get("a") == "1"


class Tags(AcceptingFilter):
    def __init__(self) -> None:
        self.seen: list[int] = []

    def match_cq(self, tags_code: int, ext: CqExtUnit | None) -> bool:
        self.seen.append(tags_code)
        return tags_code % 2 == 0


def fields(r: GetResult) -> tuple[Any, ...]:
    return (r.status, r.next_begin_offset, r.min_offset, r.max_offset, r.message_count, r.buffer_total_size,
            r.last_phy)  # fmt: skip


async def test_pulls_of_a_real_store_twin(tmp_path: Path) -> None:
    """Records of many sizes over 4 KiB segments (so records end segments) and 16-entry consume-queue files, units
    for two thirds of them, the first segment deleted under the queue: every offset, every filter, both walks,
    joined and not."""
    s = MessageStore(make_config(tmp_path / "store", mapped_file_size_cq_ext=1024), HOST)
    s.set_bitmap_calculator(lambda t, p, tg: None if p.get("a") == "x" else bytes([int(p["a"]) % 2]) + bytes(13))
    s.load()
    try:
        for i in range(120):
            a = "x" if i % 3 == 0 else str(i % 5)
            put = await s.put_message(msg("T", b"b" * (37 * i % 700), tags=f"t{i % 4}", a=a))
            assert put.ok
        for mf in s.commitlog.mfq.delete_first(1):
            mf.destroy()
        end = s.get_max_offset("T", 0)
        for offset in range(end + 1):
            for make in (lambda: None, Tags, lambda: Sql(False), lambda: Sql(True)):
                for max_msgs in (1, 5, 32):
                    seen = []
                    for walk, joined in [(wk, j) for wk in (REF, compiled.walk_entries) for j in (False, True)]:  # type: ignore[union-attr]
                        flt = make()
                        with walking(walk):
                            r = s.reader.get_message("T", 0, offset, max_msgs, flt, joined=joined)  # type: ignore[arg-type]
                        assert len(r.records) == (min(1, r.message_count) if joined else r.message_count)
                        seen.append((fields(r), b"".join(r.records), getattr(flt, "seen", None)))
                    assert all(x == seen[0] for x in seen), (offset, max_msgs, make)
    finally:
        s.abandon()
