"""Settings of the standalone dashboard (``sievemq dashboard``; env prefix ``SIEVEMQ_DASHBOARD_``), a frozen
dataclass like the roles' (docs/dashboard.md §6). ``sievemq dev`` reads the same environment for its dashboard's
account, logins and refresh."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sievemq.remoting.tls import ClientTls
from sievemq.settings import check_fields, setting
from sievemq.settings.rules import EXISTING_FILE, HOST_PORT_LIST, LISTEN_HOST
from sievemq.settings.tls import check_client, connecting_settings

__all__ = ["ENV_PREFIX", "AuthEnable", "DashboardConfig"]

ENV_PREFIX = "SIEVEMQ_DASHBOARD_"
_TLS = connecting_settings("dashboard")
AuthEnable = Literal["auto", "true", "false"]


@dataclass(frozen=True)
class DashboardConfig:
    """Where the dashboard listens, the cluster it shows and the account it asks with."""

    namesrv_addr: str = setting("name servers of the cluster shown, ';'-separated host:port list", "127.0.0.1:9876",
                                fmt=HOST_PORT_LIST)  # fmt: skip
    http_listen_host: str = setting(
        "address the dashboard listens on (empty: every interface); elsewhere than on a loopback address, turn "
        "authEnable on (a warning says so when it is off)",
        "127.0.0.1",
        fmt=LISTEN_HOST,
    )
    http_listen_port: int = setting("HTTP port of the dashboard, its JSON API, /metrics and /healthz (0: any free "
                                    "port, printed at start)", 8080, lo=0, hi=65535)  # fmt: skip
    access_key: str = setting(
        "account the dashboard signs its admin requests with (an admin account of the brokers' plain_acl.yml when "
        "they check ACL; empty: unsigned)",
        "",
    )
    secret_key: str = setting("secret key of accessKey (prefer the environment: SIEVEMQ_DASHBOARD_SECRET_KEY)", "",
                              secret=True)  # fmt: skip
    auth_enable: AuthEnable = setting(
        "require a user's bearer token (usersFile) on every /api/ request; auto: on when accessKey is set (the "
        "cluster checks ACL; sievemq dev: when its broker has aclEnable), else off",
        "auto",
    )
    users_file: str = setting(
        "TOML file of the dashboard's users: name, tokenHash (sievemq dashboard hash-token), role (admin; viewer: no "
        "message bodies nor property values unless readBodies); reloaded when it changes. Needed when authEnable "
        "is on (sievemq dev makes DATA/dashboard-users.toml)",
        "",
        fmt=EXISTING_FILE,
    )
    auth_failures_per_minute: int = setting(
        "failed logins one client address (an IPv6 /64) may make in a minute; past them its requests get 429 "
        "AUTH_RATE_LIMITED until the minute ends",
        10,
        lo=1,
        hi=100_000,
    )
    request_timeout_seconds: float = setting("timeout of each request to a name server or broker", 5.0, above=0,
                                             hi=120)  # fmt: skip
    refresh_seconds: int = setting("how often the page refreshes what it shows (0: only when asked)", 5, lo=0,
                                   hi=3600)  # fmt: skip
    tls_client_enable: bool = setting(*_TLS["enable"])
    tls_client_trust_cert_path: str = setting(*_TLS["trust"], fmt=EXISTING_FILE)
    tls_client_auth_server: bool = setting(*_TLS["auth_server"])
    tls_client_cert_path: str = setting(*_TLS["cert"], fmt=EXISTING_FILE)
    tls_client_key_path: str = setting(*_TLS["key"], fmt=EXISTING_FILE)

    def __post_init__(self) -> None:
        check_fields(self)
        tls = self.client_tls()
        if tls is not None:
            check_client(tls)

    def auth_on(self, acl_enabled: bool = False) -> bool:
        """Whether the API asks for a token: ``authEnable``, where auto means on when ``accessKey`` is set or
        ``acl_enabled`` (``sievemq dev``'s broker checks ACL)."""
        if self.auth_enable == "auto":
            return bool(self.access_key) or acl_enabled
        return self.auth_enable == "true"

    def client_tls(self) -> ClientTls | None:
        """The TLS of the dashboard's connections to the cluster (None: plain TCP)."""
        if not self.tls_client_enable:
            return None
        return ClientTls(ca_file=self.tls_client_trust_cert_path, cert_file=self.tls_client_cert_path,
                         key_file=self.tls_client_key_path, verify=self.tls_client_auth_server)  # fmt: skip
