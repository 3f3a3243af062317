"""Configuration: one frozen dataclass per role, loaded from a TOML file, environment variables and flags.

Precedence, lowest to highest: defaults < TOML file < environment (``SIEVEMQ_<NAME>``) < command-line flags.
Keys may be written in RocketMQ's camelCase (``brokerName``, ``flushDiskType``) or in snake_case.

Every value is checked when a config is built, by ``check_fields`` (called from each class's ``__post_init__``),
against two declarations of its field: the type (a ``Literal`` lists the accepted words, matched in any letter
case and kept as listed) and the ``Rule`` given with ``setting(...)`` (an inclusive range, a strict lower bound, a
format). The same declarations feed ``describe`` (``sievemq config-reference``, the README's reference) and the
flags' ``--help``. A bad value raises ``ConfigError`` naming the camelCase key, the value, what is allowed and, from
``load_config``, where the value came from.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

from sievemq.errors import ConfigError
from sievemq.protocol.names import MAX_TOPIC_LENGTH, NAME_RE
from sievemq.remoting.command import MAX_FRAME_LENGTH
from sievemq.remoting.limits import ServerLimits
from sievemq.remoting.tls import TlsMode
from sievemq.tls_settings import CLIENT_SETTINGS as CLIENT_TLS
from sievemq.tls_settings import SERVER_SETTINGS as SERVER_TLS
from sievemq.tls_settings import TlsEnable, check_broker, server_tls

T = TypeVar("T")

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
MAX_MESSAGE_SIZE_LIMIT = MAX_FRAME_LENGTH - 1024 * 1024
"""Largest ``maxMessageSize``: 15 MiB, so a body of that size and its header fit one 16 MiB remoting frame."""
MIN_COMMITLOG_FILE_SIZE = 64 * 1024
INT32_MAX = (1 << 31) - 1
"""RocketMQ's file sizes are Java ints; sievemq's record and blank sizes are 32-bit too."""

FlushDiskType = Literal["ASYNC_FLUSH", "SYNC_FLUSH"]
SubscriptionConsistency = Literal["strict", "rocketmq"]


# ------------------------------------------------------------------------------------------------ rules
@dataclass(frozen=True)
class Format:
    """A format a string setting must have: ``allowed`` says it in words, ``test`` checks a value."""

    allowed: str
    test: Callable[[str], bool]


@dataclass(frozen=True)
class Rule:
    """What a setting accepts beyond its type: an inclusive range ``lo..hi``, a strict bound ``> above``, a format."""

    lo: float | None = None
    hi: float | None = None
    above: float | None = None
    fmt: Format | None = None

    def accepts(self, value: Any) -> bool:
        """True when ``value`` (already of the field's type) is within the range and has the format."""
        if isinstance(value, int | float) and not isinstance(value, bool):
            if not math.isfinite(value):
                return False
            if self.lo is not None and value < self.lo:
                return False
            if self.hi is not None and value > self.hi:
                return False
            if self.above is not None and value <= self.above:
                return False
        return self.fmt is None or self.fmt.test(str(value))

    def bounds(self) -> str:
        """The range in words (``"in 0..65535"``, ``">= 1"``, ``"> 0"``), or ``""``."""
        if self.lo is not None and self.hi is not None:
            return f"in {self.lo}..{self.hi}"
        if self.lo is not None:
            return f">= {self.lo}"
        if self.hi is not None:
            return f"<= {self.hi}"
        if self.above is not None:
            return f"> {self.above}"
        return ""


def setting(
    doc: str,
    default: Any,
    *,
    lo: float | None = None,
    hi: float | None = None,
    above: float | None = None,
    fmt: Format | None = None,
    secret: bool = False,
) -> Any:
    """A config field: its ``doc`` (reference and ``--help``), its default and what it accepts (see ``Rule``); a
    ``secret`` one is left out of the config's repr."""
    return field(default=default, repr=not secret, metadata={"doc": doc, "rule": Rule(lo, hi, above, fmt)})


def split_addrs(value: str) -> list[str]:
    """Items of a ``;``-separated (or ``,``-separated) address list, blanks dropped."""
    return [a.strip() for a in value.replace(",", ";").split(";") if a.strip()]


_HOSTNAME_RE = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*$"
)


def _is_ip(value: str, version: int | None = None) -> bool:
    try:
        ip = ipaddress.ip_address(value)
    except ValueError:
        return False
    return version is None or ip.version == version


def _is_host(value: str) -> bool:
    return _is_ip(value) or bool(_HOSTNAME_RE.match(value))


def _is_host_port(value: str) -> bool:
    host, sep, port = value.rpartition(":")
    if not sep or not (port.isascii() and port.isdigit()) or not 1 <= int(port) <= 65535:
        return False
    if host.startswith("[") and host.endswith("]"):
        return _is_ip(host[1:-1], 6)
    return _is_host(host)


def _is_store_dir(value: str) -> bool:
    if not value.strip():
        return False
    path = Path(value)
    for candidate in (path, *path.parents):  # the nearest existing one must be a folder (mkdir makes the rest)
        if candidate.exists():
            return candidate.is_dir()
    return True


def _is_delay_levels(value: str) -> bool:
    from sievemq.store.delay_levels import parse_levels  # on use: the store package loads numpy

    try:
        parse_levels(value)
    except ValueError:
        return False
    return True


LISTEN_HOST = Format("a host name or IP address (empty: every interface)", lambda v: v == "" or _is_host(v))
ADVERTISED_IP = Format(
    "an IPv4 address others can reach (a.b.c.d, not 0.0.0.0)",
    lambda v: _is_ip(v, 4) and not ipaddress.IPv4Address(v).is_unspecified,
)
HOST_PORT = Format("host:port (port 1..65535)", _is_host_port)
HOST_PORT_LIST = Format(
    "host:port items separated by ';' (port 1..65535), or empty", lambda v: all(map(_is_host_port, split_addrs(v)))
)
NAME = Format(  # broker and cluster names are topics too (the broker creates them)
    f"1..{MAX_TOPIC_LENGTH} characters of a-z A-Z 0-9 _ - % | (RocketMQ's topic characters)",
    lambda v: len(v) <= MAX_TOPIC_LENGTH and bool(NAME_RE.match(v)),
)
STORE_DIR = Format("a folder path, not an existing file nor under one", _is_store_dir)
EXISTING_FILE = Format("empty or the path of an existing file", lambda v: v == "" or Path(v).is_file())
DELAY_LEVELS = Format(
    "durations separated by spaces, each a whole number and s, m, h or d (1s 5m 2h)", _is_delay_levels
)


# ------------------------------------------------------------------------------------------------ roles
@dataclass(frozen=True)
class NamesrvConfig:
    """Name server settings."""

    listen_host: str = setting("address to listen on", "127.0.0.1", fmt=LISTEN_HOST)
    listen_port: int = setting("TCP port for brokers and clients", 9876, lo=0, hi=65535)
    broker_expire_seconds: float = setting("drop a broker silent for this long", 120.0, above=0)
    scan_interval_seconds: float = setting("how often to look for expired brokers", 10.0, above=0)
    order_message_enable: bool = setting("fill orderTopicConf from KV namespace ORDER_TOPIC_CONFIG", False)
    tls_mode: TlsMode = setting(*SERVER_TLS["mode"])
    tls_server_cert_path: str = setting(*SERVER_TLS["cert"], fmt=EXISTING_FILE)
    tls_server_key_path: str = setting(*SERVER_TLS["key"], fmt=EXISTING_FILE)
    tls_server_key_password: str = setting(*SERVER_TLS["password"], secret=True)
    tls_server_auth_client: bool = setting(*SERVER_TLS["auth_client"])
    tls_server_trust_cert_path: str = setting(*SERVER_TLS["trust"], fmt=EXISTING_FILE)
    acl_enable: bool = setting(
        "require a signature of an admin account of aclFile for the write requests (register/unregister broker, "
        "KV and topic deletion); reads stay open",
        False,
    )
    acl_file: str = setting(
        "the plain_acl.yml the name server checks against (needed when aclEnable)", "", fmt=EXISTING_FILE
    )

    def __post_init__(self) -> None:
        check_fields(self)
        server_tls(self)  # loads the TLS files: a bad one is a ConfigError naming its key
        if self.acl_enable and not self.acl_file:
            raise ConfigError(key="aclFile", value=self.acl_file, allowed="the path of a plain_acl.yml when aclEnable")


@dataclass(frozen=True)
class BrokerConfig:
    """Broker settings (RocketMQ names in camelCase are accepted in the TOML file)."""

    broker_name: str = setting("this broker's name; queues of a topic are addressed by it", "broker-a", fmt=NAME)
    broker_cluster_name: str = setting("cluster the broker belongs to", "DefaultCluster", fmt=NAME)
    broker_id: int = setting("0 for a master", 0, lo=0)
    broker_ip: str = setting(
        "address clients use to reach this broker (advertised, IPv4)", "127.0.0.1", fmt=ADVERTISED_IP
    )
    listen_host: str = setting("address to listen on", "127.0.0.1", fmt=LISTEN_HOST)
    listen_port: int = setting("TCP port for clients", 10911, lo=0, hi=65535)
    listen_vip_channel: bool = setting(
        "also listen on listenPort - 2 for old Java clients (VIP channel; listenPort must then be >= 2)", False
    )
    namesrv_addr: str = setting(
        "name servers, ';'-separated host:port list (empty: none)", "127.0.0.1:9876", fmt=HOST_PORT_LIST
    )
    store_path_root_dir: str = setting(
        "folder of the store (commit log, queues, index, config)", "./sievemq-data", fmt=STORE_DIR
    )
    register_broker_interval_seconds: float = setting("how often to register with every name server", 30.0, above=0)
    auto_create_topic_enable: bool = setting("create unknown topics on first send (from TBW102)", True)
    auto_create_subscription_group: bool = setting("create unknown consumer groups on first use", True)
    default_topic_queue_nums: int = setting("queues of TBW102 and of admin-created topics", 8, lo=1, hi=1024)
    flush_disk_type: FlushDiskType = setting(
        "ASYNC_FLUSH (reply at once) or SYNC_FLUSH (reply after fsync)", "ASYNC_FLUSH"
    )
    flush_interval_commitlog_ms: int = setting("async flush period", 500, lo=1)
    sync_flush_timeout_ms: int = setting("wait at most this for fsync under SYNC_FLUSH", 5000, lo=1)
    mapped_file_size_commitlog: int = setting(
        "bytes per commit-log segment file", 1 << 30, lo=MIN_COMMITLOG_FILE_SIZE, hi=INT32_MAX
    )
    mapped_file_size_consume_queue_entries: int = setting(
        "entries per consume-queue file (20 bytes each)", 300_000, lo=100, hi=INT32_MAX // 20
    )
    file_reserved_time: float = setting("hours a commit-log segment is kept", 72.0, above=0)
    delete_when: int = setting("hour of day when expired segments are deleted (-1: any time)", 4, lo=-1, hi=23)
    disk_max_used_space_ratio: int = setting(
        "percent of disk use past which old segments are deleted", 75, lo=10, hi=95
    )
    disk_space_clean_forcibly_ratio: int = setting(
        "percent of disk use past which the oldest segments are deleted even if not expired (100: never)",
        85,
        lo=10,
        hi=100,
    )
    disk_full_reserve_bytes: int = setting(
        "free bytes the store keeps on its disk: a send that needs new space (a file, or the next chunk of a "
        "segment) is refused (code 14, reason DISK_FULL) unless this many stay free after it",
        128 * 1024 * 1024,
        lo=0,
    )
    max_hash_slot_num: int = setting("key index: hash slots per index file (4 bytes each)", 5_000_000, lo=1,
                                     hi=INT32_MAX // 24)  # fmt: skip
    max_index_num: int = setting("key index: entries per index file (24 bytes each)", 20_000_000, lo=1,
                                 hi=INT32_MAX // 24)  # fmt: skip
    max_message_size: int = setting(
        "largest message body in bytes (at most 15 MiB, so that it fits one 16 MiB remoting frame; a message "
        "larger than a commit-log segment is refused too)",
        4 * 1024 * 1024,
        lo=1,
        hi=MAX_MESSAGE_SIZE_LIMIT,
    )
    long_polling_enable: bool = setting("hold pulls until a message arrives (else short polling)", True)
    short_polling_time_mills: int = setting("hold time when long polling is off", 1000, lo=1)
    message_delay_level: str = setting("delay levels 1..N", DEFAULT_DELAY_LEVELS, fmt=DELAY_LEVELS)
    max_reconsume_times: int = setting("default retries before a message goes to %DLQ%group", 16, lo=0)
    channel_expired_seconds: float = setting("drop a client connection silent for this long", 120.0, above=0)
    server_max_unsent_bytes: int = setting(
        "per connection: stop reading its requests while more than this many bytes of answers wait to be sent "
        "(the peer does not read them)",
        ServerLimits.max_unsent_bytes,
        lo=64 * 1024,
    )
    server_max_requests_in_flight: int = setting(
        "per connection: requests served at once, held long-polling pulls included (a RocketMQ client holds one "
        "per queue); further requests wait unread until one is answered",
        ServerLimits.max_requests_in_flight,
        lo=1,
    )
    server_partial_frame_budget: int = setting(
        "bytes of frames not yet complete, held for all connections together; a connection that would go past "
        "it is closed",
        ServerLimits.partial_frame_budget,
        lo=MAX_FRAME_LENGTH,
    )
    server_frame_timeout_seconds: float = setting(
        "close a connection whose frame is still incomplete this long after its first byte",
        ServerLimits.frame_timeout,
        above=0,
    )
    server_max_connections: int = setting(
        "connections at most (0: no fixed cap); new ones are refused anyway when fewer than serverFdReserve file "
        "descriptors would stay free under RLIMIT_NOFILE",
        ServerLimits.max_connections,
        lo=0,
    )
    server_fd_reserve: int = setting(
        "file descriptors kept free for the store's files and outgoing connections: the connection cap is "
        "RLIMIT_NOFILE less the descriptors open for other uses less this",
        ServerLimits.fd_reserve,
        lo=0,
    )
    server_warning_interval_seconds: float = setting(
        "connection warnings (bad frames, closed offenders): at most one line per peer IP per this long, then a "
        "count of the lines held back",
        ServerLimits.warning_interval,
        above=0,
    )
    tls_mode: TlsMode = setting(*SERVER_TLS["mode"])
    tls_server_cert_path: str = setting(*SERVER_TLS["cert"], fmt=EXISTING_FILE)
    tls_server_key_path: str = setting(*SERVER_TLS["key"], fmt=EXISTING_FILE)
    tls_server_key_password: str = setting(*SERVER_TLS["password"], secret=True)
    tls_server_auth_client: bool = setting(*SERVER_TLS["auth_client"])
    tls_server_trust_cert_path: str = setting(*SERVER_TLS["trust"], fmt=EXISTING_FILE)
    tls_enable: TlsEnable = setting(*CLIENT_TLS["enable"])
    tls_client_trust_cert_path: str = setting(*CLIENT_TLS["trust"], fmt=EXISTING_FILE)
    tls_client_auth_server: bool = setting(*CLIENT_TLS["auth_server"])
    tls_client_cert_path: str = setting(*CLIENT_TLS["cert"], fmt=EXISTING_FILE)
    tls_client_key_path: str = setting(*CLIENT_TLS["key"], fmt=EXISTING_FILE)
    enable_property_filter: bool = setting("allow SQL92 subscriptions", True)
    enable_calc_filter_bit_map: bool = setting(
        "compute Bloom bitmaps of SQL92 groups at dispatch, so pulls skip non-matching messages unread", True
    )
    expect_consumer_num_use_filter: int = setting(
        "Bloom filter: expected SQL92 groups per topic (n)", 32, lo=1, hi=16384
    )
    max_error_rate_of_bloom_filter: int = setting("Bloom filter: false-positive rate in percent", 20, lo=1, hi=99)
    filter_server_nums: int = setting("filter servers this broker starts and supervises (0: none)", 0, lo=0, hi=64)
    filter_server_config: str = setting("TOML file for the filter servers this broker starts", "", fmt=EXISTING_FILE)
    subscription_consistency: SubscriptionConsistency = setting(
        "strict: clients of a group that subscribe a topic differently are refused (nothing is lost); "
        "rocketmq: RocketMQ's behaviour (newest subscription wins, messages can be lost), with a warning",
        "strict",
    )
    acl_enable: bool = setting(
        "check every request against aclFile (RocketMQ's plain ACL: signatures, PUB/SUB per topic and group, "
        "admin-only codes); refusals are code 16",
        False,
    )
    acl_file: str = setting(
        "the plain_acl.yml, reloaded when it changes (empty: plain_acl.yml in storePathRootDir)", "", fmt=EXISTING_FILE
    )
    acl_access_key: str = setting(
        "account the broker signs its own requests with (registrations with name servers, and the requests of "
        "the filter servers it starts); an admin account where they check ACL",
        "",
    )
    acl_secret_key: str = setting(
        "secret key of aclAccessKey (prefer the environment: SIEVEMQ_ACL_SECRET_KEY)", "", secret=True
    )

    def __post_init__(self) -> None:
        check_fields(self)
        check_broker(self)  # loads the TLS files: a bad one is a ConfigError naming its key
        if bool(self.acl_access_key) != bool(self.acl_secret_key):
            key = "aclSecretKey" if self.acl_access_key else "aclAccessKey"
            raise ConfigError(key=key, value="", allowed="a non-empty value: aclAccessKey and aclSecretKey go together")
        if self.listen_vip_channel and self.listen_port < 2:
            raise ConfigError(
                key="listenPort",
                value=self.listen_port,
                allowed="an integer in 2..65535 when listenVipChannel is true (the VIP channel is listenPort - 2)",
            )

    def namesrv_list(self) -> list[str]:
        """The configured name server addresses."""
        return split_addrs(self.namesrv_addr)

    @property
    def advertised_addr(self) -> str:
        """``ip:port`` that clients use for this broker."""
        return f"{self.broker_ip}:{self.listen_port}"

    def server_limits(self) -> ServerLimits:
        """The bounds of the broker's remoting servers (the ``server*`` settings)."""
        return ServerLimits(
            max_unsent_bytes=self.server_max_unsent_bytes,
            max_requests_in_flight=self.server_max_requests_in_flight,
            partial_frame_budget=self.server_partial_frame_budget,
            frame_timeout=self.server_frame_timeout_seconds,
            max_connections=self.server_max_connections,
            fd_reserve=self.server_fd_reserve,
            warning_interval=self.server_warning_interval_seconds,
        )


# ------------------------------------------------------------------------------------------------ checking
@dataclass(frozen=True)
class Spec:
    """One setting as declared: field name, camelCase key, value type, accepted words, rule, doc and default."""

    name: str
    key: str
    kind: type
    choices: tuple[str, ...]
    rule: Rule
    doc: str
    default: Any

    @property
    def allowed(self) -> str:
        """What the setting accepts, in words (for errors, the reference and ``--help``)."""
        if self.choices:
            words = " or ".join(self.choices)
            return f"{words} (any letter case)"
        if self.kind is bool:
            return "true or false"
        bounds = self.rule.bounds()
        if self.kind is int:
            return f"an integer {bounds}".rstrip()
        if self.kind is float:
            return f"a number {bounds}".rstrip()
        return self.rule.fmt.allowed if self.rule.fmt is not None else "any text"

    def check(self, value: Any) -> Any:
        """``value`` as stored (an accepted word in its listed spelling); ``ConfigError`` when not allowed."""
        if self.choices:
            for choice in self.choices:
                if isinstance(value, str) and value.lower() == choice.lower():
                    return choice
        elif _has_type(value, self.kind) and self.rule.accepts(value):
            return value
        raise ConfigError(key=self.key, value=value, allowed=self.allowed)


def _has_type(value: Any, kind: type) -> bool:
    if kind is bool or isinstance(value, bool):  # a bool is an int to isinstance, not to a setting
        return kind is bool and isinstance(value, bool)
    return isinstance(value, int | float) if kind is float else isinstance(value, kind)


def camel(name: str) -> str:
    """``flush_disk_type`` -> ``flushDiskType``."""
    first, *rest = name.split("_")
    return first + "".join(p.title() for p in rest)


_SPECS: dict[type[Any], tuple[Spec, ...]] = {}


def specs(cls: type[Any]) -> tuple[Spec, ...]:
    """Every setting of a config dataclass, in declaration order."""
    done = _SPECS.get(cls)
    if done is not None:
        return done
    hints = get_type_hints(cls)
    out = []
    for f in fields(cls):
        hint = hints[f.name]
        choices: tuple[str, ...] = get_args(hint) if get_origin(hint) is Literal else ()
        kind = str if choices else hint
        default = f.default if f.default is not dataclasses.MISSING else None
        rule = f.metadata.get("rule", Rule())
        out.append(Spec(f.name, camel(f.name), kind, choices, rule, str(f.metadata.get("doc", "")), default))
    done = _SPECS[cls] = tuple(out)
    return done


def check_fields(cfg: Any) -> None:
    """Check every field of a config dataclass instance (``ConfigError`` on the first bad one).

    Accepted words of a ``Literal`` field are stored in their listed spelling (``sync_flush`` -> ``SYNC_FLUSH``).
    """
    for spec in specs(type(cfg)):
        value = getattr(cfg, spec.name)
        checked = spec.check(value)
        if checked is not value:
            object.__setattr__(cfg, spec.name, checked)


# ------------------------------------------------------------------------------------------------ loading
def _norm(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


_TRUE = frozenset(("true", "1", "yes", "on", "t", "y"))
_FALSE = frozenset(("false", "0", "no", "off", "f", "n"))


def _coerce(value: Any, spec: Spec, source: str) -> Any:
    """A raw value (TOML, environment text, flag text) as the field's type; ``ConfigError`` when it is not one."""
    typ = spec.kind
    if isinstance(value, list | tuple) and typ is str:
        value = ",".join(str(v) for v in value)
    try:
        if typ is bool:
            if isinstance(value, bool):
                return value
            s = str(value).strip().lower()
            if s in _TRUE or s in _FALSE:
                return s in _TRUE
            raise ValueError(value)
        if typ is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(value)
            return int(value)
        if typ is float:
            if isinstance(value, bool):
                raise ValueError(value)
            return float(value)
        return str(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(key=spec.key, value=value, allowed=spec.allowed, source=source) from None


def load_config(
    cls: type[T],
    toml_path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    env_prefix: str = "SIEVEMQ_",
) -> T:
    """Build ``cls`` from defaults, a TOML file, ``<env_prefix><NAME>`` environment variables and flag overrides.

    A TOML array given for a string setting becomes its comma-separated form. Every value is checked; a bad one
    raises ``ConfigError`` saying where it came from (the file, the variable, the command line).
    """
    by_name = {s.name: s for s in specs(cls)}
    known = {_norm(name): name for name in by_name}
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}

    def put(name: str, raw: Any, source: str) -> None:
        values[name] = _coerce(raw, by_name[name], source)
        sources[name] = source

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
            put(name, v, str(toml_path))
    env = os.environ if env is None else env
    for name in by_name:
        var = env_prefix + name.upper()
        if var in env:
            put(name, env[var], var)
    for k, v in (overrides or {}).items():
        if v is not None:
            name = known.get(_norm(k), "")
            if not name:
                raise ConfigError(f"unknown setting '{k}'")
            put(name, v, "the command line")
    try:
        return cls(**values)
    except ConfigError as e:
        name = next((s.name for s in by_name.values() if s.key == e.key), "")
        if not name or e.source:
            raise
        source = sources.get(name, "the default")
        raise ConfigError(key=e.key, value=e.value, allowed=e.allowed, source=source) from None


def describe(cls: type[Any]) -> list[tuple[str, str, Any, str, str]]:
    """(camelCase key, type, default, doc, allowed values) for every field: the config reference."""
    return [(s.key, type(s.default).__name__, s.default, s.doc, s.allowed) for s in specs(cls)]
