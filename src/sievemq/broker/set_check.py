"""Whether a master holds less of the commit log than a replica of its set, and so must refuse writes.

A master that lost data (a replaced disk, a deleted folder, a new empty broker in its place) must not take writes
beside a slave that holds more: its new records would sit at offsets the slave already has. ``SetCheck`` asks the
name servers for the set's slaves and each slave for its commit-log end (at start, and when a connection claims
to hold more); a slave confirmed ahead sets ``lost_data``, which the broker answers every write with
(``HA_MASTER_BEHIND``). Claims alone are never believed: anyone can reach the remoting and HA ports. See
docs/protocol/replication.md §2 and §5.
"""

from __future__ import annotations

import logging
import time

import orjson

from sievemq.ha.settings import ReplicationSettings
from sievemq.remoting.codes import RequestCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import ConnectionPool
from sievemq.store import MessageStore
from sievemq.util.tasks import Background

__all__ = ["VERIFY_GAP_S", "SetCheck"]

log = logging.getLogger(__name__)

VERIFY_GAP_S = 5.0
"""Claims of a replica ahead are checked against the set's slaves at most this often."""


class SetCheck:
    """A master's check of its set's slaves; ``lost_data`` says why it must refuse writes (None: it need not)."""

    def __init__(self, settings: ReplicationSettings, store: MessageStore, pool: ConnectionPool) -> None:
        self.settings = settings
        self.store = store
        self._pool = pool
        self.lost_data: str | None = None
        self._verifying = Background("ha-verify-set")
        self._verified_at = -VERIFY_GAP_S

    def replica_ahead(self, peer: str, offset: int) -> None:
        """A replica holds the commit log up to ``offset``, beyond our end (confirmed): refuse writes."""
        if self.lost_data is not None:
            return
        self.lost_data = (f"replica {peer} holds the commit log up to {offset}, but this master only up to "
                          f"{self.store.max_phy_offset}")  # fmt: skip
        log.error("%s: refusing writes until recovered (`sievemq broker --recover-from-slave HOST:PORT`)",
                  self.lost_data)  # fmt: skip

    def claimed_ahead(self, peer: str, offset: int) -> None:
        """A connection (HA_CHECK on the remoting port, a first report on the HA port) says it holds the commit log
        beyond our end: check the set's slaves (``check_set``), at most every ``VERIFY_GAP_S``."""
        if self.lost_data is not None or offset <= self.store.max_phy_offset:
            return
        if self._verifying.running:
            return
        if time.monotonic() - self._verified_at < VERIFY_GAP_S:
            return
        log.warning("%s claims the commit log up to %d, beyond this master's %d: asking this set's slaves", peer,
                    offset, self.store.max_phy_offset)  # fmt: skip
        self._verified_at = time.monotonic()
        self._verifying.start(self.check_set())

    async def check_set(self) -> None:
        """Ask the name servers for our set's slaves, and each slave for its end; a slave ahead of us sets
        ``lost_data``. A name server or slave that does not answer is skipped (logged)."""
        for ns in self.settings.namesrv:
            try:
                resp = await self._pool.request(ns, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 3.0)
                table = orjson.loads(resp.body).get("brokerAddrTable") or {}
            except Exception as e:
                log.warning("cannot ask name server %s for the slaves of this set: %s", ns, e)
                continue
            addrs = (table.get(self.settings.broker_name) or {}).get("brokerAddrs") or {}
            for bid, addr in addrs.items():
                if str(bid) == "0":
                    continue
                try:
                    request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
                    info = orjson.loads((await self._pool.request(addr, request, 3.0)).body).get("table") or {}
                    end = int(info.get("commitLogMaxOffset", 0))
                except Exception as e:
                    log.warning("cannot ask slave %s how much of the commit log it holds: %s", addr, e)
                    continue
                if end > self.store.max_phy_offset:
                    self.replica_ahead(addr, end)
            return

    async def stop(self) -> None:
        """Stop a check under way."""
        await self._verifying.stop()
