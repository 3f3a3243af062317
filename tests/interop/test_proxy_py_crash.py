"""``kill -9`` under the real 5.x Python client (rocketmq-python-client 5.1.2) through ``sievemq proxy``.

The broker: a SimpleConsumer receives messages with an invisible time longer than it runs, acks some, and the
``sievemq dev`` process holding the store (name server and broker; the proxy is a separate ``sievemq proxy``, see
``tests/interop/conftest.py``) is killed with SIGKILL and started again on the same data. The POP state is durable
(docs/pop.md §3): the un-acked messages come back to a new SimpleConsumer of the group after their invisible time,
with attempt 2; messages stored but not handed out yet come as new; the acked ones never.

The proxy: it keeps no state a receipt handle needs (a handle names the broker's lease, docs/pop.md §2,
docs/proxy.md §5), so after the proxy alone is killed and restarted, the handles a consumer received before still
ack, and those messages never come back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from sievemq.client import api
from sievemq.remoting.codes import RequestCode
from sievemq.remoting.connection import connect
from tests.interop.clients import DriverProcess, run_driver, start_driver, unique_name
from tests.interop.conftest import dev_and_proxy
from tests.interop.test_against_sievemq import create_topic
from tests.support.procs import Proc

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[tuple[Proc, Proc]]:
    with dev_and_proxy(tmp_path_factory.mktemp("interop-proxy-py-crash")) as procs:
        yield procs


def offsets(broker: Proc, group: str, topic: str, queues: int) -> tuple[list[int], list[int]]:
    """The group's committed offset of each queue (-1: none) and each queue's max offset, from the broker. A POP
    group's committed offset is its floor: its lowest leased offset, else its cursor (docs/pop.md §1)."""

    async def go() -> tuple[list[int], list[int]]:
        conn = await connect("127.0.0.1", broker.port)
        try:
            committed = [await api.query_offset(conn, group, topic, q) for q in range(queues)]
            ends = [await api.queue_offset(conn, RequestCode.GET_MAX_OFFSET, topic, q) for q in range(queues)]
            return committed, ends
        finally:
            conn.close()

    return asyncio.run(go())


def position(e: dict[str, object]) -> tuple[int, int]:
    """(queue id, queue offset) of a received message, from its receipt handle (docs/pop.md §2)."""
    _version, _broker, _topic, queue_id, offset, _token = str(e["handle"]).split(" ")
    return int(queue_id), int(offset)


def consumer(proxy: Proc, topic: str, group: str, count: int, *extra: str) -> DriverProcess:
    c = start_driver("rmq5", ["simple-consume", "--endpoints", proxy.addr, "--topic", topic, "--group", group,
                              "--count", str(count), *extra])  # fmt: skip
    c.wait_for("ready", timeout=90)
    return c


def produce(proxy: Proc, topic: str, count: int, prefix: str) -> None:
    res = run_driver("rmq5", ["produce", "--endpoints", proxy.addr, "--topic", topic, "--count", str(count),
                              "--key-prefix", prefix], timeout=120)  # fmt: skip
    assert res.returncode == 0 and len(res.of("sent")) == count, res.describe()


def test_after_the_broker_is_killed_the_unacked_come_back_and_the_acked_never(cluster: tuple[Proc, Proc]) -> None:
    dev, proxy = cluster
    topic, group = unique_name("PxK9"), unique_name("G5")
    create_topic(dev, topic, queues=2)
    # Holds the first 3 deliveries for 10 s (longer than it runs: it acks the other 3 and exits), acks the rest.
    first = consumer(proxy, topic, group, 3, "--hold-first", "3", "--invisible", "10", "--timeout", "40")
    produce(proxy, topic, 6, "a")
    assert first.wait(timeout=60) == 0, first.describe()
    received = {e["keys"][0]: e for e in first.of("received")}
    acked = {e["body"] for e in first.of("acked")}
    held = {k for k, e in received.items() if e["body"] not in acked}
    assert len(received) == 6 and len(first.of("received")) == 6 and len(held) == 3, first.describe()
    produce(proxy, topic, 2, "b")  # stored, not handed out yet

    dev.kill9()
    dev.start()  # the same ports and data directory

    second = consumer(proxy, topic, group, 5, "--invisible", "30", "--timeout", "40")
    assert second.wait(timeout=60) == 0, f"{second.describe()}\n{dev.log()[-3000:]}"
    again = {e["keys"][0]: e for e in second.of("received")}
    assert len(second.of("received")) == 5 and set(again) == held | {"b0", "b1"}, second.describe()
    assert all(again[k]["attempt"] == 2 for k in held), f"handed out before the kill: attempt 2 {second.describe()}"
    assert all(again[k]["attempt"] == 1 for k in ("b0", "b1")), second.describe()
    assert all(position(again[k]) == position(received[k]) for k in held), second.describe()
    # Nothing is leased or left: the acked ones are not waiting to come back.
    committed, ends = offsets(dev, group, topic, 2)
    assert committed == ends and sum(ends) == 8, (committed, ends)


def test_after_the_proxy_is_killed_handles_received_before_still_ack(
    cluster: tuple[Proc, Proc], tmp_path: Path
) -> None:
    dev, proxy = cluster
    topic, group = unique_name("PxP9"), unique_name("G5")
    create_topic(dev, topic, queues=2)
    go = tmp_path / "ack-now"
    c = consumer(proxy, topic, group, 4, "--invisible", "60", "--timeout", "60", "--defer-ack", str(go),
                 "--ack-retry", "10")  # fmt: skip
    produce(proxy, topic, 4, "a")
    c.wait_for("waiting", timeout=60)
    assert offsets(dev, group, topic, 2)[0] == [0, 0], "all four are leased"

    proxy.kill9()
    proxy.start()  # the same port
    go.touch()

    assert c.wait(timeout=60) == 0, f"{c.describe()}\n{proxy.log()[-3000:]}"
    assert sorted(e["keys"][0] for e in c.of("received")) == ["a0", "a1", "a2", "a3"], c.describe()
    assert sorted(e["body"] for e in c.of("acked")) == [f"body-{i}" for i in range(4)], c.describe()
    # Acked at the broker: nothing leased, so they never come back.
    committed, ends = offsets(dev, group, topic, 2)
    assert committed == ends and sum(ends) == 4, (committed, ends, c.describe())
