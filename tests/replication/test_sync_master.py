"""SYNC_MASTER and ASYNC_MASTER answers with a real master and slave: a send acknowledged under SYNC_MASTER is in
the slave's commit log when the producer hears of it; a hung slave (SIGSTOP) gives FLUSH_SLAVE_TIMEOUT, a gone one
SLAVE_NOT_AVAILABLE, and the set converges when it is back; a slave refuses writes; ``sievemq cluster status``."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

from sievemq import Message, Producer
from sievemq.client.message import SendStatus
from sievemq.errors import RemotingError
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.connection import connect
from tests.support.replica_sets import ReplicaSets, commitlog_offset, in_step, set_status, split_addr, until
from tests.support.wire import send_message


async def test_sync_master_answers_after_the_slave_holds_the_message(rsets: ReplicaSets) -> None:
    rsets.broker("master", "SYNC_MASTER").start()
    slave = rsets.broker("slave", "SLAVE", 1).start()
    await in_step(rsets.namesrv)
    async with Producer(rsets.namesrv, "sync-p") as p:
        for i in range(40):
            r = await p.send(Message("SyncT", f"m{i}".encode()))
            assert r.status == SendStatus.SEND_OK
            # at the moment of the answer the record is in the slave's commit log
            held = (await set_status(rsets.namesrv))[1]["commitLogMaxOffset"]
            assert held > commitlog_offset(r.offset_msg_id), (i, held, r.offset_msg_id)

        # a hung slave: connected, silent; sends are stored on the master and answered FLUSH_SLAVE_TIMEOUT
        assert slave.popen is not None
        slave.popen.send_signal(signal.SIGSTOP)
        try:
            r = await p.send(Message("SyncT", b"while-hung"))
            assert r.status == SendStatus.FLUSH_SLAVE_TIMEOUT
            # once the master drops the silent link (haHousekeepingInterval), at once SLAVE_NOT_AVAILABLE
            async def not_available() -> bool:
                return (await p.send(Message("SyncT", b"no-slave"))).status == SendStatus.SLAVE_NOT_AVAILABLE

            await until(not_available, 20.0, "SLAVE_NOT_AVAILABLE after the master dropped the hung slave")
        finally:
            slave.popen.send_signal(signal.SIGCONT)
        rows = await in_step(rsets.namesrv)  # the slave catches up with what it missed
        assert rows[1]["lagBytes"] == 0
        assert (await p.send(Message("SyncT", b"after"))).status == SendStatus.SEND_OK


async def test_async_master_answers_at_once_and_the_slave_follows(rsets: ReplicaSets) -> None:
    rsets.broker("master", "ASYNC_MASTER").start()
    async with Producer(rsets.namesrv, "async-p") as p:
        for i in range(20):  # no slave at all: still SEND_OK
            assert (await p.send(Message("AsyncT", f"m{i}".encode()))).status == SendStatus.SEND_OK
        rsets.broker("slave", "SLAVE", 1).start()
        rows = await in_step(rsets.namesrv)  # a new, empty slave copies everything stored
        assert rows[1]["commitLogMaxOffset"] == rows[0]["commitLogMaxOffset"] > 0


async def test_a_slave_refuses_writes_with_a_reason(rsets: ReplicaSets) -> None:
    rsets.broker("master", "SYNC_MASTER").start()
    slave = rsets.broker("slave", "SLAVE", 1).start()
    await in_step(rsets.namesrv)
    conn = await connect(*split_addr(slave.addr))
    try:
        try:
            await send_message(conn, "SlaveT", b"x")
        except RemotingError as e:
            assert e.code == ResponseCode.SERVICE_NOT_AVAILABLE and e.reason == "BROKER_IS_SLAVE"
        else:
            raise AssertionError("the slave took a send")
    finally:
        conn.close()


async def test_cluster_status_shows_roles_offsets_and_lag(rsets: ReplicaSets) -> None:
    master = rsets.broker("master", "SYNC_MASTER").start()
    slave = rsets.broker("slave", "SLAVE", 1).start()
    await in_step(rsets.namesrv)
    async with Producer(rsets.namesrv, "status-p") as p:
        for i in range(10):
            await p.send(Message("StatusT", f"m{i}".encode()))
    await in_step(rsets.namesrv)
    cmd = [sys.executable, "-m", "sievemq.cli", "cluster", "status", "-n", rsets.namesrv]
    text = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=True).stdout
    rows = json.loads(subprocess.run([*cmd, "--json"], capture_output=True, text=True, timeout=30, check=True).stdout)
    by_id = {r["brokerId"]: r for r in rows}
    assert by_id[0]["role"] == "SYNC_MASTER" and by_id[0]["addr"] == master.addr and by_id[0]["slaves"] == 1
    assert by_id[1]["role"] == "SLAVE" and by_id[1]["addr"] == slave.addr
    assert by_id[1]["lagBytes"] == 0 and by_id[1]["state"] == "following"
    assert by_id[0]["commitLogMaxOffset"] == by_id[1]["commitLogMaxOffset"] > 0
    assert "SYNC_MASTER" in text and "SLAVE" in text and "following" in text
    listing = [sys.executable, "-m", "sievemq.cli", "topic", "list", "-n", rsets.namesrv, "--json"]
    topics = json.loads(subprocess.run(listing, capture_output=True, text=True, timeout=30, check=True).stdout)
    (status_topic,) = [t for t in topics if t["topic"] == "StatusT"]
    assert status_topic["messages"] == 10
    assert {r["role"] for r in status_topic["brokers"][0]["replicas"]} == {"SYNC_MASTER", "SLAVE"}

    slave.kill9()  # the slave gone: the master says so
    rows2 = await until(lambda: _slaves_gone(rsets.namesrv), 15.0, "the master without its slave")
    assert rows2[0]["slaves"] == 0


async def _slaves_gone(namesrv: str) -> dict[int, dict[str, object]] | None:
    rows = await set_status(namesrv)
    return rows if rows.get(0, {}).get("slaves") == 0 and 1 not in rows else None
