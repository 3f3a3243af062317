"""The name server's settings (how settings are declared, loaded and checked: ``sievemq.settings``)."""

from __future__ import annotations

from dataclasses import dataclass

from sievemq.acl.settings import ACL_STRICT, ACL_WINDOW, AclStrictMode
from sievemq.errors import ConfigError
from sievemq.http import settings as http
from sievemq.remoting.tls import TlsMode
from sievemq.settings import ETCD_ROOT, EXISTING_FILE, HOST_PORT_LIST, LISTEN_HOST, check_fields, setting
from sievemq.settings.tls import SERVER_SETTINGS as SERVER_TLS
from sievemq.settings.tls import server_tls

__all__ = ["NamesrvConfig"]


@dataclass(frozen=True)
class NamesrvConfig:
    """Name server settings."""

    listen_host: str = setting("address to listen on", "127.0.0.1", fmt=LISTEN_HOST)
    listen_port: int = setting("TCP port for brokers and clients", 9876, lo=0, hi=65535)
    http_listen_host: str = setting(*http.host_doc(), fmt=LISTEN_HOST)
    http_listen_port: int = setting(*http.port_doc("namesrv"), lo=-1, hi=65535)
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
    acl_strict_signatures: AclStrictMode = setting(*ACL_STRICT)
    acl_signature_window_seconds: int = setting(*ACL_WINDOW, lo=10, hi=3600)
    etcd_endpoints: str = setting(
        "the etcd cluster of the broker sets under automatic failover (host:port separated by ';'): the name server "
        "then answers RocketMQ's controller requests from it (mqadmin getControllerMetaData, getSyncStateSet, "
        "electMaster; docs/failover.md); empty: it answers them as a name server without a controller does",
        "",
        fmt=HOST_PORT_LIST,
    )
    etcd_root: str = setting(
        "with etcdEndpoints: the key prefix of sievemq's keys in etcd, the brokers' etcdRoot (a set's keys are under "
        "it, then the cluster's name, then the set's)",
        "/sievemq",
        fmt=ETCD_ROOT,
    )

    def __post_init__(self) -> None:
        check_fields(self)
        server_tls(self)  # loads the TLS files: a bad one is a ConfigError naming its key
        if self.acl_enable and not self.acl_file:
            raise ConfigError(key="aclFile", value=self.acl_file, allowed="the path of a plain_acl.yml when aclEnable")
