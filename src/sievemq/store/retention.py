"""Retention runs (doing what ``cleanup.py`` decides): delete expired commit-log segments and what pointed into them.

A run takes the flush lock (no sync round uses a descriptor it closes), detaches the oldest segments
``cleanup.expired_prefix`` allows, then the consume-queue, extension and index files wholly below the
commit log's new start, closes them and unlinks them in the sync thread.
"""

from __future__ import annotations

import asyncio
import logging
import time

from sievemq.store import cleanup
from sievemq.store.commitlog import CommitLog
from sievemq.store.config import StoreConfig
from sievemq.store.flush import FlushService
from sievemq.store.index_file import IndexService
from sievemq.store.prefault import Prefaulter
from sievemq.store.queues import QueueTable

__all__ = ["Retention"]

log = logging.getLogger("sievemq.store")


class Retention:
    """Deletes what retention allows, on a timer (``run_forever``) or when asked (``run_once``)."""

    def __init__(
        self,
        config: StoreConfig,
        commitlog: CommitLog,
        queues: QueueTable,
        index: IndexService,
        flusher: FlushService,
        prefaulter: Prefaulter,
    ) -> None:
        self.config = config
        self.commitlog = commitlog
        self.queues = queues
        self.index = index
        self.flusher = flusher
        self.prefaulter = prefaulter

    async def run_forever(self) -> None:
        """Run every ``cleanup_interval_ms``; a failed run is logged and the next one comes."""
        interval = self.config.cleanup_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.run_once()
            except Exception:
                log.exception("retention run failed")

    async def run_once(self, *, now: float | None = None, disk_ratio: float | None = None, force: bool = False) -> int:
        """One run; returns the number of commit-log segments deleted (see ``MessageStore.clean_expired_files``)."""
        cfg = self.config
        now = time.time() if now is None else now
        ratio = cleanup.disk_used_ratio(cfg.root) if disk_ratio is None else disk_ratio
        d = cleanup.decide(
            now=now,
            delete_when_hours=cfg.delete_when_hours,
            disk_ratio=ratio,
            max_used_ratio=cfg.disk_max_used_space_ratio,
            force_ratio=cfg.disk_force_clean_ratio,
        )
        if not (d.delete or force):
            return 0
        async with self.flusher.lock:
            if not self.flusher.is_open:
                return 0
            mfq = self.commitlog.mfq
            n = cleanup.expired_prefix(mfq.files, now=now, reserved_s=cfg.file_reserved_hours * 3600,
                                       force=d.force, max_files=cfg.delete_files_per_run)  # fmt: skip
            gone = mfq.delete_first(n)
            phy_min = self.commitlog.min_offset
            for cq in self.queues.expiring(phy_min):
                gone.extend(cq.delete_expired(phy_min))
            gone.extend(self.index.delete_expired(phy_min))
            paths = [mf.path for mf in gone]
            self.prefaulter.release(gone)
            for mf in gone:
                mf.close()
            if paths:
                await self.flusher.in_sync_thread(cleanup.unlink_files, paths)
                log.info("retention: deleted %d commit-log segments (%d files in all), commit log now starts at %d",
                         n, len(paths), phy_min)  # fmt: skip
        return n
