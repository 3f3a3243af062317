"""The broker's settings: one frozen dataclass, loaded from a TOML file, environment variables and flags.

Precedence, lowest to highest: defaults < TOML file < environment (``SIEVEMQ_<NAME>``) < command-line flags.
Keys may be written in RocketMQ's camelCase (``brokerName``, ``flushDiskType``) or in snake_case.

Every value is checked when a config is built, by ``check_fields`` (called from each class's ``__post_init__``),
against two declarations of its field: the type (a ``Literal`` lists the accepted words, matched in any letter
case and kept as listed) and the ``Rule`` given with ``setting(...)`` (an inclusive range, a strict lower bound, a
format). The same declarations feed ``describe`` (``sievemq config-reference``, docs/configuration.md) and the
flags' ``--help``. A bad value raises ``ConfigError`` naming the camelCase key, the value, what is allowed and, from
``load_config``, where the value came from.
"""

from __future__ import annotations

from dataclasses import dataclass

from sievemq.acl.settings import ACL_STRICT, ACL_WINDOW, AclStrictMode
from sievemq.auth.settings import HELP as AUTH
from sievemq.auth.settings import check_auth_settings
from sievemq.broker.config_core import (
    ControllerMode,
    FlushDiskType,
    SubscriptionConsistency,
    _BrokerMessages,
)
from sievemq.errors import ConfigError
from sievemq.ha.settings import HA_ADVERTISED_IP, HA_LISTEN_HOST, BrokerRole, ReplicationSettings
from sievemq.protocol.sizes import MAX_MESSAGE_SIZE_LIMIT
from sievemq.remoting.command import MAX_FRAME_LENGTH
from sievemq.remoting.limits import ServerLimits
from sievemq.remoting.tls import TlsMode
from sievemq.settings import (
    ETCD_ROOT,
    EXISTING_FILE,
    HOST_PORT_LIST,
    OPTIONAL_HOST_PORT,
    check_fields,
    setting,
    split_addrs,
)
from sievemq.settings.tls import CLIENT_SETTINGS as CLIENT_TLS
from sievemq.settings.tls import SERVER_SETTINGS as SERVER_TLS
from sievemq.settings.tls import TlsEnable, check_broker

__all__ = ["MAX_MESSAGE_SIZE_LIMIT", "BrokerConfig", "FlushDiskType", "SubscriptionConsistency"]


@dataclass(frozen=True)
class _BrokerConnections(_BrokerMessages):
    """What one connection, one peer and all of them may take (docs/server-limits.md)."""

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
        "bytes of frames not yet complete, held for all connections together; past it, the connection holding the "
        "most of the peer IP holding the most is closed (a newcomer only when it is that one)",
        ServerLimits.partial_frame_budget,
        lo=MAX_FRAME_LENGTH,
    )
    server_partial_frame_ip_percent: int = setting(
        "percent of serverPartialFrameBudget the unfinished frames of one peer IP (one IPv6 /64) may hold, but "
        "at least one whole frame (16 MiB); past it, that peer's connection holding the most is closed",
        ServerLimits.partial_frame_ip_percent,
        lo=1,
        hi=100,
    )
    server_frame_timeout_seconds: float = setting(
        "close a connection whose frame is still incomplete this long after its first byte",
        ServerLimits.frame_timeout,
        above=0,
    )
    server_first_frame_timeout_seconds: float = setting(
        "close a connection that has not completed a frame this long after it connected",
        ServerLimits.first_frame_timeout,
        above=0,
    )
    server_channel_max_idle_time_seconds: float = setting(
        "close a connection that sent nothing for this long and has no request in flight, as RocketMQ does (its "
        "clients send a heartbeat every 30 s and connect again when needed); 0: never",
        ServerLimits.idle_timeout,
        lo=0,
    )
    server_max_connections: int = setting(
        "connections at most (0: no fixed cap); new ones are refused anyway when fewer than serverFdReserve file "
        "descriptors would stay free under RLIMIT_NOFILE; at the cap, a connection that never completed a frame "
        "gives way to one from a peer IP with fewer connections",
        ServerLimits.max_connections,
        lo=0,
    )
    server_max_connections_per_ip: int = setting(
        "connections from one peer IP (one IPv6 /64) at most, those in a TLS handshake included (0: no cap)",
        ServerLimits.max_connections_per_ip,
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
    server_acl_early_check_bytes: int = setting(
        "with aclEnable: a frame longer than this is read only once its header names an account of aclFile (or "
        "comes from globalWhiteRemoteAddresses), else it is refused (code 16) before its body is read; its header "
        "may not be longer than this",
        ServerLimits.screen_bytes,
        lo=1024,
        hi=MAX_FRAME_LENGTH,
    )


@dataclass(frozen=True)
class _BrokerTls(_BrokerConnections):
    """TLS on the listening port and on the broker's own connections (docs/protocol/tls.md)."""

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


@dataclass(frozen=True)
class _BrokerFiltering(_BrokerTls):
    """SQL92, Bloom bitmaps, filter servers and subscription consistency."""

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


@dataclass(frozen=True)
class _BrokerAcl(_BrokerFiltering):
    """The plain ACL (docs/protocol/acl.md)."""

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
    acl_strict_signatures: AclStrictMode = setting(*ACL_STRICT)
    acl_signature_window_seconds: int = setting(*ACL_WINDOW, lo=10, hi=3600)


@dataclass(frozen=True)
class _BrokerAuth(_BrokerAcl):
    """ACL 2.0: users and their policies (docs/acl2.md)."""

    authentication_enabled: bool = setting(*AUTH["authentication_enabled"])
    authorization_enabled: bool = setting(*AUTH["authorization_enabled"])
    init_authentication_user: str = setting(*AUTH["init_authentication_user"], secret=True)
    inner_client_authentication_credentials: str = setting(*AUTH["inner_client_authentication_credentials"],
                                                           secret=True)  # fmt: skip
    migrate_auth_from_v1_enabled: bool = setting(*AUTH["migrate_auth_from_v1_enabled"])
    authentication_whitelist: str = setting(*AUTH["authentication_whitelist"])
    authorization_whitelist: str = setting(*AUTH["authorization_whitelist"])

    def _check_auth(self) -> None:
        check_auth_settings(self.acl_enable, self.authentication_enabled, self.authorization_enabled,
                            {"authenticationWhitelist": self.authentication_whitelist,
                             "authorizationWhitelist": self.authorization_whitelist},
                            self.filter_server_nums)  # fmt: skip


@dataclass(frozen=True)
class BrokerConfig(_BrokerAuth):
    """Broker settings (RocketMQ names in camelCase are accepted in the TOML file): the groups above, and
    replication."""

    broker_role: BrokerRole = setting(
        "ASYNC_MASTER (answer sends at once), SYNC_MASTER (after a slave has them) or SLAVE (a copy of the master "
        "of the same brokerName; brokerId > 0)",
        "ASYNC_MASTER",
    )
    ha_listen_port: int = setting(
        "HA port, where slaves (and a master recovering from this broker) copy the commit log, with a ticket from "
        "HA_CHECK. Set: it listens from the start; 0: listenPort + 1, opened only when the first ticket is handed out",
        0,
        lo=0,
        hi=65535,
    )
    ha_listen_host: str = setting(
        "address the HA port listens on (empty: listenHost's); an internal one keeps the commit log off the "
        "clients' network",
        "",
        fmt=HA_LISTEN_HOST,
    )
    broker_ip2: str = setting(
        "address others reach the HA port at (RocketMQ's brokerIP2; empty: brokerIp), registered as haServerAddr",
        "",
        fmt=HA_ADVERTISED_IP,
    )
    ha_ticket_checks_address: bool = setting(
        "a ticket opens a replication link only from the address that asked HA_CHECK for it; false: from any "
        "address (a slave behind a relay or NAT, or reaching the HA port over another network than the remoting port)",
        True,
    )
    ha_master_address: str = setting(
        "a slave's master HA address host:port (empty: the one the name servers give)", "", fmt=OPTIONAL_HOST_PORT
    )
    ha_send_heartbeat_interval: int = setting("replication heartbeat, milliseconds", 5000, lo=100)
    ha_housekeeping_interval: int = setting("drop a silent replication link after this, milliseconds", 20000, lo=500)
    ha_transfer_batch_size: int = setting("largest replication frame, bytes", 32 * 1024, lo=1024, hi=4 * 1024 * 1024)
    ha_slave_fallbehind_max: int = setting(
        "SYNC_MASTER: a slave this many bytes behind counts as unavailable (SLAVE_NOT_AVAILABLE)",
        256 * 1024 * 1024,
        lo=0,
    )
    slave_read_enable: bool = setting(
        "pulls far behind the commit log's end (beyond accessMessageInMemoryMaxRatio of memory) are sent to the "
        "group's whichBrokerWhenConsumeSlowly (a slave); false: always read from the master",
        False,
    )
    access_message_in_memory_max_ratio: int = setting(
        "percent of this machine's memory behind the commit log's end that counts as in memory: with "
        "slaveReadEnable, how far a pull may lag and still read from the master; and how far a queue's first "
        "message may be for a new group to be told offset 0 (see newGroupStartsAtEnd)",
        40,
        lo=0,
        hi=100,
    )

    controller_mode: ControllerMode = setting(
        "none: roles are fixed by brokerRole; etcd: automatic failover, the set elects its master in etcd "
        "(etcdEndpoints; every broker of the set has its own brokerId > 0 and brokerRole says how it acknowledges "
        "when it is the master; docs/failover.md)",
        "none",
    )
    etcd_endpoints: str = setting(
        "controllerMode = etcd: the etcd cluster's client addresses, host:port separated by ';'", "",
        fmt=HOST_PORT_LIST,
    )  # fmt: skip
    etcd_root: str = setting(
        "controllerMode = etcd: the key prefix of sievemq's keys in etcd (a set's keys are under it, then the "
        "cluster's name, then the set's)",
        "/sievemq",
        fmt=ETCD_ROOT,
    )
    controller_lease_seconds: int = setting(
        "controllerMode = etcd: a broker's etcd lease; a master that could not renew it for this long is replaced. "
        "The master stops acknowledging max(1, this/5) seconds before its lease could expire (fencing)",
        5,
        lo=2,
        hi=60,
    )
    min_in_sync_replicas: int = setting(
        "controllerMode = etcd: a master refuses writes while fewer brokers are in its SyncStateSet (itself included)",
        1,
        lo=1,
        hi=16,
    )
    enable_elect_unclean_master: bool = setting(
        "controllerMode = etcd: with no live broker of the SyncStateSet, elect any live one (it may lack "
        "acknowledged messages: they are lost)",
        False,
    )
    ha_max_time_slave_not_catchup: int = setting(
        "controllerMode = etcd: a replica that has not caught up with the master for this long, milliseconds, leaves "
        "the SyncStateSet (one whose link closed leaves after a second); it rejoins once caught up",
        15000,
        lo=1000,
    )

    def __post_init__(self) -> None:
        check_fields(self)
        check_broker(self)  # loads the TLS files: a bad one is a ConfigError naming its key
        self._check_auth()
        if bool(self.acl_access_key) != bool(self.acl_secret_key):
            key = "aclSecretKey" if self.acl_access_key else "aclAccessKey"
            raise ConfigError(key=key, value="", allowed="a non-empty value: aclAccessKey and aclSecretKey go together")
        if self.controller_mode == "etcd":
            self._check_controller_mode()
        elif (self.broker_role == "SLAVE") != (self.broker_id > 0):
            allowed = "an integer > 0 for a SLAVE" if self.broker_role == "SLAVE" else "0 for a master (brokerRole)"
            raise ConfigError(key="brokerId", value=self.broker_id, allowed=allowed)
        if self.listen_vip_channel and self.listen_port < 2:
            raise ConfigError(
                key="listenPort",
                value=self.listen_port,
                allowed="an integer in 2..65535 when listenVipChannel is true (the VIP channel is listenPort - 2)",
            )

    def _check_controller_mode(self) -> None:
        if not self.etcd_endpoints:
            raise ConfigError(key="etcdEndpoints", value="", allowed="one or more host:port when controllerMode = etcd")
        if self.broker_id < 1:
            raise ConfigError(key="brokerId", value=self.broker_id,
                              allowed="an integer > 0 when controllerMode = etcd (each broker of the set its own)")
        if self.broker_role == "SLAVE":
            raise ConfigError(key="brokerRole", value=self.broker_role, allowed="ASYNC_MASTER or SYNC_MASTER when "
                              "controllerMode = etcd (how this broker acknowledges when it is the master)")

    def namesrv_list(self) -> list[str]:
        """The configured name server addresses."""
        return split_addrs(self.namesrv_addr)

    @property
    def advertised_addr(self) -> str:
        """``ip:port`` that clients use for this broker."""
        return f"{self.broker_ip}:{self.listen_port}"

    @property
    def ha_port(self) -> int:
        """The HA port (``haListenPort``, else ``listenPort + 1``)."""
        return self.ha_listen_port or self.listen_port + 1

    @property
    def ha_ip(self) -> str:
        """The address others reach the HA port at (``brokerIp2``, else ``brokerIp``)."""
        return self.broker_ip2 or self.broker_ip

    @property
    def ha_address(self) -> str:
        """``ip:port`` of the HA port for others (registered as haServerAddr)."""
        return f"{self.ha_ip}:{self.ha_port}"

    def replication_settings(self, recover_from: str = "") -> ReplicationSettings:
        """The replication settings (``recover_from``: ``--recover-from-slave``)."""
        return ReplicationSettings(
            role=self.broker_role,
            host=self.ha_listen_host or self.listen_host,
            ha_port=self.ha_port,
            listen_at_start=self.ha_listen_port != 0,
            ha_host=self.ha_ip,
            warning_interval_s=self.server_warning_interval_seconds,
            ticket_checks_address=self.ha_ticket_checks_address,
            ha_master_address=self.ha_master_address,
            heartbeat_s=self.ha_send_heartbeat_interval / 1000,
            housekeeping_s=self.ha_housekeeping_interval / 1000,
            batch=self.ha_transfer_batch_size,
            max_fallbehind=self.ha_slave_fallbehind_max,
            sync_timeout_s=self.sync_flush_timeout_ms / 1000,
            broker_name=self.broker_name,
            namesrv=tuple(self.namesrv_list()),
            recover_from=recover_from,
        )

    def server_limits(self) -> ServerLimits:
        """The bounds of the broker's remoting servers (the ``server*`` settings)."""
        return ServerLimits(
            max_unsent_bytes=self.server_max_unsent_bytes,
            max_requests_in_flight=self.server_max_requests_in_flight,
            partial_frame_budget=self.server_partial_frame_budget,
            partial_frame_ip_percent=self.server_partial_frame_ip_percent,
            frame_timeout=self.server_frame_timeout_seconds,
            first_frame_timeout=self.server_first_frame_timeout_seconds,
            idle_timeout=self.server_channel_max_idle_time_seconds,
            max_connections=self.server_max_connections,
            max_connections_per_ip=self.server_max_connections_per_ip,
            fd_reserve=self.server_fd_reserve,
            warning_interval=self.server_warning_interval_seconds,
            screen_bytes=self.server_acl_early_check_bytes,
        )
