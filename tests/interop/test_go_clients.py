"""Apache RocketMQ's Go client (github.com/apache/rocketmq-client-go/v2, the 4.x remoting protocol) against real
sievemq processes, driven by our driver (tests/interop/drivers/go, built by tests/interop/setup_go_clients.sh at the
version its go.mod requires).

Here: every send mode of its producer (sync, async, one-way, batch, a QueueSelector), the push consumer clustering
and broadcasting, with TAG and SQL92 selectors, orderly, retries and the dead-letter queue, the pull consumer (Poll
with its own offsets, PullFrom with offsets of ours) and ACL credentials.

The driver prints the events of the Java driver (tests/interop/test_java_clients.py): started, sent, received,
rejected (a delivery the listener failed), assigned (the queues of the topic the consumer holds), committed (a pull
consumer's offsets), pulled (a PullFrom answer without messages), error, timeout, done.
"""

from __future__ import annotations

import asyncio
import hashlib
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sievemq import Message, PullConsumer
from tests.interop.clients import DriverProcess, DriverResult, go_driver, start_driver, unique_name
from tests.interop.test_java_clients import broker_offsets, consumed, keys, make_topic, ns, send, stored, wait_until
from tests.support.procs import Proc, dev_proc

pytestmark = pytest.mark.interop

HERE = Path(__file__).resolve().parent
SEND = ["--send-timeout-ms", "15000"]
"""The client's 3 s default covers the first send's route lookup and connection, which a loaded 2-core machine can
take longer than; a safety net, never a measure."""


def start_go(cmd: str, p: Proc | str, topic: str, group: str, *args: str) -> DriverProcess:
    """Start one driver command in the background (``p``: a server, or a name server address)."""
    namesrv = p if isinstance(p, str) else ns(p)
    return start_driver("go", [cmd, "--namesrv", namesrv, "--topic", topic, "--group", group, *args])


def go(cmd: str, p: Proc | str, topic: str, group: str, *args: str, timeout: float = 240) -> DriverResult:
    """Run one driver command to its end (``timeout``: a safety net; the driver has its own --timeout)."""
    d = start_go(cmd, p, topic, group, *args)
    d.wait(timeout=timeout)
    return d.result()


def holds(d: DriverProcess, queues: int, timeout: float = 90) -> None:
    """Wait until the consumer holds exactly ``queues`` queues of its topic."""
    d.wait_for("assigned", timeout=timeout, predicate=lambda e: len(e["queues"]) == queues)


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[Proc]:
    """One ``sievemq dev`` with default settings for the module."""
    assert go_driver().exists(), f"setup_clients.sh did not build {go_driver()}"
    p = dev_proc(tmp_path_factory.mktemp("interop-go")).start()
    try:
        yield p
    finally:
        assert p.stop() == 0, p.log()


# ------------------------------------------------------------------------------------------------ harness


def test_driver_reports_a_name_server_nobody_answers(interop_clients: Path) -> None:
    """Against a closed port the driver says so and exits (1): the send finds no route, and the consumers' Start()
    fails (they ask the name server for their topic's route); a bad command line exits 2."""
    closed = "127.0.0.1:1"
    sent = go("produce", closed, "T", "G", "--send-timeout-ms", "2000", "--timeout", "30", timeout=90)
    assert sent.returncode == 1 and sent.errors and not sent.of("sent"), sent.describe()
    for cmd in ("consume", "pull"):
        got = go(cmd, closed, "T", "G", "--expect", "1", "--timeout", "3", timeout=90)
        assert got.returncode == 1 and [e["stage"] for e in got.errors] == ["start"], got.describe()
    bad = go("produce", closed, "T", "G", "--no-such-option", timeout=90)
    assert bad.returncode == 2 and bad.errors, bad.describe()


# ------------------------------------------------------------------------------------------------ producer


def test_every_send_mode_round_trips(dev: Proc) -> None:
    """sync, async, oneway, a batch and a QueueSelector to chosen queues, each 4 messages with tags, keys and a
    property, consumed by a push consumer: every message once, as sent, at the queue and offset its sender was told.

    The Go client gives batched messages no UNIQ_KEY (its Java counterpart does), so they are known by the ids the
    broker answered for the batch, one per message, which are their stored ids (Apache RocketMQ 5.5.0 stores and
    answers them so too, observed)."""
    topic = make_topic(dev)
    modes = ["sync", "async", "oneway", "batch", "selector"]
    sent = go("produce", dev, topic, unique_name("GP"), "--mode", ",".join(modes), "--count", "4",
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
    batch_ids = batch[0]["offset_msg_id"].split(",")
    assert len(batch_ids) == 4 and all(e["offset_msg_id"] == batch[0]["offset_msg_id"] for e in batch), batch
    for e in by_mode["selector"]:  # key k<i%2> to queue i%2
        assert e["queue_id"] == e["chosen_queue"] == e["i"] % 2, sent.describe()

    got = go("consume", dev, topic, unique_name("GC"), "--from", "first", "--expect", "20", "--linger", "2",
             "--timeout", "120")  # fmt: skip
    assert got.ok, got.describe()
    assert keys(got) == Counter(f"m{i}" for i in range(20)), got.describe()
    received = {e["keys"]: e for e in got.of("received")}
    for e in sent.of("sent"):
        r = received[e["keys"]]
        assert (r["tags"], r["body"], r["props"]["color"]) == (e["tags"], e["body"], e["props"]["color"])
        if e["mode"] == "batch":
            assert r["msg_id"] == r["offset_msg_id"] == batch_ids[e["i"] - batch[0]["i"]], (e, r)
        else:
            assert r["msg_id"] == e["msg_id"], f"{e['mode']}: sent as {e['msg_id']}, received as {r['msg_id']}"
        if e["mode"] != "oneway":
            assert (r["queue_id"], r["queue_offset"]) == (e["queue_id"], e["offset"]), (e, r)
        if e["mode"] in ("sync", "async", "selector"):
            assert r["offset_msg_id"] == e["offset_msg_id"], (e, r)


def test_a_first_send_creates_the_topic(dev: Proc) -> None:
    """A topic nobody created: the client takes the route of TBW102 and sends; the broker (auto-create on in dev)
    creates the topic, and the next sends use its own route."""
    topic = unique_name("GNew")
    sent = go("produce", dev, topic, unique_name("GP"), "--count", "3", "--key-prefix", "n", *SEND)
    assert sent.ok and [e["status"] for e in sent.of("sent")] == ["SEND_OK"] * 3, sent.describe()
    assert sum(broker_offsets(dev, topic)) == 3


def test_delayed_and_compressed_messages(dev: Proc) -> None:
    """Delay level 1 (1 s) with 10 kB bodies, which the client sends zlib-compressed (over 4 KiB): they are delivered
    a second or more after their birth, whole, to the Go consumer and to sievemq's own client."""
    topic = make_topic(dev)
    sent = go("produce", dev, topic, unique_name("GP"), "--count", "3", "--key-prefix", "z", "--body-size", "10000",
              "--delay-level", "1", *SEND)  # fmt: skip
    assert sent.ok, sent.describe()
    md5s = {e["keys"]: e["body_md5"] for e in sent.of("sent")}
    got = go("consume", dev, topic, unique_name("GC"), "--from", "first", "--expect", "3", "--linger", "1",
             "--timeout", "60")  # fmt: skip
    assert got.ok and keys(got) == Counter(list(md5s)), got.describe()
    for e in got.of("received"):
        assert (e["body_md5"], e["body_len"]) == (md5s[e["keys"]], 10000), e
        assert e["store_timestamp"] - e["born_timestamp"] >= 1000 and "DELAY" not in e["props"], e
    bodies = read_with_sievemq(dev, topic, 3)
    assert {k: hashlib.md5(b).hexdigest() for k, b in bodies.items()} == md5s


def read_with_sievemq(p: Proc, topic: str, count: int) -> dict[str, bytes]:
    """The bodies of ``count`` messages of ``topic`` by key, read from the start by sievemq's PullConsumer."""

    async def go() -> dict[str, bytes]:
        consumer = PullConsumer(ns(p), unique_name("PyC"), consume_from="first")
        consumer.subscribe(topic)
        await consumer.start()
        got: dict[str, bytes] = {}
        try:
            deadline = time.monotonic() + 60
            while len(got) < count:
                assert time.monotonic() < deadline, f"read {sorted(got)} of {count}"
                for m in await consumer.poll(1.0):
                    got[" ".join(m.keys)] = m.body
        finally:
            await consumer.close()
        return got

    return asyncio.run(go())


# ------------------------------------------------------------------------------------------ push consumer


def test_tag_and_sql92_subscriptions(dev: Proc) -> None:
    """A TAG expression and an SQL92 selector (the consumers' heartbeats carry them; their pulls carry no
    expression): each gets exactly its messages."""
    topic = make_topic(dev)
    tags = ["TagA", "TagB", "TagC"]
    send(dev, [Message(topic, f"b{i}".encode(), tags=tags[i % 3], keys=f"m{i}",
                       properties={"n": str(i), "color": "red" if i % 2 else "blue"}) for i in range(12)])  # fmt: skip
    want_tag = {f"m{i}" for i in range(12) if i % 3 != 1}
    want_sql = {f"m{i}" for i in range(12) if i >= 6 and i % 2}
    common = ["--from", "first", "--linger", "2", "--timeout", "120"]
    with (
        start_go("consume", dev, topic, unique_name("GTag"), "--expr", "TagA || TagC",
                 "--expect", str(len(want_tag)), *common) as by_tag,
        start_go("consume", dev, topic, unique_name("GSql"), "--sql", "n >= 6 AND color = 'red'",
                 "--expect", str(len(want_sql)), *common) as by_sql,
    ):  # fmt: skip
        assert by_tag.wait() == 0, by_tag.describe()
        assert by_sql.wait() == 0, by_sql.describe()
    assert keys(by_tag.events) == Counter(want_tag), by_tag.describe()
    assert keys(by_sql.events) == Counter(want_sql), by_sql.describe()


def test_clustering_shares_the_queues_and_broadcasting_copies(dev: Proc) -> None:
    """Two consumers of one clustering group split the 4 queues and get each message once between them; two of a
    broadcasting group get every message each."""
    topic, count = make_topic(dev), 16
    shared, copies = unique_name("GClu"), unique_name("GBro")
    run = ["--from", "first", "--timeout", "150"]
    with (
        start_go("consume", dev, topic, shared, "--expect", "0", "--linger", "150", *run) as c1,
        start_go("consume", dev, topic, shared, "--expect", "0", "--linger", "150", *run) as c2,
        start_go("consume", dev, topic, copies, "--model", "broadcasting", "--expect", str(count), *run,
                 "--linger", "2") as b1,
        start_go("consume", dev, topic, copies, "--model", "broadcasting", "--expect", str(count), *run,
                 "--linger", "2") as b2,
    ):  # fmt: skip
        for d, n in ((c1, 2), (c2, 2), (b1, 4), (b2, 4)):
            holds(d, n)
        assert not set(c1.of("assigned")[-1]["queues"]) & set(c2.of("assigned")[-1]["queues"])
        send(dev, [Message(topic, f"b{i}".encode(), keys=f"m{i}") for i in range(count)])
        wait_until(lambda: len(consumed(c1, c2)) == count, lambda: f"{consumed(c1, c2)}")
        assert b1.wait() == 0, b1.describe()
        assert b2.wait() == 0, b2.describe()
    want = Counter(f"m{i}" for i in range(count))
    assert consumed(c1, c2) == want, f"{c1.describe()}\n{c2.describe()}"
    assert keys(c1.events) and keys(c2.events), "each clustering consumer gets its queues' share"
    assert keys(b1.events) == want, b1.describe()
    assert keys(b2.events) == want, b2.describe()


def test_orderly_consumer_keeps_each_queue_in_order(dev: Proc) -> None:
    """A QueueSelector producer sends 4 keys x 10 in turn, each key to its queue; the orderly consumer (it locks its
    queues on the broker) fails every first delivery (SuspendCurrentQueueAMoment): each message is retried in place
    before anything after it, and each key is seen in order."""
    topic, per_key = make_topic(dev), 10
    sent = go("produce", dev, topic, unique_name("GP"), "--mode", "selector", "--count", str(4 * per_key),
              "--shard-keys", "4", "--body", "{key}:{seq}", "--key-prefix", "m", *SEND)  # fmt: skip
    assert sent.ok, sent.describe()
    got = go("consume", dev, topic, unique_name("GOrd"), "--orderly", "--reconsume", "1", "--from", "first",
             "--expect", str(4 * per_key), "--linger", "2", "--timeout", "120")  # fmt: skip
    assert got.ok, got.describe()
    seen: dict[str, list[tuple[str, int, int]]] = {}
    queues: dict[str, set[int]] = {}
    for e in got.of("received", "rejected"):
        key, seq = e["body"].split(":")
        seen.setdefault(key, []).append((e["event"], int(seq), e["reconsume_times"]))
        queues.setdefault(key, set()).add(e["queue_id"])
    want = [(ev, s, n) for s in range(per_key) for ev, n in (("rejected", 0), ("received", 1))]
    assert seen == {f"k{k}": want for k in range(4)}, got.describe()
    assert queues == {f"k{k}": {k} for k in range(4)}, queues


def test_new_groups_from_first_and_from_last_on_young_queues(dev: Proc) -> None:
    """ConsumeFromFirstOffset reads every queue from its start. ConsumeFromLastOffset too, on queues whose first
    message is still in memory: for a new group the broker answers offset 0 there, RocketMQ's rule and sievemq's
    default (docs/consume-from.md); both then get what is sent while they run."""
    topic = make_topic(dev)
    send(dev, [Message(topic, b"o", keys=f"old{i}") for i in range(4)], queue_of=lambda i: i)
    common = ["--expect", "8", "--linger", "2", "--timeout", "120"]
    with (
        start_go("consume", dev, topic, unique_name("GFirst"), "--from", "first", *common) as first,
        start_go("consume", dev, topic, unique_name("GLast"), "--from", "last", *common) as last,
    ):
        for d in (first, last):
            holds(d, 4)
        send(dev, [Message(topic, b"n", keys=f"new{i}") for i in range(4)], queue_of=lambda i: i)
        for d in (first, last):
            assert d.wait() == 0, d.describe()
    want = Counter([*(f"old{i}" for i in range(4)), *(f"new{i}" for i in range(4))])
    assert keys(first.events) == want, first.describe()
    assert keys(last.events) == want, last.describe()


def test_failed_deliveries_come_back_then_go_to_the_dead_letter_queue(dev: Proc) -> None:
    """ConsumeRetryLater (next delay level 1, 1 s) brings a message back with its reconsume times rising, 0, 1, 2,
    as the broker's copy in %RETRY%group; with MaxReconsumeTimes 1, a message failed twice goes to %DLQ%group."""
    count, retried, dead = 6, unique_name("GRe"), unique_name("GDlq")
    # The client learns a retry topic only at its next route poll (every 30 s), so a group new to the broker gets its
    # first retries that late (against Apache RocketMQ 5.5.0 too, observed: 40 s): the topics exist before it starts.
    topic = make_topic(dev, retry_groups=[retried, dead])
    send(dev, [Message(topic, f"b{i}".encode(), keys=f"m{i}") for i in range(count)])
    common = ["--from", "first", "--retry-delay-level", "1", "--timeout", "120"]
    with (
        start_go("consume", dev, topic, retried, "--reconsume", "2", "--expect", str(count), "--linger", "2",
                 *common) as again,
        start_go("consume", dev, topic, dead, "--reconsume", "99", "--max-reconsume-times", "1",
                 "--expect", "0", "--linger", "150", *common) as never,
    ):  # fmt: skip
        assert again.wait() == 0, again.describe()
        wait_until(lambda: stored(dev, f"%DLQ%{dead}") == count, lambda: f"{never.describe()}")
    want = Counter(f"m{i}" for i in range(count))
    assert keys(again.events) == want, again.describe()
    history: dict[str, list[tuple[str, int, str]]] = {}
    for e in again.of("rejected", "received"):
        history.setdefault(e["keys"], []).append((e["event"], e["reconsume_times"], e["topic"]))
    assert history == {k: [("rejected", 0, topic), ("rejected", 1, topic), ("received", 2, topic)] for k in want}
    first = {e["keys"]: e["offset_msg_id"] for e in again.of("rejected") if e["reconsume_times"] == 0}
    for e in again.of("received"):  # the broker's copy: the first record's id, the original topic
        assert (e["props"].get("ORIGIN_MESSAGE_ID"), e["props"].get("RETRY_TOPIC")) == (first[e["keys"]], topic), e
    assert Counter(str(e["keys"]) for e in never.of("rejected")) == Counter({k: 2 for k in want}), never.describe()
    assert {e["reconsume_times"] for e in never.of("rejected")} == {0, 1}, never.describe()


# ------------------------------------------------------------------------------------------- pull consumer


def test_pull_consumer_polls_and_commits_its_offsets(dev: Proc) -> None:
    """Subscribe, Poll and ACK: every message once; Shutdown commits the offsets on the broker."""
    topic, group = make_topic(dev), unique_name("GPoll")
    send(dev, [Message(topic, f"b{i}".encode(), keys=f"m{i}") for i in range(16)], queue_of=lambda i: i)
    got = go("pull", dev, topic, group, "--mode", "poll", "--from", "first", "--expect", "16", "--linger", "1",
             "--timeout", "60")  # fmt: skip
    assert got.ok and keys(got) == Counter(f"m{i}" for i in range(16)), got.describe()
    assert {e["queue_id"]: e["offset"] for e in got.of("committed")} == dict.fromkeys(range(4), 4), got.describe()

    # The client commits with one-way UPDATE_CONSUMER_OFFSETs: the broker has them soon after the driver's exit.
    def committed() -> list[int]:
        return broker_offsets(dev, topic, group)

    wait_until(lambda: committed() == [4, 4, 4, 4], lambda: f"{committed()}")


def test_pull_from_chosen_offsets_with_a_tag_and_an_sql92_selector(dev: Proc) -> None:
    """PullFrom every queue from offset 1: exactly the messages there that the expression matches."""
    topic = make_topic(dev)
    send(dev, [Message(topic, f"b{i}".encode(), tags="TagA" if i % 3 else "TagB", keys=f"m{i}",
                       properties={"n": str(i)}) for i in range(16)], queue_of=lambda i: i)  # fmt: skip
    from_one = [i for i in range(16) if i >= 4]  # message i is at offset i // 4 of queue i % 4
    cases = [("--expr", "TagA", {f"m{i}" for i in from_one if i % 3}),
             ("--sql", "n BETWEEN 5 AND 9", {f"m{i}" for i in from_one if 5 <= i <= 9})]  # fmt: skip
    for flag, expr, want in cases:
        got = go("pull", dev, topic, unique_name("GFrom"), "--mode", "from", "--seek-offset", "1", flag, expr,
                 "--expect", str(len(want)), "--linger", "1", "--timeout", "60")  # fmt: skip
        assert got.ok and keys(got) == Counter(want), got.describe()


# ------------------------------------------------------------------------------------------------------ ACL

AK, SK = "goAK0001", "go-secret-01"
ADMIN = ("goAdmin", "go-admin-secret")
ACL = f"""
accounts:
  - accessKey: {AK}
    secretKey: {SK}
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [GAclOK=PUB|SUB, GAclSubOnly=SUB]
  - accessKey: {ADMIN[0]}
    secretKey: {ADMIN[1]}
    admin: true
"""
RIGHT = ["--access-key", AK, "--secret-key", SK]
ACL_GROUP = "GAclConsumer"
"""The consumer group of the ACL test: its retry topic is made with the others (the client learns it late)."""


@pytest.fixture(scope="module")
def acl_dev(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[Proc]:
    """A ``sievemq dev`` whose broker checks ACL (plain_acl.yml) with the topics of the tests made."""
    tmp = tmp_path_factory.mktemp("interop-go-acl")
    (tmp / "plain_acl.yml").write_text(ACL)
    (tmp / "broker.toml").write_text(f'aclEnable = true\naclFile = "{tmp / "plain_acl.yml"}"\n')
    p = dev_proc(tmp, "--config", str(tmp / "broker.toml")).start()
    try:
        for topic in ("GAclOK", "GAclSubOnly", f"%RETRY%{ACL_GROUP}"):
            cmd = ["topic", "create", topic, "-n", ns(p), "-q", "2", "--access-key", ADMIN[0], "--secret-key", ADMIN[1]]
            out = subprocess.run([sys.executable, "-m", "sievemq.cli", *cmd], capture_output=True, text=True,
                                 timeout=60)  # fmt: skip
            assert out.returncode == 0, out.stdout + out.stderr
        yield p
    finally:
        assert p.stop() == 0, p.log()


def test_acl_the_right_account_produces_consumes_and_retries(acl_dev: Proc) -> None:
    """Every send mode signed with primitive.Credentials, then a push consumer signed too, whose failed first
    deliveries come back (CONSUMER_SEND_MSG_BACK signed as well)."""
    prefix = unique_name("k")
    sent = go("produce", acl_dev, "GAclOK", unique_name("GP"), "--mode", "sync,async,oneway,batch", "--count", "2",
              "--key-prefix", prefix, *RIGHT, *SEND)  # fmt: skip
    assert sent.ok and len(sent.of("sent")) == 8, sent.describe()
    got = go("consume", acl_dev, "GAclOK", ACL_GROUP, "--from", "first", "--reconsume", "1", "--retry-delay-level", "1",
             "--expect", "8", "--linger", "1", "--timeout", "90", *RIGHT)  # fmt: skip
    assert got.ok, got.describe()
    assert keys(got) == Counter(f"{prefix}{i}" for i in range(8)), got.describe()
    assert {e["reconsume_times"] for e in got.of("received")} == {1}, got.describe()


@pytest.mark.parametrize(
    ("topic", "creds"),
    [("GAclOK", ["--access-key", AK, "--secret-key", "wrong-secret"]), ("GAclOK", []), ("GAclSubOnly", RIGHT)],
    ids=["wrong-secret", "no-credentials", "no-pub"],
)  # fmt: skip
def test_acl_refused_sends_report_no_permission(acl_dev: Proc, topic: str, creds: list[str]) -> None:
    sent = go("produce", acl_dev, topic, unique_name("GP"), "--count", "1", *creds, *SEND)
    errors = sent.of("error")
    assert sent.returncode == 1 and not sent.of("sent") and errors, sent.describe()
    assert errors[0].get("response_code") == 16, sent.describe()
