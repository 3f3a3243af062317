"""The pull consumer against a real ``sievemq dev``: assign, poll, seek, commit, subscribe."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from sievemq import ClientStateError, Message, MessageExt, MessageQueue, Producer, PullConsumer
from tests.client.conftest import eventually, routed

Names = Callable[[str], str]


async def _fill(namesrv: str, topic: str, n: int, group: str) -> list[MessageQueue]:
    """``n`` messages on queue 0 of a new 2-queue topic; returns its queues."""
    async with Producer(namesrv, group, default_topic_queue_nums=2) as p:
        for i in range(n):
            await p.send(Message(topic, f"m{i}".encode(), tags="TagA" if i % 2 == 0 else "TagB"),
                         queue_selector=lambda queues, msg: queues[0])  # fmt: skip
    await routed(namesrv, topic)
    return [MessageQueue(topic, "broker-a", 0), MessageQueue(topic, "broker-a", 1)]


async def _poll_n(pc: PullConsumer, n: int, timeout: float = 8.0) -> list[MessageExt]:
    out: list[MessageExt] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out.extend(await pc.poll(0.3))
    return out


async def test_assign_poll_seek_commit(namesrv: str, names: Names) -> None:
    topic, group = names("Pull"), names("g")
    q0, q1 = await _fill(namesrv, topic, 20, names("p"))
    async with PullConsumer(namesrv, group, consume_from="first", max_poll_records=7) as pc:
        assert await pc.fetch_queues(topic) == [q0, q1]
        pc.assign([q0, q1])
        first = await pc.poll(5.0)
        assert [m.queue_offset for m in first] == list(range(7)), "max_poll_records caps one poll"
        rest = await _poll_n(pc, 13)
        assert [m.body for m in first + rest] == [f"m{i}".encode() for i in range(20)]
        assert pc.position(q0) == 20 and await pc.committed(q0) in (-1, 0)
        await pc.commit()
        assert await pc.committed(q0) == 20

        pc.seek(q0, 5)
        again = await _poll_n(pc, 15)
        assert [m.queue_offset for m in again] == list(range(5, 20))
        await pc.commit({q0: 12})
        assert await pc.committed(q0) == 12
        with pytest.raises(ClientStateError, match="not assigned"):
            pc.seek(MessageQueue(topic, "broker-a", 9), 0)

    # A new consumer of the group starts from the committed offset.
    async with PullConsumer(namesrv, group) as pc2:
        pc2.assign([q0])
        resumed = await _poll_n(pc2, 8)
        assert [m.queue_offset for m in resumed] == list(range(12, 20))


async def test_new_messages_arrive_while_polling(namesrv: str, names: Names) -> None:
    topic = names("Live")
    q0, _ = await _fill(namesrv, topic, 1, names("p"))
    async with PullConsumer(namesrv, names("g"), consume_from="first") as pc:
        pc.assign([q0])
        assert len(await _poll_n(pc, 1)) == 1
        assert await pc.poll(0.3) == []
        async with Producer(namesrv, names("p2")) as p:
            start = time.monotonic()
            await p.send(Message(topic, b"live"), queue_selector=lambda queues, msg: queues[0])
            got = await eventually(lambda: pc.poll(0.5), timeout=5.0, what="a live message")
        assert [m.body for m in got] == [b"live"]
        assert time.monotonic() - start < 2.0, "long polling should hand the message over at once"


async def test_subscribe_mode_rebalances_and_filters_tags(namesrv: str, names: Names) -> None:
    topic, group = names("PullSub"), names("g")
    await _fill(namesrv, topic, 10, names("p"))
    a = PullConsumer(namesrv, group, consume_from="first", instance_name="pull-a")
    b = PullConsumer(namesrv, group, consume_from="first", instance_name="pull-b")
    for c in (a, b):
        c.subscribe(topic, "TagA")
        await c.start()
    try:
        await eventually(lambda: len(a.assignment()) == 1 and len(b.assignment()) == 1, what="one queue each")
        assert a.assignment() != b.assignment()
        owner = a if MessageQueue(topic, "broker-a", 0) in a.assignment() else b
        got = await _poll_n(owner, 5)
        assert [m.body for m in got] == [f"m{i}".encode() for i in range(0, 10, 2)]
        await owner.commit()
        assert await owner.committed(MessageQueue(topic, "broker-a", 0)) == 10
    finally:
        await a.close()
        await b.close()


async def test_assign_and_subscribe_do_not_mix(namesrv: str, names: Names) -> None:
    pc = PullConsumer(namesrv, names("g"))
    pc.assign([MessageQueue("T", "broker-a", 0)])
    with pytest.raises(ClientStateError):
        pc.subscribe("T")
    with pytest.raises(ClientStateError, match="not started"):
        await pc.poll(0.1)
