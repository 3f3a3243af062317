"""Automatic failover under faults that are not a master's death: a replica killed, the master cut off from its
replicas, an etcd member killed or cut off, a master's disk lost, a slow link, failovers back and forth. Every run
ends with the checker's verdict on the whole history (``tests/support/chaos``)."""

from __future__ import annotations

import random
import time

import pytest

from tests.support.failover_faults import run_fault
from tests.support.failover_sets import FailoverSet
from tests.support.failover_workload import acks, finish, three, workload
from tests.support.netns import netem_available
from tests.support.partitions import isolated, partitions_available
from tests.support.replica_sets import until


def _needs_hosts(fset: FailoverSet) -> None:
    if not fset.namespaces:
        pytest.skip("a partition needs hosts of their own: network namespaces (root and iproute2)")
    assert fset.net is not None
    why = partitions_available(fset.net[0])
    if why is not None:
        pytest.skip(why)


async def test_a_killed_replica_leaves_the_sync_state_set_and_sends_go_on(fset: FailoverSet) -> None:
    master = await three(fset)
    replica = next(b for b in (1, 2, 3) if b != master)
    async with workload(fset) as (h, w):
        await acks(w, 0, 100, "acknowledged sends")
        before = await fset.current()
        fault = h.begin_fault("kill-replica", fset.addr(replica))
        fset.procs[replica].kill9()
        await fset.wait_state(lambda s: replica not in s.sync_state_set, "the killed replica out of the set")
        await acks(w, time.monotonic(), 50, "sends acknowledged without it")
        fset.broker(replica).start()
        st = await fset.wait_in_sync(1, 2, 3)
        h.end_fault(fault)
        assert (st.master_id, st.master_epoch) == (before.master_id, before.master_epoch)  # no election
        await acks(w, time.monotonic(), 50, "sends acknowledged with it back")
        verdict = await finish(fset, w, h)
    assert verdict.ok, verdict.summary()


async def test_a_master_cut_off_from_its_replicas_goes_on_alone_and_they_rejoin(fset: FailoverSet) -> None:
    _needs_hosts(fset)
    master = await three(fset)
    replicas = [fset.host(b) for b in (1, 2, 3) if b != master]
    async with workload(fset) as (h, w):
        await acks(w, 0, 100, "acknowledged sends")
        before = await fset.current()
        fault = h.begin_fault("partition-master-from-replicas", fset.addr(master))
        with isolated(fset.host(master), replicas):
            st = await fset.wait_state(lambda s: s.sync_state_set == {master}, "the set shrunk to the master")
            assert st.master_epoch == before.master_epoch
            await acks(w, time.monotonic(), 50, "sends acknowledged by the master alone")
        await fset.wait_in_sync(1, 2, 3)
        h.end_fault(fault)
        await acks(w, time.monotonic(), 50, "sends acknowledged with the replicas back")
        verdict = await finish(fset, w, h)
    assert verdict.ok, verdict.summary()


@pytest.mark.parametrize("how", ["kill the leader", "cut a member off"])
async def test_etcd_losing_a_member_changes_nothing(fset: FailoverSet, how: str) -> None:
    """Brokers move to another etcd endpoint; the master keeps its lease and its epoch."""
    if how == "cut a member off":
        _needs_hosts(fset)
    await three(fset)
    async with workload(fset) as (h, w):
        await acks(w, 0, 100, "acknowledged sends")
        before = await fset.current()
        leader = fset.etcd.leader()
        assert leader is not None
        if how == "kill the leader":
            fset.etcd.kill(leader)
            await acks(w, time.monotonic(), 100, "sends acknowledged with one etcd member down")
            fset.etcd.restart(leader)
        else:
            assert fset.net is not None
            others = [fset.net[i] for i in range(3) if i != leader]
            with isolated(fset.net[leader], others):
                await acks(w, time.monotonic(), 100, "sends acknowledged with one etcd member cut off")
        await acks(w, time.monotonic(), 50, "sends acknowledged with etcd whole again")
        st = await fset.state()
        assert st is not None and (st.master_id, st.master_epoch) == (before.master_id, before.master_epoch)
        verdict = await finish(fset, w, h)
    assert verdict.ok, verdict.summary()


async def test_a_master_that_lost_its_disk_returns_as_an_empty_replica_and_catches_up(fset: FailoverSet) -> None:
    await three(fset)
    async with workload(fset) as (h, w):
        await acks(w, 0, 100, "acknowledged sends")
        await run_fault("master-disk-lost", fset, h, w, random.Random(0))  # its store folder, epochs.json included
        await acks(w, time.monotonic(), 50, "sends acknowledged with the empty broker back in sync")
        verdict = await finish(fset, w, h)
    assert verdict.ok, verdict.summary()


async def test_failovers_back_and_forth(fset: FailoverSet) -> None:
    """Three failovers in a row, each old master back in sync before the next: every epoch's log agrees."""
    await three(fset)
    async with workload(fset) as (h, w):
        await acks(w, 0, 50, "acknowledged sends")
        for _ in range(3):
            await run_fault("kill-master", fset, h, w, random.Random(0))
        verdict = await finish(fset, w, h)
    assert verdict.ok, verdict.summary()
    assert len(verdict.rto) == 3 and all(r.seconds is not None for r in verdict.rto), verdict.summary()


async def test_a_slow_link_to_the_master_loses_nothing(fset: FailoverSet) -> None:
    """150 ms more on every packet towards the master (tc netem), or where the kernel has no netem its link throttled
    to 200 kbit/s (tc tbf): sends slow down, nothing is lost, and no failover happens."""
    _needs_hosts(fset)
    master = await three(fset)
    host = fset.host(master)
    async with workload(fset) as (h, w):
        await acks(w, 0, 50, "acknowledged sends")
        before = await fset.current()
        fault = h.begin_fault("slow-link-to-master", fset.addr(master))
        if netem_available(host) is None:
            host.delay(150)
        else:
            host.throttle(200)
        try:
            slow_from = time.monotonic()
            await acks(w, slow_from, 30, "sends acknowledged over the slow link")
            print(f"30 acknowledgements over the slow link in {time.monotonic() - slow_from:.2f}s")
        finally:
            host.undelay()
        h.end_fault(fault)
        await acks(w, time.monotonic(), 30, "sends acknowledged once the link is fast again")
        st = await fset.state()
        assert st is not None and st.master_epoch == before.master_epoch
        verdict = await finish(fset, w, h)
    assert verdict.ok, verdict.summary()


async def test_a_master_cut_off_from_its_clients_only_stays_master_and_loses_nothing(fset: FailoverSet) -> None:
    """Clients cannot reach the master, which still reaches etcd, its replicas and the name server: nothing elects
    another (the master is alive; RocketMQ's controller sees its heartbeats too), sends fail until the cut heals, and
    nothing acknowledged is lost."""
    _needs_hosts(fset)
    master = await three(fset)
    async with workload(fset) as (h, w):
        await acks(w, 0, 100, "acknowledged sends")
        before = await fset.current()
        fault = h.begin_fault("partition-master-from-clients", fset.addr(master))
        with isolated(fset.host(master), [fset.clients_ip]):
            failed_before = len([e for e in h.events if type(e).__name__ == "SendFailed"])

            async def sends_fail() -> bool:
                return len([e for e in h.events if type(e).__name__ == "SendFailed"]) >= failed_before + 3

            await until(sends_fail, 60.0, "sends failing while the clients are cut off")
        await acks(w, time.monotonic(), 50, "sends acknowledged once the clients reach the master again")
        h.end_fault(fault)
        st = await fset.state()
        assert st is not None and (st.master_id, st.master_epoch) == (before.master_id, before.master_epoch)
        verdict = await finish(fset, w, h)
    assert verdict.ok, verdict.summary()
