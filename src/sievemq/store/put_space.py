"""What a put needs on disk, decided and allocated before the writer writes a byte of it (``PutSpace``).

A put touches at most: the commit log (a segment roll creates the next segment, or its segment the next chunk),
the target queue's consume queue (its next file, or the next step of its file's allocation) and the index (a chunk
of entries, or the next index file). All of it is counted first; when nothing new is needed (the common case: the
files in use have room allocated) the put goes ahead without a system call. (Extension units are best-effort:
``Dispatcher`` skips one that would need space the disk cannot give, see ``dispatch.py``.)
Otherwise ``DiskGuard.check`` decides (``disk.py``), and the files are created now, allocated, as *spares*
(``MappedFileQueue.spare``, ``IndexService.prepare``) that the writes then simply use. A refused put has written
nothing: no half record, no record without its consume-queue entry (``DiskFullError``).
"""

from __future__ import annotations

from sievemq.protocol.message import MessageExt
from sievemq.store.commitlog import END_FILE_MIN_BLANK_LENGTH, CommitLog
from sievemq.store.consume_queue import CQ_UNIT, ConsumeQueue
from sievemq.store.disk import DiskGuard, is_no_space
from sievemq.store.index_file import IndexService
from sievemq.store.mapped_file import MappedFile
from sievemq.store.mapped_file_queue import MappedFileQueue
from sievemq.store.results import DiskFullError

__all__ = ["PutSpace", "count_keys", "cq_new_files", "cq_space"]


def count_keys(msgs: list[MessageExt]) -> int:
    """At most how many index keys dispatching ``msgs`` adds (``KEYS`` split on spaces, and ``UNIQ_KEY``)."""
    n = 0
    for m in msgs:
        props = m.properties
        keys = props.get("KEYS")
        n += (keys.count(" ") + 1 if keys else 0) + (1 if props.get("UNIQ_KEY") else 0)
    return n


def cq_new_files(cq: ConsumeQueue, queue_offset: int, n: int) -> list[int]:
    """Start byte offsets of the files that appending ``n`` entries to ``cq`` from ``queue_offset`` on would create."""
    mf = cq.mfq.last
    end = (queue_offset + n) * CQ_UNIT
    if mf is not None:
        if end <= mf.end_offset:
            return []
        start = mf.end_offset
    else:
        start = queue_offset // cq.entries_per_file * cq.entries_per_file * CQ_UNIT
    return list(range(start, end, cq.mfq.file_size)) if n > 0 else []


def cq_space(cq: ConsumeQueue, queue_offset: int, n: int) -> tuple[int, list[tuple[int, int]]]:
    """What appending ``n`` entries to ``cq`` from ``queue_offset`` on needs on disk: ``(upto, new)`` where ``upto``
    is the position in the last file the writes reach (0: none beyond its allocation) and ``new`` the files to create
    as ``(start byte offset, bytes written in it)``."""
    end = (queue_offset + n) * CQ_UNIT
    mf = cq.mfq.last
    upto = 0
    if mf is not None:
        reach = min(end, mf.end_offset) - mf.file_from_offset
        if reach > mf.allocated:
            upto = reach
    size = cq.mfq.file_size
    return upto, [(s, min(end, s + size) - s) for s in cq_new_files(cq, queue_offset, n)]


class PutSpace:
    """Counts, decides and allocates the new disk space of each put (see the module docstring)."""

    def __init__(self, commitlog: CommitLog, index: IndexService, guard: DiskGuard) -> None:
        self.commitlog = commitlog
        self.index = index
        self.guard = guard

    def refuse_if_read_only(self) -> None:
        """Raise ``DiskFullError`` at once while the store is read-only (before anything is encoded)."""
        if self.guard.read_only is not None:
            refusal = self.guard.check(0)
            assert refusal is not None  # always one while read-only
            raise DiskFullError(refusal)

    def prepare(self, records: list[bytes], total: int, msgs: list[MessageExt], cq: ConsumeQueue | None,
                queue_offset: int, entries: int) -> None:  # fmt: skip
        """Make sure a put's files are there and allocated, or raise ``DiskFullError`` (nothing written).

        ``records`` (``total`` bytes) go to the commit log; ``entries`` consume-queue entries to ``cq`` from
        ``queue_offset`` on (``cq`` None: no entries).
        """
        # Fast path (nearly every put): the segment and the queue's file have room, and so has the index for any
        # number of keys the records can carry (each key takes 2 bytes of properties at least, plus UNIQ_KEY) or,
        # when it has less room left, for the keys they do carry.
        files = self.commitlog.mfq.files
        if files:
            mf = files[-1]
            if total + END_FILE_MIN_BLANK_LENGTH <= mf.allocated - mf.wrote_position:
                room = self.index.room()
                if total // 2 + len(msgs) <= room or count_keys(msgs) <= room:
                    if cq is None:
                        return
                    cq_files = cq.mfq.files
                    if cq_files:
                        last = cq_files[-1]
                        if (queue_offset + entries) * CQ_UNIT <= last.file_from_offset + last.allocated:
                            return
        self._prepare(records, total, msgs, cq, queue_offset, entries)

    def _prepare(self, records: list[bytes], total: int, msgs: list[MessageExt], cq: ConsumeQueue | None,
                 queue_offset: int, entries: int) -> None:  # fmt: skip
        plan: list[tuple[MappedFileQueue, list[tuple[int, int]]]] = []
        grow = self.commitlog.allocation_needed(total)
        starts = self.commitlog.new_files_for(records, total)
        if starts:
            plan.append((self.commitlog.mfq, [(s, 0) for s in starts]))
        cq_grow: tuple[MappedFile, int] | None = None
        if cq is not None:
            upto, new = cq_space(cq, queue_offset, entries)
            if upto and (last := cq.mfq.last) is not None:
                cq_grow = (last, upto)
            if new:
                plan.append((cq.mfq, new))
        self._make_room(plan, count_keys(msgs), grow, total, cq_grow)

    def spare_first_files(self, cqs: list[ConsumeQueue]) -> list[MappedFile]:
        """The first file of each queue that has none yet, created and allocated now as a spare (its first
        append takes it); ``DiskFullError`` when the disk cannot hold them (then none is created)."""
        plan = [(cq.mfq, [(s, 0) for s in cq_new_files(cq, cq.max_offset, 1)]) for cq in cqs if not cq.mfq.files]
        plan = [(mfq, starts) for mfq, starts in plan if starts and not any(mfq.has_spare(x) for x, _ in starts)]
        if not plan:
            return []
        self.refuse_if_read_only()
        self._make_room(plan, 0)
        return [mfq.spare(s) for mfq, starts in plan for s, _ in starts]

    def prepare_copy(self, offset: int, n: int) -> None:
        """The same for ``n`` copied commit-log bytes at ``offset`` (a slave's copy): the segments they fill.

        What the copied records then dispatch allocates as it goes (``OSError`` ENOSPC there, never a fault).
        """
        self.refuse_if_read_only()
        starts = self.commitlog.new_files_for_raw(offset, n)
        self._make_room([(self.commitlog.mfq, [(s, 0) for s in starts])] if starts else [], 0)

    def _make_room(self, plan: list[tuple[MappedFileQueue, list[tuple[int, int]]]], keys: int, grow: int = 0,
                   total: int = 0, cq_grow: tuple[MappedFile, int] | None = None) -> None:  # fmt: skip
        """Decide on and allocate: the index's room for ``keys``, the files of ``plan`` (``(start, bytes its first
        write needs)``), ``grow`` more bytes of the current segment (for ``total`` bytes of records) and the growth
        of a consume-queue file up to a position (``cq_grow``)."""
        need = self.index.bytes_needed(keys) + grow
        for mfq, starts in plan:
            need += sum(max(0, mfq.first_allocation(w) - mfq.spare_allocated(s)) for s, w in starts)
        if cq_grow is not None:
            mf, upto = cq_grow
            need += mf.allocation_end(upto) - mf.allocated
        if not need:
            return
        refusal = self.guard.check(need)
        if refusal is not None:
            raise DiskFullError(refusal)
        try:  # smallest first: what a failure leaves allocated is little
            self.index.prepare(keys)
            if grow:
                self.commitlog.allocate_for(total)
            if cq_grow is not None:
                cq_grow[0].grow_to(cq_grow[1])
            for mfq, starts in reversed(plan):
                for s, w in starts:
                    mfq.spare(s, w)
        except OSError as e:
            if not is_no_space(e):
                raise
            raise DiskFullError(self.guard.allocation_failed(need, e)) from None
        self.guard.allocated()
