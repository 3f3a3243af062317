"""A broker's replication settings, as plain data (``BrokerConfig.replication_settings()`` builds them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["CHECK_BYTES", "RECOVERY_POLL_S", "BrokerRole", "ReplicationSettings"]

BrokerRole = Literal["ASYNC_MASTER", "SYNC_MASTER", "SLAVE"]
CHECK_BYTES = 4096
"""How many bytes before its end a slave asks its master to compare (HA_CHECK)."""
RECOVERY_POLL_S = 0.2


@dataclass(frozen=True)
class ReplicationSettings:
    """The replication settings of one broker (``BrokerConfig.replication_settings()``)."""

    role: BrokerRole
    host: str
    ha_port: int
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
