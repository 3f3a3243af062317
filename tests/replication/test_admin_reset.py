"""An offset reset on a master and slave set: the master moves the group, and its slave gets the new offsets too,
so that no slave keeps a larger offset of before the reset (slaves merge offsets by maximum; docs/admin.md §4)."""

from __future__ import annotations

from sievemq import Message, Producer
from sievemq.admin.api import AdminClient
from sievemq.admin.group_ops import reset_offset
from sievemq.admin.timespec import parse_reset_point
from sievemq.client import api
from sievemq.remoting.connection import connect
from tests.support.replica_sets import ReplicaSets, in_step, split_addr, until

TOPIC, GROUP = "ResetT", "reset-g"


async def offsets(addr: str) -> list[int]:
    conn = await connect(*split_addr(addr))
    try:
        return [await api.query_offset(conn, GROUP, TOPIC, q) for q in range(2)]
    finally:
        conn.close()


async def test_a_reset_reaches_the_slave(rsets: ReplicaSets) -> None:
    master = rsets.broker("master", "SYNC_MASTER", 0).start()
    slave = rsets.broker("slave", "SLAVE", 1).start()
    await in_step(rsets.namesrv)
    async with AdminClient(rsets.namesrv) as admin:
        await admin.create_topic(TOPIC, queues=2)
        await admin.update_group(GROUP, {})  # the group a consumer's heartbeat would make: commits need one
    async with Producer(rsets.namesrv, "reset-p") as p:
        for i in range(6):
            await p.send(Message(TOPIC, f"m{i}".encode()), queue_selector=lambda qs, m, i=i: qs[i % 2])
    conn = await connect(*split_addr(master.addr))
    try:
        for q in range(2):
            await api.update_offset(conn, GROUP, TOPIC, q, 3)
    finally:
        conn.close()
    await until(lambda: _equal(slave.addr, [3, 3]), 30.0, "the slave copied the offsets")
    async with AdminClient(rsets.namesrv) as admin:
        r = await reset_offset(admin, GROUP, TOPIC, parse_reset_point("earliest"))
    assert [(q.before, q.after) for q in r.queues] == [(3, 0), (3, 0)] and not r.errors, r.to_json()
    assert await offsets(master.addr) == [0, 0]
    assert await offsets(slave.addr) == [0, 0], "the slave no longer holds the offsets of before the reset"


async def _equal(addr: str, want: list[int]) -> bool:
    return await offsets(addr) == want
