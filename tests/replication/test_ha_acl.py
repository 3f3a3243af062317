"""Replication with ACL on (issue 26.1): the brokers sign HA_CHECK with their admin account (aclAccessKey), get a
one-time ticket and open the HA link with it. A slave follows its master, and a master that lost its data recovers
from the slave (``--recover-from-slave``: HA_CHECK to the slave, whose HA port opens for that ticket), while a
stranger's HA_CHECK gets no ticket (docs/protocol/replication.md §1, §5)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from sievemq import Message, Producer
from sievemq.acl.signature import RequestSigner
from sievemq.admin.api import AdminClient
from sievemq.client import api
from sievemq.client.message import SendStatus
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import connect
from tests.support.acl_files import open_acl
from tests.support.replica_sets import ReplicaSets, split_addr, until

ADMIN = ("brokerAdminAK", "brokerAdminSK-secret")
USER = ("appUserAK1", "appUserSK1-secret")
ACL = open_acl(USER, ADMIN)


def acl_args(tmp: Path) -> tuple[str, ...]:
    path = tmp / "plain_acl.yml"
    path.write_text(ACL)
    return ("--acl-enable", "true", "--acl-file", str(path), "--acl-access-key", ADMIN[0], "--acl-secret-key",
            ADMIN[1], "--ha-listen-port", "0")  # fmt: skip


async def in_step(namesrv: str) -> dict[int, dict[str, Any]]:
    """The set's status rows (read with the admin account) once the slave follows and holds all of the master."""

    async def probe() -> dict[int, dict[str, Any]] | None:
        async with AdminClient(namesrv, access_key=ADMIN[0], secret_key=ADMIN[1]) as admin:
            rows = {r["brokerId"]: r for r in await admin.cluster_status() if r["brokerName"] == "broker-a"}
        m, s = rows.get(0), rows.get(1)
        if not (m and s and m.get("slaves") and s.get("state") == "following"):
            return None
        return rows if s["commitLogMaxOffset"] == m["commitLogMaxOffset"] else None

    return dict(await until(probe, 30.0, "the slave in step with its master"))


async def send(namesrv: str, bodies: list[bytes]) -> None:
    async with Producer(namesrv, "ha-acl-p", access_key=USER[0], secret_key=USER[1]) as p:
        for body in bodies:
            assert (await p.send(Message("HaAclT", body))).status == SendStatus.SEND_OK


async def read_signed(addr: str) -> list[bytes]:
    """Every body of HaAclT on the broker at ``addr``, pulled with the admin account."""
    conn = await connect(*split_addr(addr))
    conn.rpc_hook = RequestSigner(*ADMIN)
    out: list[bytes] = []
    try:
        for q in range(4):
            offset = 0
            while (r := await api.pull_message(conn, "ha-acl-g", "HaAclT", q, offset, max_nums=256)).messages:
                out += [m.body for m in r.messages]
                offset = r.next_begin_offset
    finally:
        conn.close()
    return sorted(out)


async def test_with_acl_a_slave_follows_and_a_master_recovers_from_it(rsets: ReplicaSets) -> None:
    args = acl_args(rsets.tmp)
    master = rsets.broker("master", "SYNC_MASTER", 0, *args).start()
    slave = rsets.broker("slave", "SLAVE", 1, *args).start()
    await in_step(rsets.namesrv)
    bodies = [f"m{i}".encode() for i in range(20)]
    await send(rsets.namesrv, bodies)  # SYNC_MASTER: SEND_OK means the slave holds each one
    held = (await in_step(rsets.namesrv))[1]["commitLogMaxOffset"]

    conn = await connect(*split_addr(master.addr))  # a stranger's HA_CHECK, signed by a non-admin account
    conn.rpc_hook = RequestSigner(*USER)
    try:
        resp = await conn.request(RemotingCommand.request(RequestCode.HA_CHECK, {"offset": 0, "length": 0, "crc": 0}))
        assert resp.code == ResponseCode.NO_PERMISSION and "haTicket" not in resp.ext_fields
    finally:
        conn.close()

    master.stop()  # a new machine in the master's place: recovered from the slave, under ACL
    shutil.rmtree(rsets.tmp / "master")
    master = rsets.broker("master", "SYNC_MASTER", 0, *args, "--recover-from-slave", slave.addr).start()
    rows = await in_step(rsets.namesrv)
    assert rows[0]["commitLogMaxOffset"] == held and rows[0]["state"] == "serving"
    assert "recovered from slave" in master.log()
    assert await read_signed(master.addr) == sorted(bodies)
    await send(rsets.namesrv, [b"after"])
    await until(lambda: _holds(slave.addr, b"after"), 20.0, "the slave following the recovered master")


async def _holds(addr: str, body: bytes) -> bool:
    return body in await read_signed(addr)
