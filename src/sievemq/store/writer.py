"""Writing the commit log: puts (encode, append, dispatch in one loop step) and a slave's copied bytes.

Both paths leave the store in the same state: records at their physical offsets, each whole record
dispatched once (``dispatch.py``). ``dispatched_to`` is the offset after the last whole record
dispatched; it trails the log's end only while a copied record is still partial, and puts are refused
then (a put would land after half a record).

Disk space: between encoding and the first write, ``PutSpace.prepare`` (``put_space.py``) makes sure every file
the put will write is there and allocated, or refuses the put (``DiskFullError``) with nothing written.
"""

from __future__ import annotations

import time

from sievemq.protocol.message import MessageExt, RecordSummary, encode_run
from sievemq.store.commitlog import END_FILE_MIN_BLANK_LENGTH, CommitLog
from sievemq.store.config import StoreConfig
from sievemq.store.dispatch import Dispatcher
from sievemq.store.prefault import Prefaulter
from sievemq.store.put_space import PutSpace
from sievemq.store.queues import QueueTable, is_safe_folder_name
from sievemq.store.results import PutStatus, StoreError

__all__ = ["Writer"]

_MAX_TOPIC_BYTES = 127
"""A record stores its topic's length in one signed byte (docs/protocol/message-format.md §1)."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class Writer:
    """Appends to the commit log and dispatches what it appended."""

    def __init__(self, config: StoreConfig, store_host: tuple[str, int], commitlog: CommitLog, queues: QueueTable,
                 dispatcher: Dispatcher, prefaulter: Prefaulter, space: PutSpace) -> None:  # fmt: skip
        self.store_host = store_host
        self.commitlog = commitlog
        self.queues = queues
        self.dispatcher = dispatcher
        self.prefaulter = prefaulter
        self.space = space
        self._max_body = config.max_message_size
        self._seg_limit = config.commitlog_file_size - END_FILE_MIN_BLANK_LENGTH
        self.last_store_ts = 0
        """Store time of the newest record: store times never go backwards (time searches rely on it)."""
        self.dispatched_to = 0
        self._copied: tuple[list[RecordSummary], int] | None = None
        """Records of a deferred ``append_copy`` still to dispatch, and the offset after them."""

    def reset(self, last_store_ts: int) -> None:
        """After recovery: the log ends with a whole record, stored at ``last_store_ts``."""
        self.last_store_ts = max(self.last_store_ts, last_store_ts)
        self.dispatched_to = self.commitlog.max_offset

    def check(self, msgs: list[MessageExt]) -> PutStatus | None:
        """Why a batch cannot be stored (None: it can): one topic and queue, names and sizes."""
        if self.dispatched_to != self.commitlog.max_offset:
            return PutStatus.SERVICE_NOT_AVAILABLE
        if not msgs:
            return PutStatus.MESSAGE_ILLEGAL
        first = msgs[0]
        topic = first.topic
        if not is_safe_folder_name(topic) or len(topic.encode()) > _MAX_TOPIC_BYTES:
            return PutStatus.MESSAGE_ILLEGAL
        limit = self._max_body
        for m in msgs:
            if m.topic != topic or m.queue_id != first.queue_id or m.queue_id < 0 or len(m.body) > limit:
                return PutStatus.MESSAGE_ILLEGAL
        return None

    def append(self, msgs: list[MessageExt]) -> int:
        """Encode, append and dispatch a checked batch (no await inside: atomic w.r.t. other coroutines).

        Fills in each message's queue offset, store time and host, commit-log offset; returns the log's new
        end. Raises ``ValueError`` / ``struct.error`` / ``PropertiesSizeExceeded`` / ``DiskFullError`` before
        writing anything.
        """
        self.space.refuse_if_read_only()
        self.dispatch_copied()  # (a recovered master's last copied records)
        cl = self.commitlog
        first = msgs[0]
        cq = self.queues.find(first.topic, first.queue_id)
        qoff0 = cq.max_offset if cq is not None else 0
        now = _now_ms()
        if now < self.last_store_ts:
            now = self.last_store_ts
        self.last_store_ts = now
        records, qoff, guess = encode_run(msgs, qoff0, now, self.store_host, cl.max_offset, self._seg_limit)
        if cq is None and qoff > qoff0:
            cq = self.queues.get_or_create(first.topic, first.queue_id)
        self.space.prepare(records, guess - cl.max_offset, msgs, cq, qoff0, qoff - qoff0)
        try:
            self._write_and_dispatch(msgs, records, guess)
        finally:
            self.dispatcher.batch_done()
        self.prefaulter.advance()
        self.dispatched_to = end = cl.max_offset
        return end

    def _write_and_dispatch(self, msgs: list[MessageExt], records: list[bytes], end: int) -> None:
        cl = self.commitlog
        dispatch = self.dispatcher.dispatch
        last = cl.mfq.last
        if last is not None and end - cl.max_offset + END_FILE_MIN_BLANK_LENGTH <= last.remaining:
            # The common case: the whole batch fits the current segment, every record at the offset it was
            # encoded for (``end`` is where the last one ends): one write, then the dispatches.
            cl.write(cl.max_offset, records[0] if len(records) == 1 else b"".join(records))
            if len(msgs) == 1:
                dispatch(msgs[0], msgs[0].commit_log_offset, len(records[0]))
            else:
                self.dispatcher.dispatch_run(msgs, [len(rec) for rec in records])
            return
        for m, rec in zip(msgs, records, strict=True):
            phy = cl.reserve(len(rec))
            if phy != m.commit_log_offset:
                m.commit_log_offset = phy
                cl.write(phy, cl.patch_phy_offset(rec, phy))
            else:
                cl.write(phy, rec)
            dispatch(m, phy, len(rec))

    def append_copy(self, offset: int, data: bytes | bytearray | memoryview, *, defer: bool = False) -> int:
        """Write copied bytes at ``offset`` (the log's end) and dispatch every record that became whole.

        Returns the new end. Bytes that do not continue the log as records raise ``StoreError`` and
        nothing of them is kept. With ``defer`` the records are checked but dispatched only by the next
        ``dispatch_copied()`` (or append): a slave acknowledges the bytes first, then builds its queues.
        """
        self.dispatch_copied()
        cl = self.commitlog
        self.space.prepare_copy(offset, len(data))
        try:
            end = cl.append_raw(offset, data)
        except ValueError as e:
            raise StoreError(str(e)) from None
        self.dispatched_to = max(self.dispatched_to, cl.min_offset)  # a copy that started at a later segment
        try:
            summaries, upto = cl.complete_records(self.dispatched_to, end)
        except ValueError as e:
            cl.mfq.set_end(offset)
            raise StoreError(f"copied commit-log bytes at {offset} are not records: {e}") from None
        self._copied = (summaries, upto)
        if not defer:
            self.dispatch_copied()
        return end

    def dispatch_copied(self) -> None:
        """Dispatch the records of the last ``append_copy(defer=True)`` (nothing when there are none)."""
        if self._copied is None:
            return
        summaries, upto = self._copied
        self._copied = None
        dispatch = self.dispatcher.dispatch_summary
        for s in summaries:
            dispatch(s)
            if s.store_timestamp > self.last_store_ts:
                self.last_store_ts = s.store_timestamp
        self.dispatched_to = upto
