"""Filter servers in routes, and filter servers started by the broker (needs the broker wiring of
``FilterServerManager``: skipped while ``BrokerConfig`` has no ``filter_server_nums``)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import orjson

from sievemq.cli.filtersrv import fetch_status
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.connection import Connection, connect
from tests.filtersrv.conftest import FilterCluster, open_conn
from tests.filtersrv.helpers import drain, is_big_eu, register, send_orders, until
from tests.support import wire
from tests.support.procs import Proc, dev_proc

TOPIC = "Routed"


async def filter_table(ns_conn: Connection, topic: str = TOPIC) -> dict[str, list[str]]:
    """The route's filterServerTable (empty when the topic has no route yet)."""
    try:
        route = await wire.get_route(ns_conn, topic)
    except Exception:
        return {}
    return route.filter_server_table


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_route_lists_live_filter_servers(fc: FilterCluster, conns: list[Connection]) -> None:
    ns = fc.namesrv()
    broker = fc.broker(ns.addr)
    bconn = await open_conn(conns, broker)
    nconn = await open_conn(conns, ns)
    await send_orders(bconn, TOPIC, range(4))
    fs1 = fc.filtersrv(broker, name="fs1")
    fs2 = fc.filtersrv(broker, name="fs2")
    want = {broker.addr: sorted([fs1.addr, fs2.addr])}
    # The broker re-registers with the name server as soon as its set changes (not after 30 s).
    assert await until(lambda: _eq(nconn, want), timeout=30.0, what="both filter servers routed")
    st = await fetch_status(fs1.addr)
    assert st["brokerName"] == "broker-a" and st["brokerId"] == 0 and st["lastRegisteredMs"] > 0
    # A filter server that dies drops out of the route (its connection closes; silence alone takes 30 s).
    fs1.kill9()
    want = {broker.addr: [fs2.addr]}
    assert await until(lambda: _eq(nconn, want), timeout=30.0, what="dead filter server dropped")


async def _eq(ns_conn: Connection, want: dict[str, list[str]]) -> bool:
    table = await filter_table(ns_conn)
    return {k: sorted(v) for k, v in table.items()} == want


async def test_broker_supervises_its_filter_servers(fc: FilterCluster, conns: list[Connection], tmp_path: Path) -> None:
    cfg = tmp_path / "filtersrv.toml"
    cfg.write_text(f'filterModules = ["shop.filters"]\nfilterPaths = ["{fc.filters_dir}"]\nworkerCount = 1\n'
                   "registerIntervalSeconds = 1\n")  # fmt: skip
    ns = fc.namesrv()
    broker = fc.broker(ns.addr, "--filter-server-nums", "1", "--filter-server-config", str(cfg))
    bconn = await open_conn(conns, broker)
    nconn = await open_conn(conns, ns)
    await send_orders(bconn, TOPIC, range(40), queues=1)

    async def one_server() -> str | None:
        servers = (await filter_table(nconn)).get(broker.addr, [])
        return servers[0] if len(servers) == 1 else None

    addr = await until(one_server, timeout=10.0, what="the supervised filter server in the route")
    assert addr is not None
    host, _, port = addr.rpartition(":")
    fconn = await connect(host, int(port))
    conns.append(fconn)
    assert (await register(fconn, "g", TOPIC, "shop.filters:big_eu_orders")).code == ResponseCode.SUCCESS
    msgs, _ = await drain(fconn, "g", TOPIC, 0)
    assert [orjson.loads(m.body)["id"] for m in msgs] == [i for i in range(40) if is_big_eu(i)]
    pid = (await fetch_status(addr))["pid"]

    # Killed: the broker starts another, which reaches the route under its new address.
    os.kill(pid, signal.SIGKILL)

    async def another_server() -> str | None:
        new = await one_server()
        return new if new and new != addr else None

    new_addr = await until(another_server, timeout=15.0, what="a restarted filter server in the route")
    assert new_addr is not None
    new_pid = (await fetch_status(new_addr))["pid"]
    assert new_pid != pid and alive(new_pid)

    # The broker stops its filter servers when it stops.
    assert broker.stop() == 0

    async def gone() -> bool:
        return not alive(new_pid)

    await until(gone, timeout=10.0, what="the filter server stopped with its broker")


async def test_dev_with_a_filter_server(fc: FilterCluster, conns: list[Connection]) -> None:
    dev: Proc = dev_proc(fc.tmp, "--filtersrv", "1")
    fc.procs.append(dev)
    dev.start()
    bconn = await open_conn(conns, dev)
    await send_orders(bconn, TOPIC, range(2))
    nconn = await connect("127.0.0.1", int(str(dev.extra["namesrv_port"])))
    conns.append(nconn)

    async def listed() -> bool:
        return len((await filter_table(nconn)).get(dev.addr, [])) == 1

    assert await until(listed, timeout=10.0, what="dev's filter server in the route")
