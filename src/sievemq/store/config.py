"""The store's settings: one frozen value, checked when it is built (``StoreConfig``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sievemq.protocol.delay_levels import DEFAULT_DELAY_LEVELS
from sievemq.protocol.sizes import DEFAULT_MAX_MESSAGE_SIZE
from sievemq.store.consume_queue_ext import MAX_BITMAP_LENGTH

__all__ = ["StoreConfig"]


@dataclass(frozen=True)
class StoreConfig:
    """Store settings (names follow RocketMQ ``MessageStoreConfig`` in snake case).

    The broker derives every value from its own settings in one place (``broker/store_settings.py``).
    """

    root: Path
    commitlog_file_size: int = 1 << 30
    cq_entries_per_file: int = 300_000
    flush_disk_type: Literal["ASYNC_FLUSH", "SYNC_FLUSH"] = "ASYNC_FLUSH"
    flush_interval_ms: int = 500
    sync_flush_timeout_ms: int = 5000
    file_reserved_hours: float = 72
    delete_when_hours: tuple[int, ...] = (4,)
    """Hours of day for time-based deletion (empty: any hour)."""
    disk_max_used_space_ratio: float = 0.75
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    max_transfer_bytes_per_pull: int = 256 * 1024
    max_transfer_msgs_per_pull: int = 32
    max_cq_scan_entries: int = 800
    """Consume-queue entries scanned per pull at most (at least ``max_msgs``)."""
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
    disk_full_reserve_bytes: int = 128 * 1024 * 1024
    """Free bytes the store never allocates into: a put that needs a new file is refused unless this many stay
    free after it (``disk.py``)."""

    max_mapped_files: int = 0
    """Files the process keeps mapped at most (0: a quarter of RLIMIT_NOFILE or half of vm.max_map_count, the less):
    least recently used consume queues are parked past it (``queues.py``, ``limits.py``)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))
        if self.flush_disk_type not in ("ASYNC_FLUSH", "SYNC_FLUSH"):
            raise ValueError(f"flush_disk_type must be ASYNC_FLUSH or SYNC_FLUSH, not {self.flush_disk_type!r}")
        if self.commitlog_file_size < 4096 or self.cq_entries_per_file < 1:
            raise ValueError("commitlog_file_size must be >= 4096 and cq_entries_per_file >= 1")
        if not 0 <= self.bitmap_length_bytes <= MAX_BITMAP_LENGTH:
            raise ValueError(f"bitmap_length_bytes must be within 0..{MAX_BITMAP_LENGTH}")
        if self.disk_full_reserve_bytes < 0:
            raise ValueError("disk_full_reserve_bytes must be >= 0")
        if self.mapped_file_size_cq_ext < 2 * (20 + self.bitmap_length_bytes) + 4:
            raise ValueError("mapped_file_size_cq_ext is too small for two units")

    @property
    def sync_flush(self) -> bool:
        """True under ``SYNC_FLUSH``: a put is answered after the fsync that covers it."""
        return self.flush_disk_type == "SYNC_FLUSH"
