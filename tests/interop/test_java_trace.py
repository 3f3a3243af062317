"""Message trace with Apache RocketMQ's Java 4.x remoting client (rocketmq-client 4.9.8, ``java4``, and the 4.x API of
5.5.0, ``java5``) against ``sievemq dev`` with ``traceTopicEnable``: a producer and a push consumer with
``enableMsgTrace`` write their trace records to RMQ_SYS_TRACE_TOPIC, sievemq decodes what they really wrote, and
``sievemq message trace <msgId>`` shows the send and the consumption, and why a group whose SQL92 expression
excludes the message never got it (docs/traces.md). See test_java_clients.py for the driver and the helpers."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from sievemq.admin.api import AdminClient
from sievemq.admin.messages import FIND_MAX, find_by_key
from sievemq.protocol.trace_records import CONTENT_SPLITOR, FIELD_SPLITOR, TraceType, decode
from tests.interop.clients import unique_name
from tests.interop.test_java_clients import KINDS, SEND, java, make_topic, ns, start_java
from tests.support.procs import Proc, dev_proc

pytestmark = pytest.mark.interop

TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[Proc]:
    """One ``sievemq dev`` that holds the trace topic from the start (``traceTopicEnable = true``)."""
    p = dev_proc(tmp_path_factory.mktemp("interop-java-trace"))
    p.env["SIEVEMQ_TRACE_TOPIC_ENABLE"] = "true"
    p.start()
    try:
        yield p
    finally:
        assert p.stop() == 0, p.log()


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``sievemq ARGS`` to its end."""
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "sievemq.cli", *args], capture_output=True, text=True, env=env,
                          timeout=120)  # fmt: skip


def trace_json(p: Proc, msg_id: str, *more: str) -> dict[str, Any]:
    res = cli("message", "trace", msg_id, "-n", ns(p), "--json", *more)
    assert res.returncode == 0, (res.stdout, res.stderr)
    doc: dict[str, Any] = orjson.loads(res.stdout)
    return doc


def raw_traces(p: Proc, msg_id: str) -> list[bytes]:
    """The bodies of the trace messages whose keys name ``msg_id``, as stored."""

    async def go() -> list[bytes]:
        async with AdminClient(ns(p)) as admin:
            return [v.body for v in (await find_by_key(admin, TRACE_TOPIC, msg_id, limit=FIND_MAX)).messages]

    return asyncio.run(go())


def test_the_broker_holds_the_trace_topic_from_the_start(dev: Proc) -> None:
    """With traceTopicEnable the broker creates RMQ_SYS_TRACE_TOPIC (1 queue) at start, as RocketMQ does."""

    async def go() -> list[tuple[str, int]]:
        async with AdminClient(ns(dev)) as admin:
            route = await admin.route(TRACE_TOPIC)
            return [(q.broker_name, q.write_queue_nums) for q in route.queue_datas]

    assert [n for _, n in asyncio.run(go())] == [1]


@pytest.mark.parametrize("kind", KINDS)
def test_trace_shows_sent_consumed_and_why_another_group_got_nothing(dev: Proc, kind: str) -> None:
    """A producer and a TagA consumer with enableMsgTrace; a second group subscribed with SQL92 ``region = 'us'``
    (registered first, then offline: its filter stays). ``message trace`` shows the send (group, host, broker,
    queue, offset, status), the delivery to the consumer's host and its success, and for the SQL92 group the
    verdict FILTERED with the reason: the message has no property ``region`` (NULL), its Bloom bits said no."""
    topic = make_topic(dev)
    producer, consumer, sql_group = unique_name("JTrP"), unique_name("JTrC"), unique_name("JTrX")
    reg = java(kind, "consume", dev, topic, sql_group, "--sql", "region = 'us'", "--expect", "0", "--linger", "2",
               "--timeout", "60")  # fmt: skip
    assert reg.ok, reg.describe()
    sent = java(kind, "produce", dev, topic, producer, "--trace", "--mode", "sync", "--count", "1", "--tags", "TagA",
                "--key-prefix", "trk", "--prop", "color=red", *SEND)  # fmt: skip
    assert sent.ok and len(sent.of("sent")) == 1, sent.describe()
    s = sent.of("sent")[0]
    msg_id = s["msg_id"]
    with start_java(kind, "consume", dev, topic, consumer, "--trace", "--expr", "TagA", "--from", "first",
                    "--expect", "0", "--linger", "120", "--timeout", "150") as c:  # fmt: skip
        c.wait_for("received", timeout=90)
        deadline = time.monotonic() + 110  # the clients write traces in the background (the consumer stays 120 s)
        while True:
            doc = trace_json(dev, msg_id)
            groups = {g["group"]: g for g in doc["groups"]}
            if doc["sent"] and groups.get(consumer, {}).get("consumed"):
                break
            assert time.monotonic() < deadline, (doc, raw_traces(dev, msg_id), c.describe())
            time.sleep(0.5)
        text = cli("message", "trace", msg_id, "-n", ns(dev))
    if os.environ.get("SIEVEMQ_PRINT_TRACES"):  # the vectors of tests/unit/trace/test_records.py came so
        print(kind, [body for body in raw_traces(dev, msg_id)])

    # what the Java client really wrote: a Pub record of 14 fields, SubBefore of 8, SubAfter of 9
    records = [r for body in raw_traces(dev, msg_id) for r in decode(body).records if r.msg_id == msg_id]
    assert {r.type for r in records} >= {TraceType.PUB, TraceType.SUB_BEFORE, TraceType.SUB_AFTER}, records
    for body in raw_traces(dev, msg_id):
        for chunk in body.decode().split(FIELD_SPLITOR):
            if chunk:
                n = {"Pub": 14, "SubBefore": 8, "SubAfter": 9}.get(chunk.split(CONTENT_SPLITOR)[0])
                assert n is None or len(chunk.split(CONTENT_SPLITOR)) == n, chunk.split(CONTENT_SPLITOR)

    (pub,) = doc["sent"]
    assert (pub["producerGroup"], pub["topic"], pub["status"], pub["tags"], pub["keys"]) == (
        producer, topic, "success", "TagA", "trk0"), pub  # fmt: skip
    assert (pub["queueId"], pub["queueOffset"], pub["offsetMsgId"]) == (s["queue_id"], s["offset"], s["offset_msg_id"])
    assert pub["clientHost"] and pub["storeHost"].endswith(f":{dev.port}"), pub
    c = groups[consumer]
    assert c["state"] == "CONSUMED" and c["deliveries"][0]["status"] == "success", c
    assert c["deliveries"][0]["retryTimes"] == 0 and c["deliveries"][0]["clientHost"], c
    assert c["filter"]["verdict"] == "DELIVERED" and c["filter"]["stage"] == "tag-hash", c
    x = groups[sql_group]
    assert x["state"] == "FILTERED" and not x["deliveries"], x
    f = x["filter"]
    assert (f["verdict"], f["subscription"]["expressionType"]) == ("FILTERED", "SQL92"), f
    assert f["stage"] in ("bitmap", "evaluation") and "'region'" in f["reason"], f
    assert f["details"]["result"] == "NULL" and f["details"]["missingProperties"] == ["region"], f
    events = [e["event"] for e in doc["events"]]
    assert events.index("SENT") < events.index("DELIVERED") < events.index("CONSUMED"), events

    assert text.returncode == 0, text.stderr
    assert f"by group {producer}" in text.stdout and "CONSUMED" in text.stdout, text.stdout
    line = next(ln for ln in text.stdout.splitlines() if ln.startswith(sql_group))
    assert "FILTERED" in line and "no property 'region'" in line, text.stdout


@pytest.mark.parametrize("kind", KINDS)
def test_trace_of_java_transactions(dev: Proc, kind: str) -> None:
    """TransactionMQProducer with enableMsgTrace: the half message's Pub (Trans_Msg_Half) and the EndTransaction
    record (COMMIT_MESSAGE; ROLLBACK_MESSAGE for a message never stored in its topic) as the Java client wrote them."""
    topic = make_topic(dev)
    res = java(kind, "transaction", dev, topic, unique_name("JTrTx"), "--trace", "--count", "2", "--plan",
               "commit,rollback", "--key-prefix", "tx", "--linger", "2", "--timeout", "90", *SEND)  # fmt: skip
    assert res.ok, res.describe()
    sent = {e["keys"]: e for e in res.of("sent")}
    expected = {"tx0": ("COMMIT_MESSAGE", True), "tx1": ("ROLLBACK_MESSAGE", False)}
    for key, (state, stored) in expected.items():
        msg_id = sent[key]["msg_id"]
        deadline = time.monotonic() + 60
        while not ((doc := trace_json(dev, msg_id, "--topic", topic))["sent"] and doc["transaction"]):
            assert time.monotonic() < deadline, doc
            time.sleep(0.5)
        if os.environ.get("SIEVEMQ_PRINT_TRACES"):
            print(kind, key, raw_traces(dev, msg_id))
        assert doc["sent"][0]["msgType"] == "Trans_Msg_Half", doc
        (end,) = doc["transaction"]
        assert (end["state"], end["fromTransactionCheck"]) == (state, False), end
        assert (doc["message"] is not None) is stored, doc
