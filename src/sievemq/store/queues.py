"""The store's consume queues by topic and queue id, and their folders (``consumequeue/``, ``consumequeue_ext/``).

Bounded files (docs/many-topics.md): every open file is a descriptor of ``RLIMIT_NOFILE`` and every mapped one also
one of Linux's ``vm.max_map_count`` mappings, so the table keeps the store files open in the process
(``MappedFile.open_files``) within ``budget``: queues are kept in least-recently-used order, and when the process
holds more than ``budget`` files the least recently used queues that no sync round uses are *parked*
(``ConsumeQueue.park``: their files closed; what was written stays in the page cache and a flush syncs it by path)
until it holds ``LOW_WATER`` of it. ``find`` / ``get_or_create`` open a parked queue again; ``peek`` answers from
what a parked queue still knows (its offsets) without opening it. Parking runs between event-loop callbacks
(``call_soon``), never in the middle of a caller's use of a queue, or at once where the caller uses one queue at a
time (``one_at_a_time``: start-up).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import logging
import os
import shutil
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path

from sievemq.store.consume_queue import ConsumeQueue
from sievemq.store.mapped_file import MappedFile
from sievemq.store.queue_summary import QueueState, Summary

log = logging.getLogger("sievemq.store")

LOW_WATER = 0.9
"""A trim parks queues until the process maps at most this fraction of ``budget`` files."""
_OUT_OF_FILES = (errno.EMFILE, errno.ENFILE, errno.ENOMEM)

__all__ = ["QueueTable", "is_safe_folder_name"]


def is_safe_folder_name(topic: str) -> bool:
    """True when ``topic`` can name a folder under a store base without leaving it (one plain path component).

    The broker validates names at the edge (charset and length); this is the store's own last line: no path
    is ever built from a name that could climb out of ``consumequeue/``.
    """
    return bool(topic) and topic not in (".", "..") and "/" not in topic and "\x00" not in topic


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """No cyclic garbage collection while a million long-lived objects are made (each collection would walk all
    of them: it doubled the time to load 400,000 queues)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class QueueTable:
    """Every consume queue of a store; created on first dispatch, loaded from disk at start-up."""

    __slots__ = ("_inline", "_lru", "_queues", "_trim_soon", "budget", "cq_base", "entries_per_file", "ext_base",
                 "ext_file_size", "parks")  # fmt: skip

    def __init__(self, cq_base: Path, ext_base: Path, entries_per_file: int, ext_file_size: int,
                 budget: int = 1 << 30) -> None:  # fmt: skip
        """``budget``: store files open in the process above which queues are parked (see the module docstring)."""
        self.cq_base = cq_base
        self.ext_base = ext_base
        self.entries_per_file = entries_per_file
        self.ext_file_size = ext_file_size
        self.budget = budget
        self._queues: dict[str, dict[int, ConsumeQueue]] = {}
        self._lru: OrderedDict[ConsumeQueue, None] = OrderedDict()
        """Queues open now, least recently used first."""
        self._trim_soon = False
        self._inline = 0
        """Above 0 (``one_at_a_time``): trims run inside ``touch``."""
        self.parks = 0
        """Queues parked so far (a counter for metrics and tests)."""

    def _new(self, topic: str, queue_id: int) -> ConsumeQueue:
        if not is_safe_folder_name(topic):
            raise ValueError(f"topic {topic!r} cannot name a store folder")
        return ConsumeQueue(self.cq_base, topic, queue_id, self.entries_per_file, ext_base=self.ext_base,
                            ext_file_size=self.ext_file_size)  # fmt: skip

    def load(self, summary: Summary | None = None) -> None:
        """Find every queue on disk (folders without data files are ignored), parked: recovery (``recovery.py``)
        opens them one after the other (``each``), ``find`` when they are used. With a clean stop's ``summary``
        (``queue_summary.py``) its queues are known without opening anything; only those it lists to scan (with
        extension files) are looked at on disk."""
        with _no_gc():
            self._load(summary)

    def _load(self, summary: Summary | None) -> None:
        if summary is not None:
            self._restore(summary.queues)
            for topic, qid in summary.scan:
                self._load_one(topic, qid, True)
            return
        base = self.cq_base
        ext_topics = set(os.listdir(self.ext_base)) if self.ext_base.is_dir() else set()
        for topic in sorted(os.listdir(base)) if base.is_dir() else []:
            if not is_safe_folder_name(topic):
                continue
            try:
                names = sorted(os.listdir(base / topic))
            except (NotADirectoryError, FileNotFoundError):
                continue
            for q in names:
                if q.isdigit():
                    self._load_one(topic, int(q), topic in ext_topics)

    def _load_one(self, topic: str, queue_id: int, ext: bool) -> None:
        cq = self._new(topic, queue_id)
        cq.load(parked=True)
        if not cq.mfq.files:
            return
        if cq.ext is not None and ext:
            cq.ext.load(parked=True)
        self._queues.setdefault(topic, {})[queue_id] = cq

    def _restore(self, summary: list[QueueState]) -> None:
        for st in summary:
            cq = self._new(st.topic, st.queue_id)
            cq.mfq.restore(st.files, st.wrote)
            cq.min_logic_offset = st.min_offset
            cq.floor_phy = st.floor_phy
            cq.tail = st.last
            cq.known = True
            self._queues.setdefault(st.topic, {})[st.queue_id] = cq

    def peek(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """The queue as it is, perhaps parked (its offsets are right, its entries not readable), or None."""
        qs = self._queues.get(topic)
        return qs.get(queue_id) if qs is not None else None

    def find(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """The queue, open (``OSError`` when it cannot be), or None when nothing was ever dispatched to it."""
        qs = self._queues.get(topic)
        cq = qs.get(queue_id) if qs is not None else None
        if cq is not None:
            self.touch(cq)
        return cq

    def get_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The queue, open, or created (with no file yet) when new."""
        qs = self._queues.get(topic)
        if qs is None:
            qs = self._queues[topic] = {}
        cq = qs.get(queue_id)
        if cq is None:
            cq = qs[queue_id] = self._new(topic, queue_id)
            if cq.ext is not None and cq.ext.directory.exists():
                shutil.rmtree(cq.ext.directory, ignore_errors=True)  # left over from a queue gone before
        self.touch(cq)
        return cq

    # ------------------------------------------------------------------------------------------ the budget
    def touch(self, cq: ConsumeQueue) -> None:
        """``cq`` is used now: open it if parked, make it the most recently used, and trim soon when over budget."""
        lru = self._lru
        if cq.parked:
            try:
                cq.ensure_open()
            except OSError as e:
                if e.errno not in _OUT_OF_FILES:
                    raise
                self.trim_now(keep=cq)  # out of descriptors or mappings: park others at once, then try again
                cq.ensure_open()
            lru[cq] = None
        else:
            try:
                lru.move_to_end(cq)
            except KeyError:
                lru[cq] = None
        if MappedFile.open_files > self.budget:
            if self._inline:
                self.trim_now(keep=cq)
                return
            if self._trim_soon:
                return
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # tools without a loop: one queue at a time, nothing else in use
                self.trim_now(keep=cq)
                return
            self._trim_soon = True
            loop.call_soon(self._trim_later)

    @contextlib.contextmanager
    def one_at_a_time(self) -> Iterator[None]:
        """While inside, the caller uses one queue at a time (start-up: recovery, the rebuild): ``touch`` parks
        others at once rather than between callbacks."""
        self._inline += 1
        try:
            yield
        finally:
            self._inline -= 1

    def _trim_later(self) -> None:
        self._trim_soon = False
        self.trim_now()

    def trim_now(self, keep: ConsumeQueue | None = None) -> int:
        """Park least recently used clean queues while the process maps more than ``budget`` files (down to
        ``LOW_WATER`` of it; with ``keep``, whatever it maps); only where no queue but ``keep`` is in use. Returns
        how many were parked."""
        if MappedFile.open_files <= self.budget and keep is None:
            return 0
        goal = int(self.budget * LOW_WATER)
        parked = 0
        lru = self._lru
        tries = len(lru)
        while MappedFile.open_files > goal and tries > 0:
            tries -= 1
            cq = next(iter(lru))
            if cq is keep or not cq.park():  # in use, or bytes not on disk yet: look again next time
                lru.move_to_end(cq)
                continue
            del lru[cq]
            parked += 1
        self.parks += parked
        if MappedFile.open_files > self.budget:
            log.debug("%d files open, budget %d: no more queues can be parked yet", MappedFile.open_files,
                      self.budget)  # fmt: skip
        return parked

    def each(self, want: Callable[[ConsumeQueue], bool] | None = None) -> Iterator[ConsumeQueue]:
        """Every queue (those ``want`` accepts), opened one after the other, parking behind as the budget asks (for
        start-up and tools: the caller uses each queue only until it asks for the next)."""
        for cq in self.all():
            if want is not None and not want(cq):
                continue
            if cq.parked:
                self.touch(cq)
            yield cq
            if MappedFile.open_files > self.budget:
                self.trim_now()

    def expiring(self, phy_min: int) -> Iterator[ConsumeQueue]:
        """The queues that commit-log retention down to ``phy_min`` may change, opened one after the other as
        ``each`` does; a parked queue whose entries all stay (``ConsumeQueue.floor_phy``) is not opened for it."""
        return self.each(lambda cq: not cq.parked or cq.floor_phy < phy_min)

    @property
    def mapped_queues(self) -> int:
        """Queues open now."""
        return len(self._lru)

    def is_live(self, cq: ConsumeQueue) -> bool:
        """True while ``cq`` is the table's queue for its topic and id (not deleted or replaced)."""
        return self.find(cq.topic, cq.queue_id) is cq

    def all(self) -> list[ConsumeQueue]:
        """Every queue."""
        return [cq for qs in self._queues.values() for cq in qs.values()]

    def topic_queues(self) -> dict[str, list[int]]:
        """Every known topic and its queue ids."""
        return {t: sorted(qs) for t, qs in self._queues.items()}

    def remove_topic(self, topic: str) -> list[ConsumeQueue]:
        """Forget the topic's queues (returned, still open) and delete its folders."""
        if not is_safe_folder_name(topic):
            return []
        qs = self._queues.pop(topic, None)
        for cq in qs.values() if qs else ():
            self._lru.pop(cq, None)
        for base in (self.cq_base, self.ext_base):
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(base / topic)
        return list(qs.values()) if qs else []

    def close(self) -> None:
        """Unmap every queue and forget them."""
        for cq in self.all():
            cq.close()
        self._queues.clear()
        self._lru.clear()
