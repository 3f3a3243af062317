"""A consume queue: the per-(topic, queue) index of commit-log records (RocketMQ ``ConsumeQueue``).

On disk: ``<root>/consumequeue/<topic>/<queueId>/<20-digit start byte offset>``, each file
``cq_entries_per_file * 20`` bytes. Entry ``n`` (the message with queue offset ``n``) sits at byte
``n * 20`` of the stream::

    commitLogOffset i64 | size i32 | tagsCode i64      (big-endian, struct ">qiq")

``tagsCode`` is the Java hash of TAGS (0 = no tag), or for ``SCHEDULE_TOPIC_XXXX`` the delivery time.
After the last entry the file is zero, so "size 0" marks the end of data. A *blank* entry
(size ``0x7FFFFFFF``, tags 0) fills slots that precede a queue's first real entry in a file (a queue
rebuilt after old commit-log segments were deleted starts at a non-zero offset); its phy field is
the phy of the next real entry so that phy stays non-decreasing along the queue.

With the consume-queue extension (``consume_queue_ext.py``, docs/protocol/consume-queue.md §8-§11) the tags slot of an
entry that has an extension unit holds the unit's *address* (a value ``<= -2**31 - 1``) and the real
tag code lives in the unit; ``tags_code_at`` / ``resolve`` give the real code back. The extension is
truncated together with the queue (``set_end_offset``) and cleaned with it (``delete_expired``).

Disk and maps (docs/many-topics.md): a file gets blocks for its first ``FIRST_ALLOCATION`` bytes (204 entries)
and then in steps that double up to ``GROW_MAX``, so a queue costs disk in proportion to what it holds. A queue can
be *parked* (``park``: its files closed, e.g. by the ``QueueTable``'s budget of open files) when no
sync round or helper thread uses them; ``ensure_open`` maps it again.
"""

from __future__ import annotations

import contextlib
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt

from sievemq.store.consume_queue_ext import EXT_ADDRESS_MAX, ConsumeQueueExt, CqExtUnit
from sievemq.store.mapped_file import MappedFile
from sievemq.store.mapped_file_queue import MappedFileQueue, SyncSlice

__all__ = [
    "BLANK_SIZE",
    "CQ_DTYPE",
    "CQ_ENTRY",
    "CQ_UNIT",
    "ConsumeQueue",
    "CqExtUnit",
    "first_ext_entry",
    "last_ext_address",
]

CQ_ENTRY = struct.Struct(">qiq")
CQ_UNIT = 20
BLANK_SIZE = 0x7FFFFFFF
CQ_DTYPE = np.dtype([("phy", ">i8"), ("size", ">i4"), ("tags", ">i8")])
"""numpy view of a block of entries (packed, 20 bytes each)."""
_PHY = struct.Struct(">q")

FIRST_ALLOCATION = 4096
"""Bytes of a new consume-queue file that get disk blocks at its creation (one page: 204 entries)."""
GROW_MAX = 1 << 20
"""The largest step by which a consume-queue file's allocation grows (steps double up to it)."""


EntryValidator = Callable[[int, int, int, int], bool]
"""``(queue_offset, phy, size, tags_code) -> ok`` used to check the tail entries on recovery."""


class ConsumeQueue:
    """One queue's entries; all mutation happens on the event-loop thread."""

    __slots__ = (
        "entries_per_file",
        "ext",
        "ext_dangling",
        "floor_phy",
        "known",
        "mfq",
        "min_logic_offset",
        "pins",
        "queue_id",
        "tail",
        "topic",
    )  # fmt: skip

    def __init__(
        self, base: Path, topic: str, queue_id: int, entries_per_file: int, *,
        ext_base: Path | None = None, ext_file_size: int = 48 * 1024 * 1024,
    ) -> None:  # fmt: skip
        """``base`` is the ``consumequeue`` directory; ``ext_base`` the ``consumequeue_ext`` one (None: no ext)."""
        self.topic = topic
        self.queue_id = queue_id
        self.entries_per_file = entries_per_file
        self.mfq = MappedFileQueue(lambda: base.joinpath(topic, str(queue_id)), entries_per_file * CQ_UNIT,
                                   FIRST_ALLOCATION, GROW_MAX, mapped=False)  # fmt: skip
        self.min_logic_offset = 0
        self.ext = ConsumeQueueExt(ext_base, topic, queue_id, ext_file_size) if ext_base is not None else None
        self.ext_dangling = False
        """Recovery found entries whose units are gone: the ext must be re-based past their addresses
        (``queue_recovery.py``)."""
        self.pins = 0
        """While above 0 the queue is not parked (a helper thread uses a mapping or a descriptor of it)."""
        self.floor_phy = -1
        """Set when parked: no commit-log retention below this offset changes the queue (``delete_expired``)."""
        self.tail: tuple[int, int] | None = None
        """Set when parked: ``(phy, phy + size)`` of the last real entry (None: none)."""
        self.known = False
        """Known from a clean stop's summary (``queue_summary.py``): start-up's recovery need not look at it."""

    # ------------------------------------------------------------------------------------------ parking
    @property
    def parked(self) -> bool:
        """True while the queue's files are closed (``ensure_open`` opens them)."""
        return self.mfq.parked or (self.ext is not None and self.ext.mfq.parked)

    @property
    def mapped_files(self) -> int:
        """Files of the queue (and of its extension) open now."""
        n = self.mfq.mapped_files
        return n + self.ext.mfq.mapped_files if self.ext is not None else n

    def edges(self) -> tuple[int, tuple[int, int] | None]:
        """``(floor_phy, tail)`` as ``park`` records them (the queue is open)."""
        files = self.mfq.files
        floor = self.phy_at(self.min_offset) if self.max_offset > self.min_offset else 1 << 63
        if len(files) > 1:
            floor = min(floor, _PHY.unpack(files[0].read(files[0].file_size - CQ_UNIT, 8))[0])
        last = self.last_entry()
        return floor, (None if last is None else (last[0], last[0] + last[1]))

    def ensure_open(self) -> None:
        """Open the queue's files again if it was parked (``OSError`` when they cannot be opened)."""
        if self.mfq.parked or (self.ext is not None and self.ext.mfq.parked):
            self.mfq.unpark()
            if self.ext is not None:
                try:
                    self.ext.mfq.unpark()
                except BaseException:
                    self.mfq.park()
                    raise

    def park(self) -> bool:
        """Close the queue's files (and unmap its extension's) unless something pins it; True when it is parked now.

        What was written stays in the page cache; a flush syncs consume-queue files by path (``SyncSlice.paths``).
        The flusher pins a queue whose extension files' descriptors a sync round uses.
        """
        if self.parked:
            return True
        ext = self.ext.mfq if self.ext is not None else None
        if self.pins:
            return False
        self.floor_phy, self.tail = self.edges()
        self.mfq.park()
        if ext is not None:
            ext.park()
        return True

    # ------------------------------------------------------------------------------------------ state
    @property
    def directory(self) -> Path:
        """The queue's directory."""
        return self.mfq.directory

    @property
    def max_offset(self) -> int:
        """Next queue offset to be written (number of logical entries)."""
        return self.mfq.max_offset // CQ_UNIT

    @property
    def min_offset(self) -> int:
        """Oldest queue offset whose message is still in the commit log (as last corrected)."""
        return max(self.min_logic_offset, self.mfq.min_offset // CQ_UNIT)

    def entry(self, offset: int) -> tuple[int, int, int] | None:
        """``(phy, size, tags_code)`` of entry ``offset`` or None if not stored."""
        mf = self.mfq.find(offset * CQ_UNIT)
        if mf is None:
            return None
        pos = offset * CQ_UNIT - mf.file_from_offset
        if pos + CQ_UNIT > mf.wrote_position:
            return None
        phy, size, tags = CQ_ENTRY.unpack(mf.read(pos, CQ_UNIT))
        return phy, size, tags

    def phy_at(self, offset: int) -> int:
        """The phy field of a stored entry (caller guarantees it exists)."""
        mf = self.mfq.find(offset * CQ_UNIT)
        assert mf is not None
        return int(_PHY.unpack(mf.read(offset * CQ_UNIT - mf.file_from_offset, 8))[0])

    def resolve(self, tags: int) -> int:
        """The real tag code for a tags slot value (an unresolvable ext address comes back as is)."""
        if tags > EXT_ADDRESS_MAX or self.ext is None:
            return tags
        unit = self.ext.get(tags)
        return tags if unit is None else unit.tags_code

    def ext_unit(self, offset: int) -> CqExtUnit | None:
        """The extension unit of entry ``offset`` (None when it has none or it is gone)."""
        e = self.entry(offset)
        if e is None or self.ext is None or e[2] > EXT_ADDRESS_MAX:
            return None
        return self.ext.get(e[2])

    def read_block(self, offset: int, n: int) -> memoryview:
        """Up to ``n`` consecutive raw entries from ``offset``, within one file (a copy: ``pread``)."""
        byte_off = offset * CQ_UNIT
        mf = self.mfq.find(byte_off)
        if mf is None:
            return memoryview(b"")
        pos = byte_off - mf.file_from_offset
        k = min(n, (mf.wrote_position - pos) // CQ_UNIT)
        if k <= 0:
            return memoryview(b"")
        return memoryview(mf.read(pos, k * CQ_UNIT))

    def file_end_offset(self, offset: int) -> int:
        """Queue offset where the file holding ``offset`` ends (next file start)."""
        return (offset // self.entries_per_file + 1) * self.entries_per_file

    # ------------------------------------------------------------------------------------------ write
    def append(self, queue_offset: int, phy: int, size: int, tags_code: int) -> bool:
        """Write the entry for ``queue_offset``; False (nothing written) if it is already there."""
        cur = self.max_offset
        mfq = self.mfq
        if not mfq.files:
            start = (queue_offset // self.entries_per_file) * self.entries_per_file
            mfq.create_file(start * CQ_UNIT)
            cur = start
            self.min_logic_offset = queue_offset
        elif queue_offset < cur:
            return False
        elif cur == mfq.min_offset // CQ_UNIT and queue_offset > cur:
            self.min_logic_offset = queue_offset  # an emptied queue restarting higher up
        if queue_offset > cur:
            self._fill_blanks(cur, queue_offset, phy)
        mf = mfq.last_or_create()
        mf.append(CQ_ENTRY.pack(phy, size, tags_code))
        return True

    def append_run(self, queue_offset: int, entries: bytes) -> bool:
        """Write packed entries from ``queue_offset`` when they simply continue the last file (True); else write
        nothing (False: ``append`` them one by one, which creates files and fills gaps)."""
        mf = self.mfq.last
        if mf is None or queue_offset * CQ_UNIT != mf.file_from_offset + mf.wrote_position:
            return False
        if mf.wrote_position + len(entries) > mf.file_size:
            return False
        mf.append(entries)
        return True

    def append_ext(self, queue_offset: int, phy: int, size: int, tags_code: int, store_time: int,
                   bitmap: bytes) -> int:  # fmt: skip
        """Write an extension unit then the entry pointing at it; returns the slot value written.

        Falls back to the plain tag code when the unit cannot be stored. The caller checks that the
        entry is not already there (``append`` would refuse it and leave an orphan unit).
        """
        slot = tags_code
        if self.ext is not None:
            addr = self.ext.put(tags_code, store_time, bitmap)
            if addr is not None:
                slot = addr
        self.append(queue_offset, phy, size, slot)
        return slot

    def _fill_blanks(self, start: int, end: int, phy: int) -> None:
        blank = CQ_ENTRY.pack(phy, BLANK_SIZE, 0)
        off = start
        while off < end:
            mf = self.mfq.last_or_create()
            k = min(end - off, mf.remaining // CQ_UNIT)
            mf.append(blank * k)
            off += k

    # ------------------------------------------------------------------------------------------ recovery
    def load(self, *, parked: bool = False) -> None:
        """Find the queue's files (``parked``: look at them only; ``ensure_open`` opens them)."""
        self.mfq.load(parked=parked)

    def set_end_offset(self, offset: int) -> None:
        """Truncate the queue so that ``offset`` is the next offset to write, and its extension with it."""
        self.mfq.set_end(offset * CQ_UNIT)
        if self.min_logic_offset > offset:
            self.min_logic_offset = offset
        ext = self.ext
        if ext is not None and (ext.has_files or self.ext_dangling):  # a queue without units costs no scan
            ext.truncate_by_max_address(last_ext_address(self))

    # ------------------------------------------------------------------------------------------ ext links
    def first_offset_with_phy_at_least(self, phy_limit: int) -> int:
        """Smallest queue offset (within stored entries) whose phy >= ``phy_limit``, or max_offset."""
        lo = self.mfq.min_offset // CQ_UNIT
        hi = self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            if self.phy_at(mid) >= phy_limit:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def truncate_from_phy(self, phy_limit: int) -> None:
        """Drop every entry whose commit-log offset is ``>= phy_limit``."""
        if self.mfq.files:
            self.set_end_offset(self.first_offset_with_phy_at_least(phy_limit))

    def last_entry(self) -> tuple[int, int] | None:
        """``(phy, size)`` of the last real entry (None if none)."""
        first = self.mfq.min_offset // CQ_UNIT
        off = self.max_offset - 1
        while off >= first:
            e = self.entry(off)
            if e is not None and e[1] != BLANK_SIZE:
                return e[0], e[1]
            off -= 1
        return None

    def last_entry_end(self) -> int:
        """phy + size of the last real entry (0 if none)."""
        e = self.last_entry()
        return 0 if e is None else e[0] + e[1]

    # ------------------------------------------------------------------------------------------ retention
    def correct_min_offset(self, phy_min: int) -> None:
        """Set the min offset to the first real entry whose message is still in the commit log."""
        off = self.first_offset_with_phy_at_least(phy_min)
        end = self.max_offset
        while off < end:
            e = self.entry(off)
            if e is None or e[1] != BLANK_SIZE:
                break
            off += 1
        self.min_logic_offset = off

    def delete_expired(self, phy_min: int) -> list[MappedFile]:
        """Detach files whose every entry points below ``phy_min`` (never the last file)."""
        n = 0
        for mf in self.mfq.files[:-1]:
            last_phy = _PHY.unpack(mf.read(mf.file_size - CQ_UNIT, 8))[0]
            if last_phy >= phy_min:
                break
            n += 1
        gone = self.mfq.delete_first(n)
        self.correct_min_offset(phy_min)
        if self.ext is not None and self.ext.has_files:
            first = first_ext_entry(self, self.min_offset)
            gone.extend(self.ext.delete_below(None if first is None else first[1]))
        return gone

    # ------------------------------------------------------------------------------------------ flushing
    def unflushed(self) -> list[SyncSlice]:
        """What of the queue (and of its extension) is not known to be on disk yet."""
        out = [self.mfq.unflushed()]
        if self.ext is not None and self.ext.has_files:
            out.append(self.ext.mfq.unflushed())
        return out

    def detach_files(self) -> list[MappedFile]:
        """Forget the queue's (and extension's) files without closing them; the caller closes them later."""
        files = self.mfq.detach()
        if self.ext is not None:
            files.extend(self.ext.mfq.detach())
        return files

    def close(self) -> None:
        """Unmap the files."""
        self.mfq.close()
        if self.ext is not None:
            self.ext.close()

    def destroy(self) -> None:
        """Unmap and delete the queue's directory (and its extension directory)."""
        self.mfq.close()
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(self.directory)
        if self.ext is not None:
            self.ext.destroy()


def ext_slots(cq: ConsumeQueue, offset: int, n: int) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.int64]]:
    """Queue offsets and slot values of the entries with an ext address among ``n`` from ``offset``."""
    arr = np.frombuffer(cq.read_block(offset, n), dtype=CQ_DTYPE)
    tags = arr["tags"]
    hit = ((tags <= EXT_ADDRESS_MAX) & (arr["size"] != BLANK_SIZE)).nonzero()[0]  # (not np.flatnonzero: 4x dearer)
    return hit + offset, tags[hit]


def last_ext_address(cq: ConsumeQueue) -> int | None:
    """The ext address in the newest entry of ``cq`` that has one (None: no entry references a unit)."""
    first = cq.mfq.min_offset // CQ_UNIT
    end = cq.max_offset
    while end > first:
        start = max(first, (end - 1) // cq.entries_per_file * cq.entries_per_file)
        _offs, slots = ext_slots(cq, start, end - start)
        if len(slots):
            return int(slots[-1])
        end = start
    return None


def first_ext_entry(cq: ConsumeQueue, offset: int, limit: int | None = None) -> tuple[int, int] | None:
    """``(queue_offset, address)`` of the first entry at or after ``offset`` that has an ext address.

    Looks at no more than ``limit`` entries when given.
    """
    off = max(offset, cq.mfq.min_offset // CQ_UNIT)
    end = cq.max_offset if limit is None else min(cq.max_offset, off + limit)
    while off < end:
        n = min(end, cq.file_end_offset(off)) - off
        offs, slots = ext_slots(cq, off, n)
        if len(slots):
            return int(offs[0]), int(slots[0])
        off += n
    return None
