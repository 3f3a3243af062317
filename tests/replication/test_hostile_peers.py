"""Anyone can reach a master's remoting and HA ports: a client that claims to hold more of the commit log (an
HA_CHECK with a huge offset, a report of a huge end on the HA port) must not make the master refuse writes. The
master asks its set's slaves, as the name servers list them, and finds none ahead."""

from __future__ import annotations

import asyncio

from sievemq import Message, Producer
from sievemq.admin.api import AdminClient
from sievemq.client.message import SendStatus
from sievemq.ha.wire import encode_report
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import connect
from tests.support.quiet import quiet_period
from tests.support.replica_sets import ReplicaSets, in_step, set_status, split_addr

HUGE = 1 << 50


async def master_state(namesrv: str) -> str:
    """The master's state in ``sievemq cluster status`` ("serving", or "refusing writes: <why>")."""
    return str((await set_status(namesrv))[0]["state"])


async def test_claims_of_more_data_from_strangers_do_not_stop_writes(rsets: ReplicaSets) -> None:
    master = rsets.broker("master", "SYNC_MASTER").start()
    rsets.broker("slave", "SLAVE", 1).start()
    await in_step(rsets.namesrv)
    async with Producer(rsets.namesrv, "hostile-p") as p:
        assert (await p.send(Message("HostileT", b"before"))).status == SendStatus.SEND_OK

        conn = await connect(*split_addr(master.addr))
        try:
            cmd = RemotingCommand.request(RequestCode.HA_CHECK, {"offset": HUGE, "length": 0, "crc": 0})
            resp = await conn.request(cmd, 5.0)
            assert resp.code == ResponseCode.SYSTEM_ERROR  # answered as what it is: a log this master lacks
        finally:
            conn.close()

        async with AdminClient("") as admin:
            ha_port = int((await admin.runtime_info(master.addr))["haListenPort"])
        reader, writer = await asyncio.open_connection(master.host, ha_port)
        writer.write(encode_report(HUGE))
        await writer.drain()
        # the master asks its slave (which is not ahead) and goes on serving: no state to wait for, only a refusal
        # of writes that must not come
        await quiet_period(2.0, "the master refusing writes after a stranger's claim",
                           unchanged=lambda: master_state(rsets.namesrv))  # fmt: skip

        assert (await p.send(Message("HostileT", b"after"))).status == SendStatus.SEND_OK
        try:  # a stranger claiming to be ahead is sent nothing of the log
            got = await asyncio.wait_for(reader.read(64), 1.0)
        except TimeoutError:
            got = b""
        assert got == b"", got
        writer.close()
    rows = await set_status(rsets.namesrv)
    assert rows[0]["state"] == "serving", rows[0]
    assert "claims the commit log" in master.log()
