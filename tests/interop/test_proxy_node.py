"""The official Node.js 5.x client (rocketmq-client-nodejs 1.0.8, gRPC) through ``sievemq proxy`` (docs/proxy.md):
its Producer sends with tag, keys and user properties and sievemq's 4.x consumers read the messages back intact; its
SimpleConsumer, with a TAG or a SQL92 filter, gets exactly the matching messages of what sievemq's 4.x producer sent,
acks them, and nothing acked comes back; its PushConsumer consumes and gets a failed message again.

Each consumer is started, and has made one receive call, before anything is produced: where a new 5.x group starts
(the queues' ends or their beginnings) does not matter then.

The filter and ack tests use one-queue topics; a separate test covers a topic of several queues, because the Node
SimpleConsumer names only queue 0 of each broker in its ReceiveMessage requests (its SubscriptionLoadBalancer keeps
the route's queues whose *queue* id equals the master broker id, 0), so it gets the other queues' messages only from
a proxy that pops the whole broker for it, as RocketMQ's does.

More of the Node client: its delay, FIFO and transactional messages in test_proxy_node_produce.py; its
SimpleConsumer's changeInvisibleDuration, dead letters and subscription consistency in test_proxy_node_consume.py;
its Producer read by the C++ core and ali-ons in test_proxy_cross.py; docs/clients.md's example in
test_readme_node.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sievemq import Message, Producer, PushConsumer
from sievemq.protocol.message import MessageExt
from tests.interop.clients import DriverProcess, run_driver, start_driver, unique_name
from tests.interop.conftest import dev_and_proxy
from tests.interop.test_against_sievemq import create_topic, ns
from tests.interop.test_proxy import _read_all
from tests.support.procs import Proc

pytestmark = pytest.mark.interop

KIND = "rmq5-node"

# The mix that sievemq's 4.x producer sends for the filter tests: (tag, user properties) of m0..m6.
_TAGS = ["TagA", "TagB", "TagC", "TagA", "TagC", "TagB", "TagD"]
_PROPS: list[dict[str, str]] = [
    {"a": "0", "b": "y"},
    {"a": "2", "b": "x"},
    {"a": "4", "b": "y"},
    {"a": "6", "b": "x"},  # a > 5 AND b = 'x'
    {"a": "8", "b": "y"},
    {"a": "10", "b": "x"},  # a > 5 AND b = 'x'
    {"b": "x"},  # no a: SQL92's NULL, not matched
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[tuple[Proc, Proc]]:
    with dev_and_proxy(tmp_path_factory.mktemp("interop-proxy-node")) as procs:
        yield procs


def _produce_4x(dev: Proc, topic: str, specs: list[tuple[str, dict[str, str]]]) -> list[str]:
    """Send with sievemq's 4.x producer: (tag, user properties) per message, body ``m<i>``, keys ``k<i>`` and
    ``id-<i>``. Returns the message ids (``UNIQ_KEY``), which a 5.x consumer sees as its message ids."""

    async def go() -> list[str]:
        async with Producer(ns(dev), unique_name("P4")) as p:
            out: list[str] = []
            for i, (tag, props) in enumerate(specs):
                msg = Message(topic, f"m{i}".encode(), tags=tag, keys=[f"k{i}", f"id-{i}"], properties=props)
                out.append((await p.send(msg)).msg_id)
            return out

    return asyncio.run(go())


def _simple_consumer(proxy: Proc, topic: str, group: str, count: int, *extra: str) -> DriverProcess:
    """A Node SimpleConsumer that has already made one receive call (its "ready" event)."""
    c = start_driver(KIND, ["simple-consume", "--endpoints", proxy.addr, "--topic", topic, "--group", group,
                            "--count", str(count), *extra])  # fmt: skip
    try:
        _wait_ready(c, proxy)
    except BaseException:
        c.stop()
        raise
    return c


def _wait_ready(c: DriverProcess, proxy: Proc, timeout: float = 90.0) -> None:
    """Until the driver printed "ready"; an error before it (a refused ReceiveMessage, say) fails at once."""
    deadline = time.monotonic() + timeout
    while not c.of("ready"):
        assert not c.of("error"), f"the Node consumer failed before its first receive came back:\n{_describe(c, proxy)}"
        assert c.poll() is None, f"the Node consumer exited before it was ready:\n{_describe(c, proxy)}"
        assert time.monotonic() < deadline, f"not ready within {timeout}s:\n{_describe(c, proxy)}"
        time.sleep(0.1)


def _describe(c: DriverProcess, proxy: Proc) -> str:
    return f"{c.describe()}\n---- proxy log (tail) ----\n{proxy.log()[-4000:]}"


def _check_filtered_delivery(c: DriverProcess, proxy: Proc, topic: str, ids: list[str], wanted: list[int]) -> None:
    """Exactly the wanted messages, each once (attempt 1), intact, acked; no errors on the way."""
    code = c.wait(timeout=120)
    why = _describe(c, proxy)
    assert code == 0, f"the Node SimpleConsumer did not ack {len(wanted)} messages:\n{why}"
    got = c.of("received")
    assert sorted(e["body"] for e in got) == sorted(f"m{i}" for i in wanted), f"not exactly the matching ones:\n{why}"
    for e in got:
        i = int(e["body"][1:])
        assert e["message_id"] == ids[i], f"message id {e['message_id']} is not the 4.x msgId {ids[i]}: {e}"
        assert (e["topic"], e["tag"], e["keys"]) == (topic, _TAGS[i], [f"id-{i}", f"k{i}"]), f"not intact: {e}"
        assert e["properties"] == _PROPS[i], f"user properties not intact (or system ones leaked): {e}"
        assert e["attempt"] == 1, f"a first delivery should be attempt 1: {e}"
        assert e["corrupted"] is False, f"the client found the body digest wrong: {e}"
    acked = {e["message_id"] for e in c.of("acked")}
    assert acked == {ids[i] for i in wanted}, f"every received message acked:\n{why}"
    assert not c.of("error"), f"errors on the way:\n{why}"


# --------------------------------------------------------------------------------------------- (a)


def test_node_producer_sends_through_the_proxy_and_4x_consumers_read_it(cluster: tuple[Proc, Proc]) -> None:
    dev, proxy = cluster
    topic = unique_name("NdT")
    create_topic(dev, topic, queues=2)
    res = run_driver(KIND, ["produce", "--endpoints", proxy.addr, "--topic", topic, "--count", "6", "--tag", "TagA",
                            "--key-prefix", "k", "--key", "order-{i}", "--prop", "color=red", "--prop", "n={i}"],
                     timeout=120)  # fmt: skip
    assert res.returncode == 0, f"{res.describe()}\n---- proxy log ----\n{proxy.log()[-4000:]}"
    assert res.of("started") and res.of("started")[0]["client"] == "rocketmq-client-nodejs@1.0.8", res.describe()
    sent = {e["i"]: e["message_id"] for e in res.of("sent")}
    assert sorted(sent) == list(range(6)), res.describe()
    assert len(set(sent.values())) == 6, f"message ids not unique: {sent}"

    got = _read_all(dev.port, topic, 2)
    assert sorted(m.body for m in got) == sorted(f"body-{i}".encode() for i in range(6)), got
    for m in got:
        i = int(m.body.decode().split("-")[1])
        assert m.tags == "TagA", m
        assert sorted(m.keys) == [f"k{i}", f"order-{i}"], f"keys not intact: {m.keys}"
        assert m.uniq_key == sent[i], f"the 4.x msgId {m.uniq_key} is not the Node client's id {sent[i]}"
        assert m.properties.get("color") == "red" and m.properties.get("n") == str(i), m.properties

    # sievemq's 4.x push consumer, with a tag subscription, gets them all (and only them).
    async def consume() -> list[MessageExt]:
        received: list[MessageExt] = []
        c = PushConsumer(ns(dev), unique_name("Nd4C"), consume_from="first", rebalance_interval=1.0)
        c.subscribe(topic, "TagA || TagZ")
        c.listener(lambda msgs: received.extend(msgs))
        await c.start()
        try:
            deadline = time.monotonic() + 30
            while len({m.uniq_key for m in received}) < 6 and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
        finally:
            await c.close()
        return received

    pushed = asyncio.run(consume())
    assert {m.uniq_key for m in pushed} == set(sent.values()), pushed
    assert all(m.properties.get("color") == "red" for m in pushed), [m.properties for m in pushed]


def test_node_producer_to_an_unknown_topic_fails_clearly(cluster: tuple[Proc, Proc]) -> None:
    _dev, proxy = cluster
    res = run_driver(KIND, ["produce", "--endpoints", proxy.addr, "--topic", unique_name("NoSuchT"), "--count", "1"],
                     timeout=120)  # fmt: skip
    assert res.returncode == 1, res.describe()
    assert not res.of("sent"), res.describe()
    errors = res.of("error")
    assert errors and errors[0].get("stage") == "startup", res.describe()
    # The client wraps the route failure twice; the innermost cause carries TOPIC_NOT_FOUND (40402).
    assert errors[0].get("error_code") == 40402, res.describe()
    assert any("not found" in c for c in errors[0].get("causes", [])), res.describe()


# --------------------------------------------------------------------------------------------- (b), (c)


@pytest.mark.parametrize(
    ("expr", "wanted"),
    [
        (("--tag-expr", "TagA || TagB"), [0, 1, 3, 5]),
        (("--sql", "a > 5 AND b = 'x'"), [3, 5]),
    ],
    ids=["tag", "sql92"],
)
def test_node_simple_consumer_receives_exactly_the_matching_messages(
    cluster: tuple[Proc, Proc], expr: tuple[str, str], wanted: list[int]
) -> None:
    dev, proxy = cluster
    topic = unique_name("NdC")
    create_topic(dev, topic, queues=1)
    c = _simple_consumer(proxy, topic, unique_name("Nd5G"), len(wanted), *expr, "--timeout", "60", "--linger", "2")
    with c:
        ids = _produce_4x(dev, topic, list(zip(_TAGS, _PROPS, strict=True)))
        _check_filtered_delivery(c, proxy, topic, ids, wanted)
        assert not [e for e in c.of("received") if e["late"]], f"something came after the last ack:\n{c.describe()}"


# --------------------------------------------------------------------------------------------- (d)


def test_node_simple_consumer_acked_messages_never_come_back(cluster: tuple[Proc, Proc]) -> None:
    """Invisible time 2 s: the first delivery is held (not acked) and must come back as attempt 2, which shows that
    a redelivery would be seen; the acked ones must not come back in the 6 s of receiving after the last ack."""
    dev, proxy = cluster
    topic = unique_name("NdA")
    create_topic(dev, topic, queues=1)
    specs: list[tuple[str, dict[str, str]]] = [("TagA", {"n": str(i)}) for i in range(3)]
    c = _simple_consumer(proxy, topic, unique_name("Nd5G"), 3, "--tag-expr", "TagA", "--invisible", "2",
                         "--hold-first", "1", "--linger", "6", "--timeout", "60")  # fmt: skip
    with c:
        ids = _produce_4x(dev, topic, specs)
        code = c.wait(timeout=120)
    why = _describe(c, proxy)
    assert code == 0, f"the Node SimpleConsumer did not ack 3 messages:\n{why}"
    on_time = [e for e in c.of("received") if not e["late"]]
    late = [e for e in c.of("received") if e["late"]]
    assert not late, f"acked messages were delivered again after their invisible time:\n{why}"
    held = on_time[0]["message_id"]
    attempts: dict[str, list[int]] = {}
    for e in on_time:
        attempts.setdefault(e["message_id"], []).append(e["attempt"])
    assert set(attempts) == set(ids), why
    assert attempts[held] == [1, 2], f"the held message should come back once, as attempt 2:\n{why}"
    assert all(a == [1] for mid, a in attempts.items() if mid != held), f"acked ones came back:\n{why}"
    assert not c.of("error"), f"errors on the way:\n{why}"


def test_node_simple_consumer_gets_the_messages_of_every_queue(cluster: tuple[Proc, Proc]) -> None:
    """Four queues, eight messages spread over them by sievemq's 4.x producer: all eight reach the Node
    SimpleConsumer, although every ReceiveMessage request it makes names queue 0."""
    dev, proxy = cluster
    topic = unique_name("NdQ")
    create_topic(dev, topic, queues=4)
    c = _simple_consumer(proxy, topic, unique_name("Nd5G"), 8, "--timeout", "40")
    with c:
        ids = _produce_4x(dev, topic, [("TagA", {"n": str(i)}) for i in range(8)])
        code = c.wait(timeout=120)
    why = _describe(c, proxy)
    got = {e["message_id"] for e in c.of("received")}
    missing = [f"m{i}" for i, mid in enumerate(ids) if mid not in got]
    assert code == 0 and not missing, (
        f"messages not delivered to the Node SimpleConsumer: {missing} (it asks for queue 0 only; the proxy must "
        f"pop every queue of the broker for it):\n{why}"
    )
    assert len(c.of("received")) == 8, f"each once:\n{why}"


def test_node_simple_consumer_with_its_default_await_duration_receives(cluster: tuple[Proc, Proc]) -> None:
    """The client's default long-polling time is 30 s (SimpleConsumer's ``awaitDuration``), more than a proxy
    holds a receive (RocketMQ's caps it at 20 s, ``grpcClientConsumerMaxLongPollingTimeoutMillis``): the proxy
    must shorten it, not refuse the request."""
    dev, proxy = cluster
    topic = unique_name("NdW")
    create_topic(dev, topic, queues=1)
    c = _simple_consumer(proxy, topic, unique_name("Nd5G"), 1, "--await", "default", "--timeout", "60")
    with c:
        ids = _produce_4x(dev, topic, [("TagA", {"n": "0"})])
        code = c.wait(timeout=120)
    why = _describe(c, proxy)
    assert code == 0 and [e["message_id"] for e in c.of("received")] == ids, why
    assert not c.of("error"), f"errors on the way:\n{why}"


# --------------------------------------------------------------------------------------------- push consumer


def test_node_push_consumer_consumes_and_a_failed_message_comes_back(cluster: tuple[Proc, Proc]) -> None:
    dev, proxy = cluster
    topic = unique_name("NdP")
    create_topic(dev, topic, queues=2)
    c = start_driver(KIND, ["push-consume", "--endpoints", proxy.addr, "--topic", topic, "--group", unique_name("Nd5P"),
                            "--count", "3", "--tag-expr", "TagA", "--fail-first", "1", "--timeout", "90",
                            "--linger", "2"])  # fmt: skip
    with c:
        _wait_ready(c, proxy)  # it has sent its first ReceiveMessage (after its first QueryAssignment)
        specs: list[tuple[str, dict[str, str]]] = [("TagA", {}), ("TagB", {}), ("TagA", {}), ("TagA", {})]
        ids = _produce_4x(dev, topic, specs)
        code = c.wait(timeout=150)
    why = _describe(c, proxy)
    assert code == 0, f"the Node PushConsumer did not consume 3 messages:\n{why}"
    got: list[dict[str, Any]] = c.of("received")
    assert {e["message_id"] for e in got} == {ids[0], ids[2], ids[3]}, f"TagA only:\n{why}"
    assert sorted(e["attempt"] for e in got) == [1, 1, 1, 2], f"the failed one came back once:\n{why}"
