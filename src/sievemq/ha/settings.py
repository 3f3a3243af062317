"""A broker's replication settings, as plain data (``BrokerConfig.replication_settings()`` builds them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sievemq.settings.rules import ADVERTISED_IP, LISTEN_HOST, Format

__all__ = ["CHECK_BYTES", "HA_ADVERTISED_IP", "HA_LISTEN_HOST", "RECOVERY_POLL_S", "BrokerRole", "ReplicationSettings"]

BrokerRole = Literal["ASYNC_MASTER", "SYNC_MASTER", "SLAVE"]
CHECK_BYTES = 4096
"""How many bytes before its end a slave asks its master to compare (HA_CHECK)."""
RECOVERY_POLL_S = 0.2
HA_LISTEN_HOST = Format("empty (listenHost's) or a host name or IP address (0.0.0.0: every IPv4 interface)",
                        LISTEN_HOST.test)  # fmt: skip
"""``haListenHost``."""
HA_ADVERTISED_IP = Format(f"empty (brokerIp) or {ADVERTISED_IP.allowed}", lambda v: v == "" or ADVERTISED_IP.test(v))
"""``brokerIp2``."""


@dataclass(frozen=True)
class ReplicationSettings:
    """The replication settings of one broker (``BrokerConfig.replication_settings()``)."""

    role: BrokerRole
    host: str
    """Where the HA port listens (``haListenHost``, else ``listenHost``; empty: every interface)."""
    ha_port: int
    listen_at_start: bool = False
    """Listen from the start (``haListenPort`` set); else at the first ticket handed out."""
    ha_host: str = ""
    """The host others reach the HA port at (``brokerIp2``, else ``brokerIp``), in HA_CHECK answers."""
    warning_interval_s: float = 10.0
    """Warnings about connections the HA port closed: at most one line per peer IP per this long."""
    ticket_checks_address: bool = True
    """A ticket opens a link only from the address it was issued to (``haTicketChecksAddress``)."""
    ha_master_address: str = ""
    """The master's HA address; empty: the one the name servers give (the master's registration)."""
    heartbeat_s: float = 5.0
    housekeeping_s: float = 20.0
    batch: int = 32 * 1024
    max_fallbehind: int = 256 * 1024 * 1024
    sync_timeout_s: float = 5.0
    broker_name: str = ""
    namesrv: tuple[str, ...] = ()
    """Where a starting master looks up the slaves of its set (to refuse writes if one holds more than it)."""
    recover_from: str = ""
    """A slave's remoting address to copy the commit log from before serving as a master (``--recover-from-slave``)."""
