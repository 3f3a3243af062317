"""The roles' TLS settings (docs/protocol/tls.md §4): their declarations, their check at load, what they give.

Server side, on the name server and the broker (RocketMQ's ``tls.server.*`` properties in camelCase):
``tlsMode``, ``tlsServerCertPath``, ``tlsServerKeyPath``, ``tlsServerKeyPassword``, ``tlsServerAuthClient``,
``tlsServerTrustCertPath``. Client side, on the broker for the connections it opens itself (its registrations with
name servers): ``tlsEnable`` (RocketMQ's ``tls.enable``: by default on exactly when ``tlsMode`` is enforcing) and
``tlsClient*``. Every file is loaded when a config is built, so a bad one stops the role with a ConfigError naming
its key.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from sievemq.errors import ConfigError
from sievemq.remoting.tls import ClientTls, ServerTls, TlsFileError, TlsMode, server_context

TlsEnable = Literal["auto", "true", "false"]


class ServerTlsFields(Protocol):
    """The server-side TLS settings of a role's config (the name server's, the broker's)."""

    @property
    def tls_mode(self) -> TlsMode: ...
    @property
    def tls_server_cert_path(self) -> str: ...
    @property
    def tls_server_key_path(self) -> str: ...
    @property
    def tls_server_key_password(self) -> str: ...
    @property
    def tls_server_auth_client(self) -> bool: ...
    @property
    def tls_server_trust_cert_path(self) -> str: ...


class BrokerTlsFields(ServerTlsFields, Protocol):
    """The broker's TLS settings: its server side and its own outgoing connections."""

    @property
    def tls_enable(self) -> TlsEnable: ...
    @property
    def tls_client_trust_cert_path(self) -> str: ...
    @property
    def tls_client_cert_path(self) -> str: ...
    @property
    def tls_client_key_path(self) -> str: ...
    @property
    def tls_client_auth_server(self) -> bool: ...
    @property
    def filter_server_nums(self) -> int: ...

SERVER_SETTINGS: dict[str, tuple[str, Any]] = {
    "mode": (
        "TLS on the listening port (RocketMQ's tls.server.mode): disabled: plain TCP only; permissive: TLS and plain "
        "TCP on the same port, told apart by a client's first byte; enforcing: TLS only, plain connections are "
        "closed",
        "disabled",
    ),
    "cert": ("PEM certificate chain this server presents (needed unless tlsMode is disabled)", ""),
    "key": ("PEM private key of tlsServerCertPath", ""),
    "password": ("password of tlsServerKeyPath when it is encrypted (prefer the environment)", ""),
    "auth_client": ("require every TLS client to present a certificate that chains to tlsServerTrustCertPath", False),
    "trust": ("PEM certificates trusted to sign client certificates (needed with tlsServerAuthClient)", ""),
}
"""(doc, default) of each server-side setting, shared by the name server's and the broker's declarations."""

CLIENT_SETTINGS: dict[str, tuple[str, Any]] = {
    "enable": (
        "TLS for the connections the broker opens (registrations with name servers; RocketMQ's tls.enable); "
        "auto: when tlsMode is enforcing",
        "auto",
    ),
    "trust": ("PEM certificates trusted to sign name servers' certificates (empty: the system's)", ""),
    "auth_server": (
        "verify the name servers' certificates and host names (false: accept any certificate, for development only)",
        True,
    ),
    "cert": ("PEM certificate the broker presents to name servers that require one (empty: none)", ""),
    "key": ("PEM private key of tlsClientCertPath, unencrypted", ""),
}
"""(doc, default) of each broker setting for its own outgoing connections."""


def connecting_settings(who: str) -> dict[str, tuple[str, Any]]:
    """(doc, default) of the ``tlsClient*`` settings of a role that connects to a cluster without serving the 4.x
    protocol itself (the proxy, the dashboard: ``who``): TLS is off unless ``tlsClientEnable``."""
    return {
        "enable": (
            f"TLS for the {who}'s own connections to name servers and brokers (theirs must have tlsMode permissive or "
            "enforcing)",
            False,
        ),
        "trust": (
            "PEM certificates trusted to sign the name servers' and brokers' certificates (empty: the system's)",
            "",
        ),
        "auth_server": (
            "verify the name servers' and brokers' certificates and host names (false: any, for development only)",
            True,
        ),
        "cert": (f"PEM certificate the {who} presents to name servers and brokers that require one (empty: none)", ""),
        "key": ("PEM private key of tlsClientCertPath, unencrypted", ""),
    }

_SERVER_KEYS = {
    "cert": "tlsServerCertPath",
    "key": "tlsServerKeyPath",
    "password": "tlsServerKeyPassword",
    "trust": "tlsServerTrustCertPath",
}
_CLIENT_KEYS = {"cert": "tlsClientCertPath", "key": "tlsClientKeyPath", "trust": "tlsClientTrustCertPath"}


def _config_error(e: TlsFileError, keys: dict[str, str]) -> ConfigError:
    key = keys.get(e.which, keys["key"])
    shown = "(not shown)" if e.which == "password" else e.path
    return ConfigError(key=key, value=shown, allowed=f"{e.expected} ({e.problem})")


def server_tls(cfg: ServerTlsFields) -> ServerTls | None:
    """The server's TLS (None when disabled); ConfigError naming the key of a file that is missing or bad."""
    if cfg.tls_mode == "disabled":
        return None
    for key, value in (("tlsServerCertPath", cfg.tls_server_cert_path), ("tlsServerKeyPath", cfg.tls_server_key_path)):
        if not value:
            raise ConfigError(key=key, value=value, allowed=f"a PEM file's path when tlsMode is {cfg.tls_mode}")
    if cfg.tls_server_auth_client and not cfg.tls_server_trust_cert_path:
        raise ConfigError(
            key="tlsServerTrustCertPath", value="", allowed="a PEM file's path when tlsServerAuthClient is true"
        )
    try:
        context = server_context(
            cfg.tls_server_cert_path,
            cfg.tls_server_key_path,
            cfg.tls_server_key_password,
            cfg.tls_server_trust_cert_path,
            cfg.tls_server_auth_client,
        )
    except TlsFileError as e:
        raise _config_error(e, _SERVER_KEYS) from None
    return ServerTls(cfg.tls_mode, context)


def outgoing_tls(cfg: BrokerTlsFields) -> ClientTls | None:
    """The TLS of the broker's own connections (None: plain TCP)."""
    on = cfg.tls_mode == "enforcing" if cfg.tls_enable == "auto" else cfg.tls_enable == "true"
    if not on:
        return None
    return ClientTls(
        ca_file=cfg.tls_client_trust_cert_path,
        cert_file=cfg.tls_client_cert_path,
        key_file=cfg.tls_client_key_path,
        verify=cfg.tls_client_auth_server,
    )


def check_client(client: ClientTls) -> None:
    """Load every file of a role's ``tlsClient*`` settings (ConfigError naming the key of a bad one)."""
    if client.key_file and not client.cert_file:
        raise ConfigError(key="tlsClientCertPath", value="", allowed="a PEM file's path when tlsClientKeyPath is set")
    try:
        client.context()
    except TlsFileError as e:
        raise _config_error(e, _CLIENT_KEYS) from None


def check_broker(cfg: BrokerTlsFields) -> None:
    """Load every TLS file the broker's settings name (ConfigError naming the key of a bad one)."""
    server_tls(cfg)
    client = outgoing_tls(cfg)
    if client is not None:
        check_client(client)
    if cfg.tls_mode == "enforcing" and cfg.filter_server_nums > 0:
        raise ConfigError(
            key="tlsMode",
            value=cfg.tls_mode,
            allowed="disabled or permissive while filterServerNums > 0 (filter servers speak plain TCP to the broker)",
        )
