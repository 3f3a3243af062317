"""Dispatch: what a stored record adds beside the commit log (consume-queue entry, extension unit, index keys).

One record goes through here in three situations, all with the same rules:

* a put (``dispatch``, right after the commit-log append, in the same loop step);
* recovery re-dispatching records read back from the commit log (``redo``);
* records appended as raw commit-log bytes, as a slave copies them (``dispatch_summary`` with listeners).

Rules: prepared and rolled-back transaction records get no consume-queue entry (``recovery.dispatchable``);
the tags slot holds the tag code (docs/protocol/consume-queue.md §4), or for ``SCHEDULE_TOPIC_XXXX`` the
delivery time (§7); with a bitmap calculator and the extension on, a message of a normal topic for which the
calculator returns a bitmap gets an extension unit and its slot holds the unit's address (§8-§10, and
docs/protocol/bloom.md §6). Unlike RocketMQ, which writes a unit for every entry once the extension is on,
sievemq writes none when there is no bitmap (no SQL92 group for the topic): both read the same for filters
("no unit" and "unit without bitmap" both pass), and the plain slot costs no extra write or read. For the same
reason a unit is skipped (plain slot) when its extension file cannot be allocated (a full disk, ``disk.py``):
filters then evaluate that message at pull time, nothing fails. Keys
(``KEYS``, split on spaces, and ``UNIQ_KEY``) go to the index as ``topic#key``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from sievemq.filter.tags import tag_code
from sievemq.protocol.delay_levels import SCHEDULE_TOPIC, delay_ms_for_level
from sievemq.protocol.message import MessageExt, RecordSummary
from sievemq.store.consume_queue import CQ_ENTRY, ConsumeQueue
from sievemq.store.consume_queue_ext import MIN_UNIT_SIZE
from sievemq.store.index_file import IndexService
from sievemq.store.queues import QueueTable
from sievemq.store.recovery import dispatchable

__all__ = ["BitmapCalculator", "DispatchListener", "Dispatcher"]

log = logging.getLogger("sievemq.store")

DispatchListener = Callable[[str, int, int, int, dict[str, str]], None]
"""``(topic, queue_id, queue_offset, tags_code, properties)`` called after each consume-queue append.

``tags_code`` is always the real tag code (never an extension address)."""

BitmapCalculator = Callable[[str, dict[str, str], str | None], bytes | None]
"""``(topic, properties, tags) -> bitmap`` computed at dispatch (before the CQ append) for the extension
unit; None when the topic has no SQL92 group (no unit is written). The bitmap must be
``StoreConfig.bitmap_length_bytes`` long (an all-zero bitmap is meaningful: no group matched)."""

_TAG_CACHE_LIMIT = 4096


class Dispatcher:
    """Builds consume-queue entries, extension units and index keys for stored records."""

    def __init__(
        self,
        queues: QueueTable,
        index: IndexService,
        *,
        delay_levels: list[int],
        bitmap_length: int,
        on_queue_written: Callable[[ConsumeQueue], None],
    ) -> None:
        """``on_queue_written(cq)`` is told of every queue appended to (the flusher syncs it next round)."""
        self.queues = queues
        self.index = index
        self._levels = delay_levels
        self._bitmap_length = bitmap_length
        self._on_written = on_queue_written
        self._calc: BitmapCalculator | None = None
        self._bad_bitmap_logged = False
        self._listeners: list[DispatchListener] = []
        self._tag_codes: dict[str, int] = {}
        self._batch_topic = ""
        self._batch_keys: list[str] = []
        self._batch_phys: list[int] = []
        self._batch_ts: list[int] = []
        """Index keys of the put being dispatched (one topic), indexed by ``batch_done``."""
        self.room: Callable[[int], bool] | None = None
        """``room(n)``: may ``n`` new bytes be allocated now (``DiskGuard.fits``)? Asked before a unit needs a new
        extension file; without room the entry gets its plain tag code (units are best-effort on a full disk)."""

    # ------------------------------------------------------------------------------------------ settings
    def set_bitmap_calculator(self, fn: BitmapCalculator | None) -> None:
        """Compute each dispatched message's filter bitmap with ``fn`` (None stops it)."""
        self._calc = fn

    def add_listener(self, cb: DispatchListener) -> None:
        """Call ``cb`` after each consume-queue append of a put or of a copied record (not of recovery)."""
        self._listeners.append(cb)

    # ------------------------------------------------------------------------------------------ rules
    def tags_code(self, topic: str, queue_id: int, tags: str | None, store_ts: int) -> int:
        """The tags slot value before any extension address: the tag hash, or a schedule delivery time."""
        if topic == SCHEDULE_TOPIC:
            return store_ts + delay_ms_for_level(self._levels, queue_id + 1)
        if not tags:
            return 0
        code = self._tag_codes.get(tags)
        if code is None:  # the Java hash is a Python loop over the characters: remember it per tag
            if len(self._tag_codes) >= _TAG_CACHE_LIMIT:
                self._tag_codes.clear()
            code = self._tag_codes[tags] = tag_code(tags)
        return code

    def _bitmap(self, calc: BitmapCalculator, topic: str, props: dict[str, str], tags: str | None) -> bytes | None:
        """Run the calculator; a failure or a bitmap of the wrong length means "no bitmap"."""
        try:
            bm = calc(topic, props, tags)
        except Exception:
            log.exception("bitmap calculator failed for a message of %s", topic)
            return None
        if bm is not None and len(bm) != self._bitmap_length:
            if not self._bad_bitmap_logged:
                self._bad_bitmap_logged = True
                log.error("bitmap calculator returned %d bytes, expected bitmap_length_bytes=%d: not stored",
                          len(bm), self._bitmap_length)  # fmt: skip
            return None
        return bm

    def _append(self, cq: ConsumeQueue, qoff: int, phy: int, size: int, tags_code: int, store_ts: int,
                props: dict[str, str], tags: str | None) -> None:  # fmt: skip
        """Append a CQ entry, through an extension unit when the calculator gives a bitmap."""
        calc = self._calc
        topic = cq.topic
        bm = self._bitmap(calc, topic, props, tags) if calc is not None and topic != SCHEDULE_TOPIC else None
        if bm is None or not self._ext_room(cq, len(bm)):
            cq.append(qoff, phy, size, tags_code)
        else:
            cq.append_ext(qoff, phy, size, tags_code, store_ts, bm)
        self._on_written(cq)

    def _ext_room(self, cq: ConsumeQueue, bitmap_length: int) -> bool:
        ext, room = cq.ext, self.room
        if ext is None or room is None:
            return True
        need = ext.bytes_to_allocate(MIN_UNIT_SIZE + bitmap_length)
        return not need or room(need)

    def _index(self, topic: str, keys: list[str], uniq: str | None, phy: int, ts: int, header: bool = True) -> None:
        put = self.index.put
        for k in keys:
            put(f"{topic}#{k}", phy, ts, header=header)
        if uniq:
            put(f"{topic}#{uniq}", phy, ts, header=header)

    def _notify(self, topic: str, queue_id: int, queue_offset: int, tags: int, props: dict[str, str]) -> None:
        for cb in self._listeners:
            try:
                cb(topic, queue_id, queue_offset, tags, props)
            except Exception:
                log.exception("dispatch listener failed")

    # ------------------------------------------------------------------------------------------ entry points
    def dispatch(self, m: MessageExt, phy: int, size: int) -> None:
        """A message just appended at ``phy`` by a put (its queue offset and store time are set); its keys are
        indexed with the put's others by ``batch_done()``."""
        props = m.properties
        topic = m.topic
        ts = m.store_timestamp
        if dispatchable(m.sys_flag):
            tag_s = props.get("TAGS")
            tags = self.tags_code(topic, m.queue_id, tag_s, ts)
            cq = self.queues.get_or_create(topic, m.queue_id)
            self._append(cq, m.queue_offset, phy, size, tags, ts, props, tag_s)
            if self._listeners:
                self._notify(topic, m.queue_id, m.queue_offset, tags, props)
        self._collect_keys(topic, props, phy, ts)

    def dispatch_run(self, msgs: list[MessageExt], sizes: list[int]) -> None:
        """``dispatch`` of each message of one put (one topic and queue, contiguous queue offsets, each at its
        ``commit_log_offset``), for less: when no entry needs an extension unit and they continue the queue's last
        file, their entries are written in one append."""
        first = msgs[0]
        topic, qid = first.topic, first.queue_id
        cq = self.queues.find(topic, qid) if len(msgs) > 1 and dispatchable(first.sys_flag) else None
        calc = self._calc
        if cq is None or topic == SCHEDULE_TOPIC or (calc is not None and any(
            self._bitmap(calc, topic, m.properties, m.properties.get("TAGS")) is not None for m in msgs
        )):  # fmt: skip
            for m, size in zip(msgs, sizes, strict=True):
                self.dispatch(m, m.commit_log_offset, size)
            return
        tag_codes = self._tag_codes
        seen = [tag_codes.get(t) if t else 0 for t in (m.properties.get("TAGS") for m in msgs)]
        codes = [c for c in seen if c is not None]
        if len(codes) != len(seen):  # a tag not seen yet: its code computed (and remembered) the usual way
            codes = [self.tags_code(topic, qid, m.properties.get("TAGS"), 0) for m in msgs]
        packed = b"".join([CQ_ENTRY.pack(m.commit_log_offset, size, code)
                           for m, size, code in zip(msgs, sizes, codes, strict=True)])  # fmt: skip
        if not cq.append_run(first.queue_offset, packed):
            for m, size in zip(msgs, sizes, strict=True):
                self.dispatch(m, m.commit_log_offset, size)
            return
        self._on_written(cq)
        if self._listeners:
            for m, code in zip(msgs, codes, strict=True):
                self._notify(topic, qid, m.queue_offset, code, m.properties)
        collect = self._collect_keys
        for m in msgs:
            collect(topic, m.properties, m.commit_log_offset, m.store_timestamp)

    def _collect_keys(self, topic: str, props: dict[str, str], phy: int, ts: int) -> None:
        keys = props.get("KEYS")
        uniq = props.get("UNIQ_KEY")
        if keys or uniq:
            if topic != self._batch_topic:
                self._index_batch()
                self._batch_topic = topic
            pending, phys, tss = self._batch_keys, self._batch_phys, self._batch_ts
            if keys:
                for k in keys.split(" "):
                    if k:
                        pending.append(k)
                        phys.append(phy)
                        tss.append(ts)
            if uniq:
                pending.append(uniq)
                phys.append(phy)
                tss.append(ts)

    def batch_done(self) -> None:
        """After the ``dispatch`` calls of one put: what they left to do once (the keys, then the index header)."""
        try:
            self._index_batch()
        finally:
            self.index.finish()

    def _index_batch(self) -> None:
        """Index the keys the put's dispatches collected (``IndexService.put_keys``), in their order."""
        if self._batch_keys:
            keys, phys, tss = self._batch_keys, self._batch_phys, self._batch_ts
            self._batch_keys, self._batch_phys, self._batch_ts = [], [], []
            self.index.put_keys(self._batch_topic, keys, phys, tss)

    def redo(self, s: RecordSummary, to_cq: bool, to_index: bool) -> None:
        """Recovery: re-dispatch one record read back from the commit log (entries already there are kept)."""
        self._dispatch_summary(s, to_cq, to_index, notify=False)

    def dispatch_summary(self, s: RecordSummary) -> None:
        """A record that arrived as commit-log bytes (copied from a master): entry, unit, keys, listeners."""
        self._dispatch_summary(s, dispatchable(s.sys_flag), True, notify=True)

    def _dispatch_summary(self, s: RecordSummary, to_cq: bool, to_index: bool, *, notify: bool) -> None:
        phy = s.commit_log_offset
        if to_cq:
            tags = self.tags_code(s.topic, s.queue_id, s.tags, s.store_timestamp)
            cq = self.queues.get_or_create(s.topic, s.queue_id)
            if not cq.mfq.files or s.queue_offset >= cq.max_offset:  # else ``append`` would refuse it
                self._append(cq, s.queue_offset, phy, s.total_size, tags, s.store_timestamp, s.properties, s.tags)
                if notify and self._listeners:
                    self._notify(s.topic, s.queue_id, s.queue_offset, tags, s.properties)
        if to_index:
            self._index(s.topic, s.keys, s.uniq_key, phy, s.store_timestamp)
