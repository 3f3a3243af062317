"""rocketmq-client 4.9.8 (``java4``) and 5.5.0 (``java5``) against ``sievemq dev``: TransactionMQProducer with the
broker's check-back on RocketMQ's default settings, request-reply (DefaultMQProducer.request answered through
MessageUtil.createReplyMessage by a consumer of the other version), message trace switched on (enableMsgTrace on
producer and consumer: sievemq serves no trace queries, and nothing else may change), and ``sievemq message verify``
(CONSUME_MESSAGE_DIRECTLY, which the Java push consumer answers by running its listener).
See test_java_clients.py for the driver and the helpers."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from sievemq import Message, Producer
from sievemq.admin.api import AdminClient
from sievemq.admin.verify import Verified, verify
from sievemq.client import api
from sievemq.protocol.consume_directly import CMResult
from sievemq.protocol.message import MessageExt
from sievemq.remoting.connection import connect
from tests.interop.clients import unique_name
from tests.interop.test_java_clients import KINDS, SEND, holds, java, keys, make_topic, ns, other, start_java
from tests.support.procs import Proc, dev_proc

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[Proc]:
    """One ``sievemq dev`` with default settings (transactionTimeout 6 s, transactionCheckInterval 30 s)."""
    p = dev_proc(tmp_path_factory.mktemp("interop-java-tx")).start()
    try:
        yield p
    finally:
        assert p.stop() == 0, p.log()


@pytest.mark.parametrize("kind", KINDS)
def test_transactions_commit_rollback_and_check_back(dev: Proc, kind: str) -> None:
    """Local transactions answer COMMIT, ROLLBACK and UNKNOW in turn; the broker checks each UNKNOW one back (some
    6 s after it was stored), the check answers COMMIT; a consumer of the other version then gets the committed and
    the checked ones, once each, and no rolled-back one."""
    topic = make_topic(dev)
    res = java(kind, "transaction", dev, topic, unique_name("JTxP"), "--count", "6", "--plan",
               "commit,rollback,unknown", "--key-prefix", "tx", "--tags", "TagA", "--linger", "2", "--timeout", "90",
               *SEND)  # fmt: skip
    assert res.ok, res.describe()
    sent = {e["keys"]: e for e in res.of("sent")}
    assert {k: (e["status"], e["local_state"]) for k, e in sent.items()} == {
        f"tx{i}": ("SEND_OK", ["COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW"][i % 3]) for i in range(6)
    }, res.describe()
    checked = res.of("checked")
    assert Counter(e["keys"] for e in checked) == Counter({"tx2": 1, "tx5": 1}), res.describe()
    for e in checked:  # the half message, with its check count as RocketMQ's broker adds it (observed)
        assert e["transaction_id"] == sent[e["keys"]]["transaction_id"], res.describe()
        assert (e["topic"], e["body"]) == (topic, sent[e["keys"]]["body"]), res.describe()
        shown = {k: e["props"].get(k) for k in ("TRAN_MSG", "TRANSACTION_CHECK_TIMES")}
        assert shown == {"TRAN_MSG": "true", "TRANSACTION_CHECK_TIMES": "1"}, shown

    got = java(other(kind), "consume", dev, topic, unique_name("JTxC"), "--expr", "TagA", "--from", "first",
               "--expect", "4", "--linger", "2", "--timeout", "90")  # fmt: skip
    assert got.ok, got.describe()
    assert keys(got) == Counter(["tx0", "tx2", "tx3", "tx5"]), got.describe()


def stored_replies(p: Proc) -> list[MessageExt]:
    """The replies the broker stored in its cluster's reply topic (1 queue)."""

    async def go() -> list[MessageExt]:
        conn = await connect("127.0.0.1", p.port)
        try:
            return (await api.pull_message(conn, "JPeek", "DefaultCluster_REPLY_TOPIC", 0, 0, max_nums=64)).messages
        finally:
            conn.close()

    return asyncio.run(go())


@pytest.mark.parametrize(("requester", "replier"), [("java4", "java5"), ("java5", "java4")])
def test_request_reply(dev: Proc, requester: str, replier: str) -> None:
    """DefaultMQProducer.request waits for the answer a consumer sends with MessageUtil.createReplyMessage: the broker
    stores it in <cluster>_REPLY_TOPIC and pushes it to the requesting client."""
    topic = make_topic(dev)
    with start_java(replier, "consume", dev, topic, unique_name("JRep"), "--reply", "--from", "first",
                    "--expect", "3", "--linger", "1", "--timeout", "120", *SEND) as answering:  # fmt: skip
        holds(answering, 4)
        res = java(requester, "request", dev, topic, unique_name("JReq"), "--count", "3", "--key-prefix", "q",
                   "--request-timeout-ms", "20000", *SEND)  # fmt: skip
        assert answering.wait() == 0, answering.describe()
    assert res.ok, f"{res.describe()}\n---- replier ----\n{answering.describe()}"
    replies = res.of("reply")
    assert [(e["i"], e["reply_body"]) for e in replies] == [(i, f"reply-body-{i}") for i in range(3)], res.describe()
    assert {e["reply_topic"] for e in replies} == {"DefaultCluster_REPLY_TOPIC"}, res.describe()
    replied = answering.of("replied")
    assert len(replied) == 3 and {e["status"] for e in replied} == {"SEND_OK"}, answering.describe()
    correlation = {e["reply_props"]["CORRELATION_ID"] for e in replies}
    assert {e["correlation_id"] for e in replied} == correlation
    # The replier's properties with the broker's region and trace switch, and when it pushed the reply; no CLUSTER
    # (as Apache RocketMQ 5.5.0 pushes and stores replies, observed).
    for e in replies:
        props = e["reply_props"]
        assert (props.get("MSG_TYPE"), props.get("MSG_REGION"), props.get("TRACE_ON")) == (
            "reply", "DefaultRegion", "true"), props  # fmt: skip
        assert props.get("PUSH_REPLY_TIME", "").isdigit() and "CLUSTER" not in props, props
    stored = [m.properties for m in stored_replies(dev) if m.properties.get("CORRELATION_ID") in correlation]
    assert len(stored) == 3, stored
    assert all(p["MSG_REGION"] == "DefaultRegion" and "CLUSTER" not in p and "PUSH_REPLY_TIME" not in p for p in stored)


@pytest.mark.parametrize("kind", KINDS)
def test_message_trace_switched_on_changes_nothing(dev: Proc, kind: str) -> None:
    """enableMsgTrace on a producer (sync and async sends) and on a push consumer: every message goes through as
    without it (the clients send their traces to RMQ_SYS_TRACE_TOPIC, which the broker creates on first use)."""
    topic = make_topic(dev)
    sent = java(kind, "produce", dev, topic, unique_name("JP"), "--trace", "--mode", "sync,async", "--count", "3",
                "--key-prefix", "t", *SEND)  # fmt: skip
    assert sent.ok and len(sent.of("sent")) == 6, sent.describe()
    got = java(kind, "consume", dev, topic, unique_name("JTrc"), "--trace", "--from", "first", "--expect", "6",
               "--linger", "2", "--timeout", "90")  # fmt: skip
    assert got.ok, got.describe()
    assert keys(got) == Counter(f"t{i}" for i in range(6)), got.describe()
    assert {e["msg_id"] for e in got.of("received")} == {e["msg_id"] for e in sent.of("sent")}


@pytest.mark.parametrize("kind", KINDS)
def test_verify_runs_the_consumers_listener(dev: Proc, kind: str) -> None:
    """``sievemq message verify`` asks a Java push consumer to consume one stored message directly: its listener
    runs on it once more and the client answers CR_SUCCESS (ConsumeMessageDirectlyResult)."""
    topic, group = make_topic(dev), unique_name("JVer")
    with start_java(kind, "consume", dev, topic, group, "--from", "first", "--expect", "0", "--linger", "150",
                    "--timeout", "150") as c:  # fmt: skip
        holds(c, 4)

        async def send() -> str:
            async with Producer(ns(dev), unique_name("PyP")) as p:
                return (await p.send(Message(topic, b"check me", keys="v1"))).msg_id

        async def ask(msg_id: str) -> Verified:
            async with AdminClient(ns(dev)) as admin:
                return await verify(admin, msg_id, group, timeout_ms=20_000)

        msg_id = asyncio.run(send())
        c.wait_for("received", timeout=60)  # consumed as usual first
        v = asyncio.run(ask(msg_id))
        assert v.ok and v.result is not None and v.result.consume_result is CMResult.CR_SUCCESS, (v, c.describe())
        c.wait_for("received", count=2, timeout=30)
    # 4.9.8 hands the listener the direct one as a plain MessageExt, whose getMsgId() is the offsetMsgId; both
    # versions keep its UNIQ_KEY.
    assert [e["props"]["UNIQ_KEY"] for e in c.of("received")] == [msg_id, msg_id], c.describe()
