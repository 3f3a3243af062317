"""RocketMQ 5's metric families, sievemq against Apache RocketMQ itself (docs/metrics-rocketmq.md): the same traffic
on both (sends of every message type, a tag-filtered group with a backlog, a reader, a POP group, dead letters), then
each one's ``/metrics``: every ``rocketmq_*`` family sievemq exports, RocketMQ exports too, of the same type and with
the same label names, and the series both have for the user's topics and groups carry the same values."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from sievemq.remoting.connection import connect
from tests.integration.test_metrics_rocketmq import _traffic
from tests.support.metrics import Scrape, fetch, parse
from tests.support.procs import Proc, broker_proc, free_port, namesrv_proc
from tests.support.rocketmq import rocketmq

NAMES = {"brokerClusterName": "DefaultCluster", "brokerName": "sv-a"}
OTEL_ONLY = {"otel_scope_name"}
"""A label OpenTelemetry's exporter adds to every series (not RocketMQ's own; sievemq leaves it out)."""
SAME_VALUES = [
    ("rocketmq_messages_in_total", {"topic": "RmqT", "message_type": "normal"}),
    ("rocketmq_messages_in_total", {"topic": "RmqTypes", "message_type": "fifo"}),
    ("rocketmq_messages_in_total", {"topic": "RmqBatch", "message_type": "normal"}),
    ("rocketmq_message_size_count", {"topic": "RmqT", "message_type": "normal"}),
    ("rocketmq_message_size_count", {"topic": "RmqBatch", "message_type": "normal"}),
    ("rocketmq_message_size_bucket", {"topic": "RmqT", "message_type": "normal", "le": "1024.0"}),
    ("rocketmq_messages_out_total", {"topic": "RmqT", "consumer_group": "rmq-consumer"}),
    ("rocketmq_messages_out_total", {"topic": "RmqT", "consumer_group": "rmq-reader"}),
    ("rocketmq_messages_out_total", {"topic": "RmqPop", "consumer_group": "rmq-pop"}),
    ("rocketmq_send_to_dlq_messages_total", {"topic": "RmqT", "consumer_group": "rmq-consumer"}),
    ("rocketmq_consumer_lag_messages", {"topic": "RmqT", "consumer_group": "rmq-consumer", "is_retry": "false"}),
    ("rocketmq_consumer_inflight_messages", {"topic": "RmqT", "consumer_group": "rmq-consumer", "is_retry": "false"}),
    ("rocketmq_consumer_ready_messages", {"topic": "RmqT", "consumer_group": "rmq-consumer", "is_retry": "false"}),
    ("rocketmq_consumer_inflight_messages", {"topic": "RmqPop", "consumer_group": "rmq-pop", "is_retry": "false"}),
    ("rocketmq_consumer_ready_messages", {"topic": "RmqPop", "consumer_group": "rmq-pop", "is_retry": "false"}),
    ("rocketmq_consumer_lag_messages", {"topic": "RmqPop", "consumer_group": "rmq-pop", "is_retry": "false"}),
    ("rocketmq_consumer_connections", {"consumer_group": "rmq-consumer", "language": "python"}),
    ("rocketmq_producer_connections", {"language": "python"}),
    ("rocketmq_broker_permission", {}),
    ("rocketmq_half_messages", {"topic": "RmqTypes"}),
]
"""Series (by the labels that name them; the node's and ``is_system`` are the same on both) whose values must agree."""
BYTES = [
    ("rocketmq_throughput_in_total", {"topic": "RmqT", "message_type": "normal"}, 19),
    ("rocketmq_throughput_out_total", {"topic": "RmqT", "consumer_group": "rmq-reader"}, 19),
]
"""Bytes of stored records, and the messages they hold: RocketMQ 5's broker stores a message's properties with a
trailing 0x02 (``MessageDecoder.messageProperties2String``), sievemq without, so RocketMQ's records of the same
messages are up to one byte longer each."""


@contextmanager
def _sievemq(tmp: Path) -> Iterator[str]:
    """A sievemq name server and broker ``sv-a`` with an HTTP port: (broker address; base URL as ``extra``)."""
    ns = namesrv_proc(tmp)
    procs: list[Proc] = [ns]
    try:
        ns.start()
        http = free_port()
        br = broker_proc(tmp, ns.addr, "sv-a", "--http-listen-port", str(http))
        procs.append(br)
        br.start()
        yield f"{br.addr} http://127.0.0.1:{http}"
    finally:
        for p in reversed(procs):
            p.stop()


async def _run(addr: str, metrics_url: str) -> Scrape:
    host, port = addr.rsplit(":", 1)
    conn = await connect(host, int(port))
    try:
        await _traffic(conn)
        status, _, text = fetch(metrics_url)
    finally:
        conn.close()
    assert status == 200, text[:500]
    return parse(text)


def _types(s: Scrape) -> dict[str, str]:
    return {f.name: f.type for f in text_string_to_metric_families(s.text) if f.name.startswith("rocketmq_")}


def _label_names(s: Scrape, family: str) -> set[str]:
    return {k for name, samples in s.samples.items() if name == family or name.startswith(family + "_")
            for x in samples for k in x.labels} - OTEL_ONLY - {"le"}  # fmt: skip


def _value(s: Scrape, name: str, labels: dict[str, str]) -> float | None:
    found = [x.value for x in s.samples.get(name, []) if all(x.labels.get(k) == v for k, v in labels.items())]
    return float(sum(found)) if found else None


async def test_sievemq_exports_rocketmqs_families_as_rocketmq_does(tmp_path: Path) -> None:
    port = free_port()
    settings = {**NAMES, "metricsExporterType": "PROM", "metricsPromExporterPort": port,
                "metricsPromExporterHost": "127.0.0.1"}  # fmt: skip
    with rocketmq(tmp_path / "ref", broker=settings) as ref:
        theirs = await _run(ref.broker, f"http://127.0.0.1:{port}/metrics")
    with _sievemq(tmp_path / "ours") as where:
        addr, http = where.split(" ")
        ours = await _run(addr, f"{http}/metrics")

    their_types, our_types = _types(theirs), _types(ours)
    ours_only = {f: t for f, t in our_types.items() if f != "rocketmq_proxy_up" and their_types.get(f) != t}
    assert not ours_only, f"families RocketMQ does not export so (theirs: {their_types})"
    for family in our_types:
        if family == "rocketmq_proxy_up":
            continue
        assert _label_names(ours, family) == _label_names(theirs, family), family
    missing = sorted(set(their_types) - set(our_types))
    assert "rocketmq_messages_in" in our_types or "rocketmq_messages_in_total" in our_types, our_types
    differ = []
    for name, labels in SAME_VALUES:
        mine, reference = _value(ours, name, labels), _value(theirs, name, labels)
        if mine is None or mine != reference:
            differ.append(f"{name}{labels}: sievemq {mine}, RocketMQ {reference}")
    for name, labels, messages in BYTES:
        mine, reference = _value(ours, name, labels), _value(theirs, name, labels)
        if mine is None or reference is None or not 0 <= reference - mine <= messages:
            differ.append(f"{name}{labels}: sievemq {mine}, RocketMQ {reference} ({messages} messages)")
    assert not differ, "\n".join(differ) + f"\n(RocketMQ's families sievemq does not export: {missing})"
