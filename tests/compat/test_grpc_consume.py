"""RocketMQ 5 clients through a proxy, compared: the same rocketmq-python-client 5.1.2 driver (tests/interop) against
Apache RocketMQ 5.5.0's proxy and against sievemq's (``sievemq dev``). What a SimpleConsumer and a PushConsumer
receive (bodies, tags, keys, properties, delivery attempts), what comes back when it is not acked, fails or has its
invisible duration changed, and which invisible durations each proxy takes.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.interop.clients import ensure_clients_installed, run_driver, start_driver, unique_name
from tests.support.procs import dev_proc
from tests.support.rocketmq import rocketmq

INVISIBLE_S = "10"
"""The least invisible duration RocketMQ's proxy takes (``minInvisibleTimeMillsForRecv``)."""


@pytest.fixture(scope="module")
def proxies(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[str, str]]]:
    """{"rocketmq": (name server, gRPC endpoint), "sievemq": (...)}: RocketMQ 5.5.0 with its proxy, and a
    ``sievemq dev``."""
    ensure_clients_installed()
    tmp = tmp_path_factory.mktemp("compat-grpc")
    broker = {"brokerClusterName": "DefaultCluster", "brokerName": "rmq-grpc", "enablePropertyFilter": True}
    with rocketmq(tmp, broker=broker, proxy=True) as ref:
        dev = dev_proc(tmp).start()
        try:
            yield {"rocketmq": (ref.namesrv, ref.grpc), "sievemq": (str(dev.extra["namesrv"]), str(dev.extra["grpc"]))}
        finally:
            assert dev.stop() == 0, dev.log()


def create_topic(namesrv: str, topic: str, queues: int = 2) -> None:
    out = subprocess.run([sys.executable, "-m", "sievemq.cli", "topic", "create", topic, "-n", namesrv, "-q",
                          str(queues)], capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr


def seen(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What a consumer observed of each delivery, in a stable order: (attempt, body, tag, keys, properties)."""
    rows = [(e["attempt"], e["body"], e["tag"], tuple(e["keys"]), tuple(sorted(e["properties"].items())))
            for e in events]  # fmt: skip
    return sorted(rows)


def on_both(proxies: dict[str, tuple[str, str]], scenario: Any) -> dict[str, Any]:
    return {side: scenario(namesrv, grpc) for side, (namesrv, grpc) in proxies.items()}


def test_a_simple_consumer_gets_the_same_deliveries(proxies: dict[str, tuple[str, str]]) -> None:
    """Three messages with a tag, keys and properties; the first delivery is not acked: it comes back once its
    invisible time is over, attempt 2, on both."""

    def scenario(namesrv: str, grpc: str) -> list[tuple[Any, ...]]:
        topic = unique_name("CmpSimple")
        create_topic(namesrv, topic)
        consumer = start_driver("rmq5", ["simple-consume", "--endpoints", grpc, "--topic", topic, "--group",
                                         unique_name("CmpG"), "--count", "3", "--hold-first", "1", "--invisible",
                                         INVISIBLE_S, "--timeout", "120"])  # fmt: skip
        consumer.wait_for("ready", timeout=120)
        sent = run_driver("rmq5", ["produce", "--endpoints", grpc, "--topic", topic, "--count", "3", "--tag", "TagA",
                                   "--key-prefix", "k", "--prop", "a=1", "--prop", "city=Zürich"])  # fmt: skip
        assert sent.ok, sent.describe()
        assert consumer.wait(timeout=180) == 0, consumer.describe()
        return seen(consumer.of("received"))

    got = on_both(proxies, scenario)
    assert [r[0] for r in got["rocketmq"]] == [1, 1, 1, 2], got["rocketmq"]
    firsts = {side: [r for r in rows if r[0] == 1] for side, rows in got.items()}
    assert firsts["sievemq"] == firsts["rocketmq"]
    # which message came first (and so was held and came back) depends on which queue each side polled first
    for side, rows in got.items():
        again = [r for r in rows if r[0] == 2]
        assert len(again) == 1 and (1, *again[0][1:]) in firsts[side], (side, rows)


def test_a_push_consumers_failed_message_comes_back(proxies: dict[str, tuple[str, str]]) -> None:
    def scenario(namesrv: str, grpc: str) -> list[tuple[Any, ...]]:
        topic = unique_name("CmpPush")
        create_topic(namesrv, topic)
        consumer = start_driver("rmq5", ["push-consume", "--endpoints", grpc, "--topic", topic, "--group",
                                         unique_name("CmpP"), "--count", "2", "--fail-first", "1", "--tag-expr",
                                         "TagA", "--timeout", "150"])  # fmt: skip
        consumer.wait_for("ready", timeout=120)
        sent = run_driver("rmq5", ["produce", "--endpoints", grpc, "--topic", topic, "--count", "2", "--tag", "TagA"])
        assert sent.ok, sent.describe()
        assert consumer.wait(timeout=200) == 0, consumer.describe()
        return seen(consumer.of("received"))

    got = on_both(proxies, scenario)
    # which message the listener fails first depends on the order of delivery: compare the attempts, and the rest
    attempts = {side: sorted(r[0] for r in rows) for side, rows in got.items()}
    assert attempts["rocketmq"] == [1, 1, 2], got["rocketmq"]
    assert attempts["sievemq"] == attempts["rocketmq"], got
    assert {r[1:] for r in got["sievemq"]} == {r[1:] for r in got["rocketmq"]}, got


def test_which_invisible_durations_a_proxy_takes(proxies: dict[str, tuple[str, str]]) -> None:
    """A receive asking for 5 s of invisibility: RocketMQ's proxy refuses it (ILLEGAL_INVISIBLE_TIME, its minimum is
    10 s) and so does sievemq's."""

    def scenario(namesrv: str, grpc: str) -> list[str]:
        topic = unique_name("CmpInv")
        create_topic(namesrv, topic)
        group = unique_name("CmpI")
        consumer = run_driver("rmq5", ["simple-consume", "--endpoints", grpc, "--topic", topic, "--group", group,
                                       "--count", "1", "--invisible", "5", "--timeout", "8"])  # fmt: skip
        return sorted({e["error"].split(",")[0] for e in consumer.of("error") if "invisible" in e["error"].lower()})

    got = on_both(proxies, scenario)
    assert got["rocketmq"] == ["BadRequestException: 40011"], got
    assert got["sievemq"] == got["rocketmq"]


def test_a_changed_invisible_duration_brings_the_message_back(proxies: dict[str, tuple[str, str]]) -> None:
    """The first delivery's invisible duration is changed to 2 s instead of an ack (changeInvisibleDuration, the
    receipt handle renewed): it comes back, attempt 2, on both, with what it carried."""

    def scenario(namesrv: str, grpc: str) -> dict[str, Any]:
        topic = unique_name("CmpChg")
        create_topic(namesrv, topic, queues=1)  # one queue: the first delivered is the first sent, on both
        consumer = start_driver("rmq5", ["simple-consume", "--endpoints", grpc, "--topic", topic, "--group",
                                         unique_name("CmpC"), "--count", "2", "--hold-first", "1", "--change", "2",
                                         "--invisible", INVISIBLE_S, "--timeout", "120"])  # fmt: skip
        consumer.wait_for("ready", timeout=120)
        sent = run_driver("rmq5", ["produce", "--endpoints", grpc, "--topic", topic, "--count", "2", "--tag", "TagA",
                                   "--key-prefix", "c"])  # fmt: skip
        assert sent.ok, sent.describe()
        assert consumer.wait(timeout=180) == 0, consumer.describe()
        # (errors a receive got are not compared: RocketMQ's proxy answers the first receives of a new client with
        # INTERNAL_ERROR until its settings arrived, and 40018 when a long poll's deadline is near; the client retries)
        return {"received": seen(consumer.of("received")), "changed": len(consumer.of("changed"))}

    got = on_both(proxies, scenario)
    assert [r[0] for r in got["rocketmq"]["received"]] == [1, 1, 2], got["rocketmq"]
    assert got["sievemq"] == got["rocketmq"]
