"""Configuration: one frozen dataclass per role, loaded from a TOML file, environment variables and flags.

Precedence, lowest to highest: defaults < TOML file < environment (``SIEVEMQ_<NAME>``) < command-line flags.
Keys may be written in RocketMQ's camelCase (``brokerName``, ``flushDiskType``) or in snake_case.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar, get_type_hints

from sievemq.errors import ConfigError

T = TypeVar("T")

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
TOPIC_NAME_RE = re.compile(r"^[%|a-zA-Z0-9_-]+$")


def _doc(text: str, **kw: Any) -> Any:
    return field(metadata={"doc": text}, **kw)


@dataclass(frozen=True)
class NamesrvConfig:
    """Name server settings."""

    listen_host: str = _doc("address to listen on", default="127.0.0.1")
    listen_port: int = _doc("TCP port for brokers and clients", default=9876)
    broker_expire_seconds: float = _doc("drop a broker silent for this long", default=120.0)
    scan_interval_seconds: float = _doc("how often to look for expired brokers", default=10.0)
    order_message_enable: bool = _doc("fill orderTopicConf from KV namespace ORDER_TOPIC_CONFIG", default=False)


@dataclass(frozen=True)
class BrokerConfig:
    """Broker settings (RocketMQ names in camelCase are accepted in the TOML file)."""

    broker_name: str = _doc("this broker's name; queues of a topic are addressed by it", default="broker-a")
    broker_cluster_name: str = _doc("cluster the broker belongs to", default="DefaultCluster")
    broker_id: int = _doc("0 for a master", default=0)
    broker_ip: str = _doc("address clients use to reach this broker (advertised, IPv4)", default="127.0.0.1")
    listen_host: str = _doc("address to listen on", default="127.0.0.1")
    listen_port: int = _doc("TCP port for clients", default=10911)
    listen_vip_channel: bool = _doc("also listen on listenPort - 2 for old Java clients (VIP channel)", default=False)
    namesrv_addr: str = _doc("name servers, ';'-separated host:port list (empty: none)", default="127.0.0.1:9876")
    store_path_root_dir: str = _doc("folder of the store (commit log, queues, index, config)", default="./sievemq-data")
    register_broker_interval_seconds: float = _doc("how often to register with every name server", default=30.0)
    auto_create_topic_enable: bool = _doc("create unknown topics on first send (from TBW102)", default=True)
    auto_create_subscription_group: bool = _doc("create unknown consumer groups on first use", default=True)
    default_topic_queue_nums: int = _doc("queues of TBW102 and of admin-created topics", default=8)
    flush_disk_type: str = _doc("ASYNC_FLUSH (reply at once) or SYNC_FLUSH (reply after fsync)", default="ASYNC_FLUSH")
    flush_interval_commitlog_ms: int = _doc("async flush period", default=500)
    sync_flush_timeout_ms: int = _doc("wait at most this for fsync under SYNC_FLUSH", default=5000)
    mapped_file_size_commitlog: int = _doc("bytes per commit-log segment file", default=1 << 30)
    mapped_file_size_consume_queue_entries: int = _doc("entries per consume-queue file", default=300_000)
    file_reserved_time: float = _doc("hours a commit-log segment is kept", default=72.0)
    delete_when: int = _doc("hour of day when expired segments are deleted (-1: any time)", default=4)
    disk_max_used_space_ratio: int = _doc("percent of disk use past which old segments are deleted", default=75)
    max_message_size: int = _doc("largest message body in bytes", default=4 * 1024 * 1024)
    long_polling_enable: bool = _doc("hold pulls until a message arrives (else short polling)", default=True)
    short_polling_time_mills: int = _doc("hold time when long polling is off", default=1000)
    message_delay_level: str = _doc("delay levels 1..N", default=DEFAULT_DELAY_LEVELS)
    max_reconsume_times: int = _doc("default retries before a message goes to %DLQ%group", default=16)
    channel_expired_seconds: float = _doc("drop a client connection silent for this long", default=120.0)
    enable_property_filter: bool = _doc("allow SQL92 subscriptions", default=True)
    enable_calc_filter_bit_map: bool = _doc(
        "compute Bloom bitmaps of SQL92 groups at dispatch, so pulls skip non-matching messages unread",
        default=True,
    )
    expect_consumer_num_use_filter: int = _doc("Bloom filter: expected SQL92 groups per topic (n)", default=32)
    max_error_rate_of_bloom_filter: int = _doc("Bloom filter: false-positive rate in percent (1..99)", default=20)
    filter_server_nums: int = _doc("filter servers this broker starts and supervises (0: none)", default=0)
    filter_server_config: str = _doc("TOML file for the filter servers this broker starts", default="")
    subscription_consistency: str = _doc(
        "strict: clients of a group that subscribe a topic differently are refused (nothing is lost); "
        "rocketmq: RocketMQ's behaviour (newest subscription wins, messages can be lost), with a warning",
        default="strict",
    )

    def namesrv_list(self) -> list[str]:
        """The configured name server addresses."""
        return [a.strip() for a in self.namesrv_addr.replace(",", ";").split(";") if a.strip()]

    @property
    def advertised_addr(self) -> str:
        """``ip:port`` that clients use for this broker."""
        return f"{self.broker_ip}:{self.listen_port}"


def _norm(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


def _coerce(value: Any, typ: Any, name: str) -> Any:
    if isinstance(value, list | tuple) and typ is str:
        value = ",".join(str(v) for v in value)
    try:
        if typ is bool:
            if isinstance(value, bool):
                return value
            s = str(value).strip().lower()
            if s in ("true", "1", "yes", "on"):
                return True
            if s in ("false", "0", "no", "off"):
                return False
            raise ValueError(value)
        if typ is int:
            if isinstance(value, bool):
                raise ValueError(value)
            return int(value)
        if typ is float:
            return float(value)
        return str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"config '{name}': cannot use {value!r} as {typ.__name__}") from None


def load_config(
    cls: type[T],
    toml_path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    env_prefix: str = "SIEVEMQ_",
) -> T:
    """Build ``cls`` from defaults, a TOML file, ``<env_prefix><NAME>`` environment variables and flag overrides.

    A TOML array given for a string setting becomes its comma-separated form.
    """
    hints = get_type_hints(cls)
    known = {_norm(f.name): f.name for f in fields(cls)}  # type: ignore[arg-type]
    values: dict[str, Any] = {}
    if toml_path:
        try:
            with open(toml_path, "rb") as fh:
                raw = tomllib.load(fh)
        except FileNotFoundError:
            raise ConfigError(f"config file {toml_path} does not exist") from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"config file {toml_path}: {e}") from None
        for k, v in raw.items():
            name = known.get(_norm(k), "")
            if not name:
                raise ConfigError(f"config file {toml_path}: unknown key '{k}' (see `sievemq config-reference`)")
            values[name] = _coerce(v, hints[name], k)
    env = os.environ if env is None else env
    for name in known.values():
        key = env_prefix + name.upper()
        if key in env:
            values[name] = _coerce(env[key], hints[name], key)
    for k, v in (overrides or {}).items():
        if v is not None:
            name = known.get(_norm(k), "")
            if not name:
                raise ConfigError(f"unknown setting '{k}'")
            values[name] = _coerce(v, hints[name], k)
    return cls(**values)


def describe(cls: type[Any]) -> list[tuple[str, str, Any, str]]:
    """(camelCase key, type, default, doc) for every field: the config reference."""
    out = []
    for f in fields(cls):
        parts = f.name.split("_")
        camel = parts[0] + "".join(p.title() for p in parts[1:])
        default = f.default if f.default is not dataclasses.MISSING else None
        out.append((camel, type(default).__name__, default, str(f.metadata.get("doc", ""))))
    return out
