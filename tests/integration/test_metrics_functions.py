"""Filter functions' counts on the broker's /metrics: ``sievemq dev --filtersrv 1`` starts a filter server, which
tells the broker what its functions decided in every registration (301), and dev's /metrics shows them as
``sievemq_filter_messages_total{kind="function"}`` (docs/metrics.md §4). Real processes: dev, its filter server and
a PushConsumer subscribed with a function."""

from __future__ import annotations

import itertools

import orjson

from sievemq import ConsumeResult, MessageExt, PushConsumer, Selector
from sievemq.remoting.connection import Connection, connect
from tests.filtersrv.conftest import SHOP_FILTERS
from tests.filtersrv.helpers import is_big_eu, send_orders
from tests.integration.conftest import Cluster
from tests.integration.helpers import eventually
from tests.integration.test_cli import run_cli
from tests.support import wire
from tests.support.metrics import Scrape, scrape
from tests.support.procs import Proc
from tests.support.quiet import quiet_period

TOPIC, GROUP = "MeteredOrders", "eu-big-metered"
REGISTER_INTERVAL = 0.5
"""The filter server's registerIntervalSeconds here (10 s by default): how often its counts reach the broker."""
FAMILY = "sievemq_filter_messages_total"
_ids = itertools.count()


def dev_with_a_filter_server(cluster: Cluster) -> Proc:
    """``sievemq dev --filtersrv 1`` allowing ``shop.filters`` (written to ``tmp/filters``), its filter server set
    by the TOML file the broker's ``filterServerConfig`` names."""
    filters = cluster.tmp / "filters"
    (filters / "shop").mkdir(parents=True)
    (filters / "shop" / "__init__.py").write_text("")
    (filters / "shop" / "filters.py").write_text(SHOP_FILTERS)
    fs_toml = cluster.tmp / "filtersrv.toml"
    fs_toml.write_text(f"registerIntervalSeconds = {REGISTER_INTERVAL}\nworkerMemoryMb = 256\n")
    broker_toml = cluster.tmp / "broker.toml"
    broker_toml.write_text(f'filterServerConfig = "{fs_toml}"\n')
    return cluster.dev("--config", str(broker_toml), "--filtersrv", "1", "--filter-modules", "shop.filters",
                       "--filter-paths", str(filters))  # fmt: skip


async def _route_has_filter_server(ns: Connection) -> bool:
    try:
        route = await wire.get_route(ns, TOPIC)
    except Exception:
        return False
    return any(route.filter_server_table.values())


class Orders:
    """A push listener recording the order ids it got."""

    def __init__(self) -> None:
        self.ids: list[int] = []

    async def __call__(self, msgs: list[MessageExt]) -> ConsumeResult:
        self.ids.extend(orjson.loads(m.body)["id"] for m in msgs)
        return ConsumeResult.SUCCESS


def _function_counts(s: Scrape) -> dict[str, float]:
    return {o: s.get(FAMILY, -1.0, kind="function", outcome=o, group=GROUP, topic=TOPIC)
            for o in ("matched", "filtered_out", "error")}  # fmt: skip


async def test_dev_metrics_show_what_its_filter_servers_functions_decided(cluster: Cluster) -> None:
    dev = dev_with_a_filter_server(cluster)
    http = str(dev.extra["http"])
    conn = await connect("127.0.0.1", dev.port)
    ns = await connect("127.0.0.1", int(str(dev.extra["namesrv_port"])))
    consumer = PushConsumer(str(dev.extra["namesrv"]), GROUP, consume_from="first", instance_name=f"m{next(_ids)}")
    try:
        await send_orders(conn, TOPIC, range(40))
        await eventually(lambda: _route_has_filter_server(ns), timeout=20, what="the filter server in the route")
        assert _function_counts(await scrape(http))["matched"] == -1, "no function counts before any function ran"
        got = Orders()
        consumer.subscribe(TOPIC, Selector.function("shop.filters:big_eu_orders"))
        consumer.listener(got)
        await consumer.start()
        want = sorted(i for i in range(40) if is_big_eu(i))
        await eventually(lambda: sorted(got.ids) == want, timeout=20, what=f"orders {want}")

        async def reported() -> dict[str, float] | None:
            counts = _function_counts(await scrape(http))
            return counts if counts["matched"] >= len(want) else None

        counts = await eventually(reported, timeout=10, what="the function's counts on dev's /metrics")
        assert counts == {"matched": len(want), "filtered_out": 40 - len(want), "error": 0}, counts
        await quiet_period(3 * REGISTER_INTERVAL, "counts added twice from later reports of the same counts")
        s = await scrape(http)
        assert _function_counts(s) == counts, f"{_function_counts(s)}: counts added again from later reports"
        assert s.find("sievemq_build_info")[0].labels["roles"] == "namesrv,broker,proxy"
        # and `sievemq group filters` says the same
        rc, out, err = await run_cli("group", "filters", GROUP, "--namesrv", str(dev.extra["namesrv"]), "--json")
        assert rc == 0, err
        (report,) = orjson.loads(out)
        (flt,) = [f for f in report["filters"] if f["topic"] == TOPIC]
        assert flt["functionCounts"] == {"matched": len(want), "filteredOut": 40 - len(want), "errors": 0}, flt
        rc, out, err = await run_cli("group", "filters", GROUP, "--namesrv", str(dev.extra["namesrv"]))
        assert f"filter function (as its filter servers reported): matched {len(want)}, filtered out " \
            f"{40 - len(want)}, failed batches 0" in out, out
    finally:
        await consumer.close()
        ns.close()
        conn.close()
