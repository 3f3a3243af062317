"""The message store facade (RocketMQ ``DefaultMessageStore``): put, pull, lookups, flush, retention.

On disk, under ``StoreConfig.root`` (a broker's store folder)::

    commitlog/<20-digit offset>                 records (commitlog.py)
    consumequeue/<topic>/<queueId>/<20-digit>   20-byte entries (consume_queue.py)
    consumequeue_ext/<topic>/<queueId>/<20-digit>  extension units: tag code, store time, filter
                                                bitmap (consume_queue_ext.py)
    index/<20-digit>                            key index hash files (index_file.py)
    checkpoint                                  flushed offsets/times (checkpoint.py)
    abort                                       exists while the store is open; present at load = unclean stop
    lock                                        flock'ed while open (one process per folder)
    config/                                     broker JSON files (jsonfile.py)

Threading model: every method runs on the event-loop thread; the mappings are written only there.
``fdatasync`` / ``fsync`` (and unlinking deleted segments) run in a dedicated one-thread executor,
serialized with retention by ``_flush_lock`` so a descriptor is never closed under a running sync.
Under ``SYNC_FLUSH`` ``put_message`` waits for a group commit: one fsync serves every waiter whose
record it covers. Under ``ASYNC_FLUSH`` a task flushes every ``flush_interval_ms``; consume queues
(with their extensions), the index and the checkpoint are flushed on that cadence in both modes.

Consume-queue extension (filtering.md 4.3-4.5): with ``enable_consume_queue_ext`` and a bitmap
calculator set (``set_bitmap_calculator``, by the broker, *before* ``load()`` so that entries rebuilt by
recovery get bitmaps too), each dispatched message of a normal topic for which the calculator returns a
bitmap gets an extension unit and its CQ slot holds the unit's address. Unlike RocketMQ, which writes a
unit for every entry once the extension is on, sievemq writes none when there is no bitmap (no SQL92
group for the topic): the slot then keeps the plain tag code. Both read the same for filters -- "no
unit" and "unit without bitmap" both pass the bitmap test -- and the plain slot costs no extra write
or read. ``SCHEDULE_TOPIC_XXXX`` never gets units (its slot holds delivery times).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import heapq
import itertools
import logging
import os
import shutil
import struct
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from sievemq.errors import SieveError
from sievemq.filter.tags import tag_code
from sievemq.protocol.message import MessageExt, PropertiesSizeExceeded, RecordSummary, encode_record
from sievemq.protocol.msgid import make_offset_msg_id
from sievemq.store import cleanup
from sievemq.store.checkpoint import Checkpoint, CheckpointFile
from sievemq.store.commitlog import END_FILE_MIN_BLANK_LENGTH, CommitLog
from sievemq.store.consume_queue import BLANK_SIZE, CQ_DTYPE, CQ_ENTRY, ConsumeQueue
from sievemq.store.consume_queue_ext import EXT_ADDRESS_MAX, MAX_BITMAP_LENGTH, BitmapProbe, CqExtUnit
from sievemq.store.delay_levels import DEFAULT_DELAY_LEVELS, SCHEDULE_TOPIC, delay_ms_for_level, parse_levels
from sievemq.store.index_file import IndexService
from sievemq.store.mapped_file import MappedFile, fsync_dir, prefault_supported, sync_fd
from sievemq.store.recovery import RecoveryReport, dispatchable, recover

__all__ = [
    "BitmapCalculator",
    "BitmapProbeFilter",
    "DispatchListener",
    "GetResult",
    "GetStatus",
    "MessageFilter",
    "MessageStore",
    "PutResult",
    "PutStatus",
    "StoreConfig",
    "StoreError",
]

log = logging.getLogger("sievemq.store")

DispatchListener = Callable[[str, int, int, int, dict[str, str]], None]
"""``(topic, queue_id, queue_offset, tags_code, properties)`` called after each consume-queue append.

``tags_code`` is always the real tag code (never an extension address)."""

BitmapCalculator = Callable[[str, dict[str, str], str | None], bytes | None]
"""``(topic, properties, tags) -> bitmap`` computed at dispatch (before the CQ append) for the extension
unit; None when the topic has no SQL92 group (no unit is written). The bitmap must be
``StoreConfig.bitmap_length_bytes`` long (an all-zero bitmap is meaningful: no group matched)."""


class StoreError(SieveError):
    """The store folder cannot be used (locked by another process, unreadable)."""


@dataclass(frozen=True)
class StoreConfig:
    """Store settings (names follow RocketMQ ``MessageStoreConfig`` in snake case)."""

    root: Path
    commitlog_file_size: int = 1 << 30
    cq_entries_per_file: int = 300_000
    flush_disk_type: Literal["ASYNC_FLUSH", "SYNC_FLUSH"] = "ASYNC_FLUSH"
    flush_interval_ms: int = 500
    sync_flush_timeout_ms: int = 5000
    file_reserved_hours: float = 72
    delete_when_hour: int = 4
    """Cron hour for time-based deletion (-1 = any time)."""
    disk_max_used_space_ratio: float = 0.75
    max_message_size: int = 4 * 1024 * 1024
    max_transfer_bytes_per_pull: int = 256 * 1024
    max_transfer_msgs_per_pull: int = 32
    max_cq_scan_entries: int = 800
    """Consume-queue entries scanned per pull at most (at least ``max_msgs``)."""
    # Additions beyond contracts.md (all defaulted).
    message_delay_levels: str = DEFAULT_DELAY_LEVELS
    index_hash_slots: int = 5_000_000
    index_max_entries: int = 20_000_000
    cleanup_interval_ms: int = 10_000
    disk_force_clean_ratio: float = 0.85
    """Above this disk usage the oldest segments are deleted even if not expired."""
    delete_files_per_run: int = 10
    enable_consume_queue_ext: bool = True
    """Write consume-queue extension units (filter bitmaps); RocketMQ's default is false."""
    mapped_file_size_cq_ext: int = 48 * 1024 * 1024
    """Size of each ``consumequeue_ext`` file."""
    bitmap_length_bytes: int = 14
    """Length of the filter bitmaps (the broker's Bloom ``m / 8``; 112 bits by default)."""
    commitlog_prefault_bytes: int = 8 * 1024 * 1024
    """How far ahead of the commit log's write position a helper thread faults pages in (0: off; Linux only)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))
        if self.flush_disk_type not in ("ASYNC_FLUSH", "SYNC_FLUSH"):
            raise ValueError(f"flush_disk_type must be ASYNC_FLUSH or SYNC_FLUSH, not {self.flush_disk_type!r}")
        if self.commitlog_file_size < 4096 or self.cq_entries_per_file < 1:
            raise ValueError("commitlog_file_size must be >= 4096 and cq_entries_per_file >= 1")
        if not 0 <= self.bitmap_length_bytes <= MAX_BITMAP_LENGTH:
            raise ValueError(f"bitmap_length_bytes must be within 0..{MAX_BITMAP_LENGTH}")
        if self.mapped_file_size_cq_ext < 2 * (20 + self.bitmap_length_bytes) + 4:
            raise ValueError("mapped_file_size_cq_ext is too small for two units")


class PutStatus(Enum):
    """Outcome of a put (Java ``PutMessageStatus``)."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


@dataclass
class PutResult:
    """Status plus the stored messages (offsets, store time, body CRC and size filled in)."""

    status: PutStatus
    msgs: list[MessageExt]
    message_ids: list[str] = field(default_factory=list)
    """offsetMsgIds of the stored records (empty unless stored)."""

    @property
    def ok(self) -> bool:
        """True when the messages are stored (PUT_OK, or FLUSH_DISK_TIMEOUT: stored but not yet synced)."""
        return self.status in (PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT)


class GetStatus(Enum):
    """Outcome of ``get_message`` (Java ``GetMessageStatus``); see remoting.md 5.2."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass
class GetResult:
    """Records found (raw stored bytes) and where the next pull should start."""

    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    records: list[bytes] = field(default_factory=list)
    message_count: int = 0
    buffer_total_size: int = 0


class MessageFilter(Protocol):
    """Server-side filter applied by ``get_message`` (tag codes, SQL92, ...).

    A filter whose ``match_cq`` would always answer True may set ``ignores_cq = True``: the store then
    skips it (and the extension-unit reads it would need).

    Optionally a filter may also define ``bitmap_probe(self) -> BitmapProbe | None`` (see
    ``BitmapProbeFilter``): the store then tests the bitmaps of a whole scan window at once and does
    not call ``match_cq`` for entries whose unit the probe rejects. A filter that offers a probe
    promises that its ``match_cq`` returns False for every such unit.
    """

    def match_cq(self, tags_code: int, ext: CqExtUnit | None) -> bool:
        """Decide from the consume-queue entry alone; False skips without reading the commit log.

        ``tags_code`` is the real tag code; ``ext`` the entry's extension unit, None when it has none.
        An entry whose unit cannot be read any more is not offered here (it passes, as in Java).
        """
        ...

    def match_record(self, record: memoryview) -> bool:
        """Decide from the stored record (SQL on properties); tag filters return True."""
        ...


class BitmapProbeFilter(MessageFilter, Protocol):
    """A ``MessageFilter`` that declares its bitmap test (SQL92 filters with Bloom data)."""

    def bitmap_probe(self) -> BitmapProbe | None:
        """The probe to apply to extension units; None: test nothing up front."""
        ...


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _sync_job(fds: list[int], dirs: list[Path], cp_file: CheckpointFile | None, cp: Checkpoint | None) -> None:
    """Executor job: fdatasync data files, fsync directories, then write the checkpoint."""
    for fd in fds:
        sync_fd(fd)
    for d in dirs:
        fsync_dir(d)
    if cp_file is not None and cp is not None:
        cp_file.write(cp)


@dataclass(slots=True)
class _FlushPlan:
    """What one flush round syncs, captured on the loop thread."""

    cl_target: int
    cl_files: list[MappedFile]
    fds: list[int]
    dirs: list[Path]
    cqs: list[tuple[ConsumeQueue, int, list[MappedFile]]]
    exts: list[tuple[ConsumeQueue, int, list[MappedFile]]]
    index_files: list[MappedFile]
    checkpoint: Checkpoint | None


class MessageStore:
    """Commit log + consume queues + index in one folder; see the module docstring."""

    def __init__(self, config: StoreConfig, store_host: tuple[str, int]) -> None:
        self.config = config
        self.store_host = store_host
        root = config.root
        self.root = root
        self.commitlog = CommitLog(root / "commitlog", config.commitlog_file_size)
        self._cq_base = root / "consumequeue"
        self._ext_base = root / "consumequeue_ext"
        self._bitmap_calc: BitmapCalculator | None = None
        self._bad_bitmap_logged = False
        self._cqs: dict[str, dict[int, ConsumeQueue]] = {}
        self.index = IndexService(root / "index", config.index_hash_slots, config.index_max_entries)
        self._levels = parse_levels(config.message_delay_levels)
        self._listeners: list[DispatchListener] = []
        self._tag_codes: dict[str, int] = {}
        self._last_store_ts = 0
        self._sync_flush = config.flush_disk_type == "SYNC_FLUSH"
        self._sync_timeout = config.sync_flush_timeout_ms / 1000
        self._checkpoint: CheckpointFile | None = None
        self._lock_fd = -1
        self._available = False
        self._stopping = False
        self._dirty_cqs: set[ConsumeQueue] = set()
        self._cl_flushed = 0
        self._flush_lock: asyncio.Lock | None = None
        self._flush_event: asyncio.Event | None = None
        self._waiters: list[tuple[int, int, asyncio.Future[bool]]] = []
        self._waiter_seq = itertools.count()
        self._tasks: list[asyncio.Task[None]] = []
        self._group_commit_task: asyncio.Task[None] | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._pf_executor: ThreadPoolExecutor | None = None
        self._pf_job: Future[bool] | None = None
        self._pf_file: MappedFile | None = None
        self._pf_front = 0
        self._flushing = 0
        self._pending_close: list[MappedFile] = []
        self.recovery_report: RecoveryReport | None = None

    # ============================================================================================ lifecycle
    def load(self) -> None:
        """Open the folder, recover (CRC-checked after an unclean stop), create ``abort``."""
        root = self.root
        self._stopping = False
        cq_folder_missing = not self._cq_base.is_dir()
        index_folder_missing = not (root / "index").is_dir()
        for d in (root, root / "commitlog", self._cq_base, self._ext_base, root / "index", root / "config"):
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
        self._checkpoint = CheckpointFile(root / "checkpoint")
        cp = self._checkpoint.read()
        self.commitlog.load()
        self._load_consume_queues()
        self.index.load()
        self.recovery_report = recover(
            self.commitlog,
            self._all_cqs(),
            self.index,
            cp,
            abnormal=abnormal,
            cq_folder_missing=cq_folder_missing,
            index_folder_missing=index_folder_missing,
            tags_fn=self._tags_code,
            redo=self._redo,
            save_checkpoint=self._checkpoint.write,
        )
        phy_min = self.commitlog.min_offset
        for cq in self._all_cqs():
            cq.correct_min_offset(phy_min)
        # Truncations must reach the disk too, or stale entries could reappear after a power loss.
        self._dirty_cqs.update(self.recovery_report.touched_queues)
        if self.recovery_report.abnormal:
            for f in self.index.files:
                self.index.dirty[f.mf.file_from_offset] = f.mf
        self._last_store_ts = max(self._last_store_ts, self._last_store_timestamp())
        # Whatever recovery kept or rebuilt goes to disk before new writes are acknowledged.
        self._available = True
        self.flush()

    def _load_consume_queues(self) -> None:
        """Map every queue found on disk."""
        base = self._cq_base
        for topic in sorted(os.listdir(base)) if base.is_dir() else []:
            tdir = base / topic
            if not tdir.is_dir():
                continue
            for q in sorted(os.listdir(tdir)):
                if not q.isdigit():
                    continue
                cq = self._new_cq(topic, int(q))
                cq.load()
                if not cq.mfq.files:
                    continue
                if cq.ext is not None:
                    cq.ext.load()
                self._cqs.setdefault(topic, {})[int(q)] = cq

    def _last_store_timestamp(self) -> int:
        end = self.commitlog.max_offset
        best = 0
        for cq in self._all_cqs():
            if cq.max_offset > cq.min_offset:
                e = cq.entry(cq.max_offset - 1)
                if e is not None and e[1] != BLANK_SIZE and e[0] < end:
                    best = max(best, self.commitlog.store_timestamp_at(e[0]) or 0)
        return best

    async def start(self) -> None:
        """Start the flush (and group-commit) and retention background tasks."""
        if not self._available:
            raise StoreError("MessageStore.start() before load()")
        self._ensure_async_state()
        self._tasks.append(asyncio.create_task(self._periodic_flush_loop(), name="sievemq-store-flush"))
        self._tasks.append(asyncio.create_task(self._cleanup_loop(), name="sievemq-store-cleanup"))
        if self.config.commitlog_prefault_bytes > 0 and prefault_supported() and self._pf_executor is None:
            self._pf_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sievemq-store-prefault")
        if self._sync_flush:
            self._ensure_group_commit()

    async def shutdown(self) -> None:
        """Stop background tasks, flush everything, remove ``abort`` (clean stop), close files."""
        if not self._available:
            return
        self._stopping = True
        tasks = list(self._tasks)
        if self._group_commit_task is not None:
            tasks.append(self._group_commit_task)
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks.clear()
        self._group_commit_task = None
        await self._flush_all()
        self._fail_waiters()
        self._available = False
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.root / "abort")
        fsync_dir(self.root)
        self._close()

    def _close(self) -> None:
        self._available = False
        if self._pf_executor is not None:  # no prefault job may touch a mapping being closed
            self._pf_executor.shutdown(wait=True)
            self._pf_executor = None
        self._pf_job = self._pf_file = None
        self.commitlog.close()
        for cq in self._all_cqs():
            cq.close()
        self._cqs.clear()
        self.index.close()
        for mf in self._pending_close:
            mf.close()
        self._pending_close.clear()
        if self._checkpoint is not None:
            self._checkpoint.close()
            self._checkpoint = None
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = -1

    def abandon(self) -> None:
        """Close every file without flushing or removing ``abort`` (simulates a crash; for tests/tools)."""
        for t in self._tasks:
            t.cancel()
        if self._group_commit_task is not None:
            self._group_commit_task.cancel()
        self._tasks.clear()
        self._group_commit_task = None
        self._fail_waiters()
        self._close()

    # ============================================================================================ put
    def set_bitmap_calculator(self, fn: BitmapCalculator | None) -> None:
        """Compute each dispatched message's filter bitmap with ``fn`` (None stops it); see ``BitmapCalculator``.

        Set it before ``load()``: recovery re-dispatches through it when it rebuilds consume queues.
        Ignored while ``enable_consume_queue_ext`` is off.
        """
        self._bitmap_calc = fn if self.config.enable_consume_queue_ext else None

    def add_dispatch_listener(self, cb: DispatchListener) -> None:
        """Call ``cb(topic, queue_id, queue_offset, tags_code, properties)`` after each consume-queue append."""
        self._listeners.append(cb)

    async def put_message(self, msg: MessageExt) -> PutResult:
        """Store one message; under SYNC_FLUSH waits for the fsync covering it."""
        return await self.put_messages([msg])

    async def put_messages(self, msgs: list[MessageExt]) -> PutResult:
        """Store a batch (same topic and queue; queue offsets contiguous); one flush wait for all."""
        status = self._check(msgs)
        if status is not None:
            return PutResult(status, msgs)
        try:
            end = self._append(msgs)
        except PropertiesSizeExceeded:
            return PutResult(PutStatus.PROPERTIES_SIZE_EXCEEDED, msgs)
        except (ValueError, struct.error) as e:  # bad topic/host/separators, or an int out of its field's range
            log.debug("put rejected: %s", e)
            return PutResult(PutStatus.MESSAGE_ILLEGAL, msgs)
        host, port = self.store_host
        ids = [make_offset_msg_id(host, port, m.commit_log_offset) for m in msgs]
        status = PutStatus.PUT_OK
        if self._sync_flush and not await self._wait_flushed(end):
            status = PutStatus.FLUSH_DISK_TIMEOUT
        return PutResult(status, msgs, ids)

    def _check(self, msgs: list[MessageExt]) -> PutStatus | None:
        if not self._available or self._stopping:
            return PutStatus.SERVICE_NOT_AVAILABLE
        if not msgs:
            return PutStatus.MESSAGE_ILLEGAL
        first = msgs[0]
        topic = first.topic
        if not topic or "/" in topic or "\x00" in topic or topic in (".", "..") or len(topic.encode()) > 127:
            return PutStatus.MESSAGE_ILLEGAL
        limit = self.config.max_message_size
        for m in msgs:
            if m.topic != topic or m.queue_id != first.queue_id or m.queue_id < 0 or len(m.body) > limit:
                return PutStatus.MESSAGE_ILLEGAL
        return None

    def _append(self, msgs: list[MessageExt]) -> int:
        """Encode, append and dispatch (no await inside: atomic w.r.t. other coroutines)."""
        cl = self.commitlog
        first = msgs[0]
        topic, qid = first.topic, first.queue_id
        cq = self._cqs.get(topic, {}).get(qid)
        qoff = cq.max_offset if cq is not None else 0
        now = _now_ms()
        if now < self._last_store_ts:
            now = self._last_store_ts  # keep store time monotonic for time searches
        self._last_store_ts = now
        guess = cl.max_offset
        seg_limit = self.config.commitlog_file_size - END_FILE_MIN_BLANK_LENGTH
        records: list[bytes] = []
        for m in msgs:
            if dispatchable(m.sys_flag):
                m.queue_offset = qoff
                qoff += 1
            else:
                m.queue_offset = 0
            m.store_timestamp = now
            m.store_host = self.store_host
            m.commit_log_offset = guess
            rec = encode_record(m)
            if len(rec) > seg_limit:
                raise ValueError(f"record of {len(rec)} bytes does not fit a commit-log segment")
            records.append(rec)
            guess += len(rec)
        for m, rec in zip(msgs, records, strict=True):
            phy = cl.reserve(len(rec))
            if phy != m.commit_log_offset:
                m.commit_log_offset = phy
                cl.write(phy, cl.patch_phy_offset(rec, phy))
            else:
                cl.write(phy, rec)
            self._dispatch(m, phy, len(rec))
        if self._pf_executor is not None:
            self._prefault_ahead()
        return cl.max_offset

    def _prefault_ahead(self) -> None:
        """Keep ``commitlog_prefault_bytes`` ahead of the write position faulted in, in the helper thread.

        One job at a time, in chunks of half the distance; a writer that outruns it simply faults pages
        itself. Bytes never change (see ``MappedFile.prefault``).
        """
        mf = self.commitlog.mfq.last
        if mf is None or (self._pf_job is not None and not self._pf_job.done()):
            return
        if mf is not self._pf_file:
            self._pf_file, self._pf_front = mf, mf.wrote_position
        ahead = self.config.commitlog_prefault_bytes
        if self._pf_front >= mf.file_size or mf.wrote_position + ahead <= self._pf_front:
            return
        start = max(self._pf_front, mf.wrote_position)
        n = min(max(ahead // 2, 1 << 16), mf.file_size - start)
        assert self._pf_executor is not None
        self._pf_job = self._pf_executor.submit(mf.prefault, start, n)
        self._pf_front = start + n

    def _prefault_wait(self, files: Iterable[MappedFile]) -> None:
        """Before closing ``files``: wait for a prefault job that may be touching one of them."""
        job, target = self._pf_job, self._pf_file
        if job is not None and target is not None and any(f is target for f in files):
            with contextlib.suppress(Exception):
                job.result(timeout=5)
            self._pf_job = self._pf_file = None

    def _tags_code(self, topic: str, queue_id: int, tags: str | None, store_ts: int) -> int:
        if topic == SCHEDULE_TOPIC:
            return store_ts + delay_ms_for_level(self._levels, queue_id + 1)
        if not tags:
            return 0
        code = self._tag_codes.get(tags)
        if code is None:  # the Java hash is a Python loop over the characters: remember it per tag
            if len(self._tag_codes) >= 4096:
                self._tag_codes.clear()
            code = self._tag_codes[tags] = tag_code(tags)
        return code

    def _get_or_create_cq(self, topic: str, queue_id: int) -> ConsumeQueue:
        qs = self._cqs.get(topic)
        if qs is None:
            qs = self._cqs[topic] = {}
        cq = qs.get(queue_id)
        if cq is None:
            cq = qs[queue_id] = self._new_cq(topic, queue_id)
            if cq.ext is not None and cq.ext.directory.exists():
                shutil.rmtree(cq.ext.directory, ignore_errors=True)  # left over from a queue gone before
        return cq

    def _new_cq(self, topic: str, queue_id: int) -> ConsumeQueue:
        cfg = self.config
        return ConsumeQueue(self._cq_base, topic, queue_id, cfg.cq_entries_per_file, ext_base=self._ext_base,
                            ext_file_size=cfg.mapped_file_size_cq_ext)  # fmt: skip

    def _cq_append(self, cq: ConsumeQueue, qoff: int, phy: int, size: int, tags_code: int, store_ts: int,
                   props: dict[str, str], tags: str | None) -> None:  # fmt: skip
        """Append a CQ entry, through an extension unit when the calculator gives a bitmap."""
        calc = self._bitmap_calc
        topic = cq.topic
        bm = self._bitmap(calc, topic, props, tags) if calc is not None and topic != SCHEDULE_TOPIC else None
        if bm is None:
            cq.append(qoff, phy, size, tags_code)
        else:
            cq.append_ext(qoff, phy, size, tags_code, store_ts, bm)

    def _bitmap(self, calc: BitmapCalculator, topic: str, props: dict[str, str], tags: str | None) -> bytes | None:
        """Run the calculator; a failure or a bitmap of the wrong length means "no bitmap"."""
        try:
            bm = calc(topic, props, tags)
        except Exception:
            log.exception("bitmap calculator failed for a message of %s", topic)
            return None
        if bm is not None and len(bm) != self.config.bitmap_length_bytes:
            if not self._bad_bitmap_logged:
                self._bad_bitmap_logged = True
                log.error("bitmap calculator returned %d bytes, expected bitmap_length_bytes=%d: not stored",
                          len(bm), self.config.bitmap_length_bytes)  # fmt: skip
            return None
        return bm

    def _dispatch(self, m: MessageExt, phy: int, size: int) -> None:
        props = m.properties
        topic = m.topic
        ts = m.store_timestamp
        if dispatchable(m.sys_flag):
            tag_s = props.get("TAGS")
            tags = self._tags_code(topic, m.queue_id, tag_s, ts)
            cq = self._get_or_create_cq(topic, m.queue_id)
            self._cq_append(cq, m.queue_offset, phy, size, tags, ts, props, tag_s)
            self._dirty_cqs.add(cq)
            for cb in self._listeners:
                try:
                    cb(topic, m.queue_id, m.queue_offset, tags, props)
                except Exception:
                    log.exception("dispatch listener failed")
        keys = props.get("KEYS")
        if keys:
            for k in keys.split(" "):
                if k:
                    self.index.put(f"{topic}#{k}", phy, ts)
        uniq = props.get("UNIQ_KEY")
        if uniq:
            self.index.put(f"{topic}#{uniq}", phy, ts)

    def _redo(self, s: RecordSummary, to_cq: bool, to_index: bool) -> None:
        """Recovery: re-dispatch one record read back from the commit log."""
        phy = s.commit_log_offset
        if to_cq:
            tags = self._tags_code(s.topic, s.queue_id, s.tags, s.store_timestamp)
            cq = self._get_or_create_cq(s.topic, s.queue_id)
            if not cq.mfq.files or s.queue_offset >= cq.max_offset:  # else ``append`` would refuse it
                self._cq_append(cq, s.queue_offset, phy, s.total_size, tags, s.store_timestamp, s.properties, s.tags)
                self._dirty_cqs.add(cq)
        if to_index:
            for k in s.keys:
                self.index.put(f"{s.topic}#{k}", phy, s.store_timestamp)
            if s.uniq_key:
                self.index.put(f"{s.topic}#{s.uniq_key}", phy, s.store_timestamp)

    # ============================================================================================ flush
    def _ensure_async_state(self) -> None:
        if self._flush_lock is None:
            self._flush_lock = asyncio.Lock()
            self._flush_event = asyncio.Event()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sievemq-store-flush")

    def _ensure_group_commit(self) -> None:
        self._ensure_async_state()
        if self._group_commit_task is None or self._group_commit_task.done():
            self._group_commit_task = asyncio.create_task(self._group_commit_loop(), name="sievemq-group-commit")

    async def _wait_flushed(self, offset: int) -> bool:
        """Wait until the commit log is fsynced up to ``offset``; False on timeout."""
        if self._cl_flushed >= offset:
            return True
        self._ensure_group_commit()
        assert self._flush_event is not None
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (offset, next(self._waiter_seq), fut))
        self._flush_event.set()
        try:
            return await asyncio.wait_for(asyncio.shield(fut), self._sync_timeout)
        except TimeoutError:
            return False

    def _resolve_waiters(self) -> None:
        w = self._waiters
        flushed = self._cl_flushed
        while w and w[0][0] <= flushed:
            fut = heapq.heappop(w)[2]
            if not fut.done():
                fut.set_result(True)

    def _fail_waiters(self) -> None:
        for _o, _s, fut in self._waiters:
            if not fut.done():
                fut.set_result(False)
        self._waiters.clear()

    async def _group_commit_loop(self) -> None:
        assert self._flush_event is not None
        ev = self._flush_event
        while True:
            await ev.wait()
            ev.clear()
            try:
                await self._flush_commitlog()
            except Exception:
                log.exception("commit log flush failed")
                await asyncio.sleep(0.1)
                ev.set()

    async def _periodic_flush_loop(self) -> None:
        interval = self.config.flush_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self._flush_all()
            except Exception:
                log.exception("periodic flush failed")

    def _plan(self, *, everything: bool) -> _FlushPlan:
        """Capture what to sync now (loop thread). ``everything`` adds queues, index and checkpoint."""
        cl = self.commitlog
        target = cl.max_offset
        cl_files = cl.mfq.dirty_files(target)
        fds = [f.fd for f in cl_files]
        dirs: list[Path] = []
        if any(f.new_file for f in cl_files):
            dirs.append(cl.mfq.directory)
        cqs: list[tuple[ConsumeQueue, int, list[MappedFile]]] = []
        exts: list[tuple[ConsumeQueue, int, list[MappedFile]]] = []
        index_files: list[MappedFile] = []
        cp: Checkpoint | None = None
        if everything:
            for cq in self._dirty_cqs:
                end = cq.mfq.max_offset
                files = cq.mfq.dirty_files(end)
                fds.extend(f.fd for f in files)
                if any(f.new_file for f in files):
                    dirs.extend((cq.directory, cq.directory.parent, self._cq_base))
                cqs.append((cq, end, files))
                ext = cq.ext
                if ext is not None and ext.mfq.files:
                    ext_end = ext.mfq.max_offset
                    ext_files = ext.mfq.dirty_files(ext_end)
                    fds.extend(f.fd for f in ext_files)
                    if any(f.new_file for f in ext_files):
                        dirs.extend((ext.directory, ext.directory.parent, self._ext_base))
                    exts.append((cq, ext_end, ext_files))
            self._dirty_cqs = set()
            index_files = list(self.index.dirty.values())
            self.index.dirty = {}
            fds.extend(f.fd for f in index_files)
            if any(f.new_file for f in index_files):
                dirs.append(self.index.directory)
            now = _now_ms()
            cp = Checkpoint(now, now, now, target, target, target)
        return _FlushPlan(target, cl_files, fds, list(dict.fromkeys(dirs)), cqs, exts, index_files, cp)

    def _finish(self, plan: _FlushPlan) -> None:
        """Record what a completed plan made durable (loop thread)."""
        cl = self.commitlog
        for f in plan.cl_files:
            f.new_file = False
        if plan.cl_target > cl.mfq.flushed_offset:
            cl.mfq.flushed_offset = plan.cl_target
        if plan.cl_target > self._cl_flushed:
            self._cl_flushed = plan.cl_target
        for cq, end, files in plan.cqs:
            for f in files:
                f.new_file = False
            cq.mfq.flushed_offset = max(cq.mfq.flushed_offset, end)
        for cq, end, files in plan.exts:
            for f in files:
                f.new_file = False
            if cq.ext is not None:
                cq.ext.mfq.flushed_offset = max(cq.ext.mfq.flushed_offset, end)
        for f in plan.index_files:
            f.new_file = False
        self._resolve_waiters()

    async def _run(self, plan: _FlushPlan) -> None:
        if not plan.fds and not plan.dirs and plan.checkpoint is None:
            self._finish(plan)
            return
        assert self._executor is not None
        cp_file = self._checkpoint if plan.checkpoint is not None else None
        self._flushing += 1
        try:
            await asyncio.get_running_loop().run_in_executor(
                self._executor, _sync_job, plan.fds, plan.dirs, cp_file, plan.checkpoint
            )
        except BaseException:
            # Nothing is marked durable; keep the queues/index dirty for the next round.
            for cq, _end, _files in plan.cqs:
                if self._find_cq(cq.topic, cq.queue_id) is cq:
                    self._dirty_cqs.add(cq)
            for f in plan.index_files:
                self.index.dirty.setdefault(f.file_from_offset, f)
            raise
        finally:
            self._flushing -= 1
            if not self._flushing and self._pending_close:
                for mf in self._pending_close:
                    mf.close()
                self._pending_close.clear()
        self._finish(plan)

    async def _flush_commitlog(self) -> None:
        self._ensure_async_state()
        assert self._flush_lock is not None
        async with self._flush_lock:
            if not self._available:
                return
            await self._run(self._plan(everything=False))

    async def _flush_all(self) -> None:
        self._ensure_async_state()
        assert self._flush_lock is not None
        async with self._flush_lock:
            if not self._available:
                return
            await self._run(self._plan(everything=True))

    def flush(self) -> None:
        """Force everything (commit log, queues, index, checkpoint) to disk, blocking the caller."""
        if not self._available:
            return
        plan = self._plan(everything=True)
        _sync_job(plan.fds, plan.dirs, self._checkpoint, plan.checkpoint)
        self._finish(plan)

    # ============================================================================================ get
    def _find_cq(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        qs = self._cqs.get(topic)
        return qs.get(queue_id) if qs is not None else None

    def get_message(
        self, topic: str, queue_id: int, offset: int, max_msgs: int, flt: MessageFilter | None
    ) -> GetResult:
        """Read up to ``max_msgs`` matching records from ``offset`` (status table: remoting.md 5.2).

        Scans at most ``max(max_cq_scan_entries, max_msgs)`` entries of one CQ file. Per entry: blank
        slots and entries whose record was deleted are skipped; ``flt.match_cq(tags_code, unit)`` (the
        real tag code and the extension unit when the slot holds an address) decides without touching
        the commit log; then ``flt.match_record`` on the stored record. With a filter that offers a
        ``bitmap_probe`` the window's extension bitmaps are tested first in one vectorised pass and
        rejected entries cost neither a ``match_cq`` call nor a commit-log read. The same messages are
        delivered either way; only when a batch fills up may ``next_begin_offset`` differ: the probe
        path has already stepped over the rejected entries that follow the last delivered one, where
        the per-entry path (like Java) stops at the next entry.
        """
        cq = self._find_cq(topic, queue_id)
        if cq is None:
            return GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        min_o = cq.min_offset
        max_o = cq.max_offset
        if max_o == 0:
            return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, min_o, max_o)
        if offset < min_o:
            return GetResult(GetStatus.OFFSET_TOO_SMALL, min_o, min_o, max_o)
        if offset == max_o:
            return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, min_o, max_o)
        if offset > max_o:
            return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, max_o, min_o, max_o)
        cfg = self.config
        block = cq.read_block(offset, max(cfg.max_cq_scan_entries, max_msgs))
        if not block:
            return GetResult(GetStatus.OFFSET_FOUND_NULL, cq.file_end_offset(offset), min_o, max_o)
        cl = self.commitlog
        cl_min = cl.min_offset
        limit_msgs = max(1, min(max_msgs, cfg.max_transfer_msgs_per_pull))
        limit_bytes = cfg.max_transfer_bytes_per_pull
        records: list[bytes] = []
        total = 0
        n = len(block) // CQ_ENTRY.size
        scanned = n
        removing = False
        # a filter that decides on the record alone (``ignores_cq``) spares the extension-unit reads
        match_cq = flt.match_cq if flt is not None and not getattr(flt, "ignores_cq", False) else None
        match_record = flt.match_record if flt is not None else None
        find = cl.mfq.find
        mm: Any = None
        lo = hi = 0
        ext = cq.ext
        ext_get = ext.get if ext is not None and ext.has_files else None
        entries: Iterable[tuple[int, tuple[int, int, int]]] = enumerate(CQ_ENTRY.iter_unpack(block))
        arr = None
        get_probe = getattr(flt, "bitmap_probe", None)
        probe = get_probe() if get_probe is not None and ext_get is not None else None
        if probe is not None:
            assert ext is not None
            arr = np.frombuffer(block, dtype=CQ_DTYPE)
            slots = arr["tags"]
            at = np.flatnonzero(slots <= EXT_ADDRESS_MAX)
            if len(at):
                rejected = at[ext.probe_reject(slots[at], probe)]
                if len(rejected) and (on_rejected := getattr(flt, "on_probe_rejected", None)) is not None:
                    on_rejected(len(rejected))
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
            if phy < cl_min:
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
        if records:
            status = GetStatus.FOUND
        else:
            if not removing and arr is not None:  # entries the probe skipped may point below the log
                head = arr[:scanned]
                removing = bool(((head["phy"] < cl_min) & (head["size"] != BLANK_SIZE)).any())
            status = GetStatus.MESSAGE_WAS_REMOVING if removing else GetStatus.NO_MATCHED_MESSAGE
        return GetResult(status, offset + scanned, min_o, max_o, records, len(records), total)

    def get_max_offset(self, topic: str, queue_id: int) -> int:
        """Next queue offset to be written (0 for an unknown queue)."""
        cq = self._find_cq(topic, queue_id)
        return cq.max_offset if cq is not None else 0

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        """Oldest queue offset still readable (0 for an unknown queue)."""
        cq = self._find_cq(topic, queue_id)
        return cq.min_offset if cq is not None else 0

    def _entry_store_time(self, cq: ConsumeQueue, offset: int) -> int | None:
        e = cq.entry(offset)
        if e is None or e[1] == BLANK_SIZE:
            return None
        return self.commitlog.store_timestamp_at(e[0])

    def get_offset_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """Queue offset of the message stored at ``timestamp``, else the nearer neighbour (remoting.md 5.4)."""
        cq = self._find_cq(topic, queue_id)
        if cq is None:
            return 0
        return cq.offset_by_time(timestamp, self.commitlog.store_timestamp_at)

    def get_earliest_store_time(self, topic: str, queue_id: int) -> int:
        """Store time of the message at the queue's min offset (-1 if none)."""
        cq = self._find_cq(topic, queue_id)
        if cq is None:
            return -1
        v = self._entry_store_time(cq, cq.min_offset)
        return -1 if v is None else v

    def get_store_time(self, topic: str, queue_id: int, offset: int) -> int | None:
        """Store time of the message at ``offset`` (None if not stored)."""
        cq = self._find_cq(topic, queue_id)
        if cq is None or not cq.min_offset <= offset < cq.max_offset:
            return None
        return self._entry_store_time(cq, offset)

    def look_message_by_offset(self, phy_offset: int) -> bytes | None:
        """The raw stored record at a commit-log offset, or None."""
        return self.commitlog.record_at(phy_offset)

    def query_message(self, topic: str, key: str, max_num: int, begin_ts: int, end_ts: int) -> list[bytes]:
        """Records of ``topic`` whose KEYS contain ``key`` or whose UNIQ_KEY is ``key`` (newest first)."""
        if max_num <= 0:
            return []
        phys = self.index.lookup(f"{topic}#{key}", max_num * 2 + 16, begin_ts, end_ts)
        out: list[bytes] = []
        seen: set[int] = set()
        cl = self.commitlog
        for phy in phys:
            if phy in seen:
                continue
            seen.add(phy)
            s = cl.summary_at(phy)
            if s is None or s.topic != topic or (key not in s.keys and s.uniq_key != key):
                continue
            rec = cl.read(phy, s.total_size)
            if rec is not None:
                out.append(rec)
                if len(out) >= max_num:
                    break
        return out

    def read_cq_entries(self, topic: str, queue_id: int, offset: int, n: int) -> list[tuple[int, int, int]]:
        """Up to ``n`` entries ``(phy, size, tags_code)`` from ``offset`` on (crossing files).

        ``tags_code`` is the real tag code (or, for ``SCHEDULE_TOPIC_XXXX``, the delivery time): an
        extension address is resolved through its unit (kept as is if the unit is gone). A blank slot
        (no message at that queue offset, see consume_queue.py) comes back as ``(-1, 0, 0)`` so that
        callers walking offsets one by one skip it.
        """
        cq = self._find_cq(topic, queue_id)
        out: list[tuple[int, int, int]] = []
        if cq is None or n <= 0 or offset < 0:
            return out
        while len(out) < n:
            block = cq.read_block(offset + len(out), n - len(out))
            if not block:
                break
            resolve = cq.resolve
            out.extend(
                (-1, 0, 0) if size == BLANK_SIZE else (phy, size, tags if tags > EXT_ADDRESS_MAX else resolve(tags))
                for phy, size, tags in CQ_ENTRY.iter_unpack(block)
            )
        return out

    def get_cq_ext_unit(self, topic: str, queue_id: int, offset: int) -> CqExtUnit | None:
        """The extension unit of the entry at ``offset`` (None: no such entry, no unit, or unit gone)."""
        cq = self._find_cq(topic, queue_id)
        return cq.ext_unit(offset) if cq is not None else None

    # ============================================================================================ topics
    def delete_topics(self, topics: set[str]) -> None:
        """Forget the topics' queues and delete their consume-queue (and extension) folders."""
        for topic in topics:
            qs = self._cqs.pop(topic, None)
            if qs:
                for cq in qs.values():
                    self._dirty_cqs.discard(cq)
                    if self._flushing:
                        self._pending_close.extend(cq.mfq.files)  # a sync job may still use the fds
                        cq.mfq.files = []
                        if cq.ext is not None:
                            self._pending_close.extend(cq.ext.mfq.files)
                            cq.ext.mfq.files = []
                    cq.destroy()
            for base in (self._cq_base, self._ext_base):
                with contextlib.suppress(FileNotFoundError):
                    shutil.rmtree(base / topic)

    def topic_queues(self) -> dict[str, list[int]]:
        """Every known topic and its queue ids."""
        return {t: sorted(qs) for t, qs in self._cqs.items()}

    def _all_cqs(self) -> list[ConsumeQueue]:
        return [cq for qs in self._cqs.values() for cq in qs.values()]

    @property
    def max_phy_offset(self) -> int:
        """Commit-log offset where the next record goes."""
        return self.commitlog.max_offset

    @property
    def min_phy_offset(self) -> int:
        """Oldest commit-log offset still stored."""
        return self.commitlog.min_offset

    # ============================================================================================ retention
    async def _cleanup_loop(self) -> None:
        interval = self.config.cleanup_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.clean_expired_files()
            except Exception:
                log.exception("retention run failed")

    async def clean_expired_files(
        self, *, now: float | None = None, disk_ratio: float | None = None, force: bool = False
    ) -> int:
        """One retention run (see cleanup.py); returns the number of commit-log segments deleted.

        ``now`` / ``disk_ratio`` override the clock and the measured disk usage; ``force`` deletes
        expired segments whatever the hour (admin TRIGGER_DELETE_FILES).
        """
        self._ensure_async_state()
        assert self._flush_lock is not None and self._executor is not None
        cfg = self.config
        now = time.time() if now is None else now
        ratio = cleanup.disk_used_ratio(self.root) if disk_ratio is None else disk_ratio
        d = cleanup.decide(
            now=now,
            delete_when_hour=cfg.delete_when_hour,
            disk_ratio=ratio,
            max_used_ratio=cfg.disk_max_used_space_ratio,
            force_ratio=cfg.disk_force_clean_ratio,
        )
        if not (d.delete or force):
            return 0
        async with self._flush_lock:
            if not self._available:
                return 0
            mfq = self.commitlog.mfq
            n = cleanup.expired_prefix(mfq.files, now=now, reserved_s=cfg.file_reserved_hours * 3600,
                                       force=d.force, max_files=cfg.delete_files_per_run)  # fmt: skip
            gone = mfq.delete_first(n)
            phy_min = self.commitlog.min_offset
            for cq in self._all_cqs():
                gone.extend(cq.delete_expired(phy_min))
            gone.extend(self.index.delete_expired(phy_min))
            paths = [mf.path for mf in gone]
            self._prefault_wait(gone)
            for mf in gone:
                mf.close()
            if paths:
                await asyncio.get_running_loop().run_in_executor(self._executor, cleanup.unlink_files, paths)
                log.info("retention: deleted %d commit-log segments (%d files in all), commit log now starts at %d",
                         n, len(paths), phy_min)  # fmt: skip
        return n
