"""A returning master never overwrites, never leaves a gap and never diverges silently: a master that lost its data
refuses writes until the operator recovers it from the slave (``--recover-from-slave``), and a slave refuses to
follow a master whose log differs from its own."""

from __future__ import annotations

import shutil

import pytest

from sievemq import Message, Producer
from sievemq.client.message import SendStatus
from sievemq.errors import RemotingError
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.connection import connect
from tests.support.procs import Proc
from tests.support.replica_sets import ReplicaSets, in_step, read_all, set_status, split_addr, until
from tests.support.wire import send_message


async def refusal_of(master: Proc) -> RemotingError:
    conn = await connect(*split_addr(master.addr))
    try:
        await send_message(conn, "RecoverT", b"must not be stored")
    except RemotingError as e:
        return e
    finally:
        conn.close()
    raise AssertionError("the master took a write")


async def _sent(namesrv: str, bodies: list[bytes], ok: SendStatus = SendStatus.SEND_OK) -> None:
    async with Producer(namesrv, "recover-p") as p:
        for body in bodies:
            assert (await p.send(Message("RecoverT", body))).status == ok


@pytest.mark.parametrize("lost", ["the commit log", "the whole data folder"])
async def test_a_master_that_lost_data_refuses_writes_until_recovered_from_the_slave(
    rsets: ReplicaSets, lost: str
) -> None:
    master = rsets.broker("master", "SYNC_MASTER").start()
    slave = rsets.broker("slave", "SLAVE", 1).start()
    await in_step(rsets.namesrv)
    bodies = [f"m{i}".encode() for i in range(30)]
    await _sent(rsets.namesrv, bodies)
    held = (await in_step(rsets.namesrv))[1]["commitLogMaxOffset"]
    master.stop()
    store = rsets.tmp / "master"
    if lost == "the commit log":  # config/replication.json remembers what the slave acknowledged
        for part in ("commitlog", "consumequeue", "index"):
            shutil.rmtree(store / part, ignore_errors=True)
    else:  # a new machine: it learns it is behind when the slave reports its end
        shutil.rmtree(store)
    master = rsets.broker("master", "SYNC_MASTER").start()

    async def refused() -> RemotingError | None:
        e = await refusal_of(master)
        return e if e.reason == "HA_MASTER_BEHIND" else None

    err = await until(refused, 20.0, "the master refusing writes")
    assert err.code == ResponseCode.SERVICE_NOT_AVAILABLE and "--recover-from-slave" in str(err)
    rows = await set_status(rsets.namesrv)
    assert rows[0]["state"].startswith("refusing writes") and rows[1]["commitLogMaxOffset"] == held
    assert "refus" in master.log()

    # the slave's next metadata round from this master must not drop what its log holds (it once copied the empty
    # topic table of a master that lost its data folder, and its messages became unreadable on both)
    async def a_round_done() -> bool:  # the round says so; without that, a dropped topic ends the wait too
        if "is only added to ours" in slave.log():
            return True
        try:
            await read_all(slave.addr, "RecoverT")
        except AssertionError:
            return True
        return False

    await until(a_round_done, 25.0, "the slave's metadata round from the master that lost its data")
    assert sorted(m.body for m in await read_all(slave.addr, "RecoverT")) == sorted(bodies)

    # the operator's command: copy the slave's log first, then serve
    master.stop()
    master = rsets.broker("master", "SYNC_MASTER", 0, "--recover-from-slave", slave.addr).start()
    rows = await in_step(rsets.namesrv)
    assert rows[0]["commitLogMaxOffset"] == held and rows[0]["state"] == "serving"
    on_master = sorted(m.body for m in await read_all(master.addr, "RecoverT"))
    assert on_master == sorted(bodies), (len(on_master), on_master[:5])
    more = [f"n{i}".encode() for i in range(5)]
    await _sent(rsets.namesrv, more)
    got = await read_all(slave.addr, "RecoverT")
    assert sorted(m.body for m in got) == sorted(bodies + more)


async def test_a_slave_refuses_to_follow_a_master_with_a_different_log(rsets: ReplicaSets) -> None:
    first = rsets.broker("master", "ASYNC_MASTER").start()
    slave = rsets.broker("slave", "SLAVE", 1).start()
    await in_step(rsets.namesrv)
    await _sent(rsets.namesrv, [f"m{i}".encode() for i in range(20)])
    held = (await in_step(rsets.namesrv))[1]["commitLogMaxOffset"]
    slave.stop()
    first.stop()
    # another master of the same name, with a longer log of other messages
    other = rsets.broker("other-master", "ASYNC_MASTER").start()
    await _sent(rsets.namesrv, [f"other-{i}".encode() * 3 for i in range(60)])
    slave = rsets.broker("slave", "SLAVE", 1).start()

    async def diverged() -> dict[int, dict[str, object]] | None:
        rows = await set_status(rsets.namesrv)
        return rows if "HA_DIVERGED" in str(rows.get(1, {}).get("state")) else None

    rows = await until(diverged, 20.0, "the slave refusing the other master")
    assert rows[1]["commitLogMaxOffset"] == held  # nothing of the other log was appended
    assert "HA_DIVERGED" in slave.log()
    assert sorted(m.body for m in await read_all(slave.addr, "RecoverT")) == sorted(
        f"m{i}".encode() for i in range(20)
    )
    assert other.popen is not None and other.popen.poll() is None
