"""Every metric family a real process exports follows Prometheus's naming conventions (tests/support/metric_names.py):
``sievemq_`` prefix, counters in ``_total``, units last and in base units (``_bytes``, ``_seconds``), no ``_total``
on gauges, snake_case label names, HELP on every family (docs/metrics.md). ``sievemq dev`` serves the name
server's, the broker's and the proxy's families on one port; traffic first gives the labelled families samples, so
their label names are seen too. The standalone roles and the filter server are checked where their own scrapes are
tested (test_metrics_ports.py, tests/filtersrv/test_metrics.py)."""

from __future__ import annotations

import grpc

from sievemq.client import api, pop_api
from sievemq.proxy.v2 import definition_pb2 as pb
from sievemq.proxy.v2 import service_pb2 as svc
from sievemq.proxy.v2 import service_pb2_grpc as rpc
from sievemq.remoting.connection import connect
from tests.integration.conftest import Cluster
from tests.integration.helpers import create_topic
from tests.support import wire
from tests.support.metric_names import naming_problems
from tests.support.metrics import scrape

LABELLED = ("sievemq_messages_in_total", "sievemq_filter_messages_total", "sievemq_consumer_lag_messages",
            "sievemq_pop_inflight_messages", "sievemq_proxy_grpc_requests_total", "sievemq_store_files_bytes",
            "sievemq_connections", "sievemq_build_info")  # fmt: skip
"""Labelled families the traffic below gives samples to (so that the check sees their label names)."""


async def test_every_family_of_dev_follows_the_naming_conventions(cluster: Cluster) -> None:
    dev = cluster.dev()
    conn = await connect("127.0.0.1", dev.port)
    channel = grpc.aio.insecure_channel(str(dev.extra["grpc"]))
    try:
        await create_topic(conn, "Named", 1)
        await pop_api.pop_message(conn, "g-pop-named", "Named", 0, invisible_ms=60_000)  # a new POP group: at the end
        for tag in ("TagA", "TagB", "TagA"):
            await wire.send_message(conn, "Named", b"x", tags=tag, queue_id=0)
        await api.pull_message(conn, "g-named", "Named", 0, 0, max_nums=8, subscription="TagA")
        await api.update_offset(conn, "g-named", "Named", 0, 1)
        await pop_api.pop_message(conn, "g-pop-named", "Named", 0, max_nums=1, invisible_ms=60_000)
        await rpc.MessagingServiceStub(channel).QueryRoute(svc.QueryRouteRequest(topic=pb.Resource(name="Named")))
        s = await scrape(str(dev.extra["http"]))
    finally:
        await channel.close()
        conn.close()
    unsampled = [name for name in LABELLED if not s.samples.get(name)]
    assert not unsampled, f"the traffic did not give these families samples: {unsampled}"
    assert len([f for f in s.families if f.startswith("sievemq_")]) >= 40, s.families
    problems = naming_problems(s.text)
    assert not problems, "families that break Prometheus's naming conventions:\n" + "\n".join(problems)


BAD = """\
# HELP sievemq_bytes_in_total Bytes of those messages as stored
# TYPE sievemq_bytes_in_total counter
sievemq_bytes_in_total{topic="T"} 3.0
# HELP sievemq_sends Sends
# TYPE sievemq_sends counter
sievemq_sends 1.0
# HELP sievemq_queue_depth_total Messages waiting
# TYPE sievemq_queue_depth_total gauge
sievemq_queue_depth_total 1.0
# HELP sievemq_flush_latency_milliseconds Flushes
# TYPE sievemq_flush_latency_milliseconds gauge
sievemq_flush_latency_milliseconds 1.0
# HELP sievemq_pause Time the loop paused
# TYPE sievemq_pause gauge
sievemq_pause 1.0
# TYPE sievemq_silent gauge
sievemq_silent{consumerGroup="g"} 1.0
# HELP queue_size Messages
# TYPE queue_size gauge
queue_size 1.0
"""


def test_the_check_finds_each_kind_of_break() -> None:
    """The checker above can fail: one family per rule, each reported."""
    problems = "\n".join(naming_problems(BAD))
    for expected in (
        "sievemq_bytes_in_total: the unit 'bytes' must come last",
        "sievemq_bytes_in_total: its HELP says it measures bytes",
        "sievemq_sends: a counter that does not end in _total",
        "sievemq_queue_depth_total: a gauge that ends in _total",
        "sievemq_flush_latency_milliseconds: 'milliseconds' is not a base unit",
        "sievemq_pause: its HELP says it measures seconds",
        "sievemq_silent: no HELP text",
        "sievemq_silent: label 'consumerGroup' is not snake_case",
        "queue_size: does not start with sievemq_",
    ):
        assert expected in problems, f"{expected!r} not reported:\n{problems}"
    good = "# HELP sievemq_messages_in_bytes_total Bytes in\n# TYPE sievemq_messages_in_bytes_total counter\n" \
           'sievemq_messages_in_bytes_total{topic="T"} 3.0\n'  # fmt: skip
    assert naming_problems(good) == []
