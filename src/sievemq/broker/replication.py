"""A broker's part in its master/slave set: its role, its HA port, following the master, and what a role allows.

Every broker has an HA port (``HAServer``), so that slaves follow a master and a master can be recovered from a
slave. It listens from the start when ``haListenPort`` is set, else from the first ticket it hands out: a
successful HA_CHECK (on the remoting port, where the ACL checks the requester) carries a one-time ticket bound to
the requester's address, and the HA port serves only a connection that opens with one. A slave also follows its
master (``HAClient``, after HA_CHECK over the remoting port: their logs agree, and it gets its ticket) and copies
its metadata (``MetadataSync``). A master remembers, in ``config/replication.json``, the highest offset a slave
acknowledged: restarted with less, it holds less than a slave and refuses writes until an operator recovers it.
See docs/protocol/replication.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sievemq.broker.access import broker_signer
from sievemq.broker.config import BrokerConfig
from sievemq.broker.filter_manager import ConsumerFilterManager
from sievemq.broker.groups import SubscriptionGroupManager
from sievemq.broker.metadata_sync import MetadataSync
from sievemq.broker.offsets import ConsumerOffsetManager
from sievemq.broker.schedule import ScheduleService
from sievemq.broker.set_check import SetCheck
from sievemq.broker.topics import TopicConfigManager
from sievemq.errors import RecoveryError, RemotingError
from sievemq.ha.gate import HelloGate
from sievemq.ha.master import HAServer
from sievemq.ha.settings import CHECK_BYTES, RECOVERY_POLL_S, ReplicationSettings
from sievemq.ha.slave import HAClient, LinkRefused
from sievemq.ha.term import Term
from sievemq.ha.tickets import TicketBook
from sievemq.ha.wire import encode_hello
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import ConnectionPool
from sievemq.settings.rules import HOST_PORT
from sievemq.settings.tls import outgoing_tls
from sievemq.store import MessageStore
from sievemq.store.jsonfile import read_json

__all__ = ["Replication", "build_replication"]

log = logging.getLogger(__name__)



def _remoting_of(ha_addr: str) -> str:
    """The remoting address beside an HA address (the HA port is the remoting port + 1 unless configured)."""
    host, _, port = ha_addr.rpartition(":")
    return f"{host}:{int(port) - 1}"


def _ticket_problem(fields: dict[str, str]) -> str | None:
    """What is wrong with the ticket and HA address of a successful HA_CHECK's answer, or None."""
    try:
        encode_hello(str(fields.get("haTicket", "")))
    except ValueError:
        return "no haTicket of 32 hex characters (a sievemq broker from before tickets? upgrade it)"
    if not HOST_PORT.test(str(fields.get("haServerAddr", ""))):
        return f"haServerAddr {fields.get('haServerAddr')!r} is not host:port"
    return None


def build_replication(
    config: BrokerConfig,
    store: MessageStore,
    config_dir: Path,
    save: Callable[[Path, Any], None],
    *,
    topics: TopicConfigManager,
    groups: SubscriptionGroupManager,
    offsets: ConsumerOffsetManager,
    schedule: ScheduleService,
    filters: ConsumerFilterManager,
    recover_from: str = "",
    term: Term | None = None,
) -> Replication:
    """The replication of a broker: its settings, a signed (and TLS, when configured) pool for other brokers'
    remoting ports, and on a slave the metadata copy into the given managers."""
    tls = outgoing_tls(config)
    pool = ConnectionPool(rpc_hook=broker_signer(config), tls=tls.context() if tls is not None else None)
    settings = config.replication_settings(recover_from)
    replication: Replication
    sync = MetadataSync(pool, lambda: replication.metadata_source, topics, groups, offsets, schedule, filters,
                        own_end=lambda: store.max_phy_offset)
    replication = Replication(settings, store, config_dir, save, pool, sync, term)
    return replication


def fenced_after_store(why: str) -> RemotingError:
    """The answer to a send stored by a master that fenced itself before answering: neither refused (14) nor
    acknowledged (the client retries)."""
    return RemotingError(ResponseCode.SYSTEM_ERROR, f"stored, but this master acknowledges nothing now: {why}; it "
                         "may or may not survive a failover", Reason.HA_MASTER_FENCED)  # fmt: skip


class Replication:
    """Role, HA port, the slave's following and copying, and the write rules of each role."""

    def __init__(
        self,
        settings: ReplicationSettings,
        store: MessageStore,
        config_dir: Path,
        save: Callable[[Path, Any], None],
        pool: ConnectionPool,
        sync: MetadataSync | None,
        term: Term | None = None,
    ) -> None:
        """``pool`` reaches other brokers' remoting ports; ``sync`` copies metadata from ``metadata_source`` (a
        slave's, all along; a recovering master's, once). ``term``: automatic failover's (the master, the epoch and
        the fence come from etcd; see docs/failover.md)."""
        self.term = term
        self.settings = settings
        self._pool = pool
        self.store = store
        self.path = config_dir / "replication.json"
        self._save = save
        self.sync = sync
        self.tickets = TicketBook(check_address=settings.ticket_checks_address)
        gate = HelloGate(self.tickets, warning_interval_s=settings.warning_interval_s)
        self.server = HAServer(store, settings.host, settings.ha_port, gate=gate, batch=settings.batch,
                               heartbeat_s=settings.heartbeat_s, housekeeping_s=settings.housekeeping_s,
                               max_fallbehind=settings.max_fallbehind, on_ahead=self.claimed_ahead)  # fmt: skip
        self._unseen: dict[tuple[str, int], int] = {}
        self.wake: Callable[[str, int], None] = lambda _topic, _queue_id: None
        """Wakes the pulls held on a queue (the broker's long polling) once what it was told of became visible."""
        if term is not None and term.is_master:  # a SYNC send waits for every replica in sync, from the first one
            self.server.require(frozenset(str(m) for m in term.members - {term.broker_id}))
            # consumers see only what every replica in sync holds (RocketMQ's readUnCommitted = false): a message
            # one read can never vanish in a failover, so no consumer offset runs ahead of the next master's log
            store.reader.read_limit = lambda: self.server.confirmed
            self.server.on_confirm = self._confirmed
        self.set_check = SetCheck(settings, store, pool)
        self.client: HAClient | None = None
        self.master_addr: str | None = None
        """The master's remoting address (a slave learns it from its registration)."""
        self.master_ha: str | None = settings.ha_master_address or None
        if term is not None and not term.is_master:
            self.master_addr, self.master_ha = term.master_address, term.master_ha_address
        self._persisted = 0
        self._last_refusal: str | None = None
        self._tasks: list[asyncio.Task[None]] = []

    # ------------------------------------------------------------------------------------------ state
    @property
    def metadata_source(self) -> str | None:
        """Whom ``sync`` copies metadata from: a slave's master; a recovering master's slave."""
        return self.master_remoting if self.is_slave else self.settings.recover_from or None

    @property
    def master_remoting(self) -> str | None:
        """The master's remoting address: from the registration, else beside its configured HA address."""
        if self.master_addr:
            return self.master_addr
        return _remoting_of(self.master_ha) if self.master_ha else None

    @property
    def is_slave(self) -> bool:
        """True for ``brokerRole = "SLAVE"``."""
        return self.settings.role == "SLAVE"

    @property
    def behind(self) -> str | None:
        """Why this master must not take writes (it holds less than a slave), or None. (Under automatic failover
        epochs and truncation keep logs in agreement: no such check.)"""
        if self.term is not None:
            return None
        if self.set_check.lost_data is not None:
            return self.set_check.lost_data
        if self.server.behind_slave is not None:
            return f"slave {self.server.behind_slave} holds more of the commit log than this master"
        return None

    def write_refusal(self) -> RemotingError | None:
        """The answer to a write this broker must refuse (a slave; a master behind its slave), or None."""
        if self.is_slave:
            return RemotingError(ResponseCode.SERVICE_NOT_AVAILABLE, "this broker is a slave: it takes no writes; "
                                 "send to the master of its set", Reason.BROKER_IS_SLAVE)  # fmt: skip
        if self.term is not None:
            return self._term_refusal(self.term)
        behind = self.behind
        if behind is not None:
            return RemotingError(ResponseCode.SERVICE_NOT_AVAILABLE, f"this master refuses writes: {behind}; recover "
                                 "it with `sievemq broker --recover-from-slave`", Reason.HA_MASTER_BEHIND)  # fmt: skip
        return None

    def _term_refusal(self, term: Term) -> RemotingError | None:
        fenced = term.fence()
        if fenced is not None:
            return RemotingError(ResponseCode.SERVICE_NOT_AVAILABLE, f"this master acknowledges nothing now: {fenced}; "
                                 "retry (the route moves to the set's master)", Reason.HA_MASTER_FENCED)  # fmt: skip
        in_sync = len(term.sync_set())
        if in_sync < term.min_in_sync:
            return RemotingError(ResponseCode.SYSTEM_ERROR, f"in-sync replicas not enough: {in_sync} in the "
                                 f"SyncStateSet, minInSyncReplicas {term.min_in_sync}; writes resume when a replica "
                                 "catches up", Reason.IN_SYNC_REPLICAS_NOT_ENOUGH)  # fmt: skip
        return None

    async def replicated(self, end: int) -> int:
        """Under SYNC_MASTER: wait for a slave to hold the commit log up to ``end`` (under automatic failover: every
        replica of the SyncStateSet); the send's answer code. A master fenced meanwhile raises instead of
        acknowledging."""
        if self.term is not None:
            code = ResponseCode.SUCCESS
            if self.settings.role == "SYNC_MASTER":
                ok = await self.server.wait_acked(end, self.settings.sync_timeout_s)
                code = ResponseCode.SUCCESS if ok else ResponseCode.FLUSH_SLAVE_TIMEOUT
            fenced = self.term.fence()  # the last moment before the answer leaves
            if fenced is not None:  # stored, perhaps copied: neither refused (14) nor acknowledged; the client retries
                raise fenced_after_store(fenced)
            return code
        if self.settings.role != "SYNC_MASTER":
            return ResponseCode.SUCCESS
        if not self.server.slave_ok(end):
            return ResponseCode.SLAVE_NOT_AVAILABLE
        ok = await self.server.wait_acked(end, self.settings.sync_timeout_s)
        return ResponseCode.SUCCESS if ok else ResponseCode.FLUSH_SLAVE_TIMEOUT

    def replicated_now(self, end: int) -> int | None:
        """``replicated``'s answer without waiting: known unless this master waits for replicas (SYNC_MASTER)."""
        if self.settings.role == "SYNC_MASTER":
            return None
        if self.term is not None:
            fenced = self.term.fence()
            if fenced is not None:
                raise fenced_after_store(fenced)
        return ResponseCode.SUCCESS

    def visible(self, topic: str, queue_id: int) -> bool:
        """A message was just dispatched to a queue: True when consumers see it at once; else (a master whose
        replicas in sync do not hold it yet) False, and ``wake(topic, queue_id)`` runs once they do."""
        if self.store.reader.read_limit is None:
            return True
        end = self.store.max_phy_offset
        if self.server.confirmed >= end:
            return True
        self._unseen[(topic, queue_id)] = end
        return False

    def _confirmed(self, floor: int) -> None:
        if not self._unseen:
            return
        for key in [k for k, end in self._unseen.items() if end <= floor]:
            del self._unseen[key]
            try:
                self.wake(*key)
            except Exception:
                log.exception("waking the pulls held on %s failed", key)

    def claimed_ahead(self, peer: str, offset: int) -> None:
        """A connection says it holds more of the commit log than this master: have the set checked (a master only;
        ``SetCheck.claimed_ahead``)."""
        if self.term is not None:
            log.error("replica %s claims to hold the commit log up to %d, beyond this master's end %d: it did not "
                      "truncate to its epoch (nothing is sent to it)", peer, offset, self.store.max_phy_offset)
        elif not self.is_slave:
            self.set_check.claimed_ahead(peer, offset)

    def wants_master(self) -> bool:
        """True for a slave that does not know its master yet (it registers again soon to learn it)."""
        return self.is_slave and self.master_remoting is None

    def on_registration(self, master_addr: str | None, ha_addr: str | None) -> None:
        """A name server answered our registration: a slave learns where its master is (under automatic failover,
        etcd says, not the name servers)."""
        if not self.is_slave or self.term is not None:
            return
        if master_addr and master_addr != self.master_addr:
            log.info("the master of this set is %s (HA %s)", master_addr, ha_addr)
            self.master_addr = master_addr
        if ha_addr and not self.settings.ha_master_address:
            self.master_ha = ha_addr

    async def link_fields(self, ip: str, request: dict[str, str] | None = None) -> dict[str, str]:
        """What a successful HA_CHECK from ``ip`` adds: a ticket for one link from ``ip`` and the HA address. Opens
        the HA port first if it is not open (``RemotingError`` HA_PORT_UNAVAILABLE when it cannot be). Under
        automatic failover the request must name this master's epoch and the replica's brokerId (its ticket's
        owner): ``RemotingError`` HA_EPOCH_MISMATCH otherwise."""
        owner = ""
        extra: dict[str, str] = {}
        term = self.term
        if term is not None:
            owner = self._term_link_owner(term, request or {})
            extra = {"masterEpoch": str(term.epoch), "masterBrokerId": str(term.master_id)}
        server = self.server
        if not server.listening:
            try:
                await server.start()
            except OSError as e:
                where = f"{server.host or '*'}:{server.port}"
                log.error("cannot listen on the HA port %s: %s (haListenHost, haListenPort)", where, e)
                raise RemotingError(ResponseCode.SYSTEM_ERROR, f"this broker cannot listen on its HA port {where}: "
                                    f"{e}; free the port or set haListenHost / haListenPort, then ask again",
                                    Reason.HA_PORT_UNAVAILABLE) from None  # fmt: skip
        ticket = self.tickets.issue(ip, time.monotonic(), owner)
        return {"haTicket": ticket, "haServerAddr": f"{self.settings.ha_host}:{server.port}", **extra}

    @staticmethod
    def _term_link_owner(term: Term, request: dict[str, str]) -> str:
        """The brokerId a replication link under automatic failover is for (HA_CHECK's ``brokerId`` and ``epoch``)."""
        epoch, broker_id = str(request.get("epoch", "")), str(request.get("brokerId", ""))
        if not term.is_master or epoch != str(term.epoch):
            where = f"master of epoch {term.epoch}" if term.is_master else f"not the master (epoch {term.epoch})"
            raise RemotingError(ResponseCode.SERVICE_NOT_AVAILABLE, f"replication asked for epoch {epoch or '?'}, "
                                f"this broker is {where}: read the set's state again", Reason.HA_EPOCH_MISMATCH)
        if not broker_id.isdigit() or not 0 < int(broker_id) < 1 << 31 or int(broker_id) == term.broker_id:
            raise RemotingError(ResponseCode.SYSTEM_ERROR, f"HA_CHECK's brokerId {broker_id!r} is not another "
                                "broker's id (an integer > 0)", Reason.INVALID_HEADER)
        return broker_id

    def runtime_info(self) -> dict[str, str]:
        """What GET_BROKER_RUNTIME_INFO adds (docs/protocol/replication.md §6)."""
        info = {"brokerRole": self.settings.role, "haListenPort": str(self.server.port),
                "haListening": str(self.server.listening).lower()}  # fmt: skip
        if self.term is not None:  # automatic failover (docs/failover.md)
            info.update(haControllerMode="etcd", haEpoch=str(self.term.epoch), haReplicaId=str(self.term.broker_id),
                        haMasterBrokerId=str(self.term.master_id),
                        haSyncStateSet=",".join(map(str, sorted(self.term.sync_set()))),
                        haEpochHistory=",".join(f"{e}@{s}" for e, s in self.term.epochs[-10:]))  # fmt: skip
        if self.is_slave:
            c = self.client
            state = "stopped" if c is None else "following" if c.connected_to else (c.refusal or "connecting")
            info.update(
                haMasterAddress=self.master_ha or "",
                haLagBytes=str(c.lag_bytes if c else 0),
                haLagSeconds=f"{c.lag_seconds if c else 0.0:.1f}",
                haMasterOffset=str(c.master_offset if c else 0),
                haState=state,
            )
        else:
            info.update(haSlaveAckOffset=str(self.server.acked), haConnectedSlaves=str(len(self.server.slaves)),
                        haBehind=self.behind or "")  # fmt: skip
        return info

    # ------------------------------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Recover first if asked, check what a slave acknowledged before, listen (``haListenPort`` set), and follow
        (a slave)."""
        if self.settings.recover_from:
            await self._recover(self.settings.recover_from)
        if self.term is None:
            self._load()
        if not self.is_slave and self.set_check.lost_data is None and self.term is None:
            await self.set_check.check_set()
        if self.settings.listen_at_start:
            await self.server.start()
        self.store.add_dispatch_listener(lambda *_a: self.server.notify())
        if self.is_slave:
            self.client = HAClient(self.store, lambda: self.master_ha, heartbeat_s=self.settings.heartbeat_s,
                                   housekeeping_s=self.settings.housekeeping_s, admit=self._admit_master,
                                   refused_retry_s=1.0 if self.term is not None else 10.0)  # fmt: skip
            self.client.start()
            if self.sync is not None:
                self.store.add_dispatch_listener(self.sync.on_dispatch)
                self.sync.start()
        elif self.term is None:
            self._tasks.append(asyncio.create_task(self._persist_loop(), name="ha-persist"))

    async def stop(self) -> None:
        """Stop following, copying and listening; remember what slaves acknowledged."""
        await self.set_check.stop()
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self.client is not None:
            await self.client.stop()
        if self.sync is not None:
            await self.sync.stop()
        await self.server.stop()
        await self._pool.close()
        if self.term is None:
            self._persist()

    async def pause_following(self) -> None:
        """Stop copying from the master (a replica about to stand for election: its log's end must hold still)."""
        if self.client is not None:
            await self.client.stop()

    # ------------------------------------------------------------------------------------------ master memory
    def _load(self) -> None:
        data = read_json(self.path, None) or {}
        acked = int(data.get("slaveAckedOffset", 0))
        self._persisted = acked
        end = self.store.max_phy_offset
        if not self.is_slave and acked > end:
            why = f"a slave acknowledged the commit log up to {acked}, but this master holds it only up to {end}"
            self.set_check.lost_data = f"{why} (data lost since)"
            log.error("%s: refusing writes until recovered (`sievemq broker --recover-from-slave HOST:PORT`)",
                      self.set_check.lost_data)  # fmt: skip

    def _persist(self) -> None:
        acked = max(self._persisted, self.server.acked)
        if acked != self._persisted:
            self._persisted = acked
            self._save(self.path, {"slaveAckedOffset": acked})

    async def _persist_loop(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self._persist()

    # ------------------------------------------------------------------------------------------ slave checks
    async def _admit_master(self, ha_addr: str) -> str:
        """The HAClient's check before following ``ha_addr``: HA_CHECK at the master's remoting port; the ticket."""
        return (await self._check_log(self.master_addr or _remoting_of(ha_addr)))["haTicket"]

    async def _check_log(self, remoting: str) -> dict[str, str]:
        """Ask ``remoting`` (HA_CHECK) whether its log agrees with the end of ours: its answer's fields, a ticket for
        its HA port among them (``haTicket``, ``haServerAddr``); ``LinkRefused`` (why) when not."""
        end = self.store.max_phy_offset
        length = min(CHECK_BYTES, end - self.store.min_phy_offset)
        crc = 0
        at = end - length
        while at < end:
            chunk = self.store.read_commitlog(at, end - at)
            crc = zlib.crc32(chunk, crc)
            at += len(chunk)
        header: dict[str, Any] = {"offset": end, "length": length, "crc": crc}
        if self.term is not None:
            header.update(brokerId=self.term.broker_id, epoch=self.term.epoch)
        request = RemotingCommand.request(RequestCode.HA_CHECK, header)
        try:
            resp = await self._pool.request(remoting, request, 10.0)
        except Exception as e:
            raise LinkRefused(f"cannot check the log at {remoting}: {e}") from None
        fields = resp.ext_fields
        if resp.code == ResponseCode.SUCCESS and self.term is not None and fields.get("masterEpoch") != str(
            self.term.epoch
        ):
            refusal = f"{remoting} answered for epoch {fields.get('masterEpoch')!r}, not {self.term.epoch}"
        elif resp.code == ResponseCode.SUCCESS:
            problem = _ticket_problem(fields)
            if problem is None:
                self._last_refusal = None
                return fields
            refusal = f"{remoting} answered HA_CHECK without a usable replication ticket: {problem}"
        else:
            refusal = f"{fields.get('reason') or resp.code}: {resp.remark}"
        if refusal != self._last_refusal:  # said once per change, not at every retry
            log.error("no replication link with %s: %s (reason %s)", remoting, refusal, fields.get("reason"))
        self._last_refusal = refusal
        raise LinkRefused(refusal)

    async def _recover(self, source: str) -> None:
        """Copy the commit log of the slave at ``source`` (its remoting address) onto ours, which must be a prefix
        of it, before serving as a master."""
        log.warning("recovering this master from slave %s: copying its commit log first", source)
        try:
            fields = await self._check_log(source)
        except LinkRefused as e:
            raise RecoveryError(f"cannot recover from {source}: {e}") from None
        ha_addr = fields["haServerAddr"]
        first = [fields["haTicket"]]

        async def admit(_addr: str) -> str:  # a link broken meanwhile: check again, with a new ticket
            return first.pop() if first else (await self._check_log(source))["haTicket"]

        client = HAClient(self.store, lambda: ha_addr, heartbeat_s=self.settings.heartbeat_s,
                          housekeeping_s=self.settings.housekeeping_s, admit=admit)  # fmt: skip
        client.start()
        started = time.monotonic()
        try:
            while not (client.heartbeats and client.master_offset <= self.store.max_phy_offset):
                await asyncio.sleep(RECOVERY_POLL_S)
        finally:
            await client.stop()
        if self.sync is not None:  # its topics, groups, offsets, delay progress and filters, too
            try:
                await self.sync.sync_once(merge=True)
            except Exception as e:
                raise RecoveryError(f"copied the commit log of {source}, but not its metadata: {e}") from None
        end = self.store.max_phy_offset
        self._save(self.path, {"slaveAckedOffset": end})
        log.warning("recovered from slave %s: commit log up to %d in %.1fs; serving as master", source, end,
                    time.monotonic() - started)  # fmt: skip
