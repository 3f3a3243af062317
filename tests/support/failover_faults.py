"""The faults of the failover chaos schedule, each applied to a running ``FailoverSet`` and healed, recorded in the
``History`` (``begin_fault``/``end_fault``), and waited out: a fault ends when every broker is back in the
SyncStateSet. Faults that cut links need network namespaces (``NEEDS_HOSTS``)."""

from __future__ import annotations

import random
import shutil
import signal
import time
from collections.abc import Awaitable, Callable

from tests.support.chaos import History
from tests.support.failover_sets import FailoverSet
from tests.support.failover_workload import Workload, acks
from tests.support.partitions import isolated

__all__ = ["FAULTS", "NEEDS_HOSTS", "Fault", "run_fault"]

IDS = (1, 2, 3)
Fault = Callable[[FailoverSet, History, Workload, random.Random], Awaitable[None]]


async def _master(fset: FailoverSet) -> tuple[int, int, str]:
    st = await fset.current()
    return st.master_id, st.master_epoch, st.master_address


async def _new_master(fset: FailoverSet, epoch: int) -> None:
    await fset.wait_state(lambda s: s.master_epoch > epoch, f"a master of an epoch after {epoch}")


async def kill_master(fset: FailoverSet, h: History, w: Workload, rng: random.Random) -> None:
    """kill -9 of the master; it returns as a replica."""
    bid, epoch, addr = await _master(fset)
    f = h.begin_fault("kill-master", addr)
    fset.procs[bid].kill9()
    await _new_master(fset, epoch)
    await acks(w, time.monotonic(), 20, "sends acknowledged by the new master")
    fset.broker(bid).start()
    await fset.wait_in_sync(*IDS)
    h.end_fault(f)


async def pause_master(fset: FailoverSet, h: History, w: Workload, rng: random.Random) -> None:
    """SIGSTOP of the master for longer than its lease, then SIGCONT."""
    bid, epoch, addr = await _master(fset)
    popen = fset.procs[bid].popen
    assert popen is not None
    f = h.begin_fault("pause-master", addr)
    popen.send_signal(signal.SIGSTOP)
    try:
        await _new_master(fset, epoch)
    finally:
        popen.send_signal(signal.SIGCONT)
    await fset.wait_in_sync(*IDS)
    h.end_fault(f)


async def master_from_etcd(fset: FailoverSet, h: History, w: Workload, rng: random.Random) -> None:
    """The master cut off from every etcd member (not from clients nor replicas)."""
    bid, epoch, addr = await _master(fset)
    assert fset.net is not None
    f = h.begin_fault("partition-master-from-etcd", addr)
    with isolated(fset.host(bid), fset.net[:3]):
        await _new_master(fset, epoch)
    await fset.wait_in_sync(*IDS)
    h.end_fault(f)


async def master_from_replicas(fset: FailoverSet, h: History, w: Workload, rng: random.Random) -> None:
    """The master cut off from its replicas (not from etcd nor clients): it goes on alone."""
    bid, _epoch, addr = await _master(fset)
    f = h.begin_fault("partition-master-from-replicas", addr)
    with isolated(fset.host(bid), [fset.host(b) for b in IDS if b != bid]):
        await fset.wait_state(lambda s: s.sync_state_set == {bid} or s.master_id != bid, "the set shrunk")
        await acks(w, time.monotonic(), 20, "sends acknowledged by the master alone")
    await fset.wait_in_sync(*IDS)
    h.end_fault(f)


async def kill_replica(fset: FailoverSet, h: History, w: Workload, rng: random.Random) -> None:
    """kill -9 of a replica; it restarts."""
    bid, _epoch, _addr = await _master(fset)
    victim = rng.choice([b for b in IDS if b != bid])
    f = h.begin_fault("kill-replica", fset.addr(victim))
    fset.procs[victim].kill9()
    await fset.wait_state(lambda s: victim not in s.sync_state_set, "the killed replica out of the set")
    fset.broker(victim).start()
    await fset.wait_in_sync(*IDS)
    h.end_fault(f)


async def kill_etcd_member(fset: FailoverSet, h: History, w: Workload, rng: random.Random) -> None:
    """kill -9 of an etcd member (the leader half of the time); it restarts."""
    leader = fset.etcd.leader()
    victim = leader if leader is not None and rng.random() < 0.5 else rng.randrange(3)
    f = h.begin_fault("kill-etcd-member", fset.etcd.endpoints[victim])
    fset.etcd.kill(victim)
    await acks(w, time.monotonic(), 30, "sends acknowledged with an etcd member down")
    fset.etcd.restart(victim)
    h.end_fault(f)


async def etcd_minority(fset: FailoverSet, h: History, w: Workload, rng: random.Random) -> None:
    """One etcd member cut off from the other two (a minority/majority split)."""
    assert fset.net is not None
    victim = rng.randrange(3)
    f = h.begin_fault("etcd-minority", fset.etcd.endpoints[victim])
    with isolated(fset.net[victim], [fset.net[i] for i in range(3) if i != victim]):
        await acks(w, time.monotonic(), 30, "sends acknowledged with an etcd member cut off")
    fset.etcd.wait_healthy(3)
    h.end_fault(f)


async def master_disk_lost(fset: FailoverSet, h: History, w: Workload, rng: random.Random) -> None:
    """kill -9 of the master and the loss of its store; it returns empty and copies the log again."""
    bid, epoch, addr = await _master(fset)
    f = h.begin_fault("kill-master-and-its-disk", addr)
    fset.procs[bid].kill9()
    await _new_master(fset, epoch)
    shutil.rmtree(fset.tmp / f"broker-{bid}")
    fset.broker(bid).start()
    await fset.wait_in_sync(*IDS)
    h.end_fault(f)


FAULTS: dict[str, Fault] = {
    "kill-master": kill_master,
    "pause-master": pause_master,
    "partition-master-from-etcd": master_from_etcd,
    "partition-master-from-replicas": master_from_replicas,
    "kill-replica": kill_replica,
    "kill-etcd-member": kill_etcd_member,
    "etcd-minority": etcd_minority,
    "master-disk-lost": master_disk_lost,
}
NEEDS_HOSTS = frozenset({"partition-master-from-etcd", "partition-master-from-replicas", "etcd-minority"})


async def run_fault(name: str, fset: FailoverSet, h: History, w: Workload, rng: random.Random) -> None:
    """Apply fault ``name``, heal it and wait until the set is whole again."""
    await FAULTS[name](fset, h, w, rng)
