"""The etcd fixtures against real etcd (``tests/support/etcd_cluster.py``, ``tests/support/partitions.py``): the
cluster forms, survives a member killed, paused or cut off (the majority goes on, the lone member refuses
linearizable requests), and takes a member back after a restart, a resume or a heal."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aetcd
import aetcd.exceptions
import pytest

from tests.support.etcd_cluster import PEER_PORT, EtcdCluster
from tests.support.netns import Host
from tests.support.partitions import heal, isolate, isolated, partition, partitions_available, rules
from tests.support.replica_sets import split_addr, until


@contextlib.asynccontextmanager
async def client(endpoint: str, timeout: float = 5.0) -> AsyncIterator[aetcd.Client]:
    """An aetcd client of one member (``timeout``: each request's gRPC deadline)."""
    host, port = split_addr(endpoint)
    async with aetcd.Client(host=host, port=port, timeout=timeout) as c:
        yield c


async def put_then_get(endpoint: str, key: bytes, value: bytes, timeout: float = 5.0) -> bytes | None:
    """Put through one member, then read it back linearizably through the same member; the value read."""
    async with client(endpoint, timeout) as c:
        await c.put(key, value)
        got = await c.get(key)
    return None if got is None else bytes(got.value)


async def get(endpoint: str, key: bytes, timeout: float = 5.0) -> bytes | None:
    """A linearizable read through one member."""
    async with client(endpoint, timeout) as c:
        got = await c.get(key)
    return None if got is None else bytes(got.value)


async def writes(endpoint: str, key: bytes, value: bytes, what: str, timeout: float = 30.0) -> None:
    """Wait until a put and a read through ``endpoint`` complete (an election may be under way)."""

    async def probe() -> bool:
        return await put_then_get(endpoint, key, value, timeout=3.0) == value

    await until(probe, timeout, what)


async def refuses(endpoint: str) -> None:
    """A linearizable write and a linearizable read through ``endpoint`` both fail (an error, or no answer within
    their 2 s deadline), tried side by side."""
    put, read = await asyncio.gather(
        put_then_get(endpoint, b"cut", b"never", timeout=2.0),
        get(endpoint, b"cut", timeout=2.0),
        return_exceptions=True,
    )
    assert isinstance(put, aetcd.exceptions.ClientError), f"a write through {endpoint} gave {put!r}"
    assert isinstance(read, aetcd.exceptions.ClientError), f"a read through {endpoint} gave {read!r}"


def _needs_partitions(hosts: list[Host] | None) -> list[Host]:
    if hosts is None:
        pytest.skip("a partition needs hosts of their own: network namespaces (root and iproute2)")
    why = partitions_available(hosts[0])
    if why is not None:
        pytest.skip(f"a partition needs nftables in the hosts' namespaces: {why}")
    return hosts


def _state(etcd: EtcdCluster, i: int) -> tuple[str, str]:
    """Member ``i``'s process: its command name and state (``T``: stopped) as /proc tells."""
    popen = etcd.members[i].popen
    assert popen is not None
    stat = Path(f"/proc/{popen.pid}/stat").read_text()
    return stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2]


async def test_the_cluster_forms_and_every_member_serves(etcd: EtcdCluster) -> None:
    lead = etcd.wait_leader()
    assert len(set(etcd.endpoints)) == 3
    for i, endpoint in enumerate(etcd.endpoints):
        assert await put_then_get(endpoint, f"k{i}".encode(), f"v{i}".encode()) == f"v{i}".encode()
    for i, endpoint in enumerate(etcd.endpoints):  # every write is seen through every member
        for j in range(3):
            assert await get(endpoint, f"k{j}".encode()) == f"v{j}".encode(), (i, j)
    st = etcd.status(lead)
    assert st is not None and st["header"]["member_id"] == st["leader"]
    async with client(etcd.endpoints[lead]) as c:  # the member list holds all three client URLs
        urls = {u for m in [m async for m in c.members()] for u in m.client_urls}
    assert urls == set(etcd.urls)


async def test_a_killed_leader_is_replaced_and_rejoins_after_a_restart(etcd: EtcdCluster) -> None:
    old = etcd.wait_leader()
    etcd.kill(old)
    assert not etcd.members[old].running
    new = await asyncio.to_thread(etcd.wait_leader, 30.0, old)
    for i in (i for i in range(3) if i != old):
        await writes(etcd.endpoints[i], b"while-down", f"by-{i}".encode(), f"a write through member {i}")
    etcd.restart(old)
    st = etcd.status(old)
    assert st is not None and st["leader"] != "0"
    assert new != old
    last = max(i for i in range(3) if i != old)  # the last write went through it
    assert await get(etcd.endpoints[old], b"while-down") == f"by-{last}".encode()  # it caught up
    assert sorted(etcd.healthy()) == [0, 1, 2]


async def _async(value: bool) -> bool:
    return value


async def test_a_paused_member_does_not_stop_the_majority_and_serves_after_resume(etcd: EtcdCluster) -> None:
    lead = etcd.wait_leader()
    etcd.pause(lead)
    try:
        # the member itself stops, not a wrapper (ip netns exec); the signal takes effect a moment after it is sent
        await until(lambda: _async(_state(etcd, lead) == ("etcd", "T")), 10.0, "the paused member stopped")
        other = (lead + 1) % 3
        await writes(etcd.endpoints[other], b"paused", b"yes", "a write with the leader paused")
        assert etcd.wait_leader(30.0, not_=lead) != lead
    finally:
        etcd.resume(lead)
    await until(lambda: _async(_state(etcd, lead)[1] != "T"), 10.0, "the resumed member running")
    await until(lambda: get(etcd.endpoints[lead], b"paused", timeout=3.0), 30.0, "the resumed member serving")
    assert await get(etcd.endpoints[lead], b"paused") == b"yes"


@pytest.mark.parametrize("role", ["leader", "follower"])
async def test_a_member_cut_off_refuses_while_the_majority_writes(
    etcd: EtcdCluster, etcd_hosts: list[Host] | None, role: str
) -> None:
    net = _needs_partitions(etcd_hosts)
    lead = etcd.wait_leader()
    cut = lead if role == "leader" else (lead + 1) % 3
    rest = [i for i in range(3) if i != cut]
    with isolated(net[cut], [net[i] for i in rest]):
        assert etcd.status(cut) is not None  # the test's own process still reaches it
        await refuses(etcd.endpoints[cut])
        for i in rest:
            await writes(etcd.endpoints[i], b"split", f"majority-{i}".encode(), f"member {i} writing")
        assert etcd.wait_leader(30.0, not_=cut) in rest
        await refuses(etcd.endpoints[cut])  # still, once the majority went on
    assert rules(net[cut]) == ""
    await until(lambda: get(etcd.endpoints[cut], b"split", timeout=3.0), 30.0, "the healed member serving")
    assert await get(etcd.endpoints[cut], b"split") == f"majority-{rest[-1]}".encode()
    etcd.wait_healthy(3)


async def test_a_three_way_split_leaves_no_majority_until_healed(
    etcd: EtcdCluster, etcd_hosts: list[Host] | None
) -> None:
    net = _needs_partitions(etcd_hosts)
    with partition([net[0]], [net[1]], [net[2]]):
        await asyncio.gather(*(refuses(endpoint) for endpoint in etcd.endpoints))
    etcd.wait_healthy(3)
    await writes(etcd.endpoints[0], b"whole", b"again", "a write after the heal")


def _reaches(src: Host, dst: Host) -> bool:
    """A TCP connection from inside ``src`` to ``dst``'s etcd peer port completes within 1.5 s."""
    code = f"import socket; socket.create_connection(({dst.ip!r}, {PEER_PORT}), timeout=1.5).close()"
    r = subprocess.run([*src.prefix(), sys.executable, "-c", code], capture_output=True, timeout=20)
    return r.returncode == 0


async def test_isolate_cuts_only_the_named_peers_and_heal_removes_it(
    etcd: EtcdCluster, etcd_hosts: list[Host] | None
) -> None:
    """Beyond etcd: the cut is between the named hosts only, both ways, and one-way cuts set only their side."""
    net = _needs_partitions(etcd_hosts)
    assert _reaches(net[0], net[1]) and _reaches(net[1], net[0]) and _reaches(net[0], net[2])
    isolate(net[0], [net[1].ip])
    try:
        assert not _reaches(net[0], net[1]) and not _reaches(net[1], net[0])
        assert _reaches(net[0], net[2]) and _reaches(net[2], net[0]) and _reaches(net[1], net[2])
        isolate(net[0], [net[2]], outbound=False)  # adds to the first cut
        table = rules(net[0])
        drop_in, drop_out = table.split("set drop_out")
        assert net[1].ip in drop_in and net[2].ip in drop_in, table
        assert net[1].ip in drop_out and net[2].ip not in drop_out, table
    finally:
        heal(net[0])
    assert rules(net[0]) == ""
    heal(net[0])  # healing a healed host does nothing
    assert _reaches(net[0], net[1]) and _reaches(net[1], net[0]) and _reaches(net[0], net[2])
