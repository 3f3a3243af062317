"""The real RocketMQ 4.x clients against real sievemq processes (issue: core).

rocketmq-client-python 0.5.0rc2 and rocketmq 0.4.4 (the official C++ core) and ali-ons 3.12.0 (pure JS) produce
and consume through ``sievemq dev``; every test asserts on what the clients themselves report.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sievemq.admin.api import AdminClient
from sievemq.client import api
from sievemq.remoting.codes import RequestCode
from sievemq.remoting.connection import connect
from tests.interop.clients import run_driver, start_driver, unique_name
from tests.support.procs import Proc, dev_proc
from tests.support.quiet import quiet_period

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[Proc]:
    p = dev_proc(tmp_path_factory.mktemp("interop-dev")).start()
    try:
        yield p
    finally:
        code = p.stop()
        assert code == 0, p.log()


def ns(p: Proc) -> str:
    return str(p.extra["namesrv"])


def create_topic(p: Proc, topic: str, queues: int = 4) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "sievemq.cli", "topic", "create", topic, "-n", ns(p), "-q", str(queues)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def total_messages(p: Proc, topic: str, queues: int = 4) -> int:
    async def go() -> int:
        conn = await connect("127.0.0.1", p.port)
        try:
            return sum([await api.queue_offset(conn, RequestCode.GET_MAX_OFFSET, topic, q) for q in range(queues)])
        finally:
            conn.close()

    return asyncio.run(go())


def produce(kind: str, p: Proc, topic: str, count: int, tags: str, key_prefix: str, *extra: str) -> list[dict]:
    res = run_driver(
        kind,
        [
            "produce",
            "--namesrv",
            ns(p),
            "--topic",
            topic,
            "--group",
            unique_name("P"),
            "--count",
            str(count),
            "--tags",
            tags,
            "--key-prefix",
            key_prefix,
            *extra,
        ],
    )
    assert res.returncode == 0, res.describe()
    sent = res.of("sent")
    assert len(sent) == count or (extra and "produce-batch" in extra), res.describe()
    return sent


def consume_args(
    p: Proc, topic: str, group: str, expr: str, expect: int, linger: float = 3.0, kind: str = "rmqcp"
) -> list[str]:
    """Consumer driver arguments (the C++ drivers report only the properties named by --show-prop)."""
    shown = [] if kind == "ons" else [a for k in ("region", "n", "color", "origin") for a in ("--show-prop", k)]
    return [
        "consume",
        "--namesrv",
        ns(p),
        "--topic",
        topic,
        "--group",
        group,
        "--expr",
        expr,
        "--expect",
        str(expect),
        "--timeout",
        "90",
        "--from",
        "first",
        "--linger",
        str(linger),
        *shown,
    ]


def received_keys(events: list[dict]) -> Counter[str]:
    return Counter(str(e["keys"]) for e in events if e.get("event") == "received")


def wait_until(probe: Callable[[], bool], timeout: float, what: Callable[[], str]) -> None:
    """Poll ``probe`` until it is true; AssertionError with ``what()`` (the state last seen) after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not probe():
        assert time.monotonic() < deadline, f"not reached within {timeout}s: {what()}"
        time.sleep(0.1)


def queue_holders(p: Proc, group: str, topic: str) -> dict[str, list[int]]:
    """The group's clients and the queues of ``topic`` each pulled last (as the broker saw them)."""

    async def go() -> dict[str, list[int]]:
        async with AdminClient(ns(p)) as admin:
            statuses = await admin.group_status(group)
        return {c["clientId"]: [q for t, q in c["queues"] if t == topic] for st in statuses for c in st["clients"]}

    return asyncio.run(go())


def wait_queues_shared(p: Proc, group: str, topic: str, clients: int, queues: int = 4, timeout: float = 90.0) -> None:
    """Until ``clients`` clients of the group pull ``topic``, each some of its queues and together all of them (their
    rebalance handed the queues out)."""

    def shared(holders: dict[str, list[int]]) -> bool:
        taken = [qs for qs in holders.values() if qs]
        return len(taken) == clients and set().union(*taken) == set(range(queues))

    wait_until(lambda: shared(queue_holders(p, group, topic)), timeout,
               lambda: f"queues of {topic} by client: {queue_holders(p, group, topic)}")  # fmt: skip


def committed_on_disk(offsets_file: Path, topic: str, group: str) -> int:
    """The sum of the group's offsets of ``topic`` in a broker's ``consumerOffset.json`` (0 before it exists)."""
    try:
        table = json.loads(offsets_file.read_text())["offsetTable"]
    except FileNotFoundError:
        return 0
    return sum(table.get(f"{topic}@{group}", {}).values())


def test_rocketmq_client_python_tags_keys_properties(dev: Proc) -> None:
    topic, group = unique_name("T"), unique_name("G")
    sent = produce("rmqcp", dev, topic, 12, "TagA,TagB,TagC", "k", "--prop", "region=eu", "--prop", "n={i}")
    assert all(s["status"] == "SEND_OK" for s in sent)
    want = {f"k{i}" for i in range(12) if i % 3 != 2}
    res = run_driver("rmqcp", consume_args(dev, topic, group, "TagA || TagB", len(want)), timeout=150)
    assert res.returncode == 0, res.describe()
    got = res.of("received")
    counts = received_keys(got)
    assert set(counts) == want, res.describe()
    assert all(n == 1 for n in counts.values()), f"duplicates: {counts}"
    for e in got:
        i = int(e["keys"][1:])
        assert e["tags"] == ["TagA", "TagB", "TagC"][i % 3]
        assert e["props"]["region"] == "eu" and e["props"]["n"] == str(i)
        assert e["body"] == f"body-{i}"


def test_ali_ons_produce_and_consume_with_tag_expression(dev: Proc) -> None:
    topic, group = unique_name("T"), unique_name("G")
    create_topic(dev, topic)
    produce("ons", dev, topic, 9, "TagA,TagB,TagC", "o", "--prop", "color=red")
    want = {f"o{i}" for i in range(9) if i % 3 != 2}
    res = run_driver("ons", consume_args(dev, topic, group, "TagA || TagB", len(want), kind="ons"), timeout=150)
    assert res.returncode == 0, res.describe()
    counts = received_keys(res.of("received"))
    assert set(counts) == want, res.describe()
    assert all(n == 1 for n in counts.values()), f"duplicates: {counts}"
    assert all(e["props"]["color"] == "red" for e in res.of("received"))


def test_rocketmq_044_send_batch_stores_every_message(dev: Proc) -> None:
    topic, group = unique_name("T"), unique_name("G")
    res = run_driver(
        "rmq044",
        [
            "produce-batch",
            "--namesrv",
            ns(dev),
            "--topic",
            topic,
            "--group",
            unique_name("P"),
            "--count",
            "10",
            "--batch-size",
            "5",
            "--tags",
            "TagA,TagB",
            "--key-prefix",
            "b",
        ],
    )
    assert res.returncode == 0, res.describe()
    assert total_messages(dev, topic) == 10
    cons = run_driver("rmqcp", consume_args(dev, topic, group, "*", 10), timeout=150)
    assert cons.returncode == 0, cons.describe()
    got = cons.of("received")
    assert set(received_keys(got)) == {f"b{i}" for i in range(10)}
    assert {e["keys"]: e["tags"] for e in got} == {f"b{i}": ("TagA", "TagB")[i % 2] for i in range(10)}


def test_rocketmq_044_compressed_batch_is_inflated_and_stored(dev: Proc) -> None:
    """A batch body over 4 KiB is zlib-compressed by the C++ core (COMPRESSED_FLAG on the batch): sievemq inflates it
    and stores every message uncompressed (RocketMQ's own broker refuses such a batch)."""
    topic, group = unique_name("T"), unique_name("G")
    res = run_driver(
        "rmq044",
        ["produce-batch", "--namesrv", ns(dev), "--topic", topic, "--group", unique_name("P"), "--count", "8",
         "--batch-size", "8", "--body-size", "3000", "--tags", "TagZ", "--key-prefix", "z"],
    )  # fmt: skip
    assert res.returncode == 0, res.describe()
    assert total_messages(dev, topic) == 8
    cons = run_driver("rmqcp", consume_args(dev, topic, group, "*", 8), timeout=150)
    assert cons.returncode == 0, cons.describe()
    got = cons.of("received")
    assert set(received_keys(got)) == {f"z{i}" for i in range(8)}
    assert {e["body_len"] for e in got} == {3000} and {e["tags"] for e in got} == {"TagZ"}


@pytest.mark.parametrize(("producer", "consumer"), [("rmqcp", "ons"), ("ons", "rmqcp")])
def test_cross_client(dev: Proc, producer: str, consumer: str) -> None:
    topic, group = unique_name("T"), unique_name("G")
    create_topic(dev, topic)
    produce(producer, dev, topic, 6, "TagA,TagB", "x", "--prop", "origin=" + producer)
    res = run_driver(consumer, consume_args(dev, topic, group, "TagA", 3, kind=consumer), timeout=150)
    assert res.returncode == 0, res.describe()
    got = res.of("received")
    assert set(received_keys(got)) == {"x0", "x2", "x4"}, res.describe()
    assert all(e["tags"] == "TagA" and e["props"]["origin"] == producer for e in got)
    assert {e["body"] for e in got} == {"body-0", "body-2", "body-4"}


def test_rebalance_three_consumers_delivers_every_message(dev: Proc) -> None:
    topic, group = unique_name("T"), unique_name("G")
    create_topic(dev, topic, queues=4)
    n = 60
    consumers = [start_driver("rmqcp", consume_args(dev, topic, group, "*", 10**6, linger=0)) for _ in range(3)]
    try:
        for c in consumers:
            c.wait_for("started", timeout=60)
        wait_queues_shared(dev, group, topic, clients=3)
        produce("rmqcp", dev, topic, n, "TagA", "r")
        deadline = time.monotonic() + 90
        union: set[str] = set()
        while time.monotonic() < deadline:
            union = set().union(*(received_keys(c.events) for c in consumers))
            if len(union) >= n:
                break
            time.sleep(0.5)
    finally:
        for c in consumers:
            c.stop()
    per_consumer = [received_keys(c.events) for c in consumers]
    union = set().union(*per_consumer)
    assert union == {f"r{i}" for i in range(n)}, [c.describe() for c in consumers]
    assert sum(1 for pc in per_consumer if pc) == 3, f"queues were not shared out: {[len(pc) for pc in per_consumer]}"


def test_consumers_resume_from_committed_offsets_after_kill9(tmp_path: Path, interop_clients: Path) -> None:
    p = dev_proc(tmp_path, "--flush", "sync").start()
    topic, group = unique_name("T"), unique_name("G")
    try:
        produce("rmqcp", p, topic, 20, "TagA", "a")
        first = run_driver("rmqcp", consume_args(p, topic, group, "*", 20, linger=1), timeout=150)
        assert first.returncode == 0, first.describe()
        assert set(received_keys(first.of("received"))) == {f"a{i}" for i in range(20)}
        # the offsets it committed (the last ones oneway, at its shutdown) are on disk before the kill
        offsets_file = tmp_path / "dev-data" / "config" / "consumerOffset.json"
        wait_until(lambda: committed_on_disk(offsets_file, topic, group) == 20, 30.0,
                   lambda: f"offsets on disk {committed_on_disk(offsets_file, topic, group)} of 20")  # fmt: skip
        p.kill9()
        p.start()
        assert total_messages(p, topic) == 20  # every acknowledged message survived
        produce("rmqcp", p, topic, 10, "TagA", "b")
        second = run_driver("rmqcp", consume_args(p, topic, group, "*", 10, linger=3), timeout=150)
        assert second.returncode == 0, second.describe()
        assert set(received_keys(second.of("received"))) == {f"b{i}" for i in range(10)}, second.describe()
    finally:
        p.stop()


def test_ali_ons_sql92_subscription_receives_exactly_the_matching_messages(dev: Proc) -> None:
    """ali-ons does not re-check SQL on the client, so this proves the broker's filter."""
    topic, group = unique_name("T"), unique_name("G")
    create_topic(dev, topic)
    produce("ons", dev, topic, 12, "TagA,TagB", "s", "--prop", "amount={i}0", "--prop", "region=eu")
    produce("ons", dev, topic, 4, "TagA", "u", "--prop", "amount=500", "--prop", "region=us")
    want = {f"s{i}" for i in range(12) if i * 10 > 50}
    args = consume_args(dev, topic, group, "*", len(want), kind="ons")
    i = args.index("--expr")
    args[i : i + 2] = ["--sql", "region = 'eu' AND amount > 50"]
    res = run_driver("ons", args, timeout=150)
    assert res.returncode == 0, res.describe()
    counts = received_keys(res.of("received"))
    assert set(counts) == want, res.describe()
    assert all(n == 1 for n in counts.values())


@pytest.mark.parametrize("kind", ["rmqcp", "ons"])
def test_sievemq_client_consumes_what_real_clients_produce(dev: Proc, kind: str) -> None:
    from sievemq import PushConsumer

    topic, group = unique_name("T"), unique_name("G")
    create_topic(dev, topic)
    produce(kind, dev, topic, 6, "TagA,TagB", "c", "--prop", "origin=" + kind)

    async def consume() -> list[Any]:
        got: list[Any] = []
        c = PushConsumer(ns(dev), group, consume_from="first", rebalance_interval=1.0)
        c.subscribe(topic, "TagA")
        c.listener(lambda msgs: got.extend(msgs))
        await c.start()
        try:
            deadline = time.monotonic() + 30
            while len({m.keys[0] for m in got}) < 3 and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            await quiet_period(1.0, "no TagB message and no redelivery", unchanged=lambda: len(got))
        finally:
            await c.close()
        return got

    got = asyncio.run(consume())
    assert sorted({m.keys[0] for m in got}) == ["c0", "c2", "c4"]
    assert all(m.tags == "TagA" and m.properties["origin"] == kind for m in got)
    assert {m.body for m in got} == {b"body-0", b"body-2", b"body-4"}


@pytest.mark.parametrize("kind", ["rmqcp", "ons"])
def test_real_clients_consume_what_sievemq_client_produces(dev: Proc, kind: str) -> None:
    from sievemq import Message, Producer

    topic, group = unique_name("T"), unique_name("G")
    create_topic(dev, topic)

    async def send() -> None:
        async with Producer(ns(dev), unique_name("P")) as p:
            for i in range(6):
                msg = Message(
                    topic,
                    f"body-{i}".encode(),
                    tags=("TagA", "TagB")[i % 2],
                    keys=[f"s{i}"],
                    properties={"origin": "sievemq"},
                )
                await p.send(msg)

    asyncio.run(send())
    res = run_driver(kind, consume_args(dev, topic, group, "TagA", 3, kind=kind), timeout=150)
    assert res.returncode == 0, res.describe()
    got = res.of("received")
    assert set(received_keys(got)) == {"s0", "s2", "s4"}, res.describe()
    assert all(e["tags"] == "TagA" and e["props"]["origin"] == "sievemq" for e in got)
    assert {e["body"] for e in got} == {"body-0", "body-2", "body-4"}
