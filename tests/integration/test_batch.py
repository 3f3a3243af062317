"""Batches: SEND_BATCH_MESSAGE (320), SEND_MESSAGE_V2 (310) with m=true (the C++ client), SEND_MESSAGE (10)
with batch=true: every entry stored as its own message with its own properties."""

from __future__ import annotations

import pytest

from sievemq.client import api
from sievemq.protocol.batch import BatchEntry, encode_batch
from sievemq.protocol.msgid import UniqIdGenerator, parse_offset_msg_id
from sievemq.protocol.send_header import SendMessageHeader
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from tests.integration.conftest import OpenConn
from tests.integration.helpers import create_topic, pull_all
from tests.support import wire
from tests.support.procs import Proc

CODES = {
    "SEND_BATCH_MESSAGE-320": RequestCode.SEND_BATCH_MESSAGE,
    "SEND_MESSAGE_V2-310-m": RequestCode.SEND_MESSAGE_V2,
    "SEND_MESSAGE-10-batch": RequestCode.SEND_MESSAGE,
}


@pytest.mark.parametrize("code", list(CODES.values()), ids=list(CODES))
async def test_batch_stores_every_message_with_its_own_properties(broker: Proc, open_conn: OpenConn, code: int) -> None:
    conn = await open_conn(broker)
    topic = f"Batch{code}"
    await create_topic(conn, topic, queues=2)
    ids = UniqIdGenerator()
    entries = [
        BatchEntry(
            flag=i,
            body=f"batch-{i}".encode() * (i + 1),
            properties={"UNIQ_KEY": ids.next(), "TAGS": f"Tag{i % 2}", "KEYS": f"bk{i}", "own": f"value-{i}"},
        )
        for i in range(5)
    ]
    # Something already in the queue, so the batch does not start at offset 0.
    await wire.send_message(conn, topic, b"before", queue_id=1)

    r = await wire.send_batch(conn, topic, entries, queue_id=1, code=code)
    assert r.code == ResponseCode.SUCCESS
    assert (r.queue_id, r.queue_offset) == (1, 1), "queueOffset is the first message's"
    msg_ids = r.msg_id.split(",")
    assert len(msg_ids) == len(entries), r.msg_id
    assert len({parse_offset_msg_id(m)[2] for m in msg_ids}) == len(entries)

    stored = (await pull_all(conn, topic, 1))[1:]
    assert [m.queue_offset for m in stored] == [1, 2, 3, 4, 5]
    assert [m.offset_msg_id for m in stored] == msg_ids
    for entry, m in zip(entries, stored, strict=True):
        assert m.topic == topic and m.queue_id == 1
        assert m.body == entry.body and m.flag == entry.flag
        for k, v in entry.properties.items():
            assert m.properties.get(k) == v, (k, m.properties)
        assert "CLUSTER" not in m.properties, "each entry is stored with its own properties, as RocketMQ does"
    # Other entries' properties did not leak into this one.
    assert {m.properties["own"] for m in stored} == {f"value-{i}" for i in range(5)}

    # Each is indexed and tag-filterable as a message of its own.
    r2 = await api.pull_message(conn, "batch-group", topic, 1, 1, subscription="Tag1")
    assert [m.body for m in r2.messages] == [entries[1].body, entries[3].body]
    assert await pull_all(conn, topic, 0) == [], "nothing went to another queue"


async def test_batch_to_a_random_queue_keeps_the_batch_together(broker: Proc, open_conn: OpenConn) -> None:
    conn = await open_conn(broker)
    await create_topic(conn, "BatchAnyQueue", queues=4)
    entries = [BatchEntry(body=f"q{i}".encode(), properties={"TAGS": "T"}) for i in range(4)]
    r = await wire.send_batch(conn, "BatchAnyQueue", entries)
    msgs = await pull_all(conn, "BatchAnyQueue", r.queue_id)
    assert [m.body for m in msgs] == [e.body for e in entries]


async def test_batches_the_broker_refuses_say_why_and_store_nothing(broker: Proc, open_conn: OpenConn) -> None:
    conn = await open_conn(broker)
    await create_topic(conn, "BatchNo", queues=1)
    good = BatchEntry(0, b"fine", {"TAGS": "A"})
    header = SendMessageHeader(producer_group="p", topic="BatchNo", queue_id=0, born_timestamp=1, batch=True)
    cases = [
        ([good, BatchEntry(0, b"late", {"DELAY": "3"})], None, "cannot carry a DELAY level"),
        ([good, BatchEntry(0, b"x" * (4 * 1024 * 1024 + 1), {})], None, "larger than maxMessageSize"),
        ([], b"", "empty batch"),
        ([], encode_batch([good, good])[:-3], "malformed batch body"),
    ]
    for entries, raw, why in cases:
        body = encode_batch(entries) if raw is None else raw
        cmd = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, header.to_fields(), body=body)
        resp = await conn.request(cmd, 10.0)
        assert resp.code == ResponseCode.MESSAGE_ILLEGAL and why in (resp.remark or ""), (why, resp.code, resp.remark)
    assert await pull_all(conn, "BatchNo", 0) == [], "no entry of a refused batch is stored"
    r = await wire.send_batch(conn, "BatchNo", [good, BatchEntry(0, b"two", {"WAIT": "false"})], queue_id=0)
    assert r.code == ResponseCode.SUCCESS
    assert [(m.body, "WAIT" in m.properties) for m in await pull_all(conn, "BatchNo", 0)] == [
        (b"fine", False), (b"two", True)
    ], "each entry is stored with its own properties, WAIT too (as RocketMQ 5 stores them)"
