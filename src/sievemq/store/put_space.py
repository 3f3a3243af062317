"""What a put needs on disk, decided and allocated before the writer writes a byte of it (``PutSpace``).

A put touches at most: the commit log (a segment roll creates the next segment), the target queue's consume
queue (its next file) and the index (a chunk of entries, or the next index file). All of it is counted first;
when nothing new is needed (the common case: the files in use have room, and they are allocated whole) the put
goes ahead without a system call. (Extension units are best-effort: ``Dispatcher`` skips one that would need a
file the disk cannot give, see ``dispatch.py``.)
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

__all__ = ["PutSpace", "count_keys"]


def count_keys(msgs: list[MessageExt]) -> int:
    """At most how many index keys dispatching ``msgs`` adds (``KEYS`` split on spaces, and ``UNIQ_KEY``)."""
    n = 0
    for m in msgs:
        props = m.properties
        keys = props.get("KEYS")
        n += (keys.count(" ") + 1 if keys else 0) + (1 if props.get("UNIQ_KEY") else 0)
    return n


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
                        if (queue_offset + entries) * CQ_UNIT <= last.file_from_offset + last.file_size:
                            return
        self._prepare(records, total, msgs, cq, queue_offset, entries)

    def _prepare(self, records: list[bytes], total: int, msgs: list[MessageExt], cq: ConsumeQueue | None,
                 queue_offset: int, entries: int) -> None:  # fmt: skip
        plan: list[tuple[MappedFileQueue, list[int]]] = []
        grow = self.commitlog.allocation_needed(total)
        starts = self.commitlog.new_files_for(records, total)
        if starts:
            plan.append((self.commitlog.mfq, starts))
        if cq is not None:
            starts = cq.new_files_for(queue_offset, entries)
            if starts:
                plan.append((cq.mfq, starts))
        self._make_room(plan, count_keys(msgs), grow, total)

    def spare_first_files(self, cqs: list[ConsumeQueue]) -> list[MappedFile]:
        """The first file of each queue that has none yet, created and allocated now as a spare (its first
        append takes it); ``DiskFullError`` when the disk cannot hold them (then none is created)."""
        plan = [(cq.mfq, cq.new_files_for(cq.max_offset, 1)) for cq in cqs if not cq.mfq.files]
        plan = [(mfq, starts) for mfq, starts in plan if starts and not any(mfq.has_spare(x) for x in starts)]
        if not plan:
            return []
        self.refuse_if_read_only()
        self._make_room(plan, 0)
        return [mfq.spare(s) for mfq, starts in plan for s in starts]

    def prepare_copy(self, offset: int, n: int) -> None:
        """The same for ``n`` copied commit-log bytes at ``offset`` (a slave's copy): the segments they fill.

        What the copied records then dispatch allocates as it goes (``OSError`` ENOSPC there, never a fault).
        """
        self.refuse_if_read_only()
        starts = self.commitlog.new_files_for_raw(offset, n)
        self._make_room([(self.commitlog.mfq, starts)] if starts else [], 0)

    def _make_room(self, plan: list[tuple[MappedFileQueue, list[int]]], keys: int, grow: int = 0,
                   total: int = 0) -> None:  # fmt: skip
        """Decide on and allocate: the index's room for ``keys``, the files of ``plan``, and ``grow`` more bytes of
        the current segment (for ``total`` bytes of records)."""
        need = self.index.bytes_needed(keys) + grow
        for mfq, starts in plan:
            first = mfq.file_size if mfq.alloc_chunk is None else min(mfq.file_size, mfq.alloc_chunk)
            need += sum(0 if mfq.has_spare(s) else first for s in starts)
        if not need:
            return
        refusal = self.guard.check(need)
        if refusal is not None:
            raise DiskFullError(refusal)
        try:  # smallest first: what a failure leaves allocated is little
            self.index.prepare(keys)
            if grow:
                self.commitlog.allocate_for(total)
            for mfq, starts in reversed(plan):
                for s in starts:
                    mfq.spare(s)
        except OSError as e:
            if not is_no_space(e):
                raise
            raise DiskFullError(self.guard.allocation_failed(need, e)) from None
        self.guard.allocated()
