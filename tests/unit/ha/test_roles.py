"""Role rules without a broker process: write refusals, SYNC_MASTER answers, a master that lost data, HA_CHECK."""

from __future__ import annotations

import json
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

from sievemq.broker.offsets import ConsumerOffsetManager
from sievemq.broker.processors.ha import HaProcessor, log_crc
from sievemq.broker.replication import Replication
from sievemq.errors import RemotingError
from sievemq.ha.master import SlaveState
from sievemq.ha.settings import ReplicationSettings
from sievemq.ha.slave import LinkRefused
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import ConnectionPool
from tests.support.quiet import quiet_period
from tests.unit.ha.test_link import Pair, put, store, until


class Saved:
    def __init__(self) -> None:
        self.docs: dict[Path, Any] = {}

    def __call__(self, path: Path, doc: Any) -> None:
        self.docs[path] = doc
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc))


def replication(tmp: Path, role: str, **kw: Any) -> tuple[Replication, Saved]:
    saved = Saved()
    s = store(tmp / "store")
    r = Replication(ReplicationSettings(role, "127.0.0.1", 0, **kw), s, tmp / "config", saved, ConnectionPool(), None)  # type: ignore[arg-type]
    return r, saved


async def test_a_slave_refuses_writes_and_a_master_takes_them(tmp_path: Path) -> None:
    slave, _ = replication(tmp_path / "s", "SLAVE")
    err = slave.write_refusal()
    assert err is not None and err.code == ResponseCode.SERVICE_NOT_AVAILABLE and err.reason == "BROKER_IS_SLAVE"
    master, _ = replication(tmp_path / "m", "ASYNC_MASTER")
    assert master.write_refusal() is None
    assert await master.replicated(10**9) == ResponseCode.SUCCESS  # ASYNC_MASTER never waits
    slave.store.abandon()
    master.store.abandon()


async def test_sync_master_without_a_slave_and_with_a_slow_one(tmp_path: Path) -> None:
    r, _ = replication(tmp_path, "SYNC_MASTER", sync_timeout_s=0.2)
    await r.server.start()
    try:
        assert await r.replicated(1) == ResponseCode.SLAVE_NOT_AVAILABLE
        r.server.slaves[1] = SlaveState("x:1", 0.0)
        assert await r.replicated(100) == ResponseCode.FLUSH_SLAVE_TIMEOUT  # connected, acknowledges nothing
        r.server._acked(100)
        assert await r.replicated(100) == ResponseCode.SUCCESS
    finally:
        r.server.slaves.clear()
        await r.server.stop()
        r.store.abandon()


async def test_a_master_restarted_with_less_than_a_slave_acknowledged_refuses_writes(tmp_path: Path) -> None:
    r, saved = replication(tmp_path, "SYNC_MASTER")
    end = await put(r.store, 5)
    (tmp_path / "config").mkdir(parents=True, exist_ok=True)
    saved(tmp_path / "config" / "replication.json", {"slaveAckedOffset": end + 100})
    r._load()
    err = r.write_refusal()
    assert err is not None and err.reason == "HA_MASTER_BEHIND" and "recover-from-slave" in err.remark
    r.store.abandon()


async def test_ha_check_compares_the_bytes_before_an_offset(tmp_path: Path) -> None:
    s = store(tmp_path / "m")
    end = await put(s, 10)
    proc = HaProcessor(s, ConsumerOffsetManager(tmp_path / "c"), None, None)  # type: ignore[arg-type]

    async def check(offset: int, length: int, crc: int) -> RemotingCommand:
        fields = {"offset": offset, "length": length, "crc": crc}
        return await proc.check(None, RemotingCommand.request(RequestCode.HA_CHECK, fields))  # type: ignore[arg-type]

    good = log_crc(s, end - 100, end)
    assert good == zlib.crc32(s.read_commitlog(end - 100, 100))
    assert (await check(end, 100, good or 0)).code == ResponseCode.SUCCESS
    bad = await check(end, 100, (good or 0) ^ 1)
    assert bad.code == ResponseCode.SYSTEM_ERROR and bad.ext_fields["reason"] == "HA_DIVERGED"
    ahead = await check(end + 50, 10, 0)
    assert ahead.ext_fields["reason"] == "HA_MASTER_BEHIND" and ahead.ext_fields["maxOffset"] == str(end)
    s.abandon()


def test_offsets_merge_takes_the_larger_and_refuses_garbage(tmp_path: Path) -> None:
    m = ConsumerOffsetManager(tmp_path)
    m.commit("G", "T", 0, 10)
    m.commit("G", "T", 1, 50)
    assert m.merge_max({"T@G": {"0": 30, "1": 20}, "U@G": {"3": 7}}) == 2
    assert (m.query("G", "T", 0), m.query("G", "T", 1), m.query("G", "U", 3)) == (30, 50, 7)
    for bad in ({"T": {"0": 1}}, {"../x@G": {"0": 1}}, {"T@G": {"0": -5}}, {"T@G": {"x": 1}}, {"T@G": 5}):
        with pytest.raises((ValueError, TypeError)):
            m.merge_max(bad)  # type: ignore[arg-type]


async def test_a_slave_checks_then_follows_and_a_diverged_master_is_refused(tmp_path: Path) -> None:
    """The slave's verify step: a master whose bytes before the slave's end differ is not followed."""
    p = Pair(tmp_path)
    await put(p.slave, 3, size=100)  # the slave holds bytes of its own...
    await put(p.master, 3, size=101)  # ...and the master other ones at the same offsets
    refusals: list[str] = []

    async def admit(addr: str) -> str:
        mine = log_crc(p.slave, 0, p.slave.max_phy_offset)
        theirs = log_crc(p.master, 0, p.slave.max_phy_offset)
        refusals.append("diverged" if mine != theirs else "ok")
        if mine != theirs:
            raise LinkRefused("diverged")
        return await p.ticket()

    p.client.admit = admit
    held = p.slave.max_phy_offset
    await p.start()
    try:
        await until(lambda: bool(refusals))
        await quiet_period(0.3, "the slave's log written after the refusal", unchanged=lambda: p.slave.max_phy_offset)
        assert refusals[0] == "diverged" and p.client.refusal == "diverged" and p.slave.max_phy_offset == held
    finally:
        await p.close()


async def test_the_ha_port_opens_at_the_first_ticket_and_a_taken_port_is_a_refusal(tmp_path: Path) -> None:
    r, _ = replication(tmp_path / "a", "ASYNC_MASTER", ha_host="10.1.2.3")
    other, _ = replication(tmp_path / "b", "ASYNC_MASTER")
    try:
        await r.start()
        assert not r.server.listening and r.runtime_info()["haListening"] == "false"
        proc = HaProcessor(r.store, ConsumerOffsetManager(tmp_path / "c"), None, None, None,  # type: ignore[arg-type]
                           r.link_fields)  # fmt: skip
        conn = type("Conn", (), {"peer": ("127.0.0.1", 5555)})()
        check = RemotingCommand.request(RequestCode.HA_CHECK, {"offset": 0, "length": 0, "crc": 0})
        resp = await proc.check(conn, check)  # type: ignore[arg-type]
        assert resp.code == ResponseCode.SUCCESS and r.server.listening and r.runtime_info()["haListening"] == "true"
        assert resp.ext_fields["haServerAddr"] == f"10.1.2.3:{r.server.port}"
        assert r.tickets.redeem(resp.ext_fields["haTicket"], "127.0.0.1", time.monotonic()) is None

        other.server.port = r.server.port  # taken: HA_CHECK says so, the broker goes on
        with pytest.raises(RemotingError) as refused:
            await other.link_fields("127.0.0.1")
        assert refused.value.reason == Reason.HA_PORT_UNAVAILABLE and str(r.server.port) in refused.value.remark
        assert not other.server.listening and len(other.tickets) == 0
    finally:
        await r.stop()
        await other.stop()
        r.store.abandon()
        other.store.abandon()
