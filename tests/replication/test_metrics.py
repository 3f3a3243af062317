"""Replication lag on ``/metrics`` of a master and its slave: 0 in step, the bytes written meanwhile while the slave
is stopped (SIGSTOP), 0 again once it runs (docs/metrics.md §7)."""

from __future__ import annotations

import os
import signal

from sievemq.remoting.connection import connect
from tests.support import wire
from tests.support.metrics import Scrape, scrape
from tests.support.procs import Proc, free_port
from tests.support.replica_sets import ReplicaSets, in_step, split_addr, until

SLOW_HOUSEKEEPING = ("--ha-housekeeping-interval", "20000")
"""The master keeps a silent slave's link for 20 s: long enough to read its lag while it is stopped."""


def _with_http(p: Proc) -> str:
    port = free_port()
    p.args += ["--http-listen-host", p.host, "--http-listen-port", str(port)]
    return f"http://{p.host}:{port}"


async def test_lag_in_bytes_and_seconds_on_master_and_slave(rsets: ReplicaSets) -> None:
    master = rsets.broker("master", "ASYNC_MASTER", 0, *SLOW_HOUSEKEEPING)
    slave = rsets.broker("slave", "SLAVE", 1, *SLOW_HOUSEKEEPING)
    master_http, slave_http = _with_http(master), _with_http(slave)
    master.start()
    slave.start()
    conn = await connect(*split_addr(master.addr))
    try:
        await wire.send_message(conn, "Replicated", b"first", queue_id=0)
        await in_step(rsets.namesrv)
        m = await until(lambda: _master_lag(master_http, 0), what="the master seeing its slave in step")
        assert m.value("sievemq_replication_slaves") == 1
        assert m.value("sievemq_replication_refusing_writes") == 0
        s = await until(lambda: _slave_lag(slave_http, 0), what="the slave in step")
        assert s.value("sievemq_replication_following") == 1
        assert not s.find("sievemq_replication_slaves"), "a slave has no slaves of its own"

        assert slave.popen is not None
        os.kill(slave.popen.pid, signal.SIGSTOP)
        before = (await scrape(master_http)).value("sievemq_store_commitlog_bytes")
        for i in range(5):
            await wire.send_message(conn, "Replicated", f"while-stopped-{i}".encode() * 10, queue_id=0)
        stopped = await scrape(master_http)
        written = stopped.value("sievemq_store_commitlog_bytes") - before
        (lag,) = stopped.find("sievemq_replication_lag_bytes", role="master")
        assert lag.value == written > 0, "the slave lacks exactly what was written since it stopped"
        (seconds,) = stopped.find("sievemq_replication_lag_seconds", role="master")
        assert seconds.value > 0

        os.kill(slave.popen.pid, signal.SIGCONT)
        await until(lambda: _master_lag(master_http, 0), what="the slave caught up")
        await until(lambda: _slave_lag(slave_http, 0), what="the slave's own lag back to 0")
    finally:
        if slave.popen is not None and slave.popen.poll() is None:
            os.kill(slave.popen.pid, signal.SIGCONT)
        conn.close()


async def _master_lag(http: str, want: float) -> Scrape | None:
    s = await scrape(http)
    rows = s.find("sievemq_replication_lag_bytes", role="master")
    seconds = s.find("sievemq_replication_lag_seconds", role="master")
    ok = len(rows) == 1 and rows[0].value == want and seconds and seconds[0].value == 0
    return s if ok else None


async def _slave_lag(http: str, want: float) -> Scrape | None:
    s = await scrape(http)
    rows = s.find("sievemq_replication_lag_bytes", role="slave")
    return s if len(rows) == 1 and rows[0].value == want and s.value("sievemq_replication_following") == 1 else None
