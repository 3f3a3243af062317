"""Filter server settings: a frozen dataclass loaded from TOML, ``SIEVEMQ_FILTERSRV_*`` variables and flags.

Precedence, lowest to highest: defaults < TOML file < environment < flags (as ``sievemq.config.load_config``).
The environment prefix is ``SIEVEMQ_FILTERSRV_`` (not ``SIEVEMQ_``) so that a filter server started by a broker
does not pick up the broker's own ``SIEVEMQ_LISTEN_PORT`` and friends. List settings (``filterModules``,
``filterPaths``, ``uploadAccounts``) are TOML arrays, or comma-separated strings in the environment and flags.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sievemq.config import load_config
from sievemq.errors import ConfigError

ENV_PREFIX = "SIEVEMQ_FILTERSRV_"
_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def _doc(text: str, **kw: Any) -> Any:
    return field(metadata={"doc": text}, **kw)


def split_list(value: str, *, paths: bool = False) -> tuple[str, ...]:
    """Items of a comma-separated setting (also ``os.pathsep`` for paths), blanks dropped."""
    text = value.replace(os.pathsep, ",") if paths else value
    return tuple(p.strip() for p in text.split(",") if p.strip())


@dataclass(frozen=True)
class FiltersrvConfig:
    """Settings of one filter server (RocketMQ-style camelCase keys are accepted in the TOML file)."""

    broker_addr: str = _doc(
        "the broker this filter server serves and pulls from (host:port)", default="127.0.0.1:10911"
    )
    listen_host: str = _doc("address to listen on", default="127.0.0.1")
    listen_port: int = _doc("TCP port for consumers (0: an ephemeral port)", default=0)
    advertised_ip: str = _doc("IP advertised to the broker as ip:port (IPv4)", default="127.0.0.1")
    register_interval_seconds: float = _doc("how often to register with the broker (301)", default=10.0)
    client_upload_filter_enable: bool = _doc("accept signed Python source uploaded by clients", default=False)
    upload_secret: str = _doc("HMAC-SHA256 secret shared with clients that may upload (prefer the env)", default="")
    upload_accounts: str = _doc("AccessKey accounts allowed to upload (comma-separated)", default="")
    filter_modules: str = _doc("modules whose functions consumers may name, module:function", default="")
    filter_paths: str = _doc("folders added to the workers' sys.path (comma-separated)", default="")
    worker_count: int = _doc("worker processes running filter functions", default=2)
    batch_timeout_seconds: float = _doc("wall-clock limit for one batch (one pull) in a worker", default=2.0)
    load_timeout_seconds: float = _doc("limit for importing/compiling a function at registration", default=10.0)
    worker_cpu_seconds: int = _doc("RLIMIT_CPU of a worker; workers are recycled at half of it", default=60)
    worker_memory_mb: int = _doc("RLIMIT_AS of a worker in MiB (0: unlimited)", default=1024)
    worker_max_batches: int = _doc("recycle a worker after this many batches", default=100_000)
    max_consecutive_failures: int = _doc("disable a function for its group after this many failures", default=3)
    max_source_bytes: int = _doc("largest uploaded source accepted", default=256 * 1024)
    read_ahead_batches: int = _doc("broker batches a pull may read to find maxMsgNums matches (1: off)", default=8)
    broker_timeout_seconds: float = _doc("timeout of a request to the broker (plus any suspend time)", default=10.0)
    parent_pid: int = _doc("exit when this process is gone (set by a broker that spawns us; 0: off)", default=0)

    def __post_init__(self) -> None:
        if self.worker_count < 1:
            raise ConfigError("filtersrv: workerCount must be at least 1")
        if self.batch_timeout_seconds <= 0 or self.load_timeout_seconds <= 0:
            raise ConfigError("filtersrv: batchTimeoutSeconds and loadTimeoutSeconds must be positive")
        if self.worker_cpu_seconds < 1:
            raise ConfigError("filtersrv: workerCpuSeconds must be at least 1")
        if self.worker_memory_mb < 0:
            raise ConfigError("filtersrv: workerMemoryMb must be 0 (unlimited) or positive")
        if self.read_ahead_batches < 1:
            raise ConfigError("filtersrv: readAheadBatches must be at least 1")
        if self.max_consecutive_failures < 1:
            raise ConfigError("filtersrv: maxConsecutiveFailures must be at least 1")
        if ":" not in self.broker_addr:
            raise ConfigError(f"filtersrv: brokerAddr must be host:port, got {self.broker_addr!r}")
        for m in self.modules:
            if not _MODULE_RE.match(m):
                raise ConfigError(f"filtersrv: filterModules entry {m!r} is not a dotted module name")

    @property
    def modules(self) -> tuple[str, ...]:
        """Allowed modules for named functions."""
        return split_list(self.filter_modules)

    @property
    def paths(self) -> tuple[str, ...]:
        """Folders added to the workers' ``sys.path``."""
        return split_list(self.filter_paths, paths=True)

    @property
    def accounts(self) -> tuple[str, ...]:
        """AccessKey accounts allowed to upload source."""
        return split_list(self.upload_accounts)


def load_filtersrv_config(
    toml_path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> FiltersrvConfig:
    """Build the config from defaults, a TOML file, ``SIEVEMQ_FILTERSRV_*`` variables and flag overrides.

    The prefix differs from the broker's so a filter server started by a broker does not take its settings.
    """
    return load_config(FiltersrvConfig, toml_path, env, overrides, env_prefix=ENV_PREFIX)
