"""Start-up on a full disk: the writes start-up makes before the store takes puts, retried until they succeed.

Recovery (``recovery.recover``) finds the ends of data and truncates, rewriting only bytes already on disk, so it
works on a full disk. Then, in order (``StartupWrites``):

1. allocate the files the store writes next: the last commit-log segment and the last index file (files written
   by older versions of sievemq are sparse; see ``disk.py``; consume-queue and extension files get blocks as they
   are written, each put counting what its entries need: ``put_space.py``);
2. rebuild consume queues and index from the commit log (``recovery.rebuild``), when recovery found them behind;
3. flush what recovery kept or rebuilt, so that it is on disk before a new write is acknowledged.

When a step fails (``OSError``: no space, or an I/O error), the store starts *read-only*
(``DiskGuard.enter_read_only``, logged at ERROR with what to free): pulls, offset queries and lookups are served
(queues and index as far as they are rebuilt), every put is refused with the disk-full answer, and checkpoints keep
the rebuild's redo points (``FlushService.caps``), so a restart meanwhile loses nothing. ``watch`` tries the
remaining steps again every ``DiskGuard.recheck_s`` once more than the reserve is free; when they are done the
store is writable, without a restart.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from sievemq.store.commitlog import CommitLog
from sievemq.store.disk import DiskGuard
from sievemq.store.flush import FlushService
from sievemq.store.index_file import IndexService
from sievemq.store.queues import QueueTable
from sievemq.store.recovery import RecoveryReport, RedoFn, rebuild

__all__ = ["StartupWrites"]

_REBUILD = "rebuild"


class StartupWrites:
    """The steps of the module docstring; ``run`` does what it can, ``watch`` retries the rest."""

    def __init__(
        self,
        *,
        commitlog: CommitLog,
        queues: QueueTable,
        index: IndexService,
        flusher: FlushService,
        guard: DiskGuard,
        report: RecoveryReport,
        redo: RedoFn,
        on_done: Callable[[], None],
    ) -> None:
        """``on_done()`` runs once every step succeeded (the writer takes the rebuilt state)."""
        self.commitlog = commitlog
        self.queues = queues
        self.index = index
        self.flusher = flusher
        self.guard = guard
        self.report = report
        self._redo = redo
        self._on_done = on_done
        self._rebuilds = 0
        self._steps: list[tuple[str, Callable[[], None]]] = [("allocating the files written next", self._allocate)]
        if report.redo_from < report.commitlog_end:
            flusher.caps.cap(_REBUILD, report.cq_redo_from, report.index_redo_from)
            what = f"rebuilding queues and index from commit-log offset {report.redo_from}"
            self._steps.append((what, self._rebuild))
        self._steps.append(("flushing what recovery kept or rebuilt", flusher.flush_now))

    @property
    def pending(self) -> bool:
        """True while a step is still to do (the store is read-only then)."""
        return bool(self._steps)

    def run(self) -> bool:
        """Do the remaining steps in order; False (read-only, logged) at the first that fails."""
        while self._steps:
            what, step = self._steps[0]
            try:
                with self.queues.one_at_a_time():  # the rebuild dispatches one record after the other
                    step()
            except OSError as e:
                self.guard.enter_read_only(f"start-up could not finish {what}: {e.strerror or e}")
                return False
            self._steps.pop(0)
        self.guard.leave_read_only()
        self._on_done()
        return True

    async def watch(self) -> None:
        """Retry the remaining steps every ``recheck_s`` while more than the reserve is free; ends when done."""
        guard = self.guard
        while self._steps:
            await asyncio.sleep(guard.recheck_s)
            if guard.free_bytes(max_age=guard.recheck_s) <= guard.reserve:
                continue
            async with self.flusher.lock:  # no flush round runs beside the rebuild and its flush
                self.run()

    # ------------------------------------------------------------------------------------------ steps
    def _allocate(self) -> None:
        last = self.commitlog.mfq.last
        if last is not None:
            last.ensure_allocated(last.file_size)
        self.index.allocate_last()
        self.guard.invalidate()

    def _rebuild(self) -> None:
        self._rebuilds += 1
        rebuild(self.commitlog, self.index, self.report, redo=self._redo, save_checkpoint=self.flusher.write_checkpoint,
                again=self._rebuilds > 1)  # fmt: skip
        self.flusher.caps.uncap(_REBUILD)
