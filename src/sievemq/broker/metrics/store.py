"""The store's size and its disk, measured when ``/metrics`` is scraped: one ``statvfs`` and a walk over the
store's open files (their allocated bytes are known without a system call) (docs/metrics.md §6). A scrape walks
at most ``QUEUES_WALK_MAX`` consume queues: with more (100,000 topics of 4 queues: a walk of 400,000 queues takes
~0.2 s on the event loop), a walk goes on over the following scrapes, one starts at most every
``QUEUES_WALK_SECONDS``, and the figures are the last whole walk's (the first one is made whole at the first
scrape)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable

from prometheus_client.core import GaugeMetricFamily, Metric

from sievemq.metrics.families import gauge
from sievemq.store import MessageStore
from sievemq.store.consume_queue import ConsumeQueue

__all__ = ["QUEUES_WALK_MAX", "QUEUES_WALK_SECONDS", "StoreCollector"]

QUEUES_WALK_MAX = 20_000
"""Consume queues a scrape walks at most (up to that many, every scrape walks them all)."""
QUEUES_WALK_SECONDS = 300.0
"""Past ``QUEUES_WALK_MAX``, seconds between the starts of two walks."""


class StoreCollector:
    """``sievemq_store_*``: bytes held, bytes on disk per kind of file, the disk's use, full and read-only states."""

    def __init__(self, store: MessageStore, clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.clock = clock
        self._walked: tuple[int, int, int] | None = None
        """(queues, consumequeue bytes, consumequeue_ext bytes) of the last whole walk over the consume queues."""
        self._started = 0.0
        self._walk: list[ConsumeQueue] | None = None
        """The queues of the walk under way (None: none is), ``_next`` the next one to read, ``_sums`` so far."""
        self._next = 0
        self._sums = [0, 0]

    def _queues(self) -> tuple[int, int, int]:
        """(queues, consumequeue bytes, consumequeue_ext bytes) of the last whole walk, after going on with the walk
        under way for up to ``QUEUES_WALK_MAX`` queues (see the module docstring)."""
        now = self.clock()
        last = self._walked
        if self._walk is None and (last is None or last[0] <= QUEUES_WALK_MAX
                                   or now - self._started >= QUEUES_WALK_SECONDS):  # fmt: skip
            self._walk, self._next, self._sums, self._started = self.store.queues.all(), 0, [0, 0], now
        walk = self._walk
        if walk is not None:
            end = len(walk) if last is None else min(len(walk), self._next + QUEUES_WALK_MAX)
            cq, ext = self._sums
            for q in walk[self._next : end]:
                cq += sum(mf.allocated for mf in q.mfq)
                if q.ext is not None:
                    ext += sum(mf.allocated for mf in q.ext.mfq)
            self._sums, self._next = [cq, ext], end
            if end >= len(walk):
                self._walked, self._walk = (len(walk), cq, ext), None
        assert self._walked is not None
        return self._walked

    def _files(self, cq: int, ext: int) -> dict[str, int]:
        s = self.store
        return {"commitlog": sum(mf.allocated for mf in s.commitlog.mfq), "consumequeue": cq, "consumequeue_ext": ext,
                "index": sum(f.mf.allocated for f in s.index.files)}  # fmt: skip

    def collect(self) -> Iterable[Metric]:
        """Sizes, disk use and states."""
        s = self.store
        yield gauge("sievemq_store_commitlog_bytes", "Bytes of records the commit log holds (its end offset less its "
                    "oldest offset)", max(0, s.max_phy_offset - s.min_phy_offset))  # fmt: skip
        files = GaugeMetricFamily("sievemq_store_files_bytes", "Disk space allocated to the store's files, by kind "
                                  "(commitlog, consumequeue, consumequeue_ext, index)", labels=["kind"])  # fmt: skip
        queues, cq, ext = self._queues()
        for kind, size in self._files(cq, ext).items():
            files.add_metric([kind], size)
        yield files
        yield gauge("sievemq_store_consume_queues", "Consume queues (topic queues that hold or held messages)",
                    queues)  # fmt: skip
        try:
            st = os.statvfs(s.root)
        except OSError:
            pass
        else:
            total = st.f_blocks * st.f_frsize
            yield gauge("sievemq_store_disk_total_bytes", "Size of the filesystem holding the store", total)
            yield gauge("sievemq_store_disk_used_bytes", "Bytes used on that filesystem (by anything)",
                        total - st.f_bfree * st.f_frsize)  # fmt: skip
            yield gauge("sievemq_store_disk_free_bytes", "Bytes free on it for the broker (diskFullReserveBytes of "
                        "them are kept in reserve)", st.f_bavail * st.f_frsize)  # fmt: skip
        yield gauge("sievemq_store_disk_full", "1 while sends that need new space are refused (DISK_FULL)",
                    1 if s.disk.full is not None else 0)  # fmt: skip
        yield gauge("sievemq_store_read_only", "1 while the store refuses every send (start-up could not finish its "
                    "writes)", 1 if s.disk.read_only is not None else 0)  # fmt: skip
