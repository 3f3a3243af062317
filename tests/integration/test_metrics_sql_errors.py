"""SQL92 evaluation errors counted: a message whose properties the expression cannot be evaluated on (``amount >
100`` with ``amount = 'lots'``: RocketMQ's ``Integer.valueOf`` throws, and its broker logs "Message Filter error") is
not delivered, as in RocketMQ, and counts as ``sievemq_filter_messages_total{kind="sql", outcome="error"}``, apart
from the FALSE and NULL results (``filtered_out``); ``sievemq group filters`` shows the same count (docs/metrics.md
§4). Real processes: ``sievemq dev`` and raw pulls, with the expression in the pull and with the group's Bloom bits
(a heartbeat's subscription)."""

from __future__ import annotations

import orjson

from sievemq.client import api
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.connection import Connection, connect
from tests.integration.conftest import Cluster
from tests.integration.helpers import call, create_topic
from tests.integration.test_sql92 import hb, pull_bodies
from tests.support import wire
from tests.support.metrics import scrape

EXPR = "amount > 100"
AMOUNTS = ["250", "50", "lots", None, "300", "3.5", "7", "1e3", "101", "x", None, "99"]
"""``amount`` of each message (None: no such property): 3 match, 4 are FALSE, 2 NULL, 3 cannot be evaluated."""
MATCHED = [f"m{i}" for i, a in enumerate(AMOUNTS) if a in ("250", "300", "101")]
ERRORS = sum(1 for a in AMOUNTS if a in ("lots", "3.5", "1e3", "x"))
FAMILY = "sievemq_filter_messages_total"


async def _send(conn: Connection, topic: str) -> None:
    for i, amount in enumerate(AMOUNTS):
        props = {} if amount is None else {"amount": amount}
        await wire.send_message(conn, topic, f"m{i}".encode(), properties=props, queue_id=0)


async def _group_filter_counts(conn: Connection, group: str, topic: str) -> dict[str, int]:
    resp = await call(conn, RequestCode.GET_GROUP_FILTERS, {"consumerGroup": group})
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    (flt,) = [f for f in orjson.loads(resp.body)["filters"] if f["topic"] == topic]
    counts: dict[str, int] = flt["counts"]
    return counts


async def test_sql92_evaluation_errors_are_counted_apart_from_false_and_null(cluster: Cluster) -> None:
    assert (len(MATCHED), ERRORS) == (3, 4)
    dev = cluster.dev()
    http = str(dev.extra["http"])
    conn = await connect("127.0.0.1", dev.port)
    try:
        await create_topic(conn, "Amounts", 1)
        await _send(conn, "Amounts")
        got, _ = await pull_bodies(conn, "g-sql-err", "Amounts", EXPR)
        assert got == MATCHED, "only TRUE delivers: errors are not delivered"

        await create_topic(conn, "AmountsBloom", 1)
        await api.heartbeat(conn, hb("c-err", "g-bloom-err", "AmountsBloom", EXPR))
        await _send(conn, "AmountsBloom")  # stored after the filter registered: Bloom bits set at dispatch
        got, _ = await pull_bodies(conn, "g-bloom-err", "AmountsBloom", None)
        assert got == MATCHED

        s = await scrape(http)
        for group, topic in (("g-sql-err", "Amounts"), ("g-bloom-err", "AmountsBloom")):
            sql = {o: s.get(FAMILY, 0, kind="sql", outcome=o, group=group, topic=topic)
                   for o in ("matched", "filtered_out", "error")}  # fmt: skip
            bitmap = s.get(FAMILY, 0, kind="bitmap", outcome="filtered_out", group=group, topic=topic)
            assert sql["matched"] == 3 and sql["error"] == ERRORS, (group, sql, bitmap)
            assert sql["filtered_out"] + bitmap == len(AMOUNTS) - 3 - ERRORS, (group, sql, bitmap)
            counts = await _group_filter_counts(conn, group, topic)
            assert counts["evaluation_errors"] == ERRORS, counts
        assert s.get(FAMILY, 0, kind="bitmap", outcome="filtered_out", group="g-bloom-err", topic="AmountsBloom") > 0, (
            "the Bloom bits spared reading the FALSE ones (not the ones in error: those are read and counted)"
        )
    finally:
        conn.close()
