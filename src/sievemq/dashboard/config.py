"""Settings of the standalone dashboard (``sievemq dashboard``; env prefix ``SIEVEMQ_DASHBOARD_``), a frozen
dataclass like the roles' (docs/dashboard.md §6). ``sievemq dev`` reads the same environment for its dashboard's
account and refresh."""

from __future__ import annotations

from dataclasses import dataclass

from sievemq.config import check_fields, setting
from sievemq.config_rules import EXISTING_FILE, HOST_PORT_LIST, LISTEN_HOST
from sievemq.remoting.tls import ClientTls
from sievemq.tls_settings import check_client, connecting_settings

__all__ = ["ENV_PREFIX", "DashboardConfig"]

ENV_PREFIX = "SIEVEMQ_DASHBOARD_"
_TLS = connecting_settings("dashboard")


@dataclass(frozen=True)
class DashboardConfig:
    """Where the dashboard listens, the cluster it shows and the account it asks with."""

    namesrv_addr: str = setting("name servers of the cluster shown, ';'-separated host:port list", "127.0.0.1:9876",
                                fmt=HOST_PORT_LIST)  # fmt: skip
    http_listen_host: str = setting(
        "address the dashboard listens on (empty: every interface); it has no login of its own: keep it local or "
        "behind a proxy that authenticates",
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

    def client_tls(self) -> ClientTls | None:
        """The TLS of the dashboard's connections to the cluster (None: plain TCP)."""
        if not self.tls_client_enable:
            return None
        return ClientTls(ca_file=self.tls_client_trust_cert_path, cert_file=self.tls_client_cert_path,
                         key_file=self.tls_client_key_path, verify=self.tls_client_auth_server)  # fmt: skip
