"""A broker under automatic failover: its role comes from its set's state in etcd, one term at a time.

A term is one ``BrokerController`` in one role of one epoch: the master of epoch N, or a replica following the
master of epoch N. Between terms no controller runs. The loop (docs/failover.md §3):

1. keep this broker's etcd lease alive and read the set (``EtcdSet.view``);
2. no state yet: create it with this broker as master of epoch 1 (``election.bootstrap``);
3. a live master: follow it (cutting first what an earlier epoch left in this log beyond the set's history:
   ``election.truncation_point``); no live master: stand for election when ``election.elect`` says so;
4. run the term, watching etcd every ``POLL_S``: a replica ends its term when the set has a new master (or it won an
   election); a master renews its lease, keeps the SyncStateSet (``election.sync_set_change``), and ends its term when
   the state names another master or its lease may be gone. A master acknowledges only while its lease is surely
   alive (``fencing.LeaseClock``); a process that restarts never resumes the epoch it was master of.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable

from sievemq.broker.config import BrokerConfig
from sievemq.broker.controller import BrokerController
from sievemq.broker.failover.leading import hand_over, keep_sync_set
from sievemq.broker.failover.local import LocalLog
from sievemq.ha.election import bootstrap, elect, truncation_point
from sievemq.ha.etcd_set import EtcdSet, EtcdUnavailable, set_prefix
from sievemq.ha.fencing import LeaseClock
from sievemq.ha.set_state import ReplicaInfo, SetState, SetView
from sievemq.ha.term import Term
from sievemq.settings import split_addrs
from sievemq.util.tasks import Background

__all__ = ["ELECTION_GRACE_S", "POLL_S", "FailoverBroker"]

log = logging.getLogger(__name__)

POLL_S = 0.5
"""How often a broker renews its lease and reads its set."""
ELECTION_GRACE_S = 2.0
"""A candidate that is not the best-placed one stands only after this long without a master."""
LEASE_RENEW_S = 0.5
"""How often the lease is renewed (its TTL is ``controllerLeaseSeconds``)."""
TermHook = Callable[[BrokerController | None], Awaitable[None]]
PUBLISH_S = 1.0
"""A broker's liveness key is rewritten (with its log's end) at most this often."""


class FailoverBroker:
    """Runs one broker of an automatic-failover set: a ``BrokerController`` per term."""

    def __init__(self, config: BrokerConfig, on_term: TermHook | None = None) -> None:
        """``config.controller_mode`` is ``etcd``; ``on_term(controller)`` runs when a term's broker serves, and
        ``on_term(None)`` before it stops (the HTTP port follows the running broker)."""
        self.config = config
        self.on_term = on_term
        self.broker_id = config.broker_id
        ttl = float(config.controller_lease_seconds)
        self.clock = LeaseClock(ttl, max(1.0, ttl / 5))
        prefix = set_prefix(config.etcd_root, config.broker_cluster_name, config.broker_name)
        self.etcd = EtcdSet(split_addrs(config.etcd_endpoints), prefix, config.broker_id, self.clock)
        self.local = LocalLog(config)
        self.controller: BrokerController | None = None
        """The running term's broker (None between terms)."""
        self.term: Term | None = None
        self.state: SetState | None = None
        """The set's state as last read."""
        self.sync_set: frozenset[int] = frozenset()
        """The SyncStateSet the running master works with."""
        self.status = "starting"
        """What this broker is doing, in words (``sievemq cluster status``, logs)."""
        self.terms_started = 0
        self.elections_won = 0
        self.first_term = asyncio.Event()
        """Set once the first term's broker serves."""
        self._elected_epoch = 0
        self._term_over = True
        self._handing_over: int | None = None
        self._published: tuple[ReplicaInfo, float] | None = None
        self._masterless_since: float | None = None
        self._task = Background("failover")
        self._keeper = Background("failover-lease")
        self._lease_generation = 0
        """Counts the leases granted: a term whose lease was replaced is over (its keys went with the old one)."""

    # ------------------------------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Start the lease keeper and the term loop in the background (a broker serves once etcd gave it a role)."""
        self._keeper.start(self._keep_lease())
        self._task.start(self._run())

    async def stop(self) -> None:
        """End the term, stop the broker and let the lease go (the set elects at once, not after the TTL)."""
        await self._task.stop()
        await self._keeper.stop()
        await self.etcd.close(revoke=True)

    # ------------------------------------------------------------------------------------------ facts
    def _end(self) -> int:
        c = self.controller
        if c is not None:
            return c.store.max_phy_offset
        assert self.local.end is not None
        return self.local.end

    def _me(self) -> ReplicaInfo:
        c = self.config
        return ReplicaInfo(self.broker_id, c.advertised_addr, c.ha_address, self.local.epoch, self._end())

    def _fence(self) -> str | None:
        if self._term_over:
            return "its term as master is over"
        if self._handing_over is not None:
            return f"it is handing the set over to broker {self._handing_over}"
        now = time.monotonic()
        if not self.clock.valid(now):
            return (f"its etcd lease ({self.clock.ttl:g}s) is not surely alive (fenced {self.clock.margin:g}s before "
                    "it could expire)")  # fmt: skip
        return None

    async def _keep_lease(self) -> None:
        """Renew the lease every ``LEASE_RENEW_S``, whatever the terms are doing (a handover's wait, a slow read); a
        new lease means the old one expired: nothing published stands and the master's term is over."""
        while True:
            try:
                if not await self.etcd.keep_alive():
                    self._published = None
                    self._lease_generation += 1
            except EtcdUnavailable:
                pass
            except Exception:
                log.exception("renewing the etcd lease failed")
            await asyncio.sleep(LEASE_RENEW_S)

    async def _leased(self) -> None:
        """Wait until a lease is granted (the keeper asks for it)."""
        while not self.etcd.has_lease:
            self.status = f"waiting for an etcd lease ({self.etcd.last_error or 'asking'})"
            await asyncio.sleep(POLL_S / 5)

    async def _publish(self, me: ReplicaInfo, *, force: bool = False) -> None:
        now = time.monotonic()
        last = self._published
        if not force and last is not None and (last[0] == me or now - last[1] < PUBLISH_S):
            return
        await self.etcd.publish(me)
        self._published = (me, now)

    # ------------------------------------------------------------------------------------------ the loop
    async def _run(self) -> None:
        await self.local.probe()
        while True:
            try:
                state = await self._next_term()
                await self._run_term(state)
            except EtcdUnavailable as e:
                self.status = f"waiting for etcd ({e})"
                await asyncio.sleep(POLL_S)
            except Exception:  # a bug must not leave the broker without a term for good
                log.exception("the failover loop failed; starting over")
                await asyncio.sleep(POLL_S)

    async def _next_term(self) -> SetState:
        """Talk to etcd until this broker has a role: the state it is master of (elected by this process) or whose
        live master it follows."""
        while True:
            await self._leased()
            view = await self.etcd.view()
            self.state = st = view.state
            me = self._me()
            now = time.monotonic()
            if st is None:
                await self._publish(me, force=True)
                if await self.etcd.bootstrap(bootstrap(me)):
                    self._elected_epoch = 1
                    log.warning("this broker is the first master of set %s (epoch 1)", self.config.broker_name)
                continue
            if st.master_id == self.broker_id:
                mine = self.etcd.lease_id
                if self.broker_id in view.alive and view.leases.get(self.broker_id) == mine:
                    return st  # elected with this lease, or handed over to (both need this broker's key live)
                if self.broker_id in view.alive:  # the key of this broker's previous life: wait for its lease
                    self.status = "waiting for the lease of this broker's previous run to expire"
                    await asyncio.sleep(POLL_S)
                    continue
            else:
                await self._publish(me)
                if view.master_alive:
                    self._masterless_since = None
                    return st
            self.status = f"no live master of epoch {st.master_epoch}"
            if await self._stand(view, me, now):
                continue
            await asyncio.sleep(POLL_S)

    async def _stand(self, view: SetView, me: ReplicaInfo, now: float) -> bool:
        """Stand for election if ``elect`` says so; True when this broker won."""
        st = view.state
        assert st is not None
        if self._masterless_since is None:
            self._masterless_since = now
        alive = {**view.alive, me.broker_id: me}
        new = elect(SetView(st, view.revision, alive), me, masterless_for=now - self._masterless_since,
                    grace_s=ELECTION_GRACE_S, unclean=self.config.enable_elect_unclean_master)  # fmt: skip
        if new is None:
            return False
        if not await self.etcd.elect(new, view.revision, st.master_id, me):
            return False
        self._elected_epoch = new.master_epoch
        self._published = (me, now)
        self.elections_won += 1
        self._masterless_since = None
        log.warning("this broker is elected master of set %s, epoch %d (from broker %d of epoch %d), its log ending "
                    "at %d", self.config.broker_name, new.master_epoch, st.master_id, st.master_epoch,
                    me.max_offset)  # fmt: skip
        return True

    # ------------------------------------------------------------------------------------------ one term
    def _make_term(self, st: SetState) -> Term:
        self.sync_set = st.sync_state_set
        return Term(self.broker_id, st.master_epoch, st.master_id, st.master_address, st.master_ha_address,
                    self._fence, lambda: self.sync_set, self.config.min_in_sync_replicas,
                    st.sync_state_set, st.epochs, self.config.broker_cluster_name,
                    self.config.broker_name)  # fmt: skip

    def _term_config(self, term: Term) -> BrokerConfig:
        c = self.config
        # a replica reports at least four times per haMaxTimeSlaveNotCatchup, so an idle one stays in sync
        beat = min(c.ha_send_heartbeat_interval, max(100, c.ha_max_time_slave_not_catchup // 4))
        if term.is_master:  # routes name a set's master by brokerId 0 (RocketMQ's MASTER_ID)
            return dataclasses.replace(c, controller_mode="none", broker_id=0, ha_send_heartbeat_interval=beat)
        return dataclasses.replace(c, controller_mode="none", broker_role="SLAVE", ha_send_heartbeat_interval=beat)

    def _prepare_log(self, st: SetState, term: Term) -> None:
        if not term.is_master:
            end = self.local.end
            assert end is not None
            keep = truncation_point(self.local.history, end, st.epochs)
            if keep < end:
                self.local.truncate(keep)
        self.local.adopt(st.epochs)

    async def _run_term(self, st: SetState) -> None:
        term = self._make_term(st)
        self._prepare_log(st, term)
        controller = BrokerController(self._term_config(term), term=term)
        self._term_over = not term.is_master
        role = "master" if term.is_master else f"replica of broker {term.master_id}"
        try:
            await controller.start()
        except Exception:
            log.exception("the broker did not start as %s of epoch %d; trying again", role, term.epoch)
            self._term_over = True
            await self._stop_controller(controller)
            await asyncio.sleep(POLL_S)
            return
        self.controller, self.term = controller, term
        self.terms_started += 1
        self.status = f"{role} of epoch {term.epoch}"
        log.warning("serving as %s of epoch %d", role, term.epoch)
        self.first_term.set()
        await self._hook(controller)
        why = "stopped"
        try:
            why = await (self._lead(term) if term.is_master else self._follow(term))
        finally:
            self._term_over = True  # a master acknowledges nothing from here on
            self._handing_over = None
            log.warning("the term as %s of epoch %d ends: %s", role, term.epoch, why)
            self.controller = self.term = None
            await self._hook(None)
            await self._stop_controller(controller)

    async def _hook(self, controller: BrokerController | None) -> None:
        if self.on_term is not None:
            try:
                await self.on_term(controller)
            except Exception:
                log.exception("the term hook failed")

    async def _stop_controller(self, controller: BrokerController) -> None:
        """Stop the term's broker and note where its log ends: read once nothing writes any more (a replica's copy
        or a master's last puts could still append before), else by opening the store again."""
        try:
            await controller.stop()
        except Exception:
            log.exception("stopping the term's broker failed")
        end = controller.final_phy_offset
        if end is not None:
            self.local.stopped_at(end)
        else:
            self.local.end = None
            await self.local.probe()

    async def _follow(self, term: Term) -> str:
        """A replica's term: until the set has another master, or this broker won an election."""
        masterless_since: float | None = None
        while True:
            await asyncio.sleep(POLL_S)
            try:
                await self._leased()
                view = await self.etcd.view()
                st = view.state
                if st is None or (st.master_id, st.master_epoch) != (term.master_id, term.epoch):
                    return "the set has a new master" if st is not None else "the set's state is gone"
                self.state = st
                self.sync_set = st.sync_state_set
                me = self._me()
                await self._publish(me)
                if view.master_alive:
                    masterless_since = None
                    continue
                now = time.monotonic()
                masterless_since = masterless_since or now
                self._masterless_since = masterless_since
                trial = elect(view, me, masterless_for=now - masterless_since, grace_s=ELECTION_GRACE_S,
                              unclean=self.config.enable_elect_unclean_master)  # fmt: skip
                if trial is None:
                    continue
                assert self.controller is not None
                await self.controller.replication.pause_following()  # the log's end holds still from here
                me = self._me()
                await self._publish(me, force=True)
                won = await self._stand(view, me, now)
                return f"elected master of epoch {self._elected_epoch}" if won else "stood for election and lost"
            except EtcdUnavailable:
                continue

    async def _lead(self, term: Term) -> str:
        """A master's term: until its lease may be gone or the state names another master."""
        assert self.controller is not None
        server = self.controller.replication.server
        generation = self._lease_generation
        while True:
            await asyncio.sleep(POLL_S)
            if self._lease_generation != generation:
                return "its etcd lease expired (another master may be elected)"
            if self.clock.expired(time.monotonic()):
                return f"etcd did not renew its lease for {self.clock.ttl:g}s"
            try:
                view = await self.etcd.view()
            except EtcdUnavailable:
                continue
            st = view.state
            if st is None or (st.master_id, st.master_epoch) != (self.broker_id, term.epoch):
                return "the set's state names another master"
            self.state = st
            if view.handover is not None and view.handover != self.broker_id:
                self._handing_over = view.handover  # fenced from here: nothing more is acknowledged
                try:
                    done = await hand_over(self.etcd, self.clock, view, st, view.handover, server,
                                           self.controller.store, self.config.broker_name)  # fmt: skip
                finally:
                    self._handing_over = None
                if done is not None:
                    return done
                continue
            with contextlib.suppress(EtcdUnavailable):
                await self._publish(self._me())
                self.sync_set = await keep_sync_set(self.etcd, view, st, server, self.config.broker_name,
                                                    self.config.ha_max_time_slave_not_catchup / 1000)  # fmt: skip
