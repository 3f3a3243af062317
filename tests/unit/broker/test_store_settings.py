"""The store's settings and the broker's Bloom filter come from one derivation, so they cannot disagree: with any
Bloom setting the SQL92 bitmaps are really stored, and delayed messages use the broker's delay levels."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

from sievemq.broker.config import BrokerConfig
from sievemq.broker.filter_manager import ConsumerFilterManager
from sievemq.broker.store_settings import bloom_filter, store_config
from sievemq.filter.bloom import BloomFilter
from sievemq.protocol.message import MessageExt, PropertyKey
from sievemq.settings import load_config
from sievemq.store import SCHEDULE_TOPIC, MessageStore, StoreConfig

HOST = ("127.0.0.1", 10911)


def _broker(tmp_path: Path, **over: object) -> BrokerConfig:
    base = {"store_path_root_dir": str(tmp_path / "store"), "mapped_file_size_commitlog": 1 << 20}
    return load_config(BrokerConfig, None, {}, {**base, **over})


@pytest.mark.parametrize(("expected", "rate"), [(32, 20), (64, 10), (1, 1), (16384, 1), (7, 99)])
def test_bitmap_length_is_the_bloom_filters(tmp_path: Path, expected: int, rate: int) -> None:
    cfg = _broker(tmp_path, expect_consumer_num_use_filter=expected, max_error_rate_of_bloom_filter=rate)
    bloom = BloomFilter.create(rate, expected)
    assert store_config(cfg).bitmap_length_bytes == bloom.m // 8 == bloom_filter(cfg).byte_length
    assert bloom_filter(cfg) == bloom


def test_non_default_bloom_settings_change_the_bitmap_length(tmp_path: Path) -> None:
    default = store_config(_broker(tmp_path)).bitmap_length_bytes
    custom = store_config(_broker(tmp_path, expectConsumerNumUseFilter=64, maxErrorRateOfBloomFilter=10))
    assert default == StoreConfig(root=tmp_path).bitmap_length_bytes == 14
    assert custom.bitmap_length_bytes == BloomFilter.create(10, 64).m // 8 == 39


def test_every_broker_store_setting_is_passed_on(tmp_path: Path) -> None:
    cfg = _broker(
        tmp_path,
        flushDiskType="sync_flush",
        mappedFileSizeConsumeQueueEntries=2000,
        flushIntervalCommitlogMs=250,
        syncFlushTimeoutMs=1234,
        fileReservedTime=0.5,
        deleteWhen=-1,
        diskMaxUsedSpaceRatio=60,
        maxMessageSize=1024,
        messageDelayLevel="1s 2s 3s",
    )
    sc = store_config(cfg)
    assert sc.root == tmp_path / "store"
    assert (sc.commitlog_file_size, sc.cq_entries_per_file) == (1 << 20, 2000)
    assert (sc.flush_disk_type, sc.flush_interval_ms, sc.sync_flush_timeout_ms) == ("SYNC_FLUSH", 250, 1234)
    assert (sc.file_reserved_hours, sc.delete_when_hours, sc.disk_max_used_space_ratio) == (0.5, (), 0.6)
    assert (sc.max_message_size, sc.message_delay_levels) == (1024, "1s 2s 3s")


async def test_bitmaps_are_written_with_non_default_bloom_settings(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = _broker(tmp_path, expectConsumerNumUseFilter=64, maxErrorRateOfBloomFilter=10)
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    filters = ConsumerFilterManager(config_dir, bloom_filter(cfg))
    entry = filters.register("G", "T", "region = 'eu'")
    assert entry is not None
    store = MessageStore(store_config(cfg), HOST)
    store.set_bitmap_calculator(filters.calc_bitmap)
    store.load()
    await store.start()
    try:
        with caplog.at_level(logging.ERROR, logger="sievemq.store"):
            for region in ("eu", "us"):
                msg = MessageExt("T", b"x", properties={"region": region}, born_host=("10.0.0.9", 1), born_timestamp=1)
                assert (await store.put_message(msg)).ok
        assert not [r for r in caplog.records if "bitmap" in r.getMessage()], caplog.text
        units = [store.get_cq_ext_unit("T", 0, offset) for offset in (0, 1)]
        assert all(u is not None and len(u.bitmap) == bloom_filter(cfg).byte_length == 39 for u in units)
        hit = [bloom_filter(cfg).is_hit(u.bitmap, entry.bit_positions) for u in units if u is not None]
        assert hit == [True, False]
    finally:
        await store.shutdown()


async def test_delayed_messages_use_the_brokers_delay_levels(tmp_path: Path) -> None:
    cfg = _broker(tmp_path, messageDelayLevel="2s 7s")
    store = MessageStore(store_config(cfg), HOST)
    store.load()
    await store.start()
    try:
        props = {PropertyKey.REAL_TOPIC: "T", PropertyKey.REAL_QID: "0", PropertyKey.DELAY: "2"}
        msg = MessageExt(SCHEDULE_TOPIC, b"x", properties=props, queue_id=1, born_host=HOST, born_timestamp=1)
        stored = (await store.put_message(msg)).msgs[0]
        ((_phy, _size, deliver_at),) = store.read_cq_entries(SCHEDULE_TOPIC, 1, 0, 1)
        assert deliver_at == stored.store_timestamp + 7000
    finally:
        await store.shutdown()


def test_store_config_is_a_plain_value(tmp_path: Path) -> None:
    cfg = _broker(tmp_path)
    assert store_config(cfg) == store_config(dataclasses.replace(cfg))
