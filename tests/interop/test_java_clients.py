"""Apache RocketMQ's Java remoting client against real sievemq processes: rocketmq-client 4.9.8 (kind ``java4``) and
the same 4.x API of the 5.x line, rocketmq-client 5.5.0 (``java5``), each driven by our driver
(tests/interop/drivers/java, built by tests/interop/setup_java_clients.sh).

Here: every DefaultMQProducer send mode, DefaultMQPushConsumer concurrently and orderly, clustering and broadcasting,
tag and SQL92 subscriptions, retries and the dead-letter queue, and DefaultLitePullConsumer.
test_java_consume_from.py has where new groups start, test_java_tx.py transactions, request-reply, message trace and
``sievemq message verify``, test_java_acl.py ACL.

Besides the common events, the Java driver prints ``assigned`` (the queues of the topic the consumer's rebalance
holds, whenever they change), ``committed`` (a lite pull consumer's committed offsets), ``checked``/``executed``
(transactions) and ``reply``/``replied`` (request-reply).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from sievemq import Message, Producer
from sievemq.admin.api import AdminClient
from sievemq.client import api
from sievemq.errors import RemotingError
from sievemq.remoting.codes import RequestCode
from sievemq.remoting.connection import connect
from tests.interop.clients import DriverProcess, DriverResult, run_driver, start_driver, unique_name
from tests.support.procs import Proc, dev_proc

pytestmark = pytest.mark.interop

KINDS = ["java4", "java5"]
"""rocketmq-client 4.9.8 and 5.5.0."""
SEND = ["--send-timeout-ms", "15000"]
"""The client's 3 s default covers the first send's route lookup and connection, which a loaded 2-core machine can
take longer than; a safety net, never a measure."""


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[Proc]:
    """One ``sievemq dev`` with default settings for the module."""
    p = dev_proc(tmp_path_factory.mktemp("interop-java")).start()
    try:
        yield p
    finally:
        assert p.stop() == 0, p.log()


# ------------------------------------------------------------------------------------------------ helpers


def ns(p: Proc) -> str:
    return str(p.extra["namesrv"])


def make_topic(p: Proc, queues: int = 4, retry_groups: Sequence[str] = ()) -> str:
    """A new topic with ``queues`` queues, routed by the name server; also the retry topics of ``retry_groups``:
    a 5.x client learns a retry topic only from its name server poll (every 30 s), so a group new to the broker
    gets its retries that late, against Apache RocketMQ 5.5.0 as well (observed); a group that consumed before has
    its retry topic already."""
    topic = unique_name("JT")

    async def go() -> None:
        async with AdminClient(ns(p)) as admin:
            names = [(topic, queues), *((f"%RETRY%{g}", 1) for g in retry_groups)]
            for name, n in names:
                await admin.create_topic(name, queues=n)
            for name, _ in names:
                deadline = time.monotonic() + 30
                while True:
                    try:
                        if (await admin.route(name)).queue_datas:
                            break
                    except RemotingError:
                        pass
                    assert time.monotonic() < deadline, f"no route for {name}"
                    await asyncio.sleep(0.05)

    asyncio.run(go())
    return topic


def send(p: Proc, messages: list[Message], queue_of: Callable[[int], int] | None = None) -> None:
    """Send ``messages`` with sievemq's own client (message i to queue ``queue_of(i)`` when given)."""

    async def go() -> None:
        async with Producer(ns(p), unique_name("PyP")) as producer:
            for i, m in enumerate(messages):
                if queue_of is None:
                    await producer.send(m)
                else:
                    q = queue_of(i)
                    await producer.send(m, queue_selector=lambda queues, _m, q=q: queues[q % len(queues)])

    asyncio.run(go())


def java(kind: str, cmd: str, p: Proc, topic: str, group: str, *args: str, timeout: float = 240) -> DriverResult:
    """Run one Java driver command to its end."""
    return run_driver(kind, [cmd, "--namesrv", ns(p), "--topic", topic, "--group", group, *args], timeout=timeout)


def start_java(kind: str, cmd: str, p: Proc, topic: str, group: str, *args: str) -> DriverProcess:
    """Start one Java driver command in the background."""
    return start_driver(kind, [cmd, "--namesrv", ns(p), "--topic", topic, "--group", group, *args])


def holds(d: DriverProcess, queues: int, timeout: float = 90) -> None:
    """Wait until the consumer's rebalance holds exactly ``queues`` queues of its topic."""
    d.wait_for("assigned", timeout=timeout, predicate=lambda e: len(e["queues"]) == queues)


def keys(events: list[dict[str, Any]]) -> Counter[str]:
    return Counter(str(e["keys"]) for e in events if e.get("event") == "received")


def consumed(*drivers: DriverProcess) -> Counter[str]:
    out: Counter[str] = Counter()
    for d in drivers:
        out += keys(d.events)
    return out


def wait_until(probe: Callable[[], bool], what: Callable[[], str], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        assert time.monotonic() < deadline, f"not reached within {timeout}s: {what()}"
        time.sleep(0.1)


def broker_offsets(p: Proc, topic: str, group: str | None = None, queues: int = 4) -> list[int]:
    """The max offset of each queue, or ``group``'s committed offset of each (-1: none)."""

    async def go() -> list[int]:
        conn = await connect("127.0.0.1", p.port)
        try:
            if group is None:
                return [await api.queue_offset(conn, RequestCode.GET_MAX_OFFSET, topic, q) for q in range(queues)]
            return [await api.query_offset(conn, group, topic, q) for q in range(queues)]
        finally:
            conn.close()

    return asyncio.run(go())


def stored(p: Proc, topic: str) -> int:
    """How many messages queue 0 of ``topic`` holds (0 while the topic does not exist)."""
    try:
        return broker_offsets(p, topic, queues=1)[0]
    except RemotingError:
        return 0


def other(kind: str) -> str:
    return "java5" if kind == "java4" else "java4"


# ------------------------------------------------------------------------------------------------ harness


@pytest.mark.parametrize("kind", KINDS)
def test_driver_reports_a_name_server_nobody_answers(interop_clients: Path, kind: str) -> None:
    """Against a closed port the driver says so and exits (1): the send fails, and the push consumer's start()
    throws (it asks the name server for its topic's route); a bad command line exits 2."""
    closed = ["--namesrv", "127.0.0.1:1", "--topic", "T", "--group", "G"]
    sent = run_driver(kind, ["produce", *closed, "--send-timeout-ms", "2000", "--timeout", "30"], timeout=90)
    assert sent.returncode == 1 and sent.errors and not sent.of("sent"), sent.describe()
    got = run_driver(kind, ["consume", *closed, "--expect", "1", "--timeout", "3"], timeout=90)
    assert got.returncode == 1 and [e["stage"] for e in got.errors] == ["start"], got.describe()
    bad = run_driver(kind, ["produce", *closed, "--no-such-option"], timeout=90)
    assert bad.returncode == 2 and bad.errors, bad.describe()


# ------------------------------------------------------------------------------------------------ producer


@pytest.mark.parametrize("kind", KINDS)
def test_every_send_mode_round_trips(dev: Proc, kind: str) -> None:
    """sync, async, oneway, a batch and a MessageQueueSelector by key, each 4 messages with tags, keys and a property,
    consumed by the other client version: every message once, as sent, under the id its sender reported."""
    topic = make_topic(dev)
    modes = ["sync", "async", "oneway", "batch", "selector"]
    sent = java(kind, "produce", dev, topic, unique_name("JP"), "--mode", ",".join(modes), "--count", "4",
                "--tags", "TagA,TagB", "--key-prefix", "m", "--prop", "color=c{i}", "--shard-keys", "2",
                "--batch-size", "4", *SEND)  # fmt: skip
    assert sent.ok and len(sent.of("sent")) == 20, sent.describe()
    by_mode: dict[str, list[dict[str, Any]]] = {}
    for e in sent.of("sent"):
        by_mode.setdefault(e["mode"], []).append(e)
    assert all(e["status"] == "SEND_OK" for m in modes if m != "oneway" for e in by_mode[m]), sent.describe()
    batch = sorted(by_mode["batch"], key=lambda e: e["i"])
    assert len({e["queue_id"] for e in batch}) == 1, "a batch goes to one queue"
    assert [e["offset"] for e in batch] == list(range(batch[0]["offset"], batch[0]["offset"] + 4))
    for key in ("k0", "k1"):  # the selector sends each key to one queue
        assert len({e["queue_id"] for e in by_mode["selector"] if e["shard_key"] == key}) == 1, sent.describe()

    got = java(other(kind), "consume", dev, topic, unique_name("JC"), "--from", "first", "--expect", "20",
               "--linger", "2", "--timeout", "120")  # fmt: skip
    assert got.ok, got.describe()
    received = {e["keys"]: e for e in got.of("received")}
    assert keys(got) == Counter(f"m{i}" for i in range(20)), got.describe()
    for e in sent.of("sent"):
        r = received[e["keys"]]
        assert (r["tags"], r["body"], r["props"]["color"]) == (e["tags"], e["body"], e["props"]["color"])
        assert r["msg_id"] == e["msg_id"], f"{e['mode']}: sent as {e['msg_id']}, received as {r['msg_id']}"
        if e["mode"] != "oneway":
            assert (r["queue_id"], r["queue_offset"]) == (e["queue_id"], e["offset"]), (e, r)


# ------------------------------------------------------------------------------------------ push consumer


@pytest.mark.parametrize("kind", KINDS)
def test_tag_and_sql92_subscriptions(dev: Proc, kind: str) -> None:
    topic = make_topic(dev)
    tags = ["TagA", "TagB", "TagC"]
    send(dev, [Message(topic, f"b{i}".encode(), tags=tags[i % 3], keys=f"m{i}",
                       properties={"n": str(i), "color": "red" if i % 2 else "blue"}) for i in range(12)])  # fmt: skip
    want_tag = {f"m{i}" for i in range(12) if i % 3 != 1}
    want_sql = {f"m{i}" for i in range(12) if i >= 6 and i % 2}
    common = ["--from", "first", "--linger", "2", "--timeout", "120"]
    with (
        start_java(kind, "consume", dev, topic, unique_name("JTag"), "--expr", "TagA || TagC",
                   "--expect", str(len(want_tag)), *common) as by_tag,
        start_java(kind, "consume", dev, topic, unique_name("JSql"), "--sql", "n >= 6 AND color = 'red'",
                   "--expect", str(len(want_sql)), *common) as by_sql,
    ):  # fmt: skip
        assert by_tag.wait() == 0, by_tag.describe()
        assert by_sql.wait() == 0, by_sql.describe()
    assert keys(by_tag.events) == Counter(want_tag), by_tag.describe()
    assert keys(by_sql.events) == Counter(want_sql), by_sql.describe()


@pytest.mark.parametrize("kind", KINDS)
def test_clustering_shares_the_queues_and_broadcasting_copies(dev: Proc, kind: str) -> None:
    """Two consumers of one clustering group split the 4 queues and get each message once between them; two of a
    broadcasting group get every message each."""
    topic, count = make_topic(dev), 16
    shared, copies = unique_name("JClu"), unique_name("JBro")
    run = ["--from", "first", "--timeout", "150"]
    with (
        start_java(kind, "consume", dev, topic, shared, "--expect", "0", "--linger", "150", *run) as c1,
        start_java(kind, "consume", dev, topic, shared, "--expect", "0", "--linger", "150", *run) as c2,
        start_java(kind, "consume", dev, topic, copies, "--model", "broadcasting", "--expect", str(count), *run,
                   "--linger", "2") as b1,
        start_java(kind, "consume", dev, topic, copies, "--model", "broadcasting", "--expect", str(count), *run,
                   "--linger", "2") as b2,
    ):  # fmt: skip
        for d, n in ((c1, 2), (c2, 2), (b1, 4), (b2, 4)):
            holds(d, n)

        def halves() -> bool:
            a, b = set(c1.of("assigned")[-1]["queues"]), set(c2.of("assigned")[-1]["queues"])
            return len(a) == len(b) == 2 and not a & b

        # each has held 2 queues; a rebalance that raced the other's first heartbeat (the 5.x client can skip one)
        # may have handed one of them all 4 since: the state to reach is two disjoint halves, as the clients settle
        wait_until(halves, lambda: f"{c1.of('assigned')[-1]} / {c2.of('assigned')[-1]}")
        send(dev, [Message(topic, f"b{i}".encode(), keys=f"m{i}") for i in range(count)])
        wait_until(lambda: len(consumed(c1, c2)) == count, lambda: f"{consumed(c1, c2)}")
        assert b1.wait() == 0, b1.describe()
        assert b2.wait() == 0, b2.describe()
    want = Counter(f"m{i}" for i in range(count))
    assert consumed(c1, c2) == want, f"{c1.describe()}\n{c2.describe()}"
    assert keys(c1.events) and keys(c2.events), "each clustering consumer gets its queues' share"
    assert keys(b1.events) == want, b1.describe()
    assert keys(b2.events) == want, b2.describe()


@pytest.mark.parametrize("kind", KINDS)
def test_orderly_consumer_gets_each_key_in_order(dev: Proc, kind: str) -> None:
    """A MessageQueueSelector producer sends 4 keys x 10 in turn; MessageListenerOrderly sees each key's in order."""
    topic, per_key = make_topic(dev), 10
    sent = java(kind, "produce", dev, topic, unique_name("JP"), "--mode", "selector", "--count", str(4 * per_key),
                "--shard-keys", "4", "--body", "{key}:{seq}", "--key-prefix", "m", *SEND)  # fmt: skip
    assert sent.ok, sent.describe()
    got = java(kind, "consume", dev, topic, unique_name("JOrd"), "--orderly", "--from", "first",
               "--expect", str(4 * per_key), "--linger", "2", "--timeout", "120")  # fmt: skip
    assert got.ok, got.describe()
    seen: dict[str, list[int]] = {}
    for e in got.of("received"):
        key, seq = e["body"].split(":")
        seen.setdefault(key, []).append(int(seq))
    assert seen == {f"k{k}": list(range(per_key)) for k in range(4)}, got.describe()


@pytest.mark.parametrize("kind", KINDS)
def test_failed_deliveries_come_back_then_go_to_the_dead_letter_queue(dev: Proc, kind: str) -> None:
    """RECONSUME_LATER (next delay level 1, 1 s) brings a message back once with reconsumeTimes 1; with
    maxReconsumeTimes 1, a message failed twice goes to %DLQ%group."""
    count, retried, dead = 6, unique_name("JRe"), unique_name("JDlq")
    topic = make_topic(dev, retry_groups=[retried, dead])
    send(dev, [Message(topic, f"b{i}".encode(), keys=f"m{i}") for i in range(count)])
    common = ["--from", "first", "--retry-delay-level", "1", "--timeout", "120"]
    with (
        start_java(kind, "consume", dev, topic, retried, "--reconsume", "1", "--expect", str(count), "--linger", "2",
                   *common) as again,
        start_java(kind, "consume", dev, topic, dead, "--reconsume", "99", "--max-reconsume-times", "1",
                   "--expect", "0", "--linger", "150", *common) as never,
    ):  # fmt: skip
        assert again.wait() == 0, again.describe()
        wait_until(lambda: stored(dev, f"%DLQ%{dead}") == count, lambda: f"{never.describe()}")
    want = Counter(f"m{i}" for i in range(count))
    assert keys(again.events) == want, again.describe()
    assert Counter(str(e["keys"]) for e in again.of("rejected")) == want, again.describe()
    assert {e["reconsume_times"] for e in again.of("rejected")} == {0}
    assert {e["reconsume_times"] for e in again.of("received")} == {1}, again.describe()
    # The broker's copy (as RocketMQ 5.5.0 makes it, observed): the first record's offsetMsgId, no flush wait.
    first = {e["keys"]: e["offset_msg_id"] for e in again.of("rejected")}
    for e in again.of("received"):
        assert (e["props"].get("ORIGIN_MESSAGE_ID"), e["props"].get("WAIT")) == (first[e["keys"]], "false"), e
    assert Counter(str(e["keys"]) for e in never.of("rejected")) == Counter({k: 2 for k in want}), never.describe()


# ------------------------------------------------------------------------------------- lite pull consumer


@pytest.mark.parametrize("kind", KINDS)
def test_lite_pull_subscribe_and_assign_seek_commit(dev: Proc, kind: str) -> None:
    """DefaultLitePullConsumer: subscribe with a tag; assign every queue, seek each to offset 2, poll, commitSync:
    the broker then holds the committed offsets."""
    topic = make_topic(dev)
    send(dev, [Message(topic, b"x", tags="TagA" if i % 2 else "TagB", keys=f"m{i}") for i in range(16)],
         queue_of=lambda i: i)  # fmt: skip
    sub = java(kind, "lite-pull", dev, topic, unique_name("JLs"), "--mode", "subscribe", "--expr", "TagA",
               "--from", "first", "--expect", "8", "--linger", "1", "--timeout", "20")  # fmt: skip
    assert sub.ok and set(keys(sub)) == {f"m{i}" for i in range(16) if i % 2}, sub.describe()

    group = unique_name("JLa")
    got = java(kind, "lite-pull", dev, topic, group, "--mode", "assign", "--seek-offset", "2", "--commit",
               "--expect", "8", "--linger", "1", "--timeout", "20")  # fmt: skip
    assert got.ok, got.describe()
    assert sorted((e["queue_id"], e["queue_offset"]) for e in got.of("received")) == [
        (q, o) for q in range(4) for o in (2, 3)
    ], got.describe()
    assert {e["queue_id"]: e["offset"] for e in got.of("committed")} == dict.fromkeys(range(4), 4), got.describe()
    assert broker_offsets(dev, topic, group) == [4, 4, 4, 4]
