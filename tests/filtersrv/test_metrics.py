"""A filter server's ``/metrics``: its functions' decisions (kind "function") and its worker restarts, the same
counts as its status (docs/metrics.md §10)."""

from __future__ import annotations

from sievemq.cli.filtersrv import fetch_status
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.connection import Connection
from tests.filtersrv.conftest import FilterCluster, open_conn
from tests.filtersrv.helpers import class_pull, drain, is_big_eu, register, send_orders, until
from tests.support.metric_names import naming_problems
from tests.support.metrics import scrape
from tests.support.procs import free_port

TOPIC = "Metered"


async def test_function_counts_and_worker_restarts(fc: FilterCluster, conns: list[Connection]) -> None:
    ns = fc.namesrv()
    broker = fc.broker(ns.addr)
    http = free_port()
    fs = fc.filtersrv(broker, "--http-listen-port", str(http), "--batch-timeout-seconds", "0.5")
    base = f"http://127.0.0.1:{http}"
    bconn = await open_conn(conns, broker)
    fconn = await open_conn(conns, fs)
    await send_orders(bconn, TOPIC, range(60), queues=1)
    for group, fn in (("big", "big_eu_orders"), ("looper", "loop_forever")):
        resp = await register(fconn, group, TOPIC, f"shop.filters:{fn}")
        assert resp.code == ResponseCode.SUCCESS, (group, resp.remark)

    got, _ = await drain(fconn, "big", TOPIC, 0)
    assert len(got) == sum(1 for i in range(60) if is_big_eu(i))
    stuck = await class_pull(fconn, "looper", TOPIC, 0, 0)
    assert stuck.code == ResponseCode.SYSTEM_ERROR, stuck.remark

    status = await until(lambda: _replaced(fs.addr), what="the looping worker replaced")
    s = await scrape(base)
    (big,) = [f for f in status["functions"] if f["consumerGroup"] == "big"]
    (looper,) = [f for f in status["functions"] if f["consumerGroup"] == "looper"]
    name = "sievemq_filter_messages_total"
    assert s.value(name, kind="function", outcome="matched", group="big", topic=TOPIC) == big["matched"] >= len(got)
    assert s.value(name, kind="function", outcome="filtered_out", group="big", topic=TOPIC) == big["filteredOut"] > 0
    assert s.value(name, kind="function", outcome="error", group="big", topic=TOPIC) == 0
    assert s.value(name, kind="function", outcome="error", group="looper", topic=TOPIC) == looper["errors"] == 1
    assert s.value("sievemq_filtersrv_worker_restarts_total", reason="timeout") == 1
    assert s.value("sievemq_filtersrv_functions", state="enabled") == 2
    assert s.value("sievemq_filtersrv_workers") == len(status["workers"]["pids"])
    assert s.value("sievemq_connections", role="filtersrv") >= 1
    assert s.find("sievemq_build_info")[0].labels["roles"] == "filtersrv"
    assert naming_problems(s.text) == [], "the filter server's families follow Prometheus's naming conventions"


async def _replaced(addr: str) -> dict[str, object] | None:
    status = await fetch_status(addr)
    workers = status["workers"]
    return status if workers["replaced"].get("timeout") == 1 and len(workers["pids"]) == workers["size"] else None
