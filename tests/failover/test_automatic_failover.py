"""Automatic failover on etcd, end to end: three brokers of one set (SYNC_MASTER when master, the default lease),
producers and a consumer group running, a fault, and the checker's verdict on the whole history: no acknowledged
message lost, no two masters in one epoch, every delivery accounted for, and how long the set could not be written.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from sievemq.admin.api import AdminClient
from tests.support.failover_sets import FailoverSet
from tests.support.failover_workload import acks, finish, three, workload
from tests.support.partitions import isolated, partitions_available
from tests.support.replica_sets import until


async def test_a_killed_master_is_replaced_by_a_replica_and_nothing_acknowledged_is_lost(fset: FailoverSet) -> None:
    master = await three(fset)
    async with workload(fset) as (h, w):
        await acks(w, 0, 150, "acknowledged sends before the fault")
        old = await fset.current()
        fault = h.begin_fault("kill-master", fset.addr(master))
        killed_at = time.monotonic()
        fset.procs[master].kill9()
        new = await fset.wait_state(lambda s: s.master_epoch > old.master_epoch, "a new master elected")
        assert new.master_id != master and new.master_id in old.sync_state_set
        await acks(w, killed_at, 50, "sends acknowledged by the new master")
        fset.broker(master).start()  # the old master returns as a replica of the new one
        await fset.wait_in_sync(1, 2, 3)
        h.end_fault(fault)
        await acks(w, time.monotonic(), 100, "sends acknowledged with the old master back in sync")
        verdict = await finish(fset, w, h)
    assert verdict.ok, verdict.summary()
    assert verdict.rto and verdict.rto[0].seconds is not None, verdict.summary()
    assert verdict.rto[0].seconds < 15.0, verdict.summary()  # lease 5 s + election + the clients' route refresh


async def test_a_paused_master_acknowledges_nothing_after_it_wakes(fset: FailoverSet) -> None:
    """SIGSTOP the master for longer than its lease: the set elects another; SIGCONT: the old master must not
    acknowledge one more send (it is fenced), and it rejoins as a replica."""
    master = await three(fset)
    async with workload(fset) as (h, w):
        await acks(w, 0, 100, "acknowledged sends before the pause")
        old = await fset.current()
        proc = fset.procs[master]
        assert proc.popen is not None
        fault = h.begin_fault("pause-master", fset.addr(master))
        proc.popen.send_signal(signal.SIGSTOP)
        await fset.wait_state(lambda s: s.master_epoch > old.master_epoch, "a new master elected")
        woke = time.monotonic()
        proc.popen.send_signal(signal.SIGCONT)
        await fset.wait_in_sync(1, 2, 3)
        h.end_fault(fault)
        await acks(w, time.monotonic(), 100, "sends acknowledged with the old master back in sync")
        verdict = await finish(fset, w, h)
    late = [a for a in w.acks if a.addr == fset.addr(master) and a.t > woke]
    assert not late, f"the old master acknowledged {len(late)} sends after it woke: {late[:3]}"
    assert verdict.ok, verdict.summary()


async def test_a_master_cut_off_from_etcd_steps_down_and_the_replicas_elect(fset: FailoverSet) -> None:
    """The master loses etcd but not its clients nor its replicas: it stops acknowledging before its lease can
    expire, a replica is elected, clients move to it; healed, the old master follows the new one."""
    if not fset.namespaces:
        pytest.skip("a partition needs hosts of their own: network namespaces (root and iproute2)")
    master = await three(fset)
    host = fset.host(master)
    why = partitions_available(host)
    if why is not None:
        pytest.skip(why)
    async with workload(fset) as (h, w):
        await acks(w, 0, 100, "acknowledged sends before the partition")
        old = await fset.current()
        assert fset.net is not None
        fault = h.begin_fault("partition-master-from-etcd", fset.addr(master))
        cut = time.monotonic()
        with isolated(host, fset.net[:3]):
            new = await fset.wait_state(lambda s: s.master_epoch > old.master_epoch, "a new master elected")
            assert new.master_id != master
            await acks(w, cut, 50, "sends acknowledged by the new master while the old one is cut off")
        await fset.wait_in_sync(1, 2, 3)
        h.end_fault(fault)
        await acks(w, time.monotonic(), 100, "sends acknowledged with the old master back in sync")
        verdict = await finish(fset, w, h)
    # acknowledgements of the old master's epoch all came before the new epoch's first
    first_new = min(a.t for a in w.acks if a.addr != fset.addr(master) and a.t > cut)
    late = [a for a in w.acks if a.addr == fset.addr(master) and a.t > first_new]
    assert not late, f"the cut-off master acknowledged {len(late)} sends after the new master's first"
    assert verdict.ok, verdict.summary()
    await asyncio.sleep(0)


async def test_cluster_status_shows_the_epoch_and_the_sync_state_set(fset: FailoverSet) -> None:
    """``sievemq cluster status`` (and the dashboard's /api/cluster, which shows its rows): the master at #0 with its
    own brokerId, the epoch, the SyncStateSet; after a failover, the next epoch and the new master."""
    master = await three(fset)

    async def rows_show(epoch: int, master_id: int, members: list[int]) -> bool:
        async with AdminClient(fset.namesrv) as admin:
            rows = await admin.cluster_status()
        heads = [r for r in rows if r["brokerId"] == 0]
        return (len(rows) == 3 and len(heads) == 1 and all(r.get("epoch") == epoch for r in rows)
                and heads[0]["replicaId"] == master_id and heads[0]["syncStateSet"] == members)  # fmt: skip

    st = await fset.current()
    await until(lambda: rows_show(st.master_epoch, master, [1, 2, 3]), 30.0, "status rows of epoch 1")
    text = cli("cluster", "status", "-n", fset.namesrv)
    assert f"epoch {st.master_epoch}  brokerId {master}  SyncStateSet [1, 2, 3]" in text, text
    fset.procs[master].kill9()
    new = await fset.wait_state(lambda s: s.master_epoch > st.master_epoch, "a new master elected")
    fset.broker(master).start()
    await fset.wait_in_sync(1, 2, 3)
    await until(lambda: rows_show(new.master_epoch, new.master_id, [1, 2, 3]), 30.0, "status rows of epoch 2")
    async with AdminClient(fset.namesrv) as admin:
        head = next(r for r in await admin.cluster_status() if r["brokerId"] == 0)
    assert head["epochHistory"] == [list(e) for e in new.epochs], head  # each epoch and where its master began


def cli(*args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "sievemq.cli", *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


async def test_an_operator_hands_the_set_over_to_a_replica_without_losing_anything(fset: FailoverSet) -> None:
    """The handover ``mqadmin electMaster`` asks for: the master stops acknowledging, waits until the chosen replica
    holds all it wrote, and writes the next epoch naming it; clients move within about a second."""
    master = await three(fset)
    target = next(b for b in (1, 2, 3) if b != master)
    async with workload(fset) as (h, w):
        await acks(w, 0, 100, "acknowledged sends")
        old = await fset.current()
        fault = h.begin_fault("handover", fset.addr(master))
        asked = time.monotonic()
        await fset.request_handover(target)
        new = await fset.wait_state(lambda s: s.master_id == target, "the replica made master", timeout=30.0)
        assert new.master_epoch == old.master_epoch + 1
        await acks(w, asked, 30, "sends acknowledged by the new master")
        await fset.wait_in_sync(1, 2, 3)
        h.end_fault(fault)
        verdict = await finish(fset, w, h)
    assert verdict.ok, verdict.summary()
    assert fset.procs[master].popen is not None and fset.procs[master].popen.poll() is None  # it just steps down
    assert verdict.rto and verdict.rto[0].seconds is not None and verdict.rto[0].seconds < 5.0, verdict.summary()


async def test_every_broker_serves_metrics_whatever_its_term(fset: FailoverSet) -> None:
    """The HTTP port (``/metrics``, ``/healthz``) serves the running term's broker, and again after a failover."""
    port = 18080 if fset.namespaces else 0
    if not port:
        pytest.skip("each broker needs its own HTTP port: network namespaces (hosts of their own)")
    master = await three(fset, "--http-listen-port", str(port), "--http-listen-host", "0.0.0.0")

    def metrics(bid: int) -> str:
        host = fset.procs[bid].host
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as r:
            return str(r.read().decode())

    async def serves(bid: int) -> bool:
        return "sievemq_" in await asyncio.to_thread(metrics, bid)

    for bid in (1, 2, 3):
        await until(lambda b=bid: serves(b), 30.0, f"broker {bid}'s /metrics")
    st = await fset.current()
    fset.procs[master].kill9()
    new = await fset.wait_state(lambda s: s.master_epoch > st.master_epoch, "a new master elected")
    await until(lambda: serves(new.master_id), 30.0, "the new master's /metrics")


async def test_orderly_consumption_keeps_each_queues_order_across_a_failover(fset: FailoverSet) -> None:
    """Each producer sends to one queue (a shard key) and the group consumes orderly, under the queue locks of
    whichever broker is master: every queue's first deliveries come in the order its sends were acknowledged, across
    the kill and the new master (redeliveries are allowed, and counted)."""
    master = await three(fset)
    async with workload(fset, orderly=True) as (h, w):
        await acks(w, 0, 100, "acknowledged sends before the fault")
        old = await fset.current()
        fault = h.begin_fault("kill-master", fset.addr(master))
        killed_at = time.monotonic()
        fset.procs[master].kill9()
        await fset.wait_state(lambda s: s.master_epoch > old.master_epoch, "a new master elected")
        await acks(w, killed_at, 60, "sends acknowledged by the new master")
        fset.broker(master).start()
        await fset.wait_in_sync(1, 2, 3)
        h.end_fault(fault)
        verdict = await finish(fset, w, h)
    assert verdict.ok, verdict.summary()
    assert not verdict.order, verdict.summary()
