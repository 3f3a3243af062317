"""Inconsistent subscriptions in one consumer group, with sievemq's own client (issue: never lose a message).

Two consumers of one group subscribe one topic with ``TagA || TagB`` (first) and ``TagC``; 10 messages tagged A,
B, C in turn go to 4 queues. The TagC consumer gets a clear error from start() (or stands by, with
``standby=True``), and every A/B message reaches the group. A rolling change of a group's expression across three
consumers loses nothing: the old expression keeps every queue until no client holds it, then the new one takes
over.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import pytest

from sievemq import Message, Producer, PushConsumer, SubscriptionError
from sievemq.admin.api import AdminClient
from sievemq.protocol.reasons import Reason
from tests.client.conftest import collecting, eventually, ready, routed
from tests.support.quiet import quiet_period

Names = Callable[[str], str]
FAST = {"rebalance_interval": 1.0, "heartbeat_interval": 1.0, "persist_interval": 0.5, "consume_from": "first"}


async def create(namesrv: str, topic: str, queues: int = 4) -> None:
    async with AdminClient(namesrv) as admin:
        await admin.create_topic(topic, queues)
    await routed(namesrv, topic)


async def send_abc(namesrv: str, topic: str, n: int = 10) -> dict[str, str]:
    sent = {}
    async with Producer(namesrv, "consistency-p") as p:
        for i in range(n):
            tag = "ABC"[i % 3]
            await p.send(Message(topic, f"m{i}".encode(), tags=f"Tag{tag}", keys=[f"m{i}"]))
            sent[f"m{i}"] = tag
    return sent


async def test_inconsistent_consumer_gets_a_clear_error_and_nothing_is_lost(namesrv: str, names: Names) -> None:
    topic, group = names("T"), names("g")
    await create(namesrv, topic)
    ab = PushConsumer(namesrv, group, instance_name="ab", **FAST)  # type: ignore[arg-type]
    ab.subscribe(topic, "TagA || TagB")
    got_ab = collecting(ab)
    await ab.start()
    c = PushConsumer(namesrv, group, instance_name="c", **FAST)  # type: ignore[arg-type]
    c.subscribe(topic, "TagC")
    collecting(c)
    try:
        with pytest.raises(SubscriptionError) as err:
            await c.start()
        text = str(err.value)
        assert group in text and topic in text and "TagC" in text and "TagA || TagB" in text
        assert "use another consumer group" in text
        assert err.value.reason == Reason.SUBSCRIPTION_INCONSISTENT  # what a program branches on
        await ready(ab, topic, 4)
        sent = await send_abc(namesrv, topic)
        want = {k for k, t in sent.items() if t in "AB"}
        await eventually(lambda: {m.keys[0] for m in got_ab.msgs} >= want, 20, what="every A/B message")
        assert {m.keys[0] for m in got_ab.msgs} == want
    finally:
        await c.close()
        await ab.close()


async def test_standby_consumer_gets_no_queues_and_nothing_is_lost(namesrv: str, names: Names) -> None:
    topic, group = names("T"), names("g")
    await create(namesrv, topic)
    ab = PushConsumer(namesrv, group, instance_name="ab2", **FAST)  # type: ignore[arg-type]
    ab.subscribe(topic, "TagA || TagB")
    got_ab = collecting(ab)
    await ab.start()
    c = PushConsumer(namesrv, group, instance_name="c2", standby=True, **FAST)  # type: ignore[arg-type]
    c.subscribe(topic, "TagC")
    got_c = collecting(c)
    try:
        await c.start()
        await ready(ab, topic, 4)
        await quiet_period(2.5, "the standby taking queues over a few rebalance rounds",
                           unchanged=lambda: sorted(str(mq) for mq in c.assignment() if mq.topic == topic))  # fmt: skip
        assert not [mq for mq in c.assignment() if mq.topic == topic]
        sent = await send_abc(namesrv, topic)
        want = {k for k, t in sent.items() if t in "AB"}
        await eventually(lambda: {m.keys[0] for m in got_ab.msgs} >= want, 20, what="every A/B message")
        assert not got_c.msgs
        # when the group's expression holder leaves, the standby takes over
        await ab.close()
        await ready(c, topic, 4, timeout=15)
        more = await send_abc(namesrv, topic, 6)
        want_c = {k for k, t in more.items() if t == "C"}
        await eventually(lambda: {m.keys[0] for m in got_c.msgs} >= want_c, 20, what="TagC after the takeover")
    finally:
        await c.close()
        await ab.close()


async def test_rolling_change_of_a_groups_expression_loses_nothing(namesrv: str, names: Names) -> None:
    topic, group = names("T"), names("g")
    await create(namesrv, topic)
    received: list[tuple[str, str]] = []

    def consumer(i: int, expr: str, standby: bool) -> PushConsumer:
        c = PushConsumer(namesrv, group, instance_name=f"roll-{i}-{expr[:4]}", standby=standby, **FAST)  # type: ignore[arg-type]
        c.subscribe(topic, expr)

        async def listener(msgs: list) -> None:  # type: ignore[type-arg]
            received.extend((m.keys[0], m.tags or "") for m in msgs)

        c.listener(listener)
        return c

    olds = [consumer(i, "TagA", False) for i in range(3)]
    for c in olds:
        await c.start()
    sent: list[tuple[str, str, float]] = []
    stop = asyncio.Event()

    async def produce() -> None:
        async with Producer(namesrv, "roll-p") as p:
            i = 0
            while not stop.is_set():
                tag = "TagA" if i % 2 == 0 else "TagB"
                await p.send(Message(topic, b"x", tags=tag, keys=[f"r{i}"]))
                sent.append((f"r{i}", tag, time.monotonic()))
                i += 1
                await asyncio.sleep(0.02)

    producer = asyncio.create_task(produce())
    news: list[PushConsumer] = []
    try:
        await asyncio.sleep(1.0)
        switched_at = 0.0
        for i, old in enumerate(olds):
            await old.close()
            if i == len(olds) - 1:
                switched_at = time.monotonic()
            new = consumer(i, "TagA || TagB", True)
            await new.start()
            news.append(new)
            await asyncio.sleep(1.5)
        await asyncio.sleep(2.0)
        stop.set()
        await producer
        want_a = {k for k, t, _ in sent if t == "TagA"}
        want_b = {k for k, t, ts in sent if t == "TagB" and ts > switched_at}
        await eventually(lambda: {k for k, _ in received} >= want_a | want_b, 30, what="every matching message")
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await producer
        for c in olds + news:
            await c.close()
    assert want_a and want_b
