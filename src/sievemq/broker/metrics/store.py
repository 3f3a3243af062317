"""The store's size and its disk, measured when ``/metrics`` is scraped: one ``statvfs`` and a walk over the
store's open files (their allocated bytes are known without a system call) (docs/metrics.md §6)."""

from __future__ import annotations

import os
from collections.abc import Iterable

from prometheus_client.core import GaugeMetricFamily, Metric

from sievemq.metrics.families import gauge
from sievemq.store import MessageStore

__all__ = ["StoreCollector"]


class StoreCollector:
    """``sievemq_store_*``: bytes held, bytes on disk per kind of file, the disk's use, full and read-only states."""

    def __init__(self, store: MessageStore) -> None:
        self.store = store

    def _files(self) -> dict[str, int]:
        s = self.store
        sizes = {"commitlog": sum(mf.allocated for mf in s.commitlog.mfq), "consumequeue": 0, "consumequeue_ext": 0,
                 "index": sum(f.mf.allocated for f in s.index.files)}  # fmt: skip
        for cq in s.queues.all():
            sizes["consumequeue"] += sum(mf.allocated for mf in cq.mfq)
            if cq.ext is not None:
                sizes["consumequeue_ext"] += sum(mf.allocated for mf in cq.ext.mfq)
        return sizes

    def collect(self) -> Iterable[Metric]:
        """Sizes, disk use and states."""
        s = self.store
        yield gauge("sievemq_store_commitlog_bytes", "Bytes of records the commit log holds (its end offset less its "
                    "oldest offset)", max(0, s.max_phy_offset - s.min_phy_offset))  # fmt: skip
        files = GaugeMetricFamily("sievemq_store_files_bytes", "Disk space allocated to the store's files, by kind "
                                  "(commitlog, consumequeue, consumequeue_ext, index)", labels=["kind"])  # fmt: skip
        for kind, size in self._files().items():
            files.add_metric([kind], size)
        yield files
        yield gauge("sievemq_store_consume_queues", "Consume queues (topic queues that hold or held messages)",
                    len(s.queues.all()))  # fmt: skip
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
