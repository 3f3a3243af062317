"""The store's settings and the broker's Bloom filter, derived from ``BrokerConfig`` in one place.

Both are computed here only, so they cannot disagree: the bitmaps that ``ConsumerFilterManager.calc_bitmap``
builds with ``bloom_filter(cfg)`` are exactly ``StoreConfig.bitmap_length_bytes`` long (the store drops any other
length, see ``store/message_store.py``), and the delivery times the store writes for delayed messages use the
broker's ``messageDelayLevel``, as its schedule service does.
"""

from __future__ import annotations

from pathlib import Path

from sievemq.broker.config import BrokerConfig
from sievemq.filter.bloom import BloomFilter
from sievemq.settings import delete_hours
from sievemq.store import StoreConfig

__all__ = ["bloom_filter", "store_config"]


def bloom_filter(cfg: BrokerConfig) -> BloomFilter:
    """The broker's Bloom parameters (``maxErrorRateOfBloomFilter``, ``expectConsumerNumUseFilter``)."""
    return BloomFilter.create(cfg.max_error_rate_of_bloom_filter, cfg.expect_consumer_num_use_filter)


def store_config(cfg: BrokerConfig) -> StoreConfig:
    """The store settings derived from the broker's (bitmap length from ``bloom_filter(cfg)``)."""
    return StoreConfig(
        root=Path(cfg.store_path_root_dir),
        commitlog_file_size=cfg.mapped_file_size_commitlog,
        cq_entries_per_file=cfg.mapped_file_size_consume_queue_entries,
        max_mapped_files=cfg.max_mapped_files,
        flush_disk_type=cfg.flush_disk_type,
        flush_interval_ms=cfg.flush_interval_commitlog_ms,
        sync_flush_timeout_ms=cfg.sync_flush_timeout_ms,
        file_reserved_hours=cfg.file_reserved_time,
        delete_when_hours=delete_hours(cfg.delete_when) or (),
        disk_max_used_space_ratio=cfg.disk_max_used_space_ratio / 100.0,
        disk_force_clean_ratio=cfg.disk_space_clean_forcibly_ratio / 100.0,
        disk_full_reserve_bytes=cfg.disk_full_reserve_bytes,
        index_hash_slots=cfg.max_hash_slot_num,
        index_max_entries=cfg.max_index_num,
        max_message_size=cfg.max_message_size,
        message_delay_levels=cfg.message_delay_level,
        bitmap_length_bytes=bloom_filter(cfg).byte_length,
    )
