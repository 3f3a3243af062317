"""Filter server settings: a frozen dataclass loaded from TOML, ``SIEVEMQ_FILTERSRV_*`` variables and flags.

Precedence, lowest to highest: defaults < TOML file < environment < flags (as ``sievemq.settings.load_config``).
The environment prefix is ``SIEVEMQ_FILTERSRV_`` (not ``SIEVEMQ_``) so that a filter server started by a broker
does not pick up the broker's own ``SIEVEMQ_LISTEN_PORT`` and friends. List settings (``filterModules``,
``filterPaths``, ``uploadAccounts``, ``sandboxSkip``, ``sandboxReadPaths``) are TOML arrays, or comma-separated
strings in the environment and flags.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sievemq.acl.settings import ACL_STRICT, ACL_WINDOW, AclStrictMode
from sievemq.errors import ConfigError
from sievemq.filtersrv.layers import SKIPPABLE, SandboxRequire, parse_skip, skip_is_valid
from sievemq.http import settings as http
from sievemq.settings import ADVERTISED_IP, HOST_PORT, LISTEN_HOST, Format, check_fields, load_config, setting

ENV_PREFIX = "SIEVEMQ_FILTERSRV_"
_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def split_list(value: str, *, paths: bool = False) -> tuple[str, ...]:
    """Items of a comma-separated setting (also ``os.pathsep`` for paths), blanks dropped."""
    text = value.replace(os.pathsep, ",") if paths else value
    return tuple(p.strip() for p in text.split(",") if p.strip())


MODULE_LIST = Format(
    "dotted module names separated by commas (shop.filters), or empty",
    lambda v: all(_MODULE_RE.match(m) for m in split_list(v)),
)
LAYER_LIST = Format(f"empty or sandbox layers separated by commas ({', '.join(SKIPPABLE)})", skip_is_valid)
USER_NAME = Format(
    "a user name (letters, digits, '_', '-', '.')", lambda v: re.fullmatch(r"[\w.-]+", v, re.ASCII) is not None
)


@dataclass(frozen=True)
class FiltersrvConfig:
    """Settings of one filter server (RocketMQ-style camelCase keys are accepted in the TOML file)."""

    broker_addr: str = setting(
        "the broker this filter server serves and pulls from (host:port)", "127.0.0.1:10911", fmt=HOST_PORT
    )
    listen_host: str = setting("address to listen on", "127.0.0.1", fmt=LISTEN_HOST)
    listen_port: int = setting("TCP port for consumers (0: an ephemeral port)", 0, lo=0, hi=65535)
    http_listen_host: str = setting(*http.host_doc(), fmt=LISTEN_HOST)
    http_listen_port: int = setting(*http.port_doc("filtersrv"), lo=0, hi=65535)
    http_metrics_max_series: int = setting(
        "/metrics: (group, topic) pairs with their own series at most (the rest add up in one labelled (other))",
        2000,
        lo=1,
        hi=1_000_000,
    )
    advertised_ip: str = setting("IP advertised to the broker as ip:port (IPv4)", "127.0.0.1", fmt=ADVERTISED_IP)
    register_interval_seconds: float = setting("how often to register with the broker (301)", 10.0, above=0)
    client_upload_filter_enable: bool = setting("accept signed Python source uploaded by clients", False)
    upload_secret: str = setting(
        "HMAC-SHA256 secret shared with clients that may upload (prefer the env)", "", secret=True
    )
    upload_accounts: str = setting("AccessKey accounts allowed to upload (comma-separated)", "")
    filter_modules: str = setting("modules whose functions consumers may name, module:function", "", fmt=MODULE_LIST)
    filter_paths: str = setting("folders added to the workers' sys.path (comma-separated)", "")
    worker_count: int = setting("worker processes running named filter functions (uploads have their own)", 2, lo=1)
    upload_worker_count: int = setting(
        "worker processes of each uploaded function, its tenant's own (upload account, group, topic, source); "
        "never shared with another function",
        1,
        lo=1,
        hi=64,
    )
    max_upload_workers: int = setting(
        "uploaded functions' worker processes at most, all tenants together; an upload needing more is refused "
        "(2, FILTER_WORKERS_FULL)",
        8,
        lo=1,
        hi=4096,
    )
    upload_idle_seconds: float = setting(
        "an uploaded function's workers stop after this long without a batch (they start again at its next pull)",
        300.0,
        above=0,
    )
    batch_timeout_seconds: float = setting("wall-clock limit for one batch (one pull) in a worker", 2.0, above=0)
    load_timeout_seconds: float = setting("limit for importing/compiling a function at registration", 10.0, above=0)
    worker_cpu_seconds: int = setting("RLIMIT_CPU of a worker; workers are recycled at half of it", 60, lo=1)
    worker_memory_mb: int = setting("RLIMIT_AS of a worker in MiB (0: unlimited)", 1024, lo=0)
    worker_max_batches: int = setting("recycle a worker after this many batches", 100_000, lo=1)
    max_consecutive_failures: int = setting("disable a function for its group after this many failures", 3, lo=1)
    max_source_bytes: int = setting("largest uploaded source accepted", 256 * 1024, lo=1)
    upload_window_seconds: float = setting(
        "an upload's uploadTimestamp must be within this many seconds of the filter server's clock", 300.0, above=0
    )
    sandbox_require: SandboxRequire = setting(
        "sandbox layers every worker must have for uploads to be accepted: strict (all of them; the filter server "
        "must run as root) or basic (no_new_privs, seccomp, rlimits)",
        "strict",
    )
    sandbox_user: str = setting("the unprivileged user workers run as (when the filter server runs as root)",
                                "nobody", fmt=USER_NAME)  # fmt: skip
    sandbox_skip: str = setting("sandbox layers not to set up (comma-separated; uploads still need sandboxRequire)",
                                "", fmt=LAYER_LIST)  # fmt: skip
    sandbox_read_paths: str = setting("extra folders filter functions may read, read-only (comma-separated)", "")
    read_ahead_batches: int = setting("broker batches a pull may read to find maxMsgNums matches (1: off)", 8, lo=1)
    broker_timeout_seconds: float = setting("timeout of a request to the broker (plus any suspend time)", 10.0, above=0)
    parent_pid: int = setting("exit when this process is gone (set by a broker that spawns us; 0: off)", 0, lo=0)
    acl_enable: bool = setting("check consumers' requests against aclFile (set by a broker with aclEnable)", False)
    acl_file: str = setting("the broker's plain_acl.yml (needed when aclEnable)", "")
    acl_strict_signatures: AclStrictMode = setting(*ACL_STRICT)
    acl_signature_window_seconds: int = setting(*ACL_WINDOW, lo=10, hi=3600)
    acl_access_key: str = setting("account signing the requests to the broker (set by the broker that starts us)", "")
    acl_secret_key: str = setting("secret key of aclAccessKey (prefer the environment)", "", secret=True)

    def __post_init__(self) -> None:
        check_fields(self)
        if self.max_upload_workers < self.upload_worker_count:
            raise ConfigError(
                key="maxUploadWorkers",
                value=self.max_upload_workers,
                allowed=f"at least uploadWorkerCount ({self.upload_worker_count})",
            )

    @property
    def modules(self) -> tuple[str, ...]:
        """Allowed modules for named functions."""
        return split_list(self.filter_modules)

    @property
    def paths(self) -> tuple[str, ...]:
        """Folders added to the workers' ``sys.path``."""
        return split_list(self.filter_paths, paths=True)

    @property
    def read_paths(self) -> tuple[str, ...]:
        """Extra folders filter functions may read."""
        return split_list(self.sandbox_read_paths, paths=True)

    @property
    def sandbox_skipped(self) -> frozenset[str]:
        """Layers the operator turned off."""
        return parse_skip(self.sandbox_skip)

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
