"""``sievemq group reset-offset`` with real RocketMQ clients running: the C++ core (rocketmq-client-python) and
ali-ons as 4.x push consumers, and a 5.x PushConsumer (rocketmq-python-client) through the proxy on POP; each
receives the messages of before the reset again (docs/admin.md §4)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from sievemq import Message, Producer
from sievemq.admin.api import AdminClient
from sievemq.admin.progress import group_progress
from sievemq.client import api
from sievemq.remoting.connection import connect
from tests.interop.clients import DriverProcess, start_driver, unique_name
from tests.interop.conftest import dev_and_proxy
from tests.interop.test_against_sievemq import consume_args, create_topic, ns, produce, received_keys
from tests.support.procs import Proc
from tests.support.quiet import quiet_period_blocking

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[tuple[Proc, Proc]]:
    with dev_and_proxy(tmp_path_factory.mktemp("interop-admin-reset")) as procs:
        yield procs


def _reset(dev: Proc, group: str, topic: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "sievemq.cli", "group", "reset-offset", group, "--topic", topic, "--to", "earliest",
         "-n", ns(dev)], capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def _lag(dev: Proc, group: str, topic: str) -> int:
    async def go() -> int:
        async with AdminClient(ns(dev)) as admin:
            return (await group_progress(admin, group, topic)).lag

    return asyncio.run(go())


def _started(dev: Proc, group: str, topic: str, queues: int) -> bool:
    """Whether the broker holds a start offset of ``group`` for every queue of ``topic``."""

    async def go() -> bool:
        conn = await connect("127.0.0.1", dev.port)
        try:
            return all([await api.query_offset(conn, group, topic, q, zero_if_not_found=False) >= 0
                        for q in range(queues)])  # fmt: skip
        finally:
            conn.close()

    return asyncio.run(go())


def _wait(what: str, probe: object, c: DriverProcess, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe():  # type: ignore[operator]
            return
        time.sleep(0.3)
    raise AssertionError(f"{what} not reached: {c.describe()}")


@pytest.mark.parametrize("kind", ["rmqcp", "ons"])
def test_a_running_4x_consumer_consumes_again_after_a_reset(cluster: tuple[Proc, Proc], kind: str) -> None:
    dev, _ = cluster
    topic, group, n = unique_name("Rs"), unique_name("G"), 6
    create_topic(dev, topic, queues=2)
    produce("rmqcp", dev, topic, n, "TagA", "r")
    c = start_driver(kind, consume_args(dev, topic, group, "*", 10**6, linger=0, kind=kind))
    try:
        c.wait_for("started", timeout=60)
        _wait("every message received", lambda: len(received_keys(c.events)) == n, c)
        _wait("offsets committed", lambda: _lag(dev, group, topic) == 0, c)
        out = _reset(dev, group, topic)
        assert "told 1 online consumer(s)" in out, out
        _wait("every message received again", lambda: set(received_keys(c.events).values()) == {2}, c)
        quiet_period_blocking(2.0, "no third delivery", unchanged=lambda: received_keys(c.events))
    finally:
        c.stop()
    assert received_keys(c.events) == Counter({f"r{i}": 2 for i in range(n)}), c.describe()


def test_a_running_5x_push_consumer_consumes_again_after_a_reset(cluster: tuple[Proc, Proc]) -> None:
    dev, proxy = cluster
    topic, group, n = unique_name("Rs5"), unique_name("G5"), 4
    create_topic(dev, topic, queues=2)
    c = start_driver("rmq5", ["push-consume", "--endpoints", proxy.addr, "--topic", topic, "--group", group,
                              "--count", str(2 * n), "--timeout", "90"])  # fmt: skip
    try:
        c.wait_for("ready", timeout=90)
        # the group's first heartbeat (through the proxy) sets where it starts: the messages sent next are its own
        _wait("the group's start on the topic", lambda: _started(dev, group, topic, queues=2), c)

        async def send() -> None:
            async with Producer(ns(dev), unique_name("P")) as p:
                for i in range(n):
                    await p.send(Message(topic, f"m{i}".encode(), keys=[f"k{i}"]))

        asyncio.run(send())
        _wait("every message acked", lambda: len(c.of("acked")) >= n, c)
        _wait("offsets committed", lambda: _lag(dev, group, topic) == 0, c)
        _reset(dev, group, topic)
        assert c.wait(timeout=90) == 0, c.describe()
    finally:
        c.stop()
    bodies = Counter(e["body"] for e in c.of("received"))
    assert bodies == Counter({f"m{i}": 2 for i in range(n)}), c.describe()
