"""A real broker with a few thousand topics answers ``/metrics`` with a bounded page (docs/metrics.md §2, §8): topics
created by UPDATE_AND_CREATE_TOPIC_LIST (18) in lists, messages sent to hundreds of them, a group's offsets
committed on them, dead letters; every labelled family keeps at most ``httpMetricsMaxSeries`` series (a histogram
at most that many sample lines) and its sums stay exact."""

from __future__ import annotations

import asyncio
from collections import Counter
from functools import partial

import orjson

from sievemq.broker.metrics.rocketmq_counts import MESSAGE_SIZE_BUCKETS
from sievemq.client import api
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection, connect
from tests.integration.conftest import Cluster
from tests.integration.helpers import create_group, eventually
from tests.support import wire
from tests.support.metrics import Scrape, scrape
from tests.support.procs import free_port

TOPICS = 2000
SENT_TO = 300
CAP = 40
PER_TOPIC = ("sievemq_messages_in_total", "sievemq_messages_in_bytes_total", "rocketmq_messages_in_total",
             "rocketmq_throughput_in_total")  # fmt: skip


async def _create(conn: Connection, names: list[str]) -> None:
    rows = [{"topicName": n, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "topicFilterType": "SINGLE_TAG",
             "topicSysFlag": 0, "order": False} for n in names]  # fmt: skip
    cmd = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC_LIST, {}, orjson.dumps({"topicConfigList": rows}))
    resp = await conn.request(cmd, wire.ANSWER_TIMEOUT)
    assert resp.code == ResponseCode.SUCCESS, resp.remark


def _series(s: Scrape) -> Counter[str]:
    """Sample lines per family (a histogram's buckets, count and sum all count)."""
    out: Counter[str] = Counter()
    for name, samples in s.samples.items():
        family = name.removesuffix("_bucket").removesuffix("_count").removesuffix("_sum")
        out[family.removesuffix("_total")] += len(samples)
    return out


async def test_a_broker_with_thousands_of_topics_answers_a_bounded_page(cluster: Cluster) -> None:
    ns = cluster.namesrv()
    port = free_port()
    b = cluster.broker(ns.addr, "broker-many", "--http-listen-port", str(port), "--http-metrics-max-series", str(CAP),
                       "--max-topics", str(TOPICS + 100))  # fmt: skip
    http = f"http://127.0.0.1:{port}"
    conn = await connect("127.0.0.1", b.port)
    try:
        names = [f"Many{i:05d}" for i in range(TOPICS)]
        for i in range(0, TOPICS, 500):
            await _create(conn, names[i : i + 500])
        await asyncio.gather(*(wire.send_message(conn, t, b"m" * 10, queue_id=i % 4)
                               for i, t in enumerate(names[:SENT_TO])))  # fmt: skip
        await create_group(conn, "g-many")
        for i, t in enumerate(names[:SENT_TO]):
            await api.update_offset(conn, "g-many", t, i % 4, 0)  # one message behind on each
        found: Scrape | None = await eventually(partial(_scraped, http), what="every message and offset counted")
    finally:
        conn.close()
    assert found is not None
    s = found
    assert s.value("sievemq_broker_topics") >= TOPICS
    lines = _series(s)
    histogram = len(MESSAGE_SIZE_BUCKETS) + 3  # lines of one histogram series: its buckets, +Inf, count and sum
    for family, n in lines.items():
        if family.startswith(("sievemq_", "rocketmq_")) and not family.endswith("latency_seconds"):
            assert n <= CAP + histogram, f"{family}: {n} series over the cap {CAP}"
            assert n <= CAP + 1 or family == "rocketmq_message_size", f"{family}: {n} series over the cap {CAP}"
    size = s.samples["rocketmq_message_size_count"]
    assert 1 < len(size) <= CAP, "the histogram keeps what fits in the cap's sample lines, and (other)"
    assert sum(x.value for x in size) == SENT_TO
    for name in PER_TOPIC:
        assert len(s.samples[name]) == CAP + 1, name
        assert s.find(name, topic="(other)"), f"{name}: topics past the cap add up in (other)"
    assert s.total("sievemq_messages_in_total") == SENT_TO
    assert s.total("rocketmq_messages_in_total") == SENT_TO
    lag = s.samples["sievemq_consumer_lag_messages"]
    assert len(lag) == CAP + 1 and sum(x.value for x in lag) == SENT_TO


async def _scraped(http: str) -> Scrape | None:
    s = await scrape(http)
    done = s.total("sievemq_messages_in_total") == SENT_TO
    return s if done and s.total("sievemq_consumer_lag_messages") == SENT_TO else None
