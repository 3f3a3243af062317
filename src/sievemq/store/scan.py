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
``mm``, ``file_from_offset`` and ``wrote_position``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from sievemq.store.consume_queue import BLANK_SIZE, CQ_DTYPE, CQ_ENTRY
from sievemq.store.consume_queue_ext import EXT_ADDRESS_MAX, BitmapProbe, CqExtUnit
from sievemq.store.filtering import MessageFilter
from sievemq.store.results import GetResult, GetStatus

__all__ = ["ExtUnits", "RecordFile", "ScanLimits", "Window", "position_status", "scan_window", "window_result"]


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
    total: int
    scanned: int
    """Entries consumed from the window start (the next pull starts after them)."""
    removing: bool
    """Some entries pointed below the commit log's oldest offset (their records were deleted)."""


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
    return GetResult(status, offset + w.scanned, min_o, max_o, w.records, len(w.records), w.total)


def scan_window(
    block: bytes,
    *,
    find: Callable[[int], RecordFile | None],
    log_min: int,
    ext: ExtUnits | None,
    flt: MessageFilter | None,
    limits: ScanLimits,
) -> Window:
    """Scan the raw entries ``block`` (see the module docstring); ``log_min`` is the commit log's oldest offset.

    ``ext`` is the queue's extension (None when it has no unit files).
    """
    limit_msgs = max(1, limits.max_msgs)
    limit_bytes = limits.max_bytes
    records: list[bytes] = []
    total = 0
    n = len(block) // CQ_ENTRY.size
    scanned = n
    removing = False
    # a filter that decides on the record alone (``ignores_cq``) spares the extension-unit reads
    match_cq = flt.match_cq if flt is not None and not flt.ignores_cq else None
    match_record = flt.match_record if flt is not None else None
    mm: Any = None
    lo = hi = 0
    ext_get = ext.get if ext is not None else None
    entries: Iterable[tuple[int, tuple[int, int, int]]] = enumerate(CQ_ENTRY.iter_unpack(block))
    arr = None
    rejected = None
    probe = flt.bitmap_probe() if flt is not None and ext is not None else None
    if probe is not None:
        assert ext is not None and flt is not None
        arr = np.frombuffer(block, dtype=CQ_DTYPE)
        slots = arr["tags"]
        at = np.flatnonzero(slots <= EXT_ADDRESS_MAX)
        if len(at):
            rejected = at[ext.probe_reject(slots[at], probe)]
            if len(rejected):
                keep = np.ones(n, dtype=np.bool_)
                keep[rejected] = False
                idx = np.flatnonzero(keep)
                rows = arr[idx]
                entries = zip(idx.tolist(), zip(rows["phy"].tolist(), rows["size"].tolist(),
                                                slots[idx].tolist(), strict=True), strict=True)  # fmt: skip
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
    if rejected is not None and len(rejected):
        assert flt is not None
        # only those before where this scan stopped: the next pull scans the rest again (and counts them then)
        flt.on_probe_rejected(len(rejected) if scanned == n else int((rejected < scanned).sum()))
    if not records and not removing and arr is not None:  # entries the probe skipped may point below the log
        head = arr[:scanned]
        removing = bool(((head["phy"] < log_min) & (head["size"] != BLANK_SIZE)).any())
    return Window(records, total, scanned, removing)
