"""The producer against a real ``sievemq dev``: send kinds, results, queue selection, compression, validation."""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Callable

import pytest

from sievemq import (
    ClientStateError,
    Message,
    MessageQueue,
    MessageValidationError,
    Producer,
    PullConsumer,
    SendStatus,
)
from sievemq.client import api
from sievemq.protocol.msgid import parse_offset_msg_id
from sievemq.remoting.connection import connect
from tests.client.conftest import eventually
from tests.support.procs import Proc

Names = Callable[[str], str]


async def _poll_all(namesrv: str, group: str, topic: str, want: int, timeout: float = 10.0) -> list[object]:
    """Every message of ``topic`` from offset 0 (a pull consumer over all queues), until ``want`` arrived."""
    async with PullConsumer(namesrv, group, consume_from="first") as pc:
        pc.assign(await eventually(lambda: pc.fetch_queues(topic), what=f"route of {topic}"))
        got: list[object] = []
        deadline = time.monotonic() + timeout
        while len(got) < want and time.monotonic() < deadline:
            got.extend(await pc.poll(0.5))
        return got


async def test_send_returns_ids_and_the_message_arrives_intact(namesrv: str, names: Names) -> None:
    topic = names("T")
    async with Producer(namesrv, names("p")) as p:
        r = await p.send(Message(topic, b"hello", tags="TagA", keys=["o-1", "o-2"], properties={"region": "eu"}))
    assert r.status is SendStatus.SEND_OK
    assert len(r.msg_id) == 32 and len(r.offset_msg_id) == 32
    assert r.message_queue.topic == topic and r.message_queue.broker_name == "broker-a"
    assert r.queue_offset == 0
    (m,) = await _poll_all(namesrv, names("reader"), topic, 1)
    assert m.body == b"hello" and m.tags == "TagA" and m.keys == ["o-1", "o-2"]  # type: ignore[attr-defined]
    assert m.properties["region"] == "eu" and m.msg_id == r.msg_id  # type: ignore[attr-defined]
    assert m.offset_msg_id == r.offset_msg_id and m.queue_id == r.message_queue.queue_id  # type: ignore[attr-defined]


async def test_auto_created_topic_gets_its_own_route(namesrv: str, names: Names) -> None:
    """A topic nobody created is sent through TBW102's route; the broker creates it with 4 queues."""
    topic = names("Auto")
    async with Producer(namesrv, names("p")) as p:
        for i in range(8):
            await p.send(Message(topic, f"m{i}".encode()))
        assert (await p.publish_info(topic)).from_default  # still TBW102's route, shaped to 4 queues

        async def real_route() -> bool:
            return not (await p.publish_info(topic)).from_default

        await eventually(real_route, what="the topic's own route")
        queues = {(await p.send(Message(topic, b"x"))).message_queue.queue_id for _ in range(8)}
    assert queues == {0, 1, 2, 3}  # round robin over the 4 queues the broker created


async def test_send_batch_stores_each_message_in_order_on_one_queue(namesrv: str, names: Names) -> None:
    topic = names("Batch")
    msgs = [Message(topic, f"b{i}".encode(), tags="TagB", keys=[f"k{i}"]) for i in range(10)]
    async with Producer(namesrv, names("p")) as p:
        r = await p.send_batch(msgs)
    assert r.status is SendStatus.SEND_OK
    assert len(r.msg_ids) == 10 and len(set(r.msg_ids)) == 10
    assert len(r.offset_msg_id.split(",")) == 10
    got = await _poll_all(namesrv, names("reader"), topic, 10)
    assert [m.body for m in got] == [f"b{i}".encode() for i in range(10)]  # type: ignore[attr-defined]
    assert [m.msg_id for m in got] == r.msg_ids  # type: ignore[attr-defined]
    assert {m.queue_id for m in got} == {r.message_queue.queue_id}  # type: ignore[attr-defined]
    assert [m.keys for m in got] == [[f"k{i}"] for i in range(10)]  # type: ignore[attr-defined]


async def test_oneway_and_async_sends_arrive(namesrv: str, names: Names) -> None:
    topic = names("Oneway")
    results = []
    async with Producer(namesrv, names("p")) as p:
        await p.send(Message(topic, b"first"))  # route known
        for i in range(5):
            p.send_oneway(Message(topic, f"o{i}".encode()))
        tasks = [
            p.send_async(Message(topic, f"a{i}".encode()), callback=lambda r, e: results.append((r, e)))
            for i in range(5)
        ]
        done = await asyncio.gather(*tasks)
    assert all(r.status is SendStatus.SEND_OK for r in done)
    await eventually(lambda: len(results) == 5, what="async callbacks")
    assert all(e is None and r is not None for r, e in results)
    got = await _poll_all(namesrv, names("reader"), topic, 11)
    assert sorted(m.body for m in got) == sorted(  # type: ignore[attr-defined]
        [b"first"] + [f"o{i}".encode() for i in range(5)] + [f"a{i}".encode() for i in range(5)]
    )


async def test_delayed_message_arrives_after_its_delay_not_before(namesrv: str, names: Names) -> None:
    topic = names("Delay")
    async with Producer(namesrv, names("p")) as p:
        await p.send(Message(topic, b"warmup"))
        async with PullConsumer(namesrv, names("reader"), consume_from="first") as pc:
            pc.assign(await eventually(lambda: pc.fetch_queues(topic), what=f"route of {topic}"))
            await eventually(lambda: pc.poll(0.2), what="warm-up message")
            sent_at = time.monotonic()
            await p.send(Message(topic, b"later"), delay_level=1)
            early = await pc.poll(0.7)
            assert early == [], "a level-1 delayed message arrived before 1 s"
            got = await eventually(lambda: pc.poll(0.2), timeout=5.0, what="delayed message")
            waited = time.monotonic() - sent_at
    assert [m.body for m in got] == [b"later"]
    assert 0.9 <= waited < 4.0
    assert got[0].properties["REAL_TOPIC"] == topic and got[0].topic == topic


async def test_shard_key_keeps_a_key_on_one_queue(namesrv: str, names: Names) -> None:
    topic = names("Ordered")
    async with Producer(namesrv, names("p"), default_topic_queue_nums=8) as p:
        await p.send(Message(topic, b"create"))

        async def real_route() -> bool:
            return not (await p.publish_info(topic)).from_default

        await eventually(real_route, what="the topic's own route")
        by_key: dict[str, set[int]] = {}
        offsets: dict[str, list[int]] = {}
        for i in range(40):
            key = f"user-{i % 4}"
            r = await p.send(Message(topic, f"{key}:{i}".encode()), shard_key=key)
            by_key.setdefault(key, set()).add(r.message_queue.queue_id)
            offsets.setdefault(key, []).append(r.queue_offset)
        chosen = await p.send(Message(topic, b"sel"), queue_selector=lambda queues, msg: queues[-1])
    assert all(len(q) == 1 for q in by_key.values()), by_key
    assert all(o == sorted(o) for o in offsets.values())
    assert chosen.message_queue.queue_id == 7


async def test_large_body_is_compressed_on_the_wire_and_inflated_for_consumers(
    namesrv: str, names: Names, dev: Proc
) -> None:
    topic = names("Big")
    body = (b"sievemq compresses large bodies " * 400)[:12_000]
    async with Producer(namesrv, names("p")) as p:
        r = await p.send(Message(topic, body))
        small = await p.send(Message(topic, b"tiny"))
    conn = await connect("127.0.0.1", dev.port)
    try:
        raw = await api.pull_message(conn, names("raw"), topic, r.message_queue.queue_id, r.queue_offset, max_nums=1)
    finally:
        conn.close()
    stored = raw.messages[0]
    assert stored.sys_flag & 0x1 and zlib.decompress(stored.body) == body and len(stored.body) < len(body)
    got = await _poll_all(namesrv, names("reader"), topic, 2)
    assert {m.body for m in got} == {body, b"tiny"}  # type: ignore[attr-defined]
    assert parse_offset_msg_id(small.offset_msg_id)[0] == "127.0.0.1"


@pytest.mark.parametrize(
    ("msg", "match"),
    [
        (Message("bad topic", b"x"), "illegal characters"),
        (Message("a" * 128, b"x"), "longer than the limit 127"),
        (Message("", b"x"), "blank"),
        (Message("TBW102", b"x"), "auto-create template"),
        (Message("SCHEDULE_TOPIC_XXXX", b"x"), "system topic"),
        (Message("ok", b""), "empty"),
        (Message("ok", b"x" * (4 * 1024 * 1024 + 1)), "larger than the limit"),
        (Message("ok", b"x", properties={"TAGS": "t"}), "used by the system"),
        (Message("ok", b"x", properties={"UNIQ_KEY": "u"}), "used by the system"),
        (Message("ok", b"x", properties={"a\x01b": "v"}), "separator"),
        (Message("ok", b"x", properties={"k": "v\x02"}), "separator"),
        (Message("ok", b"x", properties={"k": ""}), "blank"),
        (Message("ok", b"x", tags="A||B"), "'\\|\\|'"),
        (Message("ok", b"x", delay_level=-1), "delay level"),
    ],
)
async def test_invalid_messages_are_refused_before_sending(
    namesrv: str, names: Names, msg: Message, match: str
) -> None:
    async with Producer(namesrv, names("p")) as p:
        with pytest.raises(MessageValidationError, match=match):
            await p.send(msg)
        with pytest.raises(MessageValidationError, match=match):
            p.send_oneway(msg)


async def test_batch_validation_and_state_errors(namesrv: str, names: Names) -> None:
    p = Producer(namesrv, names("p"))
    with pytest.raises(ClientStateError, match="not started"):
        await p.send(Message("T", b"x"))
    async with p:
        with pytest.raises(MessageValidationError, match="same topic"):
            await p.send_batch([Message("T1", b"x"), Message("T2", b"x")])
        with pytest.raises(MessageValidationError, match="delayed"):
            await p.send_batch([Message("T1", b"x", delay_level=2)])
        with pytest.raises(MessageValidationError, match="at least one"):
            await p.send_batch([])
    with pytest.raises(ClientStateError):
        await p.send(Message("T", b"x"))
    with pytest.raises(MessageValidationError, match="group name"):
        Producer(namesrv, "bad group")


async def test_selector_returning_garbage_is_a_clear_error(namesrv: str, names: Names) -> None:
    topic = names("Sel")
    async with Producer(namesrv, names("p")) as p:
        await p.send(Message(topic, b"x"))
        with pytest.raises(MessageValidationError, match="not a MessageQueue"):
            await p.send(Message(topic, b"x"), queue_selector=lambda q, m: 3)  # type: ignore[arg-type,return-value]
        r = await p.send(Message(topic, b"x"), queue_selector=lambda q, m: MessageQueue(topic, "broker-a", 2))
    assert r.message_queue.queue_id == 2
