"""A 4.x group and a 5.x group on one topic do not disturb each other (docs/pop.md §4: each group has its own
offsets, POP state is per group), with real clients at the same time: sievemq's 4.x PushConsumer (pull, committed
offsets) and the 5.x Python client's SimpleConsumer (rocketmq-python-client 5.1.2, POP through ``sievemq proxy``).

Each consumes every message exactly once per group while the other runs. The 4.x group's committed offsets end
at the queues' ends; the 5.x group's committed offset of a queue is its floor (docs/pop.md §1), held back by the
messages it leased and did not ack, whatever the 4.x group commits; the 5.x group's acks leave the 4.x group's
offsets where they were, and the 4.x group then resumes from them: exactly the messages sent since.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from sievemq import PushConsumer
from sievemq.protocol.message import MessageExt
from tests.integration.helpers import eventually
from tests.interop.clients import DriverProcess, run_driver, start_driver, unique_name
from tests.interop.conftest import dev_and_proxy
from tests.interop.test_against_sievemq import create_topic, ns
from tests.interop.test_proxy_py_crash import offsets, position
from tests.support.procs import Proc

pytestmark = pytest.mark.interop

QUEUES = 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[tuple[Proc, Proc]]:
    with dev_and_proxy(tmp_path_factory.mktemp("interop-proxy-py-groups")) as procs:
        yield procs


async def _push_4x(dev: Proc, group: str, topic: str, got: list[MessageExt]) -> PushConsumer:
    consumer = PushConsumer(ns(dev), group, consume_from="first", persist_interval=0.2, rebalance_interval=1.0)
    consumer.subscribe(topic, "*")

    @consumer.listener
    async def on(msgs: list[MessageExt]) -> None:
        got.extend(msgs)

    await consumer.start()
    return consumer


async def _simple_5x(proxy: Proc, topic: str, group: str, count: int, *extra: str) -> DriverProcess:
    c = start_driver("rmq5", ["simple-consume", "--endpoints", proxy.addr, "--topic", topic, "--group", group,
                              "--count", str(count), *extra])  # fmt: skip
    await asyncio.to_thread(c.wait_for, "ready", timeout=90)
    return c


async def _produce_5x(proxy: Proc, topic: str, count: int, prefix: str) -> None:
    res = await asyncio.to_thread(
        run_driver,
        "rmq5",
        ["produce", "--endpoints", proxy.addr, "--topic", topic, "--count", str(count), "--key-prefix", prefix],
        timeout=120,
    )
    assert res.returncode == 0 and len(res.of("sent")) == count, res.describe()


def _keys(msgs: list[MessageExt]) -> list[str]:
    return sorted(k for m in msgs for k in m.keys)


async def test_a_4x_and_a_5x_group_of_one_topic_each_get_everything_once_and_keep_their_own_offsets(
    cluster: tuple[Proc, Proc],
) -> None:
    dev, proxy = cluster
    topic, g4, g5 = unique_name("PxMix"), unique_name("G4"), unique_name("G5")
    create_topic(dev, topic, queues=QUEUES)

    # 1. Both at once: the 5.x group holds its first 2 deliveries (60 s, longer than the test), acks the other 8.
    five = await _simple_5x(proxy, topic, g5, 8, "--hold-first", "2", "--invisible", "60", "--timeout", "60")
    got4: list[MessageExt] = []
    four = await _push_4x(dev, g4, topic, got4)
    try:
        await _produce_5x(proxy, topic, 10, "a")
        assert await asyncio.to_thread(five.wait, 90) == 0, five.describe()
        await eventually(lambda: len(got4) >= 10, timeout=60, what="the 4.x group got all ten")
    finally:
        await four.close()
    a = [f"a{i}" for i in range(10)]
    assert _keys(got4) == a, f"the 4.x group got each once: {_keys(got4)}"
    received5 = five.of("received")
    assert sorted(e["keys"][0] for e in received5) == a, f"the 5.x group got each once: {five.describe()}"
    acked = {e["message_id"] for e in five.of("acked")}
    held = [position(e) for e in received5 if e["message_id"] not in acked]
    assert len(held) == 2, five.describe()

    def floor(ends: list[int]) -> list[int]:
        return [min([o for q2, o in held if q2 == q] or [ends[q]]) for q in range(QUEUES)]

    committed4, ends = await asyncio.to_thread(offsets, dev, g4, topic, QUEUES)
    assert sum(ends) == 10 and committed4 == ends, (committed4, ends)
    committed5, _ = await asyncio.to_thread(offsets, dev, g5, topic, QUEUES)
    assert committed5 == floor(ends) != ends, f"the 5.x group's floor, not the 4.x group's offsets: {committed5}"

    # 2. The 5.x group alone acks 6 more (its 2 held ones stay invisible): the 4.x group's offsets stay put.
    five = await _simple_5x(proxy, topic, g5, 6, "--invisible", "30", "--timeout", "60")
    await _produce_5x(proxy, topic, 6, "b")
    assert await asyncio.to_thread(five.wait, 90) == 0, five.describe()
    b = [f"b{i}" for i in range(6)]
    assert sorted(e["keys"][0] for e in five.of("received")) == b, five.describe()
    after4, ends2 = await asyncio.to_thread(offsets, dev, g4, topic, QUEUES)
    assert sum(ends2) == 16 and after4 == committed4, f"5.x acks moved the 4.x group's offsets: {after4}"
    committed5, _ = await asyncio.to_thread(offsets, dev, g5, topic, QUEUES)
    assert committed5 == floor(ends2), committed5

    # 3. The 4.x group again, from its committed offsets: exactly the 6 sent since; the 5.x floor stays.
    got4 = []
    four = await _push_4x(dev, g4, topic, got4)
    try:
        await eventually(lambda: len(got4) >= 6, timeout=60, what="the 4.x group got the six new ones")
    finally:
        await four.close()
    assert _keys(got4) == b, f"the 4.x group resumed where it was: {_keys(got4)}"
    final4, _ = await asyncio.to_thread(offsets, dev, g4, topic, QUEUES)
    final5, _ = await asyncio.to_thread(offsets, dev, g5, topic, QUEUES)
    assert (final4, final5) == (ends2, floor(ends2)), (final4, final5, ends2)
