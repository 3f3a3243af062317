"""The HA port against a real broker (issue 26.1): it reads no commit log to a stranger. It listens only when
``haListenPort`` is set or a ticket was handed out; a link opens only with a one-time ticket from HA_CHECK, from the
address the ticket was issued to; with ACL on, only an admin account's HA_CHECK gets one; ``haListenHost`` and
``brokerIp2`` put it on an internal address (docs/protocol/replication.md §1)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from pathlib import Path

import pytest

from sievemq.acl.signature import RequestSigner
from sievemq.admin.api import AdminClient
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import connect
from tests.integration.conftest import Cluster
from tests.integration.helpers import eventually
from tests.support.acl_files import open_acl
from tests.support.procs import Proc, broker_proc, free_port
from tests.support.wire import send_message

ADMIN = ("haAdminAK", "haAdminSK-secret")
USER = ("haUserAK1", "haUserSK1-secret")
ACL = open_acl(USER, ADMIN)
SECRET = b"secret-body-only-for-replicas"
ON_DEMAND = ("--ha-listen-port", "0")
"""The HA port as an operator gets it without haListenPort (the test helper sets one by default)."""


def acl_args(tmp: Path) -> list[str]:
    path = tmp / "plain_acl.yml"
    path.write_text(ACL)
    return ["--acl-enable", "true", "--acl-file", str(path)]


def listens(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex((host, port)) == 0


async def ha_check(broker: Proc, account: tuple[str, str] | None) -> RemotingCommand:
    """An empty replica's HA_CHECK (its log ends at 0: nothing to compare), signed by ``account``."""
    conn = await connect(broker.host, broker.port)
    conn.rpc_hook = RequestSigner(*account) if account else None
    try:
        cmd = RemotingCommand.request(RequestCode.HA_CHECK, {"offset": 0, "length": 0, "crc": 0})
        return await conn.request(cmd, 5.0)
    finally:
        conn.close()


async def ticket(broker: Proc, account: tuple[str, str] | None) -> str:
    resp = await ha_check(broker, account)
    assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark, resp.ext_fields)
    return resp.ext_fields["haTicket"]


async def stream(host: str, port: int, first: bytes, source: str | None = None, seconds: float = 6.0) -> bytes:
    """Connect to ``host:port`` (from ``source``), send ``first``, and read until the broker closes or ``seconds``
    pass; nothing listening reads nothing."""
    try:
        reader, writer = await asyncio.open_connection(host, port, local_addr=(source, 0) if source else None)
    except ConnectionRefusedError:
        return b""
    writer.write(first)
    got = b""
    try:
        with contextlib.suppress(TimeoutError, ConnectionError):
            async with asyncio.timeout(seconds):
                while chunk := await reader.read(1 << 16):
                    got += chunk
                    if SECRET in got:
                        break
    finally:
        writer.close()
    return got


def hello(ticket: str, offset: int = 0) -> bytes:
    from sievemq.ha.wire import encode_hello, encode_report  # (not in the code before tickets)

    return encode_hello(ticket) + encode_report(offset)


OFFSET_0 = (0).to_bytes(8, "big")
"""What RocketMQ's slave sends first: its commit-log end, 0 for an empty one."""


async def store_secret(broker: Proc, account: tuple[str, str] | None) -> None:
    conn = await connect(broker.host, broker.port)
    conn.rpc_hook = RequestSigner(*account) if account else None
    try:
        await send_message(conn, "HaSecretT", SECRET)
    finally:
        conn.close()


@pytest.mark.parametrize("acl", [False, True], ids=["acl-off", "acl-on"])
async def test_a_stranger_on_the_ha_port_gets_not_one_byte(cluster: Cluster, tmp_path: Path, acl: bool) -> None:
    account = ADMIN if acl else None
    ns = cluster.namesrv()
    every_warning = ("--server-warning-interval-seconds", "0.001")  # (one line per peer IP per interval)
    broker = cluster.broker(ns.addr, "broker-a", *ON_DEMAND, *every_warning, *(acl_args(tmp_path) if acl else []))
    ha_port = broker.port + 1
    await store_secret(broker, account)

    # the attack: connect and send an 8-byte offset 0 (before this fix: the whole commit log)
    assert await stream("127.0.0.1", ha_port, OFFSET_0) == b""

    good = await ticket(broker, account)  # a replica's HA_CHECK: the port listens from now on
    assert listens("127.0.0.1", ha_port)
    assert await stream("127.0.0.1", ha_port, OFFSET_0) == b""  # no hello: closed after the hello timeout
    assert await stream("127.0.0.1", ha_port, hello("0" * 32)) == b""  # a ticket never issued
    assert await stream("127.0.0.1", ha_port, hello(good), source="127.0.0.2") == b""  # stolen: another address
    assert SECRET in await stream("127.0.0.1", ha_port, hello(good))  # the replica itself: the log
    assert await stream("127.0.0.1", ha_port, hello(good)) == b""  # replayed

    log = broker.log()
    assert "HA port: closed the connection from 127.0.0.2" in log and "ticket issued to another address" in log
    assert "unknown ticket" in log and "no hello within" in log


async def test_no_ha_port_until_needed_or_configured(cluster: Cluster) -> None:
    ns = cluster.namesrv()
    lazy = cluster.broker(ns.addr, "broker-a", *ON_DEMAND)
    port = free_port()
    eager = cluster.broker(ns.addr, "broker-b", "--ha-listen-port", str(port))
    assert not listens("127.0.0.1", lazy.port + 1)  # a master without a slave has no HA port
    async with AdminClient("") as admin:
        info = await admin.runtime_info(lazy.addr)
        assert (info["haListening"], info["haListenPort"]) == ("false", str(lazy.port + 1))
        assert (await admin.runtime_info(eager.addr))["haListening"] == "true" and listens("127.0.0.1", port)

        resp = await ha_check(lazy, None)
        assert resp.ext_fields["haServerAddr"] == f"127.0.0.1:{lazy.port + 1}"
        assert (await admin.runtime_info(lazy.addr))["haListening"] == "true" and listens("127.0.0.1", lazy.port + 1)


async def test_a_taken_ha_port_is_a_refusal_not_a_crash(cluster: Cluster) -> None:
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-a", *ON_DEMAND)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", broker.port + 1))
        squatter.listen()
        resp = await ha_check(broker, None)
        assert resp.code == ResponseCode.SYSTEM_ERROR and resp.ext_fields["reason"] == Reason.HA_PORT_UNAVAILABLE
        assert "haTicket" not in resp.ext_fields and str(broker.port + 1) in (resp.remark or "")
    assert (await ha_check(broker, None)).code == ResponseCode.SUCCESS  # freed: the next HA_CHECK opens it
    assert broker.popen is not None and broker.popen.poll() is None


async def test_with_acl_only_an_admin_accounts_ha_check_gets_a_ticket(cluster: Cluster, tmp_path: Path) -> None:
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-a", *ON_DEMAND, *acl_args(tmp_path))
    unsigned = await ha_check(broker, None)
    assert unsigned.code == ResponseCode.NO_PERMISSION and "haTicket" not in unsigned.ext_fields
    assert unsigned.ext_fields.get("reason") == Reason.ACL_NO_CREDENTIALS
    user = await ha_check(broker, USER)  # a valid signature, but not an admin account
    assert user.code == ResponseCode.NO_PERMISSION and "haTicket" not in user.ext_fields, user.remark
    assert user.ext_fields.get("reason") == Reason.NO_PERMISSION
    assert not listens("127.0.0.1", broker.port + 1)  # no ticket was handed out: no port either
    assert len(await ticket(broker, ADMIN)) == 32


async def test_the_ha_port_on_an_internal_address(cluster: Cluster) -> None:
    """``haListenHost`` binds it, ``brokerIp2`` advertises it: a slave learns it from the name server and follows."""
    ns = cluster.namesrv()
    master = cluster.broker(ns.addr, "broker-a", *ON_DEMAND, "--ha-listen-host", "127.0.0.2", "--broker-ip2",
                            "127.0.0.2", "--broker-role", "SYNC_MASTER")  # fmt: skip
    ha_port = master.port + 1
    await store_secret(master, None)
    resp = await ha_check(master, None)
    assert resp.ext_fields["haServerAddr"] == f"127.0.0.2:{ha_port}"
    assert listens("127.0.0.2", ha_port) and not listens("127.0.0.1", ha_port)

    slave = broker_proc(cluster.tmp, ns.addr, "broker-a", "--broker-role", "SLAVE", "--broker-id", "1", label="slave")
    cluster.procs.append(slave)  # (stopped at the end whatever happens)
    slave.start()
    async with AdminClient(ns.addr) as admin:

        async def following() -> bool:
            info = await admin.runtime_info(slave.addr)
            ends = int(info["commitLogMaxOffset"]), int((await admin.runtime_info(master.addr))["commitLogMaxOffset"])
            return (
                info["haState"] == "following"
                and info["haMasterAddress"] == f"127.0.0.2:{ha_port}"
                and (ends[0] == ends[1] > 0)
            )

        await eventually(following, 20.0, what="the slave following the master's internal HA address")
    conn = await connect("127.0.0.1", master.port)
    try:  # SYNC_MASTER: SEND_OK only once the slave holds it
        assert (await send_message(conn, "HaSecretT", b"after")).code == ResponseCode.SUCCESS
    finally:
        conn.close()


async def test_a_ticket_from_any_address_when_told_so(cluster: Cluster) -> None:
    """``haTicketChecksAddress = false`` (a slave behind a relay or NAT): still one link per ticket."""
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-a", *ON_DEMAND, "--ha-ticket-checks-address", "false")
    await store_secret(broker, None)
    good = await ticket(broker, None)
    assert SECRET in await stream("127.0.0.1", broker.port + 1, hello(good), source="127.0.0.2")
    assert await stream("127.0.0.1", broker.port + 1, hello(good)) == b""
