"""Faults of the network between master and slave, on hosts of their own (network namespaces): a slave cut off
(its link down) and back, and a slow link (``tc netem``, or a delaying relay where the kernel has no netem) under
SYNC_MASTER."""

from __future__ import annotations

import time

import pytest

from sievemq import Message, Producer
from sievemq.client.message import SendStatus
from tests.support.netns import netem_available
from tests.support.relay import DelayingRelay
from tests.support.replica_sets import BROKER_PORT, ReplicaSets, in_step, read_all, until

TOPIC = "NetT"


def _needs_hosts(rsets: ReplicaSets) -> None:
    if not rsets.namespaces:
        pytest.skip("a network fault needs hosts of their own: network namespaces (root and iproute2)")


async def test_a_slave_cut_off_and_reconnected_catches_up(rsets: ReplicaSets) -> None:
    _needs_hosts(rsets)
    rsets.broker("master", "SYNC_MASTER").start()
    slave = rsets.broker("slave", "SLAVE", 1).start()
    await in_step(rsets.namesrv)
    sent: list[bytes] = []
    async with Producer(rsets.namesrv, "net-p", send_timeout=4.0) as p:
        for i in range(10):
            sent.append(f"before-{i}".encode())
            assert (await p.send(Message(TOPIC, sent[-1]))).status == SendStatus.SEND_OK
        rsets.host("slave").link_down()
        try:
            statuses = set()
            deadline = time.monotonic() + 15
            while SendStatus.SLAVE_NOT_AVAILABLE not in statuses and time.monotonic() < deadline:
                sent.append(f"cut-{len(sent)}".encode())
                statuses.add((await p.send(Message(TOPIC, sent[-1]))).status)
            # first the silent link times sends out, then the master drops it and says no slave at once
            assert statuses == {SendStatus.FLUSH_SLAVE_TIMEOUT, SendStatus.SLAVE_NOT_AVAILABLE}, statuses
        finally:
            rsets.host("slave").link_up()
        await in_step(rsets.namesrv, timeout=30.0)
        assert (await p.send(Message(TOPIC, b"after"))).status == SendStatus.SEND_OK
        sent.append(b"after")
    await until(lambda: _holds(slave.addr, sent), 15.0, "the slave holding every message")


async def _holds(addr: str, sent: list[bytes]) -> bool:
    return set(sent) <= {m.body for m in await read_all(addr, TOPIC)}


async def test_a_slow_link_delays_sync_sends_but_loses_nothing(rsets: ReplicaSets) -> None:
    """80 ms each way between master and slave: on the slave's link with ``tc netem`` where the kernel has it, else
    a user-space relay on the bridge that the slave's replication connection goes through (``haMasterAddress``)."""
    _needs_hosts(rsets)
    master = rsets.broker("master", "SYNC_MASTER")
    if netem_available(rsets.host("master")) is not None:  # the link comes from the relay's address: any address
        master.args += ["--ha-ticket-checks-address", "false"]
    master.start()
    relay: DelayingRelay | None = None
    if netem_available(rsets.host("master")) is not None:
        master_ha = f"{rsets.host('master').ip}:{BROKER_PORT + 1}"
        bridge = rsets.host("master").ip.rsplit(".", 1)[0] + ".254"
        relay = await DelayingRelay(bridge, master_ha).start()
        slave = rsets.broker("slave", "SLAVE", 1, "--ha-master-address", relay.addr).start()
    else:
        slave = rsets.broker("slave", "SLAVE", 1).start()
    try:
        await in_step(rsets.namesrv)
        if relay is not None:
            relay.delay = 0.08
        else:
            rsets.host("slave").delay(80)
        sent = [f"slow-{i}".encode() for i in range(20)]
        async with Producer(rsets.namesrv, "slow-p", send_timeout=4.0) as p:
            for body in sent:
                started = time.monotonic()
                assert (await p.send(Message(TOPIC, body))).status == SendStatus.SEND_OK
                assert time.monotonic() - started >= 0.08  # the answer waited for the slave across the slow link
        if relay is not None:
            relay.delay = 0.0
        else:
            rsets.host("slave").undelay()
        await in_step(rsets.namesrv)
        assert set(sent) <= {m.body for m in await read_all(slave.addr, TOPIC)}
    finally:
        if relay is not None:
            await relay.close()
