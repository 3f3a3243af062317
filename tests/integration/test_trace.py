"""Message trace written by sievemq's own clients (``ClientOptions(trace=True)``, docs/traces.md §5) against a real
``sievemq dev``, and ``sievemq message trace`` / ``AdminClient.message_trace`` on it: the send, a delivery that
failed and its retry, a dead letter, and the verdicts of groups whose tag or SQL92 subscription excludes the
message. The Java client's traces: tests/interop/test_java_trace.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
import pytest

from sievemq import (
    ConsumeResult,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    Selector,
    TransactionProducer,
    TransactionState,
)
from sievemq.admin.api import AdminClient
from sievemq.admin.messages import FIND_MAX, find_by_key
from sievemq.protocol.trace_records import TRACE_PRODUCER_GROUP_PREFIX, TraceType, decode
from sievemq.remoting.codes import RequestCode, ResponseCode
from tests.client.conftest import dev, namesrv, ready
from tests.integration.test_cli import run_cli

__all__ = ["dev", "namesrv"]  # the module's sievemq dev (tests/client/conftest.py)

_n = iter(range(1, 10_000))


@pytest.fixture
async def admin(namesrv: str) -> AsyncIterator[AdminClient]:
    async with AdminClient(namesrv) as a:
        yield a


async def poll(probe: Callable[[], Awaitable[dict[str, Any] | None]], timeout: float, what: str) -> dict[str, Any]:
    """``probe()`` until it returns a document (the clients write traces in the background)."""
    deadline = time.monotonic() + timeout
    while (doc := await probe()) is None:
        assert time.monotonic() < deadline, f"{what} not seen within {timeout} s"
        await asyncio.sleep(0.2)
    return doc


def fresh(prefix: str) -> str:
    return f"{prefix}{next(_n)}_{id(_n) % 10_000}"


class FailFirst:
    """RECONSUME_LATER the first ``fails`` deliveries of each message, then SUCCESS."""

    def __init__(self, fails: int) -> None:
        self.fails = fails
        self.seen: dict[str, int] = {}

    async def __call__(self, msgs: list[MessageExt]) -> ConsumeResult:
        n = self.seen[msgs[0].msg_id] = self.seen.get(msgs[0].msg_id, 0) + 1
        return ConsumeResult.RECONSUME_LATER if n <= self.fails else ConsumeResult.SUCCESS


async def test_own_clients_trace_and_message_trace_explains_every_group(namesrv: str, admin: AdminClient) -> None:
    topic = fresh("TrT")
    await admin.create_topic(topic, queues=2)
    g_ok, g_sql, g_tag, g_dlq = (fresh(p) for p in ("TrOk", "TrSql", "TrTag", "TrDlq"))
    retrying = FailFirst(1)
    consumers = [
        PushConsumer(namesrv, g_ok, trace=True, retry_delay_level=1),
        PushConsumer(namesrv, g_sql, trace=True),
        PushConsumer(namesrv, g_tag, trace=True),
        PushConsumer(namesrv, g_dlq, trace=True, max_reconsume_times=0),
    ]
    consumers[0].subscribe(topic, "TagA")
    consumers[0].listener(retrying)
    consumers[1].subscribe(topic, Selector.sql("amount > 10"))
    consumers[1].listener(lambda msgs: ConsumeResult.SUCCESS)
    consumers[2].subscribe(topic, "TagB")
    consumers[2].listener(lambda msgs: ConsumeResult.SUCCESS)
    consumers[3].subscribe(topic, "*")
    consumers[3].listener(FailFirst(99))
    try:
        for c in consumers:
            await c.start()
            await ready(c, topic)
        async with Producer(namesrv, fresh("TrP"), trace=True) as p:
            sent = await p.send(Message(topic, b"traced", tags="TagA", keys="order-1", properties={"amount": "5"}))
        msg_id = sent.msg_id

        seen: list[dict[str, Any]] = []

        async def traced() -> dict[str, Any] | None:
            doc = await admin.message_trace(msg_id)
            seen[:] = [doc]
            groups = {g["group"]: g for g in doc["groups"]}
            done = doc["sent"] and groups.get(g_ok, {}).get("consumed") and groups.get(g_dlq, {}).get("deadLetter")
            return doc if done else None

        try:
            doc = await poll(traced, 60, "the traces of the send and the consumption")
        except AssertionError as e:
            raise AssertionError(f"{e}: {seen}") from None
    finally:
        for c in consumers:
            await c.close()

    (pub,) = doc["sent"]
    assert (pub["status"], pub["topic"], pub["tags"], pub["keys"], pub["msgType"]) == (
        "success", topic, "TagA", "order-1", "Normal_Msg")  # fmt: skip
    assert (pub["queueId"], pub["queueOffset"]) == (sent.message_queue.queue_id, sent.queue_offset)
    assert doc["message"]["topic"] == topic
    groups = {g["group"]: g for g in doc["groups"]}
    ok = groups[g_ok]
    assert ok["state"] == "CONSUMED" and ok["retries"] >= 1, ok
    assert [(d["retryTimes"], d["status"], d["consumeReturn"]) for d in ok["deliveries"]] == [
        (0, "failed", "FAILED"), (1, "success", "SUCCESS")], ok  # fmt: skip
    assert ok["filter"]["verdict"] == "DELIVERED"
    dlq = groups[g_dlq]
    assert dlq["state"] == "DEAD_LETTERED" and dlq["deadLetter"]["topic"] == f"%DLQ%{g_dlq}", dlq
    sql = groups[g_sql]["filter"]
    assert (sql["verdict"], sql["details"]["result"], groups[g_sql]["deliveries"]) == ("FILTERED", "FALSE", []), sql
    assert sql["stage"] in ("bitmap", "evaluation")
    tag = groups[g_tag]["filter"]
    assert (tag["verdict"], tag["stage"]) == ("FILTERED", "tag-hash") and "'TagA' is not in" in tag["reason"], tag
    events = [e["event"] for e in doc["events"]]
    for event in ("SENT", "DELIVERED", "CONSUME_FAILED", "RETRY_STORED", "CONSUMED", "DEAD_LETTERED"):
        assert event in events, events

    # the trace messages: RocketMQ's format, written by the clients' trace producers, keyed by the message id
    found = await find_by_key(admin, "RMQ_SYS_TRACE_TOPIC", msg_id, limit=FIND_MAX)
    kinds = {r.type for v in found.messages for r in decode(v.body).records if r.msg_id == msg_id}
    assert kinds == {TraceType.PUB, TraceType.SUB_BEFORE, TraceType.SUB_AFTER}
    assert all(not decode(v.body).skipped for v in found.messages)
    producers = {v.msg.properties.get("PGROUP", "") for v in found.messages}
    assert all(g.startswith(TRACE_PRODUCER_GROUP_PREFIX) for g in producers if g), producers

    # the command: JSON as the API gives it, and the table for people
    code, out, err = await run_cli("message", "trace", msg_id, "-n", namesrv, "--json")
    assert code == 0, err
    assert {g["group"] for g in orjson.loads(out)["groups"]} >= {g_ok, g_sql, g_tag, g_dlq}
    code, out, err = await run_cli("message", "trace", msg_id, "-n", namesrv, "--group", g_sql)
    assert code == 0, err
    line = next(ln for ln in out.splitlines() if ln.startswith(g_sql))
    assert "FILTERED" in line and "FALSE" in line, out
    assert g_ok not in out


async def test_a_custom_trace_topic_and_tracing_off(namesrv: str, admin: AdminClient) -> None:
    topic, custom = fresh("TrC"), fresh("MyTrace")
    await admin.create_topic(topic, queues=1)
    async with Producer(namesrv, fresh("TrP"), trace=True, trace_topic=custom) as p:
        traced = await p.send(Message(topic, b"a"))
    async with Producer(namesrv, fresh("TrQ")) as p:  # trace is off by default
        untraced = await p.send(Message(topic, b"b"))

    async def found() -> dict[str, Any] | None:
        doc = await admin.message_trace(traced.msg_id, trace_topic=custom)
        return doc if doc["sent"] else None

    doc = await poll(found, 30, "the trace in the custom topic")
    assert doc["traceTopic"] == custom and doc["sent"][0]["topic"] == topic
    by_offset_id = await admin.message_trace(traced.offset_msg_id, trace_topic=custom)  # the broker's id works too
    assert (by_offset_id["msgId"], by_offset_id["sent"]) == (traced.msg_id, doc["sent"])
    # both producers are closed: a traced one writes what it queued before close() returns, so nothing is pending
    doc = await admin.message_trace(untraced.msg_id, topic=topic, trace_topic=custom)
    assert (doc["traceRecords"], doc["sent"], doc["message"]["topic"]) == (0, [], topic)
    code, _, err = await run_cli("message", "trace", "not-an-id", "-n", namesrv)
    assert code == 2 and "MSG_ID" in err


async def test_a_transaction_producers_trace(namesrv: str, admin: AdminClient) -> None:
    """The half message's Pub (Trans_Msg_Half) and the EndTransaction record: committed, and rolled back (that
    message is never stored in its topic: the trace still tells its story)."""
    topic = fresh("TrX")
    await admin.create_topic(topic, queues=1)

    async def check(msg: MessageExt) -> TransactionState:
        return TransactionState.COMMIT

    async with TransactionProducer(namesrv, fresh("TrTx"), check_listener=check, trace=True) as p:
        committed = await p.send_in_transaction(Message(topic, b"c", tags="T1"), _answer(TransactionState.COMMIT))
        rolled = await p.send_in_transaction(Message(topic, b"r"), _answer(TransactionState.ROLLBACK))

    async def ended(msg_id: str) -> dict[str, Any] | None:
        doc = await admin.message_trace(msg_id, topic=topic)
        return doc if doc["sent"] and doc["transaction"] else None

    doc = await poll(lambda: ended(committed.send.msg_id), 30, "the committed transaction's trace")
    assert doc["sent"][0]["msgType"] == "Trans_Msg_Half" and doc["message"]["topic"] == topic
    (end,) = doc["transaction"]
    assert (end["state"], end["fromTransactionCheck"], end["transactionId"]) == (
        "COMMIT_MESSAGE", False, committed.send.msg_id)  # fmt: skip
    assert [e["event"] for e in doc["events"]] == ["SENT", "END_TRANSACTION"]
    doc = await poll(lambda: ended(rolled.send.msg_id), 30, "the rolled-back transaction's trace")
    assert doc["transaction"][0]["state"] == "ROLLBACK_MESSAGE" and doc["message"] is None
    assert "message" in doc["errors"] and doc["groups"] == []


def _answer(state: TransactionState) -> Callable[[Message, Any], Awaitable[TransactionState]]:
    async def local(msg: Message, arg: Any) -> TransactionState:
        return state

    return local


async def test_explain_message_refusals_and_one_group(namesrv: str, admin: AdminClient) -> None:
    """EXPLAIN_MESSAGE (30013) names what is wrong: an unknown topic (17), a queue the topic lacks (1), an offset
    with no message (22); ``consumerGroup`` limits the answer to that group."""
    topic = fresh("TrE")
    await admin.create_topic(topic, queues=1)
    async with Producer(namesrv, fresh("TrP")) as p:
        await p.send(Message(topic, b"x", tags="A"))
    addr = (await admin.brokers())[0].addrs[0]

    async def ask(**fields: Any) -> tuple[int, str, bytes]:
        r = await admin.request(addr, RequestCode.EXPLAIN_MESSAGE, fields)
        return r.code, r.remark or "", r.body

    assert (await ask(topic=fresh("Nope"), queueId=0, queueOffset=0))[0] == ResponseCode.TOPIC_NOT_EXIST
    assert (await ask(topic=topic, queueId=5, queueOffset=0))[0] == ResponseCode.SYSTEM_ERROR
    assert (await ask(topic=topic, queueId=0, queueOffset=7))[0] == ResponseCode.QUERY_NOT_FOUND
    code, _, body = await ask(topic=topic, queueId=0, queueOffset=0, consumerGroup="someone")
    assert code == ResponseCode.SUCCESS
    doc = orjson.loads(body)
    assert (doc["tags"], [g["group"] for g in doc["groups"]]) == ("A", ["someone"])
    assert (doc["groups"][0]["verdict"], doc["groups"][0]["consumerOffset"]) == ("UNKNOWN", None)
