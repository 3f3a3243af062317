"""The message store: what the broker calls (RocketMQ's ``DefaultMessageStore``, as a facade over parts).

On disk, under ``StoreConfig.root`` (a broker's store folder)::

    commitlog/<20-digit offset>                    records (commitlog.py)
    consumequeue/<topic>/<queueId>/<20-digit>      20-byte entries (consume_queue.py)
    consumequeue_ext/<topic>/<queueId>/<20-digit>  extension units: tag code, store time, filter
                                                   bitmap (consume_queue_ext.py)
    index/<20-digit>                               key index hash files (index_file.py)
    checkpoint                                     flushed offsets/times (checkpoint.py)
    abort                                          exists while the store is open; present at load = unclean stop
    lock                                           flock'ed while open (one process per folder)
    config/                                        broker JSON files (jsonfile.py)

The parts, a module each: ``writer.py`` (puts and copied bytes), ``dispatch.py`` (what a stored record
adds: entry, extension unit, index keys), ``queues.py`` (the consume queues by topic), ``lookup.py``
(reads), ``flush.py (when bytes reach the disk: group commit,
periodic flush, checkpoint), ``scan.py`` (the pull scan), ``retention.py`` (deleting expired segments,
as ``cleanup.py`` decides), ``recovery.py`` (start-up repair), ``prefault.py`` (page faults ahead of the
writer), ``disk.py`` / ``put_space.py`` / ``readonly.py`` (disk space: files allocated before they are written,
puts refused before they write when the disk is full, a read-only start when start-up cannot write). This class
wires them and keeps the lifecycle.

Threading: every method runs on the event-loop thread, and the mappings are written only there; syncs
and unlinks run in the flusher's thread (see ``flush.py``).

Replication taps: a master reads its log with ``read_commitlog(offset, n)``; a slave appends what it
received with ``append_commitlog(offset, data)``, which writes the bytes at the same physical offsets and
dispatches every record that became whole, in one call.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import struct
from dataclasses import replace

from sievemq.protocol.delay_levels import parse_levels
from sievemq.protocol.message import MessageExt, PropertiesSizeExceeded, RecordSummary, offset_msg_ids
from sievemq.store.commitlog import CommitLog
from sievemq.store.config import StoreConfig
from sievemq.store.consume_queue import CQ_UNIT
from sievemq.store.consume_queue_ext import CqExtUnit
from sievemq.store.disk import DiskGuard
from sievemq.store.dispatch import BitmapCalculator, Dispatcher, DispatchListener
from sievemq.store.filtering import MessageFilter
from sievemq.store.flush import FlushService
from sievemq.store.index_file import IndexService
from sievemq.store.limits import mapped_files_budget
from sievemq.store.lookup import Reader
from sievemq.store.mapped_file import MappedFile, fsync_dir
from sievemq.store.prefault import Prefaulter
from sievemq.store.put_space import PutSpace
from sievemq.store.queue_summary import read_summary, write_summary
from sievemq.store.queues import LOW_WATER, QueueTable
from sievemq.store.readonly import StartupWrites
from sievemq.store.recovery import RecoveryReport, recover
from sievemq.store.results import DiskFullError, GetResult, PutResult, PutStatus, StoreError
from sievemq.store.retention import Retention
from sievemq.store.writer import Writer

__all__ = ["MessageStore"]

log = logging.getLogger("sievemq.store")


class MessageStore:
    """Commit log + consume queues + index in one folder; see the module docstring."""

    def __init__(self, config: StoreConfig, store_host: tuple[str, int]) -> None:
        self.config = config
        self.store_host = store_host
        root = self.root = config.root
        self.commitlog = CommitLog(root / "commitlog", config.commitlog_file_size)
        self.index = IndexService(root / "index", config.index_hash_slots, config.index_max_entries)
        budget = mapped_files_budget(config.max_mapped_files)
        self.queues = QueueTable(root / "consumequeue", root / "consumequeue_ext", config.cq_entries_per_file,
                                 config.mapped_file_size_cq_ext, budget)  # fmt: skip
        self.flusher = FlushService(
            self.commitlog,
            self.index,
            sync_flush=config.sync_flush,
            interval_ms=config.flush_interval_ms,
            sync_timeout_ms=config.sync_flush_timeout_ms,
            is_live=self.queues.is_live,
            record_end=lambda: self.writer.dispatched_to,
        )
        self.dispatcher = Dispatcher(
            self.queues,
            self.index,
            delay_levels=parse_levels(config.message_delay_levels),
            bitmap_length=config.bitmap_length_bytes,
            on_queue_written=self.flusher.mark_dirty,
        )
        self.prefaulter = Prefaulter(self.commitlog.mfq, config.commitlog_prefault_bytes)
        self.disk = DiskGuard(root, config.disk_full_reserve_bytes)
        self.dispatcher.room = self.disk.fits
        space = PutSpace(self.commitlog, self.index, self.disk)
        self.writer = Writer(config, store_host, self.commitlog, self.queues, self.dispatcher, self.prefaulter, space)
        self.reader = Reader(config, self.commitlog, self.queues, self.index)
        self.retention = Retention(config, self.commitlog, self.queues, self.index, self.flusher, self.prefaulter)
        self._lock_fd = -1
        self._available = False
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []
        self.recovery_report: RecoveryReport | None = None
        self.startup: StartupWrites | None = None

    # ------------------------------------------------------------------------------------------ lifecycle
    @property
    def available(self) -> bool:
        """True between ``load()`` and ``shutdown()`` / ``abandon()``."""
        return self._available

    def load(self) -> None:
        """Open the folder, recover (CRC-checked after an unclean stop), create ``abort``."""
        root = self.root
        self._stopping = False
        cq_folder_missing = not self.queues.cq_base.is_dir()
        index_folder_missing = not self.index.directory.is_dir()
        for d in (root, self.commitlog.mfq.directory, self.queues.cq_base, self.queues.ext_base,
                  self.index.directory, root / "config"):  # fmt: skip
            d.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(root / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(self._lock_fd)
            self._lock_fd = -1
            raise StoreError(f"store folder {root} is in use by another process") from e
        abort = root / "abort"
        abnormal = abort.exists()
        # Mark "running" before recovery changes anything: a crash during recovery is an unclean stop.
        with open(abort, "wb"):
            pass
        fsync_dir(root)
        cp = self.flusher.open_checkpoint(root / "checkpoint")
        self.commitlog.load()
        summary = read_summary(self.queues.cq_base, cp.physic_offset, self.config.cq_entries_per_file * CQ_UNIT,
                               trust=not abnormal)  # fmt: skip
        self.queues.load(summary)
        self.index.load()
        known = {cq: cq.tail for cq in self.queues.all() if cq.known and cq.tail is not None}
        with self.queues.one_at_a_time():
            report = self.recovery_report = recover(
                self.commitlog,
                self.queues.each,
                self.index,
                cp,
                abnormal=abnormal,
                cq_folder_missing=cq_folder_missing,
                index_folder_missing=index_folder_missing,
                tags_fn=self.dispatcher.tags_code,
                known=known,
            )
        newest = report.newest_entry
        last_store_time = (self.commitlog.store_timestamp_at(newest) or 0) if newest >= 0 else 0
        # Truncations must reach the disk too, or stale entries could reappear after a power loss.
        for cq in report.touched_queues:
            self.flusher.mark_dirty(cq)
        if report.abnormal:
            self.index.mark_all_dirty()
        self.writer.reset(last_store_time)
        self._available = True
        self.flusher.activate()
        # Allocate, rebuild, flush (before new writes are acknowledged); read-only until that is done.
        newest_time = [last_store_time]

        def redo(summary: RecordSummary, to_cq: bool, to_index: bool) -> None:
            if to_cq:  # what the rebuilt queues point at: the writer's clock never goes below it
                newest_time[0] = max(newest_time[0], summary.store_timestamp)
            self.dispatcher.redo(summary, to_cq, to_index)

        self.startup = StartupWrites(commitlog=self.commitlog, queues=self.queues, index=self.index,
                                     flusher=self.flusher, guard=self.disk, report=report, redo=redo,
                                     on_done=lambda: self.writer.reset(newest_time[0]))  # fmt: skip
        self.startup.run()

    async def start(self) -> None:
        """Start the flush (and group-commit) and retention background tasks."""
        if not self._available:
            raise StoreError("MessageStore.start() before load()")
        self.flusher.start()
        self._tasks.append(asyncio.create_task(self.retention.run_forever(), name="sievemq-store-cleanup"))
        if self.startup is not None and self.startup.pending:
            self._tasks.append(asyncio.create_task(self.startup.watch(), name="sievemq-store-startup-writes"))
        self.prefaulter.start()

    async def shutdown(self) -> None:
        """Stop background tasks, flush everything, remove ``abort`` (clean stop), close files."""
        if not self._available:
            return
        self._stopping = True
        tasks, self._tasks = self._tasks, []
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        await self.flusher.stop_tasks()
        try:
            await self.flusher.flush_all()
            # what the next start knows of the queues without opening them (after the last flush: they are on disk)
            write_summary(self.queues.cq_base, self.queues.all(), self.flusher.last_checkpoint.physic_offset,
                          self.config.cq_entries_per_file * CQ_UNIT)  # fmt: skip
        except OSError as e:  # ``abort`` stays: the next start verifies what the store holds
            log.error("store stop: %s; the next start checks every file", e)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.root / "abort")
        self.flusher.fail_waiters()
        self._available = False
        fsync_dir(self.root)
        self._close()

    def _close(self) -> None:
        self._available = False
        self.prefaulter.stop()  # no prefault job may touch a mapping being closed
        self.commitlog.close()
        self.queues.close()
        self.index.close()
        self.flusher.close()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = -1

    def abandon(self) -> None:
        """Close every file without flushing or removing ``abort`` (simulates a crash; for tests/tools)."""
        for t in self._tasks:
            t.cancel()
        self._tasks.clear()
        self.flusher.cancel_tasks()
        self._close()

    # ------------------------------------------------------------------------------------------ put
    def set_bitmap_calculator(self, fn: BitmapCalculator | None) -> None:
        """Compute each dispatched message's filter bitmap with ``fn`` (None stops it); see ``BitmapCalculator``.

        Set it before ``load()``: recovery re-dispatches through it when it rebuilds consume queues.
        Ignored while ``enable_consume_queue_ext`` is off.
        """
        self.dispatcher.set_bitmap_calculator(fn if self.config.enable_consume_queue_ext else None)

    def add_dispatch_listener(self, cb: DispatchListener) -> None:
        """Call ``cb(topic, queue_id, queue_offset, tags_code, properties)`` after each consume-queue append."""
        self.dispatcher.add_listener(cb)

    async def prepare_queues(self, topic: str, queue_ids: range) -> int:
        """Make a new topic's queues ready before their first message: each one's first consume-queue file is
        created and allocated (a spare), so that the first put does not pay for making it (a folder, a file, its
        first blocks). Returns how many files it prepared; best effort (a full disk: none, and the puts decide;
        near the open-files budget: none, they would be closed before their first message).
        """
        if not self._available or self._stopping:
            return 0
        if MappedFile.open_files + len(queue_ids) > self.queues.budget * LOW_WATER:
            return 0
        cqs = [self.queues.get_or_create(topic, q) for q in queue_ids]
        try:
            spares = self.writer.space.spare_first_files(cqs)
        except (DiskFullError, OSError) as e:
            log.info("queues of %s not prepared ahead: %s", topic, e)
            return 0
        return len(spares)

    async def put_message(self, msg: MessageExt) -> PutResult:
        """Store one message; under SYNC_FLUSH waits for the fsync covering it."""
        return await self.put_messages([msg])

    async def put_messages(self, msgs: list[MessageExt]) -> PutResult:
        """Store a batch (same topic and queue; queue offsets contiguous); one flush wait for all."""
        return await self.flushed(self.put_now(msgs))

    @property
    def waits_for_flush(self) -> bool:
        """True under SYNC_FLUSH: a put is answered after ``flushed``."""
        return self.flusher.sync_flush

    async def flushed(self, result: PutResult) -> PutResult:
        """``result`` once the records of a put are on disk under SYNC_FLUSH (FLUSH_DISK_TIMEOUT when the flush
        did not come in time); at once otherwise."""
        if result.status is not PutStatus.PUT_OK or not self.flusher.sync_flush:
            return result
        last = result.msgs[-1]
        if await self.flusher.wait_flushed(last.commit_log_offset + last.store_size):
            return result
        return replace(result, status=PutStatus.FLUSH_DISK_TIMEOUT)

    def put_now(self, msgs: list[MessageExt]) -> PutResult:
        """Store a batch as ``put_messages`` does, without waiting for a flush: under SYNC_FLUSH a PUT_OK result
        is acknowledged only after ``flushed``."""
        status = PutStatus.SERVICE_NOT_AVAILABLE if not self._available or self._stopping else self.writer.check(msgs)
        if status is not None:
            return PutResult(status, msgs)
        try:
            self.writer.append(msgs)
        except DiskFullError as e:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, msgs, disk_full=e.info)
        except PropertiesSizeExceeded:
            return PutResult(PutStatus.PROPERTIES_SIZE_EXCEEDED, msgs)
        except (ValueError, struct.error) as e:  # bad topic/host/separators, or an int out of its field's range
            log.debug("put rejected: %s", e)
            return PutResult(PutStatus.MESSAGE_ILLEGAL, msgs)
        host, port = self.store_host
        return PutResult(PutStatus.PUT_OK, msgs, offset_msg_ids(host, port, msgs))

    async def put_in_order(self, batches: list[list[MessageExt]]) -> list[PutResult]:
        """Store batches one right after the other, no other put between them (their records adjacent in the
        log, unless a segment ends between two), with one flush wait at the end. Stops at the first batch
        refused: the results of the batches tried, the last one the refusal."""
        results: list[PutResult] = []
        end = -1
        for msgs in batches:
            status = PutStatus.SERVICE_NOT_AVAILABLE if not self._available or self._stopping else None
            status = status or self.writer.check(msgs)
            if status is not None:
                results.append(PutResult(status, msgs))
                break
            try:
                end = self.writer.append(msgs)
            except DiskFullError as e:
                results.append(PutResult(PutStatus.SERVICE_NOT_AVAILABLE, msgs, disk_full=e.info))
                break
            except (PropertiesSizeExceeded, ValueError, struct.error) as e:
                log.debug("put rejected: %s", e)
                results.append(PutResult(PutStatus.MESSAGE_ILLEGAL, msgs))
                break
            host, port = self.store_host
            results.append(PutResult(PutStatus.PUT_OK, msgs, offset_msg_ids(host, port, msgs)))
        if end >= 0 and self.flusher.sync_flush and not await self.flusher.wait_flushed(end):
            results = [replace(r, status=PutStatus.FLUSH_DISK_TIMEOUT) if r.status == PutStatus.PUT_OK else r
                       for r in results]  # fmt: skip
        return results

    def record_from(self, phy: int) -> bytes | None:
        """The record at ``phy``, or the first of the next segment when ``phy`` is in a segment's blank tail."""
        return self.commitlog.record_from(phy)

    # ------------------------------------------------------------------------------------------ replication
    def read_commitlog(self, offset: int, max_bytes: int) -> bytes:
        """Commit-log bytes from ``offset``, within one segment (b"" when none are there yet): what a master streams."""
        return self.commitlog.read_raw(offset, max_bytes)

    def append_commitlog(self, offset: int, data: bytes | bytearray | memoryview, *, defer: bool = False) -> int:
        """A slave's copy: write ``data`` at ``offset`` (the current end) and dispatch every record that became whole
        (with ``defer``: checked now, dispatched by ``dispatch_copied()`` or the next append).

        Returns the new commit-log end; bytes that do not continue the log as records raise ``StoreError``.
        """
        if not self._available or self._stopping:
            raise StoreError("the store is not open")
        return self.writer.append_copy(offset, data, defer=defer)

    def dispatch_copied(self) -> None:
        """Dispatch what a deferred ``append_commitlog`` wrote (consume queues, index, bitmaps, listeners)."""
        self.writer.dispatch_copied()

    async def wait_flushed(self, offset: int) -> bool:
        """Wait until the commit log is on disk up to ``offset`` (False on ``sync_flush_timeout_ms``)."""
        return await self.flusher.wait_flushed(offset)

    def flush(self) -> None:
        """Force everything (commit log, queues, index, checkpoint) to disk, blocking the caller."""
        self.flusher.flush_now()

    # ------------------------------------------------------------------------------------------ reads (lookup.py)
    def get_message(
        self, topic: str, queue_id: int, offset: int, max_msgs: int, flt: MessageFilter | None, *, joined: bool = False
    ) -> GetResult:
        """Up to ``max_msgs`` matching records from ``offset`` (``Reader.get_message``; ``joined``: as one body)."""
        return self.reader.get_message(topic, queue_id, offset, max_msgs, flt, joined=joined)

    def get_max_offset(self, topic: str, queue_id: int) -> int:
        """Next queue offset to be written (0 for an unknown queue)."""
        return self.reader.max_offset(topic, queue_id)

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        """Oldest queue offset still readable (0 for an unknown queue)."""
        return self.reader.min_offset(topic, queue_id)

    def get_offset_by_time(self, topic: str, queue_id: int, timestamp: int, upper: bool = False) -> int:
        """The first queue offset stored at or after ``timestamp`` (``upper``: the last at or before it)."""
        return self.reader.offset_by_time(topic, queue_id, timestamp, upper)

    def get_earliest_store_time(self, topic: str, queue_id: int) -> int:
        """Store time of the message at the queue's min offset (-1 if none)."""
        return self.reader.earliest_store_time(topic, queue_id)

    def get_store_time(self, topic: str, queue_id: int, offset: int) -> int | None:
        """Store time of the message at ``offset`` (None if not stored)."""
        return self.reader.store_time(topic, queue_id, offset)

    def look_message_by_offset(self, phy_offset: int) -> bytes | None:
        """The raw stored record at a commit-log offset, or None."""
        return self.commitlog.record_at(phy_offset)

    def query_message(
        self, topic: str, key: str, max_num: int, begin_ts: int, end_ts: int, max_bytes: int | None = None
    ) -> list[bytes]:
        """Records of ``topic`` whose KEYS contain ``key`` or whose UNIQ_KEY is ``key`` (newest first; at most
        ``max_bytes`` of them after the first)."""
        return self.reader.query_message(topic, key, max_num, begin_ts, end_ts, max_bytes)

    def read_cq_entries(self, topic: str, queue_id: int, offset: int, n: int) -> list[tuple[int, int, int]]:
        """Up to ``n`` entries ``(phy, size, real tags_code)`` from ``offset`` on; blanks as ``(-1, 0, 0)``."""
        return self.reader.cq_entries(topic, queue_id, offset, n)

    def get_cq_ext_unit(self, topic: str, queue_id: int, offset: int) -> CqExtUnit | None:
        """The extension unit of the entry at ``offset`` (None: no such entry, no unit, or unit gone)."""
        return self.reader.ext_unit(topic, queue_id, offset)

    # ------------------------------------------------------------------------------------------ topics
    def delete_topics(self, topics: set[str]) -> None:
        """Forget the topics' queues and delete their consume-queue (and extension) folders."""
        for topic in topics:
            for cq in self.queues.remove_topic(topic):
                self.flusher.forget(cq)
                self.flusher.retire(cq.detach_files())  # a sync round may still use the descriptors
                cq.destroy()

    def topic_queues(self) -> dict[str, list[int]]:
        """Every known topic and its queue ids."""
        return self.queues.topic_queues()

    @property
    def max_phy_offset(self) -> int:
        """Commit-log offset where the next record goes."""
        return self.commitlog.max_offset

    @property
    def min_phy_offset(self) -> int:
        """Oldest commit-log offset still stored."""
        return self.commitlog.min_offset

    # ------------------------------------------------------------------------------------------ retention
    async def clean_expired_files(
        self, *, now: float | None = None, disk_ratio: float | None = None, force: bool = False
    ) -> int:
        """One retention run (see retention.py); returns the number of commit-log segments deleted.

        ``now`` / ``disk_ratio`` override the clock and the measured disk usage; ``force`` deletes
        expired segments whatever the hour (admin TRIGGER_DELETE_FILES).
        """
        return await self.retention.run_once(now=now, disk_ratio=disk_ratio, force=force)
