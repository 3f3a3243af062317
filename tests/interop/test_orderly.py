"""The C++ core's orderly PushConsumer (rocketmq-client-python 0.5.0rc2, ``orderly=True``) against ``sievemq dev``:
it consumes only queues the broker locked for it (LOCK_BATCH_MQ), and per sharding key in the order sent."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from sievemq import Message, Producer
from tests.interop.clients import run_driver, unique_name
from tests.interop.test_against_sievemq import consume_args, create_topic, ns
from tests.support.procs import Proc, dev_proc

pytestmark = pytest.mark.interop

KEYS, PER_KEY = 4, 15


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[Proc]:
    p = dev_proc(tmp_path_factory.mktemp("interop-orderly")).start()
    try:
        yield p
    finally:
        assert p.stop() == 0, p.log()


async def _produce(namesrv: str, topic: str) -> None:
    async with Producer(namesrv, unique_name("OrdP")) as p:
        for seq in range(PER_KEY):
            for k in range(KEYS):
                await p.send(Message(topic, f"k{k}:{seq}".encode(), keys=[f"k{k}-{seq}"]), shard_key=f"k{k}")


def test_cpp_core_orderly_consumer_gets_each_key_in_order(dev: Proc) -> None:
    topic = unique_name("OrdT")
    create_topic(dev, topic)
    asyncio.run(_produce(ns(dev), topic))
    args = [*consume_args(dev, topic, unique_name("OrdC"), "*", KEYS * PER_KEY, linger=2.0), "--orderly"]
    res = run_driver("rmqcp", args, timeout=150)
    assert res.returncode == 0, res.describe()
    seen: dict[str, list[int]] = {}
    for e in res.of("received"):
        key, seq = e["body"].split(":")
        seen.setdefault(key, []).append(int(seq))
    assert seen == {f"k{k}": list(range(PER_KEY)) for k in range(KEYS)}, res.describe()
