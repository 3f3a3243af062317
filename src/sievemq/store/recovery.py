"""Start-up recovery of a store folder: commit-log end, consume-queue / index repair and rebuild.

Reads (never writes) the file formats described in ``commitlog.py``, ``consume_queue.py``,
``index_file.py`` and ``checkpoint.py``; truncation and rebuilding go through those classes.

Clean stop (no ``abort`` file): the commit log is walked from the checkpoint (or from the start of
its third-last segment when the checkpoint is unusable) to find its end; consume queues keep their
entries except a torn tail; nothing is re-dispatched unless queues or the index are missing.

Unclean stop (``abort`` present, e.g. kill -9 or power loss): every record after the checkpoint's
fsynced offset (or every record, without a checkpoint) is verified -- magic, lengths, physical
offset field and body CRC -- and the log is cut at the first bad one (rest of the segment zeroed,
later segments deleted). Consume-queue and index entries at or after the checkpoint's flushed
offsets are dropped, then rebuilt from the commit log; so is a queue that lost its tail, the whole
``consumequeue`` folder if it is gone, and the whole index if its folder is gone.

Consume-queue extension units are validated with their entries (a tail entry whose unit is unreadable
or carries another tag code is dropped), the extension is truncated after the last kept entry's unit,
and a queue whose units are gone (``consumequeue_ext`` deleted) is cut at its first such entry and
rebuilt; re-dispatch goes through ``Dispatcher.redo`` (dispatch.py), which asks the bitmap calculator
again. (A folder that exists but is empty is trusted: topics may all have been deleted, messages may
have had no keys.)

Disk space: ``recover`` (finding ends, truncating) only rewrites bytes that are already on disk, so it works on
a full disk; ``rebuild`` (the re-dispatch) writes new entries and may need new files. It raises ``OSError``
(ENOSPC) before writing what it cannot allocate, and can then run again later (``again=True``): queue entries
already rebuilt are kept, the index is cut back to its redo point first (``readonly.py`` retries it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from sievemq.protocol.message import RecordSummary
from sievemq.protocol.sysflag import TRANSACTION_MASK, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE
from sievemq.store.checkpoint import Checkpoint
from sievemq.store.commitlog import CommitLog
from sievemq.store.consume_queue import ConsumeQueue
from sievemq.store.index_file import IndexService
from sievemq.store.queue_recovery import recover_queue

__all__ = ["RecoveryReport", "rebuild", "recover"]

log = logging.getLogger("sievemq.store.recovery")

TagsFn = Callable[[str, int, str | None, int], int]
"""``(topic, queue_id, tags, store_timestamp) -> tags code`` as the dispatcher computes it."""
RedoFn = Callable[[RecordSummary, bool, bool], None]
"""``(summary, to_consume_queue, to_index)`` re-dispatches one record."""


@dataclass(slots=True)
class RecoveryReport:
    """What recovery did (logged, and handy in tests)."""

    abnormal: bool = False
    commitlog_end: int = 0
    cq_redo_from: int = 0
    index_redo_from: int = 0
    records_redone: int = 0
    newest_entry: int = -1
    """Commit-log offset of the newest record a consume queue points at after recovery (-1: none)."""
    touched_queues: list[ConsumeQueue] = field(default_factory=list)
    """Queues whose files recovery changed (truncated or rebuilt); they must be flushed."""
    checkpoint: Checkpoint = field(default_factory=Checkpoint)
    """The checkpoint recovery started from."""

    @property
    def redo_from(self) -> int:
        """Commit-log offset from which ``rebuild`` re-dispatches (``commitlog_end``: nothing to rebuild)."""
        return min(self.cq_redo_from, self.index_redo_from, self.commitlog_end)


def _make_validator(cl: CommitLog, end: int, cq: ConsumeQueue, tags_fn: TagsFn) -> Callable[[int, int, int, int], bool]:
    def validate(qoff: int, phy: int, size: int, tags: int) -> bool:
        if phy < cl.min_offset:
            return True  # its segment is gone; nothing to compare with
        if phy < 0 or size <= 0 or phy + size > end:
            return False
        s = cl.summary_at(phy)
        return (
            s is not None
            and s.total_size == size
            and s.topic == cq.topic
            and s.queue_id == cq.queue_id
            and s.queue_offset == qoff
            and tags_fn(s.topic, s.queue_id, s.tags, s.store_timestamp) == tags
        )

    return validate


def dispatchable(sys_flag: int) -> bool:
    """False for prepared/rollback transaction records, which get no consume-queue entry (as Java)."""
    t = sys_flag & TRANSACTION_MASK
    return t != TRANSACTION_PREPARED_TYPE and t != TRANSACTION_ROLLBACK_TYPE


def recover(
    cl: CommitLog,
    cqs: Callable[[Callable[[ConsumeQueue], bool] | None], Iterable[ConsumeQueue]],
    index: IndexService,
    cp: Checkpoint,
    *,
    abnormal: bool,
    cq_folder_missing: bool,
    index_folder_missing: bool,
    tags_fn: TagsFn,
    known: dict[ConsumeQueue, tuple[int, int]] | None = None,
) -> RecoveryReport:
    """Recover the commit log, consume queues and index in place (no new space needed); returns a report.

    What must then be re-dispatched (``report.redo_from``) is done by ``rebuild``. ``cqs(want)`` gives the queues
    (those ``want`` accepts) one after the other (``QueueTable.each``: each is used only until the next is asked
    for); each queue's min offset is corrected to the log's start on the way. Queues a clean stop's summary gave
    (``ConsumeQueue.known``) are not opened unless the redo point cuts them: ``known`` holds their last entries.
    """
    report = RecoveryReport(abnormal=abnormal, checkpoint=cp)
    # 1. Commit log end.
    start: int | None = None
    if cp.physic_offset > 0 and cl.mfq.find(cp.physic_offset) is not None and cl.is_boundary(cp.physic_offset):
        start = cp.physic_offset
    elif abnormal:
        start = cl.min_offset  # no usable checkpoint: verify everything
    end = cl.recover(start, check_crc=abnormal)
    phy_min = cl.min_offset
    report.commitlog_end = end

    # 2. Consume queues: torn tails, entries past the end, entries that were not known flushed.
    r_cq = phy_min if cq_folder_missing else max(phy_min, min(cp.logics_offset, end))
    tops: dict[ConsumeQueue, tuple[int, int]] = {}
    """``(phy, end)`` of each queue's last entry after the first pass (a queue a clean stop's summary gave is taken
    as it says, unopened)."""
    tops.update(known or {})
    for cq in cqs(lambda q: not q.known):
        if recover_queue(cq, _make_validator(cl, end, cq, tags_fn), phy_min):
            lost_from = cq.last_entry_end()
            r_cq = min(r_cq, max(phy_min, lost_from))
            report.touched_queues.append(cq)
        cq.correct_min_offset(phy_min)
        last = cq.last_entry()
        if last is not None:
            tops[cq] = (last[0], last[0] + last[1])
    # every entry of a queue whose last one ends at or below the redo point stays: such a queue is not opened again
    newest = max((t[0] for t in tops.values() if t[1] <= r_cq), default=-1)
    for cq in cqs(lambda q: q in tops and tops[q][1] > r_cq):
        before = cq.max_offset
        cq.truncate_from_phy(r_cq)
        if cq.max_offset != before:
            report.touched_queues.append(cq)
        last = cq.last_entry()
        if last is not None:
            newest = max(newest, last[0])
    report.cq_redo_from = r_cq
    report.newest_entry = newest

    # 3. Index.
    r_idx = phy_min if index_folder_missing else max(phy_min, min(cp.index_offset, end))
    index.truncate_from_phy(r_idx)
    report.index_redo_from = r_idx
    return report


def rebuild(
    cl: CommitLog,
    index: IndexService,
    report: RecoveryReport,
    *,
    redo: RedoFn,
    save_checkpoint: Callable[[Checkpoint], None],
    again: bool = False,
) -> int:
    """4. Re-dispatch the records after the redo points; returns how many (``OSError`` ENOSPC: run it again later).

    ``again``: an earlier run stopped half way; the index is cut back to its redo point first.
    """
    cp, end = report.checkpoint, report.commitlog_end
    r_cq, r_idx = report.cq_redo_from, report.index_redo_from
    redo_from = report.redo_from
    if redo_from >= end:
        if report.abnormal:
            log.warning("store recovery (unclean stop): commit log end %d, nothing to re-dispatch", end)
        return 0
    if again:
        index.truncate_from_phy(r_idx)
    # Persist the redo points first: if we crash half way, the next start redoes from there again.
    save_checkpoint(
        Checkpoint(cp.physic_timestamp, cp.logics_timestamp, cp.index_timestamp, min(cp.physic_offset, end),
                   min(cp.logics_offset, r_cq), min(cp.index_offset, r_idx))
    )  # fmt: skip
    n = 0
    for s in cl.iter_summaries(max(redo_from, cl.min_offset), end):
        phy = s.commit_log_offset
        redo(s, phy >= r_cq and dispatchable(s.sys_flag), phy >= r_idx)
        n += 1
    report.records_redone = n
    log.warning("store recovery (%s stop): commit log end %d, %d records re-dispatched (cq from %d, index from %d)",
                "unclean" if report.abnormal else "clean", end, n, r_cq, r_idx)  # fmt: skip
    return n
