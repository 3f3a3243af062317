"""The RocketMQ 5.x Python client (rocketmq-python-client 5.1.2, gRPC) through ``sievemq proxy``: its producer
starts (routes, settings handshake) and sends; 4.x consumers (sievemq's and the C++ core) read the messages with
tag, keys, user properties and message id intact."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sievemq.client import api
from sievemq.protocol.message import MessageExt
from sievemq.remoting.connection import connect
from tests.interop.clients import run_driver, unique_name
from tests.interop.conftest import dev_and_proxy
from tests.interop.test_against_sievemq import consume_args, create_topic, received_keys
from tests.support.procs import Proc

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[tuple[Proc, Proc]]:
    with dev_and_proxy(tmp_path_factory.mktemp("interop-proxy")) as procs:
        yield procs


def _read_all(port: int, topic: str, queues: int) -> list[MessageExt]:
    async def go() -> list[MessageExt]:
        conn = await connect("127.0.0.1", port)
        try:
            out: list[MessageExt] = []
            for q in range(queues):
                r = await api.pull_message(conn, unique_name("Rd"), topic, q, 0, max_nums=64, subscription="*")
                out.extend(r.messages)
            return out
        finally:
            conn.close()

    return asyncio.run(go())


def test_5x_producer_sends_through_the_proxy_and_4x_consumers_read_it(cluster: tuple[Proc, Proc]) -> None:
    dev, proxy = cluster
    topic = unique_name("PxT")
    create_topic(dev, topic, queues=2)
    res = run_driver("rmq5", ["produce", "--endpoints", proxy.addr, "--topic", topic, "--count", "6", "--tag", "TagA",
                              "--key-prefix", "k", "--prop", "color=red", "--prop", "n={i}"], timeout=120)  # fmt: skip
    assert res.returncode == 0, res.describe()
    sent = {e["i"]: e["message_id"] for e in res.of("sent")}
    assert len(sent) == 6, res.describe()
    got = _read_all(dev.port, topic, 2)
    assert sorted(m.body for m in got) == sorted(f"body-{i}".encode() for i in range(6))
    for m in got:
        i = int(m.body.decode().split("-")[1])
        assert (m.tags, m.keys, m.uniq_key) == ("TagA", [f"k{i}"], sent[i]), m
        assert m.properties.get("color") == "red" and m.properties.get("n") == str(i), m.properties
    # The C++ core consumes them with a tag expression, as any 4.x message; ali-ons (Node.js) too.
    c = run_driver("rmqcp", consume_args(dev, topic, unique_name("PxC"), "TagA", 6), timeout=150)
    assert c.returncode == 0, c.describe()
    _assert_4x_received(c.of("received"), sent, c.describe())
    o = run_driver("ons", consume_args(dev, topic, unique_name("PxO"), "TagA", 6, kind="ons"), timeout=150)
    assert o.returncode == 0, o.describe()
    _assert_4x_received(o.of("received"), sent, o.describe())


def _assert_4x_received(got: list[dict[str, Any]], sent: dict[int, str], why: str) -> None:
    """Each of the 5.x producer's six messages once, as a 4.x consumer driver prints it (``tags``, ``keys``, ``props``:
    the C++ driver the properties ``consume_args`` names with --show-prop and the standard ones, ali-ons all)."""
    assert received_keys(got) == Counter(f"k{i}" for i in range(6)), why
    for e in got:
        i = int(e["body"].split("-")[1])
        assert (e["tags"], e["keys"]) == ("TagA", f"k{i}"), e
        assert (e["props"].get("color"), e["props"].get("n")) == ("red", str(i)), e
        assert e["props"].get("UNIQ_KEY") == sent[i], f"the 5.x message id is the 4.x unique key: {e}"


def test_a_topic_that_does_not_exist_is_a_clear_failure(cluster: tuple[Proc, Proc]) -> None:
    _dev, proxy = cluster
    res = run_driver("rmq5", ["produce", "--endpoints", proxy.addr, "--topic", unique_name("NoSuchT"), "--count",
                              "1"], timeout=120)  # fmt: skip
    assert res.returncode == 1, res.describe()
    assert not res.of("sent"), res.describe()
    assert any("route" in e.get("error", "") for e in res.of("error")), res.describe()


def test_sievemq_dev_serves_5x_clients_on_its_grpc_port(cluster: tuple[Proc, Proc]) -> None:
    dev, _proxy = cluster
    topic = unique_name("DevPxT")
    create_topic(dev, topic, queues=1)
    res = run_driver("rmq5", ["produce", "--endpoints", str(dev.extra["grpc"]), "--topic", topic, "--count", "2"],
                     timeout=120)  # fmt: skip
    assert res.returncode == 0, res.describe()
    assert sorted(m.body for m in _read_all(dev.port, topic, 1)) == [b"body-0", b"body-1"]
    assert f"gRPC proxy   {dev.extra['grpc']}" in dev.log(), "the dev banner does not show the gRPC endpoint"
