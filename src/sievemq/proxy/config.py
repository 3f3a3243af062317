"""Proxy settings (``sievemq proxy``): a frozen dataclass, like the other roles' (docs/proxy.md §3)."""

from __future__ import annotations

from dataclasses import dataclass

from sievemq.config import check_fields, setting
from sievemq.config_rules import ADVERTISED_IP, HOST_PORT_LIST, LISTEN_HOST, split_addrs

__all__ = ["ProxyConfig"]


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
    advertised_ip: str = setting(
        "IP the proxy gives clients as its endpoint in routes (clients talk only to the proxy)",
        "127.0.0.1",
        fmt=ADVERTISED_IP,
    )
    max_body_size: int = setting(
        "largest message body a 5.x client may send (bytes)", 4 * 1024 * 1024, lo=1, hi=15 * 1024 * 1024
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
    max_delivery_attempts: int = setting(
        "deliveries of a message the server settings announce to 5.x consumers (the broker dead-letters after "
        "the group's retryMaxTimes + 1)",
        17,
        lo=1,
        hi=1000,
    )

    def __post_init__(self) -> None:
        check_fields(self)

    def namesrv_list(self) -> list[str]:
        """Name server addresses."""
        return split_addrs(self.namesrv_addr)
