"""The pull scan: from a window of consume-queue entries and a filter to the records a pull returns.

Two pure steps, no state of their own:

* ``position_status`` answers the offsets that need no scan at all (the status table of
  docs/protocol/requests.md §6: empty queue, offset too small, at or past the end);
* ``scan_window`` walks one window of raw 20-byte entries (one consume-queue file at most). Per entry:
  blank slots and entries whose record was deleted are skipped; ``flt.match_cq(tags_code, unit)`` (the
  real tag code and the extension unit when the slot holds an address) decides without touching the
  commit log; then ``flt.match_record`` on the stored record. With a filter that offers a
  ``bitmap_probe`` the window's extension bitmaps are tested first in one vectorised pass and rejected
  entries cost neither a ``match_cq`` call nor a commit-log read. The same messages are delivered either
  way; only when a batch fills up may the next offset differ: the probe path has already stepped over
  the rejected entries that follow the last delivered one, where the per-entry path (like RocketMQ)
  stops at the next entry.

Records are read through ``find(phy)`` (the commit log's ``MappedFileQueue.find``): a file exposing
``mm`` (a buffer: the mapping), ``file_from_offset`` and ``wrote_position``. A *joined* scan (what a pull answers
with) returns the records back to back in one ``bytes``.

The per-entry loop is ``walk_entries``; ``store/_scan.pyx`` holds its compiled twin (swapped in as
``protocol/_codec.pyx``'s twins are, docs/performance.md), which copies each run of contiguous records straight
from the mapping into the joined body: one copy, no object per record. ``REFERENCE`` keeps the pure-Python one.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from sievemq.protocol import accel as _accel
from sievemq.store.consume_queue import BLANK_SIZE, CQ_DTYPE, CQ_ENTRY
from sievemq.store.consume_queue_ext import EXT_ADDRESS_MAX, BitmapProbe, CqExtUnit
from sievemq.store.filtering import MessageFilter
from sievemq.store.results import GetResult, GetStatus

__all__ = [
    "REFERENCE",
    "ExtUnits",
    "RecordFile",
    "ScanLimits",
    "Window",
    "position_status",
    "scan_window",
    "walk_entries",
    "window_result",
]


class RecordFile(Protocol):
    """One commit-log file as the scan reads it."""

    @property
    def mm(self) -> Any:
        """The file's bytes (a mapping)."""
        ...

    @property
    def file_from_offset(self) -> int:
        """Commit-log offset of the file's first byte."""
        ...

    @property
    def wrote_position(self) -> int:
        """End of valid data in the file."""
        ...


class ExtUnits(Protocol):
    """A queue's extension units as the scan reads them."""

    def get(self, address: int) -> CqExtUnit | None:
        """The unit at ``address`` (None: gone)."""
        ...

    def probe_reject(self, addresses: Any, probe: BitmapProbe) -> Any:
        """For each address, True when the probe rejects its unit."""
        ...


@dataclass(frozen=True, slots=True)
class ScanLimits:
    """How much one pull may return."""

    max_msgs: int
    max_bytes: int


@dataclass(slots=True)
class Window:
    """What a scan of one window found."""

    records: list[bytes]
    """The records found; a joined scan: one ``bytes`` holding them back to back (empty list: none found)."""
    total: int
    scanned: int
    """Entries consumed from the window start (the next pull starts after them)."""
    removing: bool
    """Some entries pointed below the commit log's oldest offset (their records were deleted)."""
    count: int = -1
    """How many records were found (-1: ``len(records)``)."""

    @property
    def found(self) -> int:
        """How many records were found."""
        return self.count if self.count >= 0 else len(self.records)


def position_status(offset: int, min_o: int, max_o: int) -> GetResult | None:
    """The answer for an offset that needs no scan, or None when the scan must run."""
    if max_o == 0:
        return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, min_o, max_o)
    if offset < min_o:
        return GetResult(GetStatus.OFFSET_TOO_SMALL, min_o, min_o, max_o)
    if offset == max_o:
        return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, min_o, max_o)
    if offset > max_o:
        return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, max_o, min_o, max_o)
    return None


def window_result(w: Window, offset: int, min_o: int, max_o: int) -> GetResult:
    """The pull answer for a scanned window starting at ``offset``."""
    if w.records:
        status = GetStatus.FOUND
    else:
        status = GetStatus.MESSAGE_WAS_REMOVING if w.removing else GetStatus.NO_MATCHED_MESSAGE
    return GetResult(status, offset + w.scanned, min_o, max_o, w.records, w.found, w.total)


def scan_window(
    block: bytes | memoryview,
    *,
    find: Callable[[int], RecordFile | None],
    log_min: int,
    ext: ExtUnits | None,
    flt: MessageFilter | None,
    limits: ScanLimits,
    joined: bool = False,
) -> Window:
    """Scan the raw entries ``block`` (see the module docstring); ``log_min`` is the commit log's oldest offset.

    ``ext`` is the queue's extension (None when it has no unit files). ``joined``: the window's ``records`` is one
    ``bytes``, the records back to back (what a pull answer's body is).
    """
    n = len(block) // CQ_ENTRY.size
    # a filter that decides on the record alone (``ignores_cq``) spares the extension-unit reads
    match_cq = flt.match_cq if flt is not None and not flt.ignores_cq else None
    match_record = flt.match_record if flt is not None else None
    ext_get = ext.get if ext is not None else None
    arr = None
    rejected = None
    keep = None
    probe = flt.bitmap_probe() if flt is not None and ext is not None else None
    if probe is not None:
        assert ext is not None
        arr = np.frombuffer(block, dtype=CQ_DTYPE)
        rejected = _probe_rejected(arr, ext, probe)
        if rejected is not None:
            mask = np.ones(n, dtype=np.bool_)
            mask[rejected] = False
            keep = mask.tobytes()
    w = walk_entries(block, keep, find, log_min, ext_get, match_cq, match_record, max(1, limits.max_msgs),
                     limits.max_bytes, joined)  # fmt: skip
    if rejected is not None:
        assert flt is not None
        # only those before where this scan stopped: the next pull scans the rest again (and counts them then)
        flt.on_probe_rejected(len(rejected) if w.scanned == n else int((rejected < w.scanned).sum()))
    if not w.records and not w.removing and arr is not None:  # entries the probe skipped may point below the log
        head = arr[: w.scanned]
        w.removing = bool(((head["phy"] < log_min) & (head["size"] != BLANK_SIZE)).any())
    return w


def _probe_rejected(arr: npt.NDArray[Any], ext: ExtUnits, probe: BitmapProbe) -> npt.NDArray[np.intp] | None:
    """Indexes of the window's entries whose extension unit the probe rejects (None: none)."""
    slots = arr["tags"]
    at = np.flatnonzero(slots <= EXT_ADDRESS_MAX)
    if not len(at):
        return None
    rejected: npt.NDArray[np.intp] = at[ext.probe_reject(slots[at], probe)]
    return rejected if len(rejected) else None


def walk_entries(
    block: bytes | memoryview,
    keep: bytes | None,
    find: Callable[[int], RecordFile | None],
    log_min: int,
    ext_get: Callable[[int], CqExtUnit | None] | None,
    match_cq: Callable[[int, CqExtUnit | None], bool] | None,
    match_record: Callable[[memoryview], bool] | None,
    limit_msgs: int,
    limit_bytes: int,
    joined: bool,
) -> Window:
    """The per-entry loop of ``scan_window`` (module docstring): entries whose byte in ``keep`` is 0 are skipped (the
    probe rejected them); ``match_cq``/``match_record`` are the filter's stages (None: pass). Reading stops before
    the entry that would take the records past ``limit_msgs`` or ``limit_bytes`` (the first always goes).
    """
    records: list[bytes] = []
    total = 0
    scanned = len(block) // CQ_ENTRY.size
    removing = False
    mm: Any = None
    lo = hi = 0
    entries: Iterable[tuple[int, tuple[int, int, int]]] = enumerate(CQ_ENTRY.iter_unpack(block))
    if keep is not None:
        entries = itertools.compress(entries, keep)
    for i, (phy, size, tags) in entries:
        if size == BLANK_SIZE:
            continue
        if phy < log_min:
            removing = True
            continue
        if records and (len(records) >= limit_msgs or total + size > limit_bytes):
            scanned = i
            break
        if match_cq is not None:
            if tags > EXT_ADDRESS_MAX:
                if not match_cq(tags, None):
                    continue
            elif ext_get is not None:
                unit = ext_get(tags)
                if unit is not None and not match_cq(unit.tags_code, unit):
                    continue
        if not (lo <= phy and phy + size <= hi):  # the record is not in the file read last
            mf = find(phy)
            if mf is None or size <= 0 or phy - mf.file_from_offset + size > mf.wrote_position:
                removing = True
                continue
            mm, lo = mf.mm, mf.file_from_offset
            hi = lo + mf.wrote_position
        pos = phy - lo
        if match_record is not None:
            view = memoryview(mm)
            try:
                ok = match_record(view[pos : pos + size])
            finally:
                view.release()
            if not ok:
                continue
        records.append(mm[pos : pos + size])
        total += size
    if joined:
        return Window([b"".join(records)] if records else [], total, scanned, removing, len(records))
    return Window(records, total, scanned, removing, len(records))


REFERENCE: dict[str, object] = {"walk_entries": walk_entries}
"""The pure-Python ``walk_entries``, kept whatever runs (the accelerator's tests compare against it)."""
_accel.install(sys.modules[__name__], REFERENCE, "init_scan", _accel.scan)
