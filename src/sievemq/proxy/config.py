"""Proxy settings (``sievemq proxy``): a frozen dataclass, like the other roles' (docs/proxy.md §3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from sievemq.errors import ConfigError
from sievemq.http import settings as http
from sievemq.protocol.sizes import DEFAULT_MAX_MESSAGE_SIZE, MAX_MESSAGE_SIZE_LIMIT
from sievemq.settings import check_fields, setting
from sievemq.settings.rules import ADVERTISED_IP, EXISTING_FILE, HOST_PORT_LIST, LISTEN_HOST, split_addrs
from sievemq.settings.tls import connecting_settings

__all__ = ["ProxyConfig"]

_TLS = connecting_settings("proxy")


@dataclass(frozen=True)
class ProxyConfig:
    """Settings of one proxy in front of a cluster."""

    namesrv_addr: str = setting(
        "name servers of the cluster the proxy serves, ';'-separated host:port list",
        "127.0.0.1:9876",
        fmt=HOST_PORT_LIST,
    )
    listen_host: str = setting("address the gRPC service listens on", "127.0.0.1", fmt=LISTEN_HOST)
    listen_port: int = setting("TCP port of the gRPC service (apache.rocketmq.v2)", 8081, lo=0, hi=65535)
    http_listen_host: str = setting(*http.host_doc(), fmt=LISTEN_HOST)
    http_listen_port: int = setting(*http.port_doc("proxy"), lo=-1, hi=65535)
    advertised_ip: str = setting(
        "IP the proxy gives clients as its endpoint in routes (clients talk only to the proxy)",
        "127.0.0.1",
        fmt=ADVERTISED_IP,
    )
    max_body_size: int = setting(
        "largest message body a 5.x client may send (bytes)", DEFAULT_MAX_MESSAGE_SIZE, lo=1, hi=MAX_MESSAGE_SIZE_LIMIT
    )
    request_timeout_seconds: float = setting(
        "timeout of the proxy's requests to brokers and name servers", 3.0, above=0
    )
    default_invisible_seconds: int = setting(
        "invisible time of a received message when the client names none (a PushConsumer's receives)",
        30,
        lo=1,
        hi=43200,
    )
    min_invisible_time_mills_for_recv: int = setting(
        "least invisible time (ms) a receive may ask for; a shorter one is refused with ILLEGAL_INVISIBLE_TIME, as "
        "RocketMQ's proxy refuses it (not checked for a receive with auto-renew, whose lease the proxy renews)",
        10_000,
        lo=0,
        hi=43_200_000,
    )
    max_delivery_attempts: int = setting(
        "deliveries of a message the server settings announce to 5.x consumers (the broker dead-letters after "
        "the group's retryMaxTimes + 1)",
        17,
        lo=1,
        hi=1000,
    )
    max_concurrent_calls: int = setting(
        "gRPC calls served at once (each client holds a Telemetry stream and its long-polling receives); calls "
        "beyond it are refused with RESOURCE_EXHAUSTED",
        10_000,
        lo=1,
        hi=1_000_000,
    )
    max_streams_per_connection: int = setting(
        "gRPC calls one client connection may have open at once (HTTP/2 MAX_CONCURRENT_STREAMS)", 256, lo=1, hi=65_536
    )
    acl_enable: bool = setting(
        "check every call of a 5.x client against aclFile (the brokers' plain_acl.yml format and rules: the "
        "client's MQv2-HMAC-SHA1 signature, PUB/SUB per topic and group); refusals are UNAUTHORIZED or FORBIDDEN",
        False,
    )
    acl_file: str = setting("the plain_acl.yml, reloaded when it changes (needed with aclEnable)", "",
                            fmt=EXISTING_FILE)  # fmt: skip
    acl_max_clock_skew_seconds: int = setting(
        "how far a call's x-mq-date-time may be from the proxy's clock (0: any). The default allows for the Python "
        "5.x client, which writes its local time as if it were UTC",
        15 * 3600,
        lo=0,
    )
    acl_access_key: str = setting(
        "account the proxy signs its requests to brokers with (an admin account where brokers check ACL)", ""
    )
    acl_secret_key: str = setting(
        "secret key of aclAccessKey (prefer the environment: SIEVEMQ_ACL_SECRET_KEY)", "", secret=True
    )

    authentication_enabled: bool = setting(
        "ACL 2.0: every call of a 5.x client must be signed (MQv2-HMAC-SHA1) by an enabled user of the brokers' users "
        "(fetched from a broker of rocketMQClusterName with aclAccessKey, a Super user there); refusals are "
        "UNAUTHORIZED",
        False,
    )
    authorization_enabled: bool = setting(
        "ACL 2.0: every call must be allowed by its user's policies on the brokers (Pub on a topic to send, Sub on "
        "topic and group to receive, ...); refusals are FORBIDDEN",
        False,
    )
    rocket_mq_cluster_name: str = setting(
        "the cluster whose brokers hold the ACL 2.0 users and policies (RocketMQ's rocketMQClusterName)",
        "DefaultCluster",
    )
    auth_metadata_refresh_seconds: int = setting(
        "ACL 2.0: how often the proxy fetches the brokers' users and policies: a change made on the brokers applies "
        "at the proxy within this time",
        5,
        lo=1,
        hi=3600,
    )

    tls_mode: Literal["disabled", "enforcing"] = setting(
        "TLS on the gRPC port: disabled (plain TCP) or enforcing (TLS only; a 5.x client needs tls_enable and to "
        "trust the certificate's issuer)",
        "disabled",
    )
    tls_server_cert_path: str = setting(
        "PEM certificate chain the proxy presents (needed with tlsMode enforcing)", "", fmt=EXISTING_FILE
    )
    tls_server_key_path: str = setting("PEM private key of tlsServerCertPath, unencrypted", "", fmt=EXISTING_FILE)
    tls_server_auth_client: bool = setting(
        "require every client to present a certificate that chains to tlsServerTrustCertPath", False
    )
    tls_server_trust_cert_path: str = setting(
        "PEM certificates trusted to sign client certificates (needed with tlsServerAuthClient)", "", fmt=EXISTING_FILE
    )
    tls_client_enable: bool = setting(*_TLS["enable"])
    tls_client_trust_cert_path: str = setting(*_TLS["trust"], fmt=EXISTING_FILE)
    tls_client_auth_server: bool = setting(*_TLS["auth_server"])
    tls_client_cert_path: str = setting(*_TLS["cert"], fmt=EXISTING_FILE)
    tls_client_key_path: str = setting(*_TLS["key"], fmt=EXISTING_FILE)

    def __post_init__(self) -> None:
        check_fields(self)
        if self.tls_mode == "enforcing" and not (self.tls_server_cert_path and self.tls_server_key_path):
            raise ConfigError("tlsMode enforcing needs tlsServerCertPath and tlsServerKeyPath", key="tlsMode",
                              value=self.tls_mode)  # fmt: skip
        if self.acl_enable and not self.acl_file:
            raise ConfigError(key="aclFile", value=self.acl_file, allowed="the path of a plain_acl.yml when aclEnable")
        acl2 = self.authentication_enabled or self.authorization_enabled
        if acl2 and self.acl_enable:
            raise ConfigError(key="aclEnable", value=True, allowed="false while authenticationEnabled or "
                              "authorizationEnabled is true: the plain ACL and ACL 2.0 exclude each other")  # fmt: skip
        if acl2 and not self.acl_access_key:
            raise ConfigError(key="aclAccessKey", value="", allowed="a Super user of the brokers while "
                              "authenticationEnabled or authorizationEnabled is true: the proxy fetches the users and "
                              "policies with it")  # fmt: skip
        if bool(self.acl_access_key) != bool(self.acl_secret_key):
            key = "aclSecretKey" if self.acl_access_key else "aclAccessKey"
            raise ConfigError(key=key, value="", allowed="a non-empty value: aclAccessKey and aclSecretKey go together")
        if self.tls_server_auth_client and not self.tls_server_trust_cert_path:
            raise ConfigError("tlsServerAuthClient needs tlsServerTrustCertPath", key="tlsServerAuthClient",
                              value="true")  # fmt: skip

    def client_tls(self) -> dict[str, Any]:
        """The TLS keyword arguments of the proxy's 4.x clients (empty: plain TCP)."""
        if not self.tls_client_enable:
            return {}
        return {"tls": True, "tls_ca_file": self.tls_client_trust_cert_path or None,
                "tls_cert_file": self.tls_client_cert_path or None, "tls_key_file": self.tls_client_key_path or None,
                "tls_verify": self.tls_client_auth_server}  # fmt: skip

    def namesrv_list(self) -> list[str]:
        """Name server addresses."""
        return split_addrs(self.namesrv_addr)
