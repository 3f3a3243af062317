"""Reading the store: pulls (through ``scan.py``), queue offsets and store times, key and offset lookups.

Reads only, on the event-loop thread; nothing here changes a file.
"""

from __future__ import annotations

from collections.abc import Callable

from sievemq.store.commitlog import CommitLog
from sievemq.store.config import StoreConfig
from sievemq.store.consume_queue import BLANK_SIZE, CQ_ENTRY, ConsumeQueue
from sievemq.store.consume_queue_ext import EXT_ADDRESS_MAX, CqExtUnit
from sievemq.store.filtering import MessageFilter
from sievemq.store.index_file import IndexService
from sievemq.store.queues import QueueTable
from sievemq.store.results import GetResult, GetStatus
from sievemq.store.scan import ScanLimits, position_status, scan_window, window_result

__all__ = ["Reader", "offset_by_time"]


def offset_by_time(
    cq: ConsumeQueue, timestamp: int, store_time_at: Callable[[int], int | None], upper: bool = False
) -> int:
    """Binary search of ``cq`` on store times (read from the commit log by ``store_time_at(phy)``), as RocketMQ 5
    answers SEARCH_OFFSET_BY_TIMESTAMP (docs/protocol/requests.md §9).

    Lower boundary (the default): the first offset stored at or after ``timestamp``; the max offset when every
    message is older. ``upper``: the last offset stored at or before it; the min offset when every message is
    newer. An empty queue: its min offset. Store times are non-decreasing along a queue; entries whose record is
    gone count as "earlier than anything".
    """
    lo, hi = cq.min_offset, cq.max_offset
    if lo >= hi:
        return lo
    first = lo

    def t(i: int) -> int:
        e = cq.entry(i)
        if e is None or e[1] == BLANK_SIZE:
            return -1
        v = store_time_at(e[0])
        return -1 if v is None else v

    while lo < hi:  # lower: the first offset whose store time is >= timestamp; upper: ... > timestamp
        mid = (lo + hi) // 2
        if t(mid) < timestamp or (upper and t(mid) == timestamp):
            lo = mid + 1
        else:
            hi = mid
    return max(first, lo - 1) if upper else lo


class Reader:
    """The store's read side over its commit log, queues and index."""

    def __init__(self, config: StoreConfig, commitlog: CommitLog, queues: QueueTable, index: IndexService) -> None:
        self.commitlog = commitlog
        self.queues = queues
        self.index = index
        self.config = config
        self.read_limit: Callable[[], int] | None = None
        """Consumers see only records that end at or below this commit-log offset (a master under automatic failover:
        what every replica in sync holds, RocketMQ's confirmOffset); None: everything stored."""

    def visible_max(self, cq: ConsumeQueue, max_o: int, limit: int) -> int:
        """``max_o`` lowered past the queue's tail entries whose records end beyond ``limit``."""
        min_o = cq.min_offset
        while max_o > min_o:
            e = cq.entry(max_o - 1)
            if e is None or e[0] + e[1] <= limit:
                break
            max_o -= 1
        return max_o

    def get_message(
        self, topic: str, queue_id: int, offset: int, max_msgs: int, flt: MessageFilter | None, *, joined: bool = False
    ) -> GetResult:
        """Up to ``max_msgs`` matching records from ``offset`` (status table: docs/protocol/requests.md §6).

        Scans at most ``max(max_cq_scan_entries, max_msgs)`` entries of one consume-queue file
        (``scan.scan_window``), read in place from its mapping. ``joined``: ``records`` holds one ``bytes``, the
        records back to back (a pull answer's body; ``message_count`` says how many).
        """
        queues = self.queues
        cq = queues.peek(topic, queue_id)  # a pull at the end of a parked queue does not map it
        if cq is None:
            return GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        min_o = cq.min_offset
        max_o = cq.max_offset
        if min_o <= offset < max_o or self.read_limit is not None:
            queues.touch(cq)
        if self.read_limit is not None:  # (a master under automatic failover only: the pull path stays as it was)
            max_o = self.visible_max(cq, max_o, self.read_limit())
        early = position_status(offset, min_o, max_o)
        if early is not None:
            return early
        cfg = self.config
        block = cq.read_block(offset, min(max(cfg.max_cq_scan_entries, max_msgs), max_o - offset))
        if not block:
            return GetResult(GetStatus.OFFSET_FOUND_NULL, cq.file_end_offset(offset), min_o, max_o)
        limits = ScanLimits(min(max_msgs, cfg.max_transfer_msgs_per_pull), cfg.max_transfer_bytes_per_pull)
        ext = cq.ext if cq.ext is not None and cq.ext.has_files else None
        cl = self.commitlog
        w = scan_window(block, find=cl.mfq.find, log_min=cl.min_offset, ext=ext, flt=flt, limits=limits, joined=joined)
        result = window_result(w, offset, min_o, max_o)
        if w.scanned > 0:  # how far behind the log's end this pull reads (a slave-read suggestion rests on it)
            result.last_phy = CQ_ENTRY.unpack_from(block, (w.scanned - 1) * CQ_ENTRY.size)[0]
        return result

    def max_offset(self, topic: str, queue_id: int) -> int:
        """Next queue offset to be written (0 for an unknown queue)."""
        cq = self.queues.peek(topic, queue_id)
        return cq.max_offset if cq is not None else 0

    def min_offset(self, topic: str, queue_id: int) -> int:
        """Oldest queue offset still readable (0 for an unknown queue)."""
        cq = self.queues.peek(topic, queue_id)
        return cq.min_offset if cq is not None else 0

    def _entry_store_time(self, cq: ConsumeQueue, offset: int) -> int | None:
        e = cq.entry(offset)
        if e is None or e[1] == BLANK_SIZE:
            return None
        return self.commitlog.store_timestamp_at(e[0])

    def offset_by_time(self, topic: str, queue_id: int, timestamp: int, upper: bool = False) -> int:
        """The first queue offset stored at or after ``timestamp`` (``upper``: the last at or before it), as
        ``offset_by_time`` (requests.md §9); 0 for an unknown queue."""
        cq = self.queues.find(topic, queue_id)
        if cq is None:
            return 0
        return offset_by_time(cq, timestamp, self.commitlog.store_timestamp_at, upper)

    def earliest_store_time(self, topic: str, queue_id: int) -> int:
        """Store time of the message at the queue's min offset (-1 if none)."""
        cq = self.queues.find(topic, queue_id)
        if cq is None:
            return -1
        v = self._entry_store_time(cq, cq.min_offset)
        return -1 if v is None else v

    def store_time(self, topic: str, queue_id: int, offset: int) -> int | None:
        """Store time of the message at ``offset`` (None if not stored)."""
        cq = self.queues.find(topic, queue_id)
        if cq is None or not cq.min_offset <= offset < cq.max_offset:
            return None
        return self._entry_store_time(cq, offset)

    def query_message(
        self, topic: str, key: str, max_num: int, begin_ts: int, end_ts: int, max_bytes: int | None = None
    ) -> list[bytes]:
        """Records of ``topic`` whose KEYS contain ``key`` or whose UNIQ_KEY is ``key`` (newest first); past the
        first, no record that would take the total over ``max_bytes``."""
        if max_num <= 0:
            return []
        total = 0
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
            if out and max_bytes is not None and total + s.total_size > max_bytes:
                break
            rec = cl.read(phy, s.total_size)
            if rec is not None:
                total += len(rec)
                out.append(rec)
                if len(out) >= max_num:
                    break
        return out

    def cq_entries(self, topic: str, queue_id: int, offset: int, n: int) -> list[tuple[int, int, int]]:
        """Up to ``n`` entries ``(phy, size, tags_code)`` from ``offset`` on (crossing files).

        ``tags_code`` is the real tag code (or, for ``SCHEDULE_TOPIC_XXXX``, the delivery time): an
        extension address is resolved through its unit (kept as is if the unit is gone). A blank slot
        (no message at that queue offset, see consume_queue.py) comes back as ``(-1, 0, 0)`` so that
        callers walking offsets one by one skip it.
        """
        cq = self.queues.find(topic, queue_id)
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

    def ext_unit(self, topic: str, queue_id: int, offset: int) -> CqExtUnit | None:
        """The extension unit of the entry at ``offset`` (None: no such entry, no unit, or unit gone)."""
        cq = self.queues.find(topic, queue_id)
        return cq.ext_unit(offset) if cq is not None else None
