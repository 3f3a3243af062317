"""When the store's bytes reach the disk (``FlushService``): group commit, the periodic flush, the checkpoint.

Threading: mappings are written on the event-loop thread only. ``fdatasync`` / ``fsync`` run in one
dedicated executor thread (``sync_job``), one round at a time under ``lock``, so a descriptor is never
closed under a running sync: files that leave the store while a round runs are closed after it
(``retire``). A round is *planned* on the loop thread (``plan``: which slices of which files, which
directories, which checkpoint), *synced* in the executor, then *finished* on the loop thread: each
stream marks itself flushed up to where the plan looked (``SyncSlice.done``) and SYNC_FLUSH waiters
covered by the commit log's new flushed offset are answered.

* Under ``SYNC_FLUSH`` a put waits (``wait_flushed``) for a group commit: one fsync of the commit log
  serves every waiter whose record it covers (the group-commit task runs whenever a waiter arrives).
* In both modes a task flushes everything every ``flush_interval_ms``: commit log, consume queues
  with their extensions, the index, then the checkpoint (file layout in ``checkpoint.py``), which
  records the commit-log offset the round covered for all three.

A round whose sync fails (``OSError``: EIO, ENOSPC) marks nothing durable, and is logged (at most every
``FAIL_LOG_S``). SYNC_FLUSH waiters it covered are answered "not flushed" at once (the put is answered
FLUSH_DISK_TIMEOUT): after a failed fsync the kernel may have dropped the error with the pages' dirty state, so a
later fsync that succeeds proves nothing about them. For the same reason the commit-log range of the round is
written again (``MappedFile.redirty``) before the next round, and from then on every checkpoint keeps the
consume-queue and index offsets of the last good one (``CheckpointCaps``): the next start rebuilds both from there.
The same kind of cap holds while start-up's rebuild is pending (``readonly.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import heapq
import itertools
import logging
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from sievemq.store.checkpoint import Checkpoint, CheckpointFile
from sievemq.store.commitlog import CommitLog
from sievemq.store.consume_queue import ConsumeQueue
from sievemq.store.index_file import IndexService
from sievemq.store.mapped_file import MappedFile, fsync_dir, sync_fd
from sievemq.store.mapped_file_queue import SyncSlice
from sievemq.util.ratelimit import RateLimitedLog

__all__ = ["CheckpointCaps", "FlushPlan", "FlushService", "sync_job"]

log = logging.getLogger("sievemq.store")

T = TypeVar("T")

FAIL_LOG_S = 10.0
"""At most one log line per this many seconds about failing flushes."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def sync_path(path: Path) -> None:
    """``fdatasync`` a file through a descriptor opened for it (a parked file: its pages are in the page cache); a
    file deleted meanwhile is no error."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        sync_fd(fd)
    finally:
        os.close(fd)


SYNCFS_FROM = 64
"""From this many files to sync by path on, one ``syncfs(2)`` of their filesystem does it (one journal commit where
400 ``fdatasync`` calls took 44-205 ms and ``syncfs`` 2-6 ms)."""

_syncfs: Any = None
if sys.platform.startswith("linux"):
    with contextlib.suppress(OSError, AttributeError):
        _syncfs = ctypes.CDLL(None, use_errno=True).syncfs
        _syncfs.argtypes = (ctypes.c_int,)
        _syncfs.restype = ctypes.c_int


def sync_paths(paths: list[Path]) -> None:
    """Sync the files ``paths`` name (consume-queue files: no descriptor of theirs is held for it): one by one, or
    many at once with ``syncfs`` of the filesystem of the first (``OSError`` when it fails)."""
    if len(paths) >= SYNCFS_FROM and _syncfs is not None:
        fd = os.open(paths[0].parent.parent.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            if _syncfs(fd) != 0:
                err = ctypes.get_errno()
                raise OSError(err, os.strerror(err))
        finally:
            os.close(fd)
        return
    for path in paths:
        sync_path(path)


def sync_job(fds: list[int], dirs: list[Path], cp_file: CheckpointFile | None, cp: Checkpoint | None,
             paths: list[Path] | None = None) -> None:  # fmt: skip
    """Executor job: fdatasync data files (and ``paths``), fsync directories, then write the checkpoint."""
    for fd in fds:
        sync_fd(fd)
    if paths:
        sync_paths(paths)
    for d in dirs:
        fsync_dir(d, strict=True)
    if cp_file is not None and cp is not None:
        cp_file.write(cp)


class CheckpointCaps:
    """Ceilings on the queue and index offsets a checkpoint names, each set for a reason until lifted."""

    def __init__(self) -> None:
        self._caps: dict[str, tuple[int, int]] = {}

    def cap(self, why: str, logics: int, index: int) -> None:
        """Until ``uncap(why)``, no queue offset above ``logics`` and no index offset above ``index``."""
        old = self._caps.get(why)
        self._caps[why] = (logics, index) if old is None else (min(old[0], logics), min(old[1], index))

    def uncap(self, why: str) -> None:
        """Lift the cap set for ``why``."""
        self._caps.pop(why, None)

    def apply(self, at: int) -> tuple[int, int]:
        """The (queue, index) offsets a checkpoint taken at commit-log offset ``at`` may name."""
        caps = self._caps.values()
        return min([at, *(c[0] for c in caps)]), min([at, *(c[1] for c in caps)])


@dataclass(slots=True)
class FlushPlan:
    """What one round syncs, captured on the loop thread."""

    commitlog: SyncSlice
    slices: list[SyncSlice]
    """Consume queues and their extensions."""
    queues: list[ConsumeQueue]
    index_files: list[MappedFile]
    dirs: list[Path]
    checkpoint: Checkpoint | None

    @property
    def fds(self) -> list[int]:
        """Every descriptor to sync."""
        out = self.commitlog.fds
        for s in self.slices:
            out.extend(s.fds)
        out.extend(f.fd for f in self.index_files)
        return out

    @property
    def paths(self) -> list[Path]:
        """Parked files to sync by path."""
        return [p for s in self.slices for p in s.paths]

    @property
    def empty(self) -> bool:
        """True when the round has nothing to do on disk."""
        return not self.fds and not self.paths and not self.dirs and self.checkpoint is None


class FlushService:
    """Owns the flush lock, the sync thread, SYNC_FLUSH waiters, dirty queues and deferred closes."""

    def __init__(
        self,
        commitlog: CommitLog,
        index: IndexService,
        *,
        sync_flush: bool,
        interval_ms: int,
        sync_timeout_ms: int,
        is_live: Callable[[ConsumeQueue], bool],
        record_end: Callable[[], int] | None = None,
    ) -> None:
        """``is_live(cq)`` tells whether a queue still belongs to the store (a failed round re-marks only those).

        ``record_end()`` is the offset after the last whole record dispatched (the log's end unless a copied
        record is still partial): the checkpoint never names an offset inside a record.
        """
        self.commitlog = commitlog
        self.index = index
        self.sync_flush = sync_flush
        self._interval = interval_ms / 1000
        self._sync_timeout = sync_timeout_ms / 1000
        self._is_live = is_live
        self._record_end = record_end
        self._checkpoint: CheckpointFile | None = None
        self._open = False
        self._lock: asyncio.Lock | None = None
        self._event: asyncio.Event | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._dirty: set[ConsumeQueue] = set()
        self._waiters: list[tuple[int, int, asyncio.Future[bool]]] = []
        self._seq = itertools.count()
        self._tasks: list[asyncio.Task[None]] = []
        self._group_commit: asyncio.Task[None] | None = None
        self._syncing = 0
        self.pending_close: list[MappedFile] = []
        """Files that left the store during a sync round; closed when no round runs."""
        self._last_cp = Checkpoint()
        self.caps = CheckpointCaps()
        self._fail_log = RateLimitedLog(FAIL_LOG_S)

    # ------------------------------------------------------------------------------------------ lifecycle
    def open_checkpoint(self, path: Path) -> Checkpoint:
        """Open the checkpoint file and return what it holds (zeros when new or torn)."""
        self._checkpoint = CheckpointFile(path)
        self._last_cp = self._checkpoint.read()
        return self._last_cp

    @property
    def last_checkpoint(self) -> Checkpoint:
        """The checkpoint the last completed round wrote (or the one read at start)."""
        return self._last_cp

    def write_checkpoint(self, cp: Checkpoint) -> None:
        """Write (and fsync) the checkpoint now, blocking (recovery's redo points)."""
        assert self._checkpoint is not None
        self._checkpoint.write(cp)

    def activate(self) -> None:
        """Start accepting flush rounds (after recovery)."""
        self._open = True

    @property
    def is_open(self) -> bool:
        """True between ``activate`` and ``close``."""
        return self._open

    def start(self) -> None:
        """Start the periodic flush task (and, under SYNC_FLUSH, the group-commit task)."""
        self._async_state()
        self._tasks.append(asyncio.create_task(self._periodic_loop(), name="sievemq-store-flush"))
        if self.sync_flush:
            self._ensure_group_commit()

    async def stop_tasks(self) -> None:
        """Cancel the background tasks and wait for them."""
        tasks = list(self._tasks)
        if self._group_commit is not None:
            tasks.append(self._group_commit)
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks.clear()
        self._group_commit = None

    def cancel_tasks(self) -> None:
        """Cancel the background tasks without waiting (a simulated crash)."""
        for t in self._tasks:
            t.cancel()
        if self._group_commit is not None:
            self._group_commit.cancel()
        self._tasks.clear()
        self._group_commit = None

    def close(self) -> None:
        """Answer waiters (not flushed), close deferred files and the checkpoint, end the sync thread."""
        self._open = False
        self.fail_waiters()
        for mf in self.pending_close:
            mf.close()
        self.pending_close.clear()
        if self._checkpoint is not None:
            self._checkpoint.close()
            self._checkpoint = None
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def _async_state(self) -> tuple[asyncio.Lock, ThreadPoolExecutor]:
        if self._lock is None:
            self._lock = asyncio.Lock()
            self._event = asyncio.Event()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sievemq-store-flush")
        return self._lock, self._executor

    @property
    def lock(self) -> asyncio.Lock:
        """Held for a flush round; retention takes it too, so no file is closed under a sync."""
        return self._async_state()[0]

    async def in_sync_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """Run blocking file work (unlinks) in the sync thread, after any round in progress."""
        return await asyncio.get_running_loop().run_in_executor(self._async_state()[1], fn, *args)

    # ------------------------------------------------------------------------------------------ what is dirty
    def mark_dirty(self, cq: ConsumeQueue) -> None:
        """``cq`` was written: the next full round syncs it."""
        self._dirty.add(cq)

    def forget(self, cq: ConsumeQueue) -> None:
        """``cq`` leaves the store: no round syncs it any more."""
        self._dirty.discard(cq)

    def retire(self, files: list[MappedFile]) -> None:
        """Close files that left the store, now or (while a round may use their descriptors) after it."""
        if self._syncing:
            self.pending_close.extend(files)
        else:
            for mf in files:
                mf.close()

    # ------------------------------------------------------------------------------------------ rounds
    def plan(self, *, everything: bool) -> FlushPlan:
        """Capture what to sync now (loop thread). ``everything`` adds queues, index and checkpoint."""
        cl = self.commitlog
        target = cl.max_offset
        cl_slice = cl.mfq.unflushed(target)
        dirs: list[Path] = [cl.mfq.directory] if cl_slice.creates_files else []
        slices: list[SyncSlice] = []
        queues: list[ConsumeQueue] = []
        index_files: list[MappedFile] = []
        cp: Checkpoint | None = None
        if everything:
            queues = list(self._dirty)
            self._dirty = set()
            for cq in queues:
                for s in cq.unflushed():
                    slices.append(s)
                    if s.creates_files:  # the queue's, the topic's and the base folder may all be new
                        d = s.queue.directory
                        dirs.extend((d, d.parent, d.parent.parent))
            index_files = self.index.take_dirty()
            if any(f.new_file for f in index_files):
                dirs.append(self.index.directory)
            now = _now_ms()
            at = target if self._record_end is None else min(target, self._record_end())
            cp = Checkpoint(now, now, now, at, *self.caps.apply(at))
        return FlushPlan(cl_slice, slices, queues, index_files, list(dict.fromkeys(dirs)), cp)

    def _finish(self, plan: FlushPlan) -> None:
        """Record what a completed plan made durable (loop thread)."""
        plan.commitlog.done()
        for s in plan.slices:
            s.done()
        self.index.mark_flushed(plan.index_files)
        if plan.checkpoint is not None:
            self._last_cp = plan.checkpoint
        self._resolve_waiters()

    def _failed(self, plan: FlushPlan, err: BaseException) -> None:
        """A round did not complete: nothing of it counts as on disk; its queues and index files go back for the
        next round, and after a failed sync (``OSError``) see the module docstring (loop thread)."""
        self._dirty.update(cq for cq in plan.queues if self._is_live(cq))
        self.index.restore_dirty(plan.index_files)
        if not isinstance(err, OSError):
            return
        plan.commitlog.redirty()
        self.caps.cap("failed flush", self._last_cp.logics_offset, self._last_cp.index_offset)
        self.fail_waiters(plan.commitlog.upto)
        held = self._fail_log.allow("flush")
        if held is not None:
            log.error("store flush failed (%s; %d more failures since the last message): nothing of the round counts "
                      "as on disk, SYNC_FLUSH puts it covered are answered FLUSH_DISK_TIMEOUT; retrying",
                      err, held)  # fmt: skip

    async def _run(self, plan: FlushPlan) -> None:
        if plan.empty:
            self._finish(plan)
            return
        _lock, executor = self._async_state()
        cp_file = self._checkpoint if plan.checkpoint is not None else None
        self._syncing += 1
        pinned = [cq for cq in plan.queues if cq.ext is not None and cq.ext.has_files]
        for cq in pinned:  # their extension files' descriptors are in the job: no parking until it is done
            cq.pins += 1
        try:
            await asyncio.get_running_loop().run_in_executor(
                executor, sync_job, plan.fds, plan.dirs, cp_file, plan.checkpoint, plan.paths
            )
        except BaseException as e:
            self._failed(plan, e)
            raise
        finally:
            for cq in pinned:
                cq.pins -= 1
            self._syncing -= 1
            if not self._syncing and self.pending_close:
                for mf in self.pending_close:
                    mf.close()
                self.pending_close.clear()
        self._finish(plan)

    async def flush_commitlog(self) -> None:
        """One round of the commit log alone (group commit); ``OSError`` when its sync failed (logged)."""
        async with self.lock:
            if self._open:
                await self._run(self.plan(everything=False))

    async def flush_all(self) -> None:
        """One round of everything; ``OSError`` when its sync failed (logged)."""
        async with self.lock:
            if self._open:
                await self._run(self.plan(everything=True))

    def flush_now(self) -> None:
        """Force everything to disk, blocking the caller (start-up, tools); ``OSError`` when a sync fails."""
        if not self._open:
            return
        plan = self.plan(everything=True)
        try:
            sync_job(plan.fds, plan.dirs, self._checkpoint, plan.checkpoint, plan.paths)
        except OSError as e:
            self._failed(plan, e)
            raise
        self._finish(plan)

    async def _periodic_loop(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.flush_all()
            except OSError:
                pass  # logged by _failed, rate-limited
            except Exception:
                log.exception("periodic flush failed")

    # ------------------------------------------------------------------------------------------ group commit
    def _ensure_group_commit(self) -> None:
        self._async_state()
        if self._group_commit is None or self._group_commit.done():
            self._group_commit = asyncio.create_task(self._group_commit_loop(), name="sievemq-group-commit")

    async def wait_flushed(self, offset: int) -> bool:
        """Wait until the commit log is fsynced up to ``offset``; False on timeout."""
        if self.commitlog.mfq.flushed_offset >= offset:
            return True
        self._ensure_group_commit()
        assert self._event is not None
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (offset, next(self._seq), fut))
        self._event.set()
        try:
            return await asyncio.wait_for(asyncio.shield(fut), self._sync_timeout)
        except TimeoutError:
            return False

    def _resolve_waiters(self) -> None:
        w = self._waiters
        flushed = self.commitlog.mfq.flushed_offset
        while w and w[0][0] <= flushed:
            fut = heapq.heappop(w)[2]
            if not fut.done():
                fut.set_result(True)

    def fail_waiters(self, upto: int | None = None) -> None:
        """Answer waiters "not flushed": every one (the store is closing), or those up to ``upto`` (a failed sync)."""
        w = self._waiters
        while w and (upto is None or w[0][0] <= upto):
            fut = heapq.heappop(w)[2]
            if not fut.done():
                fut.set_result(False)

    async def _group_commit_loop(self) -> None:
        assert self._event is not None
        ev = self._event
        while True:
            await ev.wait()
            ev.clear()
            try:
                await self.flush_commitlog()
            except Exception as e:
                if not isinstance(e, OSError):  # an OSError is logged by _failed, rate-limited
                    log.exception("commit log flush failed")
                await asyncio.sleep(0.1)
                if self._waiters:
                    ev.set()
