"""Start-up repair of one consume queue (``recover_queue``): its written end, a torn or invalid tail, lost extension
units. ``recovery.py`` runs it on every queue; the file format is ``consume_queue.py``'s."""

from __future__ import annotations

from array import array

from sievemq.store.consume_queue import (
    BLANK_SIZE,
    CQ_UNIT,
    ConsumeQueue,
    EntryValidator,
    first_ext_entry,
)
from sievemq.store.consume_queue_ext import EXT_ADDRESS_MAX
from sievemq.store.mapped_file import MappedFile

__all__ = ["data_end", "ext_lost_from", "recover_queue"]


def recover_queue(cq: ConsumeQueue, validate: EntryValidator | None = None, phy_min: int = 0) -> int:
    """Find the written end (first entry with size 0); drop invalid tail entries and return their count.

    With a validator, entries from the first one (at or above commit-log offset ``phy_min``) whose extension unit
    is gone are dropped too (the ``consumequeue_ext`` files were lost), and a tail entry whose unit cannot be read is
    invalid. The caller re-dispatches what was dropped.
    """
    files = cq.mfq.files
    if not files:
        return 0
    last = files[-1]
    last.wrote_position = data_end(last)
    last.flushed_position = last.wrote_position
    cq.mfq.flushed_offset = cq.mfq.max_offset
    tail_end = cq.max_offset
    if validate is not None:
        first = cq.mfq.min_offset // CQ_UNIT
        lost = ext_lost_from(cq, phy_min)
        end = tail_end if lost is None else lost
        while end > first:
            e = cq.entry(end - 1)
            if e is not None and e[1] != BLANK_SIZE and e[2] <= EXT_ADDRESS_MAX:
                unit = cq.ext.get(e[2]) if cq.ext is not None else None
                if unit is None:  # a lost unit: redo the entry
                    cq.ext_dangling = True
                    e = None
                else:
                    e = (e[0], e[1], unit.tags_code)
            if e is None or (e[1] != BLANK_SIZE and not validate(end - 1, *e)):
                end -= 1
                continue
            break
        tail_end = end
    dropped = cq.max_offset - tail_end
    # Always rewrite the tail boundary: zeroes any torn bytes after the last good entry.
    cq.set_end_offset(tail_end)
    return dropped


def ext_lost_from(cq: ConsumeQueue, phy_min: int) -> int | None:
    """Queue offset of the first entry whose unit is gone (the ext files were lost), or None.

    Checks the first entry with an ext address among the first file's worth of entries whose message is still in
    the commit log (phy ``>= phy_min``): retention keeps every unit from there on, so a missing one means the files
    were lost. (Lost units of the newest entries are found by the tail validation; units lost only in the middle of
    a queue are not looked for: those entries read as "unit unknown", which passes filters.)
    """
    if cq.ext is None or cq.max_offset <= cq.mfq.min_offset // CQ_UNIT:
        return None
    first = first_ext_entry(cq, cq.first_offset_with_phy_at_least(phy_min), cq.entries_per_file)
    if first is None:
        return None
    qoff, addr = first
    if cq.ext.get(addr) is not None:
        return None
    cq.ext_dangling = True
    return qoff


def data_end(mf: MappedFile) -> int:
    """Byte position of the first entry whose size field is 0 (the file's allocated end if none: holes are zeros)."""
    raw = array("i")
    end = min(mf.file_size, mf.allocated)
    raw.frombytes(mf.read(0, end - end % CQ_UNIT))
    sizes = raw[2::5]  # the size field of each entry; zero is zero in any byte order
    try:
        return sizes.index(0) * CQ_UNIT
    except ValueError:
        return len(sizes) * CQ_UNIT
