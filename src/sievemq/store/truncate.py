"""Cutting a stopped store's commit log back to an offset (a replica that was ahead of the new master).

``truncate_commitlog(config, offset)`` runs on a store folder that no ``MessageStore`` has open (it takes the
folder's ``lock`` and refuses when a process holds it). ``offset`` must be a record boundary at or below the
log's end: the start of a record, of a segment, or of a segment's end-of-file marker, found by walking the records
of its segment (and, when it lies past the checkpoint, by the same walk recovery makes to find the end: from the
checkpoint, body CRCs checked after an unclean stop). Anything else is refused (``TruncationRefused``) and nothing is
changed (but for what any load also does: spare segments a crash left are deleted). The next ``MessageStore.load()``
then serves a log that ends exactly at ``offset``, with no consume-queue entry, extension unit or index key for a
record at or past it.

How: only the commit log is cut here. The consume queues, their extension units and the index are cut by the
start-up recovery that follows (``recovery.py``), which on every load drops the queue entries and index keys at or
past the smaller of the checkpoint's offsets and the log's end, and re-dispatches the records from there to the end.
This module leaves the ``abort`` marker, so that the load takes the unclean-stop path (records after the checkpoint
CRC-checked, every file recovery rewrote flushed again, the index included), and lowers the checkpoint's queue and
index offsets to at most ``offset``, so that the cut does not rest on the end alone. Cutting the queues here instead
would repeat recovery's code and need a crash ordering of its own across hundreds of files; this way the whole
truncation turns on one durable write (step 4), and a crash on either side of it is a case recovery already handles.

The steps, in order (``Truncation.steps``), each durable before the next starts:

1. ``abort`` is created (the next load verifies records, CRCs included, from the checkpoint on).
2. the commit-log segments holding the bytes below ``offset`` (from the checkpoint's) are fsynced.
3. the checkpoint is rewritten: commit log at a boundary that stays valid after the cut (``offset``, or the start of
   the segment before it when ``offset`` starts a segment that goes), queues and index at ``min(theirs, offset)``.
   A crash up to here loads as before the truncation: the same log, the same queues (rebuilt from the lower offsets).
4. the commit point: the record header (size and magic) at ``offset`` is zeroed and fsynced. From here on recovery
   finds the end of the log at ``offset`` and cuts everything after it: a crash loads as after the truncation.
5. the rest of that segment is zeroed; later segments are deleted, the last first, the folder fsynced after each
   (a gap between segments would make the next load drop the segments before it).
6. ``epochs.json``, when there is one, loses the entries that start at or past ``offset`` (``EpochHistory.cut``).

Truncating at the log's end changes no store file (step 6 still runs: it completes an earlier run that stopped
after its commit point). ``offset`` below the oldest stored byte is refused: such a replica copies afresh.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sievemq.store.checkpoint import Checkpoint, CheckpointFile
from sievemq.store.commitlog import CommitLog, check_record
from sievemq.store.config import StoreConfig
from sievemq.store.epochs import EPOCHS_FILE, load_epochs, save_epochs
from sievemq.store.mapped_file import MappedFile, fsync_dir
from sievemq.store.results import StoreError

__all__ = ["Truncation", "TruncationRefused", "TruncationStep", "plan_truncation", "truncate_commitlog"]

log = logging.getLogger("sievemq.store")

_BLANK = -1  # check_record's answers
_END = 0
_HEADER = 8  # TOTALSIZE + MAGICCODE


class TruncationRefused(StoreError):
    """The folder cannot be truncated at that offset (nothing was changed)."""


@dataclass(frozen=True, slots=True)
class TruncationStep:
    """One durable step of a truncation."""

    name: str
    run: Callable[[], None]


def _scan_start(cl: CommitLog, cp: Checkpoint, abnormal: bool) -> int:
    """Where recovery starts walking the log (``recovery.recover`` then ``CommitLog.recover``), read-only."""
    mfq = cl.mfq
    start: int | None = None
    if cp.physic_offset > 0 and mfq.find(cp.physic_offset) is not None and cl.is_boundary(cp.physic_offset):
        start = cp.physic_offset
    elif abnormal:
        start = cl.min_offset
    if start is None or mfq.find(start) is None:
        start = mfq.files[max(0, len(mfq.files) - 3)].file_from_offset
    return start


def _walk(cl: CommitLog, start: int, check_crc: bool, target: int) -> tuple[int, bool]:
    """``(end, hit)``: the log's end as recovery finds it walking from ``start``, and whether ``target`` was one of
    the boundaries it stepped on (a record, an end-of-segment marker, a segment start)."""
    files = cl.mfq.files
    end = start
    hit = False
    for mf in files[cl.mfq.index_of(start) :]:
        pos = start - mf.file_from_offset if mf.file_from_offset <= start else 0
        phy = mf.file_from_offset + pos
        while True:
            hit = hit or phy == target
            n = check_record(mf, pos, phy, check_crc)
            if n <= 0:
                break
            pos += n
            phy += n
        if n == _BLANK or pos >= mf.file_size:
            end = mf.end_offset
            continue
        end = phy
        break
    return end, hit


def _is_boundary_below(mf: MappedFile, target: int) -> bool:
    """True when walking the records of ``mf`` from its start (as written, no CRC) steps on ``target``."""
    pos, phy = 0, mf.file_from_offset
    while phy < target:
        n = check_record(mf, pos, phy, False)
        if n <= 0:
            return False
        pos += n
        phy += n
    return phy == target


def _read_checkpoint(path: Path) -> Checkpoint:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return Checkpoint()
    return Checkpoint.decode(data) or Checkpoint()


class Truncation:
    """An opened (locked) store folder and the steps that cut its commit log at ``offset``; see the module docstring.

    ``run()`` runs them all; tests run a prefix (``run(k)``) and ``close()`` to stand for a crash after step ``k``.
    """

    def __init__(self, config: StoreConfig, offset: int) -> None:
        """Lock the folder, find the log's end and check ``offset`` (``TruncationRefused``: nothing changed)."""
        self.root = root = config.root
        self.offset = offset
        self.end = 0
        self.steps: list[TruncationStep] = []
        self._lock_fd = -1
        self._cl: CommitLog | None = None
        if offset < 0:
            raise TruncationRefused(f"cannot truncate the commit log at a negative offset ({offset})")
        if not root.is_dir():
            if offset:
                raise TruncationRefused(f"{root} holds no store: its commit log ends at 0, not after {offset}")
            return
        try:
            self._open(config)
            self._plan()
        except BaseException:
            self.close()
            raise

    def _open(self, config: StoreConfig) -> None:
        root = self.root
        fd = os.open(root / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            raise TruncationRefused(f"store folder {root} is in use by another process: stop its broker first") from e
        self._lock_fd = fd
        cl = self._cl = CommitLog(root / "commitlog", config.commitlog_file_size)
        cl.load()

    def _plan(self) -> None:
        cl = self._cl
        assert cl is not None
        root, offset = self.root, self.offset
        mfq = cl.mfq
        if not mfq.files:
            if offset:
                raise TruncationRefused(f"offset {offset} is past the end of the commit log (0: it is empty)")
        else:
            abnormal = (root / "abort").exists()
            cp = _read_checkpoint(root / "checkpoint")
            start = _scan_start(cl, cp, abnormal)
            self.end, hit = _walk(cl, start, abnormal, offset)
            if offset > self.end:
                raise TruncationRefused(f"offset {offset} is past the end of the commit log ({self.end})")
            if offset < cl.min_offset:
                raise TruncationRefused(
                    f"offset {offset} is below the oldest byte the commit log still holds ({cl.min_offset}): "
                    "the store must be emptied and copied afresh"
                )
            if offset < self.end:
                mf = mfq.find(offset)
                assert mf is not None  # min_offset <= offset < end
                if not hit and not (offset < start and _is_boundary_below(mf, offset)):
                    raise TruncationRefused(f"offset {offset} is not a record boundary of the commit log")
                self._plan_cut(cl, cp, start, mf)
        self.steps.append(TruncationStep("epochs", self._cut_epochs))

    def _plan_cut(self, cl: CommitLog, cp: Checkpoint, start: int, mf: MappedFile) -> None:
        root, offset = self.root, self.offset
        files = cl.mfq.files
        i = files.index(mf)
        pos = offset - mf.file_from_offset
        goes = pos == 0 and i > 0  # a segment starting at the cut goes (recovery keeps only a first one)
        resume = files[i - 1].file_from_offset if goes else offset
        synced = files[cl.mfq.index_of(min(start, offset)) : i + (0 if goes else 1)]
        new_cp = Checkpoint(cp.physic_timestamp, cp.logics_timestamp, cp.index_timestamp, resume,
                            min(cp.logics_offset, offset), min(cp.index_offset, offset))  # fmt: skip
        later = files[i if goes else i + 1 :]

        def mark() -> None:
            with open(root / "abort", "ab"):
                pass
            fsync_dir(root)

        def sync() -> None:
            for f in synced:
                f.sync()

        def checkpoint() -> None:
            cpf = CheckpointFile(root / "checkpoint")
            try:
                cpf.write(new_cp)
            finally:
                cpf.close()
            fsync_dir(root)

        def commit() -> None:
            log.warning("truncating the commit log of %s from %d to %d", root, self.end, offset)
            mf.write_at(pos, bytes(_HEADER))
            mf.sync()

        def zero_tail() -> None:
            mf.zero_from(pos)
            mf.sync()

        self.steps += [
            TruncationStep("abort", mark),
            TruncationStep("sync", sync),
            TruncationStep("checkpoint", checkpoint),
            TruncationStep("commit", commit),
        ]
        if not goes:
            self.steps.append(TruncationStep("zero-tail", zero_tail))
        for f in reversed(later):
            self.steps.append(TruncationStep(f"delete {f.path.name}", functools.partial(self._delete, f)))

    def _delete(self, mf: MappedFile) -> None:
        mf.destroy()
        fsync_dir(mf.path.parent)

    def _cut_epochs(self) -> None:
        path = self.root / EPOCHS_FILE
        if not path.exists() and not path.with_name(path.name + ".bak").exists():
            return
        history = load_epochs(path)
        if history.cut(self.offset):
            save_epochs(path, history)

    def run(self, upto: int | None = None) -> None:
        """Run the steps (the first ``upto`` only, for tests)."""
        for step in self.steps[:upto]:
            step.run()

    def close(self) -> None:
        """Unmap the segments and release the folder's lock."""
        if self._cl is not None:
            self._cl.close()
            self._cl = None
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def __enter__(self) -> Truncation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def plan_truncation(config: StoreConfig, offset: int) -> Truncation:
    """Open and check the folder for a truncation at ``offset`` (``TruncationRefused``); close it when done."""
    return Truncation(config, offset)


def truncate_commitlog(config: StoreConfig, offset: int) -> int:
    """Cut the stopped store's commit log at ``offset`` (see the module docstring); returns the log's new end."""
    with contextlib.closing(plan_truncation(config, offset)) as t:
        t.run()
        return t.offset
