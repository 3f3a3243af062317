"""The RocketMQ 5.x Python client (gRPC) through ``sievemq dev``'s proxy, and the same process's ``/metrics``: every
SendMessage call counted by method and answer code, the messages under their topic (docs/metrics.md §9)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.clients import run_driver, unique_name
from tests.interop.test_against_sievemq import create_topic
from tests.support.metrics import scrape
from tests.support.procs import Proc, dev_proc

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[Proc]:
    p = dev_proc(tmp_path_factory.mktemp("interop-proxy-metrics")).start()
    try:
        yield p
    finally:
        assert p.stop() == 0, p.log()


def test_5x_sends_are_counted_by_method_and_code(dev: Proc) -> None:
    topic = unique_name("PxMetrics")
    create_topic(dev, topic, queues=2)
    http = str(dev.extra["http"])
    before = asyncio.run(scrape(http))
    res = run_driver("rmq5", ["produce", "--endpoints", str(dev.extra["grpc"]), "--topic", topic, "--count", "5"],
                     timeout=120)  # fmt: skip
    assert res.returncode == 0, res.describe()
    assert len(res.of("sent")) == 5, res.describe()
    after = asyncio.run(scrape(http))
    calls = "sievemq_proxy_grpc_requests_total"
    sent = after.get(calls, method="SendMessage", code="OK") - before.get(calls, method="SendMessage", code="OK")
    assert sent == 5, after.find(calls)
    assert after.get(calls, method="QueryRoute", code="OK") >= 1, "the client asked for the topic's route"
    assert after.value("sievemq_messages_in_total", topic=topic) == 5
    assert after.value("sievemq_proxy_grpc_latency_seconds_count", method="SendMessage") >= 5
