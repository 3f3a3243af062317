"""The Grafana dashboard deploy/grafana/sievemq-rocketmq.json reads only what a running sievemq exports: every metric
name its queries (panels and template variables) use has samples on a real ``sievemq dev`` after real traffic, every
label they select on or group by is on those samples, and every label value they match exactly is there too
(docs/metrics-rocketmq.md §4)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson

from sievemq.client import api
from sievemq.remoting.connection import connect
from tests.integration.conftest import Cluster
from tests.integration.helpers import create_topic
from tests.integration.test_metrics_rocketmq import _traffic
from tests.integration.test_sql92 import EXPR, fill, hb, pull_bodies
from tests.support import wire
from tests.support.metrics import Scrape, parse, scrape

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "sievemq-rocketmq.json"

_METRIC = r"(?:rocketmq|sievemq)_[a-z0-9_]+"
_SELECTOR = re.compile(rf"\b({_METRIC})\s*(?:\{{([^}}]*)\}})?")
_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
_GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
_LABEL_VALUES = re.compile(rf"label_values\(\s*({_METRIC})\s*(?:\{{[^}}]*\}})?\s*,\s*([a-z_]+)\s*\)")


def queries(dashboard: dict[str, Any]) -> list[str]:
    """Every PromQL expression of the dashboard: its panels' targets (rows' nested panels too) and its variables'."""
    out: list[str] = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for p in panels:
            out.extend(t["expr"] for t in p.get("targets", []) if t.get("expr"))
            walk(p.get("panels", []))

    walk(dashboard["panels"])
    for v in dashboard["templating"]["list"]:
        q = v.get("query")
        if isinstance(q, dict):
            out.append(q["query"])
    return out


def problems(expr: str, s: Scrape) -> list[str]:
    """What ``expr`` asks for that the scrape ``s`` does not have."""
    found: list[str] = []
    selectors = _SELECTOR.findall(expr)
    grouping = {g.strip() for clause in _GROUPING.findall(expr) for g in clause.split(",") if g.strip()}
    grouping |= {label for _, label in _LABEL_VALUES.findall(expr)}
    for name, matchers in selectors:
        samples = s.samples.get(name, [])
        if not samples:
            found.append(f"{expr}: no samples of {name}")
            continue
        labels = {k for x in samples for k in x.labels}
        for label, op, value in _MATCHER.findall(matchers):
            if label not in labels:
                found.append(f"{expr}: {name} has no label {label}")
            elif op == "=" and not any(x.labels.get(label) == value for x in samples):
                found.append(f"{expr}: no sample of {name} has {label}={value!r}")
        for label in grouping - labels:
            found.append(f"{expr}: {name} has no label {label} (grouped by)")
    if not selectors:
        found.append(f"{expr}: names no sievemq or rocketmq metric")
    return found


async def test_every_query_of_the_dashboard_reads_what_sievemq_exports(cluster: Cluster) -> None:
    dashboard = orjson.loads(DASHBOARD.read_bytes())
    exprs = queries(dashboard)
    assert len(exprs) >= 30, exprs
    assert any("rocketmq_" in e for e in exprs) and any("sievemq_filter_messages_total" in e for e in exprs)

    dev = cluster.dev()
    conn = await connect("127.0.0.1", dev.port)
    try:
        await _traffic(conn)
        await create_topic(conn, "DashSql", 1)  # SQL92: matched, filtered out, and errors ('lots' > 100)
        for i, amount in enumerate(["250", "50", "lots", "300"]):
            await wire.send_message(conn, "DashSql", f"m{i}".encode(), properties={"amount": amount}, queue_id=0)
        got, _ = await pull_bodies(conn, "g-dash-sql", "DashSql", "amount > 100")
        assert got == ["m0", "m3"]
        await create_topic(conn, "DashBloom", 1)  # Bloom bits: stored after the group's filter registered
        await api.heartbeat(conn, hb("c-dash-bloom", "g-dash-bloom", "DashBloom", EXPR))
        await fill(conn, "DashBloom")
        got, _ = await pull_bodies(conn, "g-dash-bloom", "DashBloom", None)
        assert got
        s = await scrape(str(dev.extra["http"]))
    finally:
        conn.close()
    found = [p for e in exprs for p in problems(e, s)]
    assert not found, "\n".join(found)


def test_the_checker_finds_what_is_missing() -> None:
    s = Scrape("", {}, [])
    assert problems('sum by (topic) (rate(rocketmq_messages_in_total{cluster=~"$c"}[1m]))', s) == [
        'sum by (topic) (rate(rocketmq_messages_in_total{cluster=~"$c"}[1m])): no samples of rocketmq_messages_in_total'
    ]
    assert problems("vector(1)", s) == ["vector(1): names no sievemq or rocketmq metric"]
    one = parse('# HELP rocketmq_topic_number Active topic number\n# TYPE rocketmq_topic_number gauge\n'
                'rocketmq_topic_number{cluster="C",node_id="b"} 3.0\n')  # fmt: skip
    assert problems('sum by (node_id) (rocketmq_topic_number{cluster="C"})', one) == []
    assert problems('sum by (broker) (rocketmq_topic_number{cluster="D", zone=~"z"})', one) == [
        'sum by (broker) (rocketmq_topic_number{cluster="D", zone=~"z"}): no sample of rocketmq_topic_number has '
        "cluster='D'",
        'sum by (broker) (rocketmq_topic_number{cluster="D", zone=~"z"}): rocketmq_topic_number has no label zone',
        'sum by (broker) (rocketmq_topic_number{cluster="D", zone=~"z"}): rocketmq_topic_number has no label broker '
        "(grouped by)",
    ]
    assert problems("label_values(rocketmq_topic_number, zone)", one) == [
        "label_values(rocketmq_topic_number, zone): rocketmq_topic_number has no label zone (grouped by)"
    ]
