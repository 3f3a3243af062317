"""Settings are checked when a config is built: every bad value names its key, the value, what is allowed and its
source, in one line; good values (boundaries included) load unchanged, accepted words in their listed spelling."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from sievemq.broker.config import MAX_MESSAGE_SIZE_LIMIT, BrokerConfig
from sievemq.errors import ConfigError
from sievemq.filtersrv.config import FiltersrvConfig, load_filtersrv_config
from sievemq.namesrv.config import NamesrvConfig
from sievemq.settings import delete_hours, describe, load_config, specs

NS, BR, FS = NamesrvConfig, BrokerConfig, FiltersrvConfig

REJECTED: list[tuple[type[Any], str, Any, str]] = [
    # name server
    (NS, "listenHost", "bad host!", "host name or IP address"),
    (NS, "listenPort", 65536, "0..65535"),
    (NS, "listenPort", -1, "0..65535"),
    (NS, "brokerExpireSeconds", 0, "> 0"),
    (NS, "scanIntervalSeconds", -1.5, "> 0"),
    (NS, "orderMessageEnable", "maybe", "true or false"),
    # broker: names, addresses, paths
    (BR, "brokerName", "broker a", "RocketMQ's topic characters"),
    (BR, "brokerName", "", "1..127 characters"),
    (BR, "brokerName", "b" * 128, "1..127 characters"),
    (BR, "brokerClusterName", "my/cluster", "a-z A-Z 0-9 _ - %"),
    (BR, "brokerId", -1, ">= 0"),
    (BR, "brokerIp", "localhost", "IPv4"),
    (BR, "brokerIp", "0.0.0.0", "not 0.0.0.0"),
    (BR, "brokerIp", "10.0.0.256", "IPv4"),
    (BR, "brokerIp", "::1", "IPv4"),
    (BR, "listenHost", "a b", "host name or IP address"),
    (BR, "listenPort", 70000, "0..65535"),
    (BR, "namesrvAddr", "127.0.0.1", "host:port"),
    (BR, "namesrvAddr", "127.0.0.1:0", "port 1..65535"),
    (BR, "namesrvAddr", "127.0.0.1:9876;ns2", "separated by ';'"),
    (BR, "namesrvAddr", "ns1:99999", "port 1..65535"),
    (BR, "namesrvAddr", "bad host:9876", "host:port"),
    (BR, "storePathRootDir", "", "folder path"),
    (BR, "storePathRootDir", "   ", "folder path"),
    (BR, "filterServerConfig", "/nonexistent/filtersrv.toml", "existing file"),
    # broker: enumerations
    (BR, "flushDiskType", "bogus", "ASYNC_FLUSH or SYNC_FLUSH"),
    (BR, "flushDiskType", "sync", "ASYNC_FLUSH or SYNC_FLUSH"),
    (BR, "flushDiskType", "", "ASYNC_FLUSH or SYNC_FLUSH"),
    (BR, "subscriptionConsistency", "loose", "strict or rocketmq"),
    # broker: numbers
    (BR, "registerBrokerIntervalSeconds", 0, "> 0"),
    (BR, "defaultTopicQueueNums", 0, "1..1024"),
    (BR, "defaultTopicQueueNums", 1025, "1..1024"),
    (BR, "flushIntervalCommitlogMs", 0, ">= 1"),
    (BR, "syncFlushTimeoutMs", -5, ">= 1"),
    (BR, "mappedFileSizeCommitlog", 65535, "65536..2147483647"),
    (BR, "mappedFileSizeCommitlog", 1 << 31, "65536..2147483647"),
    (BR, "mappedFileSizeConsumeQueueEntries", 99, "100..107374182"),
    (BR, "fileReservedTime", 0, "> 0"),
    (BR, "fileReservedTime", math.inf, "> 0"),
    (BR, "fileReservedTime", math.nan, "> 0"),
    (BR, "deleteWhen", "24", "hours of day 0..23"),
    (BR, "deleteWhen", "-2", "hours of day 0..23"),
    (BR, "deleteWhen", "04;x", "hours of day 0..23"),
    (BR, "diskMaxUsedSpaceRatio", 9, "10..95"),
    (BR, "diskMaxUsedSpaceRatio", 96, "10..95"),
    (BR, "maxMessageSize", 0, f"1..{MAX_MESSAGE_SIZE_LIMIT}"),
    (BR, "maxMessageSize", MAX_MESSAGE_SIZE_LIMIT + 1, f"1..{MAX_MESSAGE_SIZE_LIMIT}"),
    (BR, "shortPollingTimeMills", 0, ">= 1"),
    (BR, "messageDelayLevel", "1s 5x", "durations separated by spaces"),
    (BR, "messageDelayLevel", "", "durations separated by spaces"),
    (BR, "messageDelayLevel", "5", "s, m, h or d"),
    (BR, "maxReconsumeTimes", -1, ">= 0"),
    (BR, "channelExpiredSeconds", 0, "> 0"),
    (BR, "expectConsumerNumUseFilter", 0, "1..16384"),
    (BR, "expectConsumerNumUseFilter", 16385, "1..16384"),
    (BR, "maxErrorRateOfBloomFilter", 0, "1..99"),
    (BR, "maxErrorRateOfBloomFilter", 100, "1..99"),
    (BR, "filterServerNums", -1, "0..64"),
    (BR, "filterServerNums", 65, "0..64"),
    # filter server
    (FS, "brokerAddr", "127.0.0.1", "host:port"),
    (FS, "listenHost", "-bad-", "host name or IP address"),
    (FS, "listenPort", 65536, "0..65535"),
    (FS, "advertisedIp", "example.com", "IPv4"),
    (FS, "registerIntervalSeconds", 0, "> 0"),
    (FS, "filterModules", "shop.filters,not a module!", "dotted module names"),
    (FS, "workerCount", 0, ">= 1"),
    (FS, "batchTimeoutSeconds", 0, "> 0"),
    (FS, "loadTimeoutSeconds", -1, "> 0"),
    (FS, "workerCpuSeconds", 0, ">= 1"),
    (FS, "workerMemoryMb", -1, ">= 0"),
    (FS, "workerMaxBatches", 0, ">= 1"),
    (FS, "maxConsecutiveFailures", 0, ">= 1"),
    (FS, "maxSourceBytes", 0, ">= 1"),
    (FS, "readAheadBatches", 0, ">= 1"),
    (FS, "brokerTimeoutSeconds", 0, "> 0"),
    (FS, "parentPid", -1, ">= 0"),
]

ACCEPTED: list[tuple[type[Any], str, Any]] = [
    (NS, "listenPort", 0),
    (NS, "listenPort", 65535),
    (NS, "listenHost", ""),
    (NS, "listenHost", "0.0.0.0"),
    (NS, "listenHost", "::"),
    (NS, "listenHost", "localhost"),
    (NS, "brokerExpireSeconds", 0.001),
    (BR, "brokerName", "a"),
    (BR, "brokerName", "b" * 127),
    (BR, "brokerName", "broker_a-1%|"),
    (BR, "brokerIp", "10.0.0.5"),
    (BR, "brokerId", 0),
    (BR, "namesrvAddr", ""),
    (BR, "namesrvAddr", "ns1.example.com:9876;10.0.0.1:1"),
    (BR, "namesrvAddr", "ns1:9876,ns2:65535"),
    (BR, "namesrvAddr", "[::1]:9876"),
    (BR, "defaultTopicQueueNums", 1),
    (BR, "defaultTopicQueueNums", 1024),
    (BR, "flushIntervalCommitlogMs", 1),
    (BR, "mappedFileSizeCommitlog", 65536),
    (BR, "mappedFileSizeCommitlog", (1 << 31) - 1),
    (BR, "mappedFileSizeConsumeQueueEntries", 100),
    (BR, "fileReservedTime", 0.0001),
    (BR, "deleteWhen", "-1"),
    (BR, "deleteWhen", "23"),
    (BR, "deleteWhen", "04;16"),
    (BR, "diskMaxUsedSpaceRatio", 10),
    (BR, "diskMaxUsedSpaceRatio", 95),
    (BR, "maxMessageSize", 1),
    (BR, "maxMessageSize", MAX_MESSAGE_SIZE_LIMIT),
    (BR, "messageDelayLevel", "1s"),
    (BR, "messageDelayLevel", "1d 2h 30m 0s"),
    (BR, "maxReconsumeTimes", 0),
    (BR, "expectConsumerNumUseFilter", 1),
    (BR, "expectConsumerNumUseFilter", 16384),
    (BR, "maxErrorRateOfBloomFilter", 1),
    (BR, "maxErrorRateOfBloomFilter", 99),
    (BR, "filterServerNums", 0),
    (BR, "filterServerNums", 64),
    (BR, "subscriptionConsistency", "rocketmq"),
    (FS, "brokerAddr", "broker-1.internal:10911"),
    (FS, "listenPort", 0),
    (FS, "workerMemoryMb", 0),
    (FS, "filterModules", "shop.filters, ops.rules"),
]


def _load(cls: type[Any], overrides: dict[str, Any] | None = None, **kw: Any) -> Any:
    if cls is FiltersrvConfig:
        return load_filtersrv_config(kw.get("toml"), kw.get("env", {}), overrides)
    return load_config(cls, kw.get("toml"), kw.get("env", {}), overrides)


def _attr(cls: type[Any], key: str) -> str:
    return next(s.name for s in specs(cls) if s.key == key)


@pytest.mark.parametrize(
    ("cls", "key", "bad", "words"), REJECTED, ids=lambda v: getattr(v, "__name__", None) or repr(v)[:40]
)
def test_a_bad_value_names_key_value_and_what_is_allowed(cls: type[Any], key: str, bad: Any, words: str) -> None:
    with pytest.raises(ConfigError) as ei:
        _load(cls, {key: bad})
    e = ei.value
    text = str(e)
    assert (e.key, e.source) == (key, "the command line")
    assert e.value == bad or (isinstance(bad, float) and math.isnan(bad))
    assert text.startswith(f"invalid {key} {e.value!r} (from the command line): expected ")
    assert words in e.allowed and text.endswith(e.allowed)
    assert "\n" not in text


@pytest.mark.parametrize(("cls", "key", "good"), ACCEPTED, ids=lambda v: getattr(v, "__name__", None) or repr(v)[:40])
def test_boundary_and_typical_values_load_unchanged(cls: type[Any], key: str, good: Any) -> None:
    assert getattr(_load(cls, {key: good}), _attr(cls, key)) == good


def test_broker_id_and_role_go_together() -> None:
    slave = _load(BrokerConfig, {"brokerRole": "SLAVE", "brokerId": 3})
    assert (slave.broker_role, slave.broker_id) == ("SLAVE", 3)
    for role, broker_id, allowed in (("SLAVE", 0, "> 0 for a SLAVE"), ("SYNC_MASTER", 2, "0 for a master")):
        with pytest.raises(ConfigError) as ei:
            _load(BrokerConfig, {"brokerRole": role, "brokerId": broker_id})
        assert ei.value.key == "brokerId" and allowed in ei.value.allowed


def test_the_ha_port_is_beside_the_remoting_port_unless_set() -> None:
    assert _load(BrokerConfig, {"listenPort": 20911}).ha_port == 20912
    assert _load(BrokerConfig, {"listenPort": 20911, "haListenPort": 30000}).ha_port == 30000
    with pytest.raises(ConfigError) as ei:
        _load(BrokerConfig, {"haMasterAddress": "nowhere"})
    assert ei.value.key == "haMasterAddress"


@pytest.mark.parametrize("written", ["SYNC_FLUSH", "sync_flush", "Sync_Flush", "sYNC_fLUSH"])
def test_flush_disk_type_in_any_case_is_stored_in_upper_case(tmp_path: Path, written: str) -> None:
    toml = tmp_path / "broker.toml"
    toml.write_text(f'flushDiskType = "{written}"\n')
    for cfg in (
        load_config(BrokerConfig, toml, {}),
        load_config(BrokerConfig, None, {"SIEVEMQ_FLUSH_DISK_TYPE": written}),
        load_config(BrokerConfig, None, {}, {"flush_disk_type": written}),
        BrokerConfig(flush_disk_type=written),  # type: ignore[arg-type]
    ):
        assert cfg.flush_disk_type == "SYNC_FLUSH"
    assert load_config(BrokerConfig, None, {}, {"flushDiskType": "async_flush"}).flush_disk_type == "ASYNC_FLUSH"
    assert BrokerConfig(subscription_consistency="RocketMQ").subscription_consistency == "rocketmq"  # type: ignore[arg-type]


def test_every_source_is_checked_and_named(tmp_path: Path) -> None:
    toml = tmp_path / "bad.toml"
    toml.write_text('flushDiskType = "bogus"\n')
    with pytest.raises(ConfigError) as ei:
        load_config(BrokerConfig, toml, {})
    assert (ei.value.key, ei.value.value, ei.value.source) == ("flushDiskType", "bogus", str(toml))
    assert f"invalid flushDiskType 'bogus' (from {toml}): expected ASYNC_FLUSH or SYNC_FLUSH" in str(ei.value)

    with pytest.raises(ConfigError, match=r"^invalid listenPort 70000 \(from SIEVEMQ_LISTEN_PORT\): .*0\.\.65535"):
        load_config(BrokerConfig, None, {"SIEVEMQ_LISTEN_PORT": "70000"})
    with pytest.raises(ConfigError, match=r"^invalid workerCount 0 \(from SIEVEMQ_FILTERSRV_WORKER_COUNT\)"):
        load_filtersrv_config(None, {"SIEVEMQ_FILTERSRV_WORKER_COUNT": "0"})
    with pytest.raises(ConfigError, match=r"^invalid diskMaxUsedSpaceRatio 99 \(from the command line\)"):
        load_config(BrokerConfig, None, {}, {"disk_max_used_space_ratio": 99})

    # The final value is what counts: a bad file value overridden by a good variable or flag loads.
    toml.write_text("listenPort = 70000\nmaxErrorRateOfBloomFilter = 0\n")
    cfg = load_config(BrokerConfig, toml, {"SIEVEMQ_LISTEN_PORT": "10911"}, {"maxErrorRateOfBloomFilter": 5})
    assert (cfg.listen_port, cfg.max_error_rate_of_bloom_filter) == (10911, 5)


@pytest.mark.parametrize(
    ("raw", "key", "words"),
    [
        ('listenPort = "abc"', "listenPort", "an integer in 0..65535"),
        ("listenPort = 4.5", "listenPort", "an integer in 0..65535"),
        ("listenPort = true", "listenPort", "an integer in 0..65535"),
        ('fileReservedTime = "soon"', "fileReservedTime", "a number > 0"),
        ("fileReservedTime = false", "fileReservedTime", "a number > 0"),
        ('autoCreateTopicEnable = "maybe"', "autoCreateTopicEnable", "true or false"),
    ],
)
def test_a_value_of_the_wrong_type_is_reported_like_a_bad_value(tmp_path: Path, raw: str, key: str, words: str) -> None:
    toml = tmp_path / "broker.toml"
    toml.write_text(raw + "\n")
    with pytest.raises(ConfigError) as ei:
        load_config(BrokerConfig, toml, {})
    assert (ei.value.key, ei.value.allowed, ei.value.source) == (key, words, str(toml))
    assert str(ei.value).startswith(f"invalid {key} ")


def test_text_forms_of_numbers_and_booleans_still_load() -> None:
    cfg = load_config(
        BrokerConfig,
        None,
        {"SIEVEMQ_LISTEN_PORT": " 10912 ", "SIEVEMQ_FILE_RESERVED_TIME": "1", "SIEVEMQ_LONG_POLLING_ENABLE": "off"},
        {"auto_create_topic_enable": "f", "listen_vip_channel": "Y", "default_topic_queue_nums": 4.0},
    )
    assert (cfg.listen_port, cfg.file_reserved_time, cfg.long_polling_enable) == (10912, 1.0, False)
    assert (cfg.auto_create_topic_enable, cfg.listen_vip_channel, cfg.default_topic_queue_nums) == (False, True, 4)


def test_direct_construction_is_checked_too() -> None:
    with pytest.raises(ConfigError) as ei:
        BrokerConfig(listen_port=-1)
    assert (ei.value.key, ei.value.value, ei.value.source) == ("listenPort", -1, "")
    assert str(ei.value) == "invalid listenPort -1: expected an integer in 0..65535"
    with pytest.raises(ConfigError, match="listenPort"):
        BrokerConfig(listen_port="10911")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="workerCount"):
        FiltersrvConfig(worker_count=0)


def test_the_vip_channel_needs_a_port_two_below() -> None:
    with pytest.raises(ConfigError) as ei:
        load_config(BrokerConfig, None, {}, {"listen_vip_channel": True, "listen_port": 1})
    assert (ei.value.key, ei.value.value, ei.value.source) == ("listenPort", 1, "the command line")
    assert "listenVipChannel" in ei.value.allowed
    assert load_config(BrokerConfig, None, {}, {"listen_vip_channel": True, "listen_port": 2}).listen_port == 2


def test_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("")
    for bad in (a_file, a_file / "store"):
        with pytest.raises(ConfigError, match=r"storePathRootDir .*not an existing file nor under one"):
            load_config(BrokerConfig, None, {}, {"storePathRootDir": str(bad)})
    for good in (tmp_path, tmp_path / "new" / "store"):
        assert load_config(BrokerConfig, None, {}, {"storePathRootDir": str(good)}).store_path_root_dir == str(good)
    assert not (tmp_path / "new").exists(), "checking a path creates nothing"
    fs_toml = tmp_path / "fs.toml"
    fs_toml.write_text("workerCount = 1\n")
    assert load_config(BrokerConfig, None, {}, {"filterServerConfig": str(fs_toml)}).filter_server_config == str(
        fs_toml
    )
    with pytest.raises(ConfigError, match="filterServerConfig"):
        load_config(BrokerConfig, None, {}, {"filterServerConfig": str(tmp_path)})  # a folder is not a file

    # A bad default is reported as such (here: ./sievemq-data is a file).
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sievemq-data").write_text("")
    with pytest.raises(ConfigError, match=r"^invalid storePathRootDir './sievemq-data' \(from the default\)"):
        load_config(BrokerConfig, None, {})


def test_other_errors_keep_their_message_and_have_no_key(tmp_path: Path) -> None:
    toml = tmp_path / "broker.toml"
    toml.write_text("nonsense = 1\n")
    with pytest.raises(ConfigError, match=r"unknown key 'nonsense'") as ei:
        load_config(BrokerConfig, toml, {})
    assert ei.value.key == ""
    with pytest.raises(ConfigError, match=r"does not exist"):
        load_config(BrokerConfig, tmp_path / "missing.toml", {})


@pytest.mark.parametrize("cls", [NamesrvConfig, BrokerConfig, FiltersrvConfig])
def test_defaults_are_valid_and_every_setting_says_what_it_accepts(cls: type[Any]) -> None:
    cls()
    for key, _typ, _default, doc, allowed in describe(cls):
        assert doc and allowed, key


@pytest.mark.parametrize(
    ("text", "hours"),
    [("04", (4,)), ("4", (4,)), ("04;16", (4, 16)), ("16; 04;16", (4, 16)), ("-1", ()), ("24", None), ("", None),
     ("4;;5", None), ("a", None), ("-2", None), ("004", None)],
)  # fmt: skip
def test_delete_when_reads_rocketmqs_hour_lists(text: str, hours: tuple[int, ...] | None) -> None:
    assert delete_hours(text) == hours
