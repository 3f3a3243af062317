"""Orderly consumption in sievemq's client (``PushConsumer(orderly=True)``) against a real broker: one message at a
time per queue in queue order, a failed message retried in place (nothing after it first) and dead-lettered after
``max_reconsume_times``, and per-key order kept across a rebalance between two consumers, which never hold a queue
at the same time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from sievemq import ConsumeResult, Message, MessageExt, Producer, PushConsumer
from sievemq.admin.api import AdminClient
from sievemq.client import api
from sievemq.remoting.connection import connect
from tests.client.conftest import eventually, ready, routed
from tests.support.quiet import quiet_period

Names = Callable[[str], str]
FAST = {"rebalance_interval": 1.0, "heartbeat_interval": 1.0, "persist_interval": 0.5, "consume_from": "first"}


async def _create(namesrv: str, topic: str, queues: int) -> None:
    async with AdminClient(namesrv) as admin:
        await admin.create_topic(topic, queues)
    await routed(namesrv, topic)


async def test_a_failed_message_is_retried_in_place_then_dead_lettered(namesrv: str, names: Names) -> None:
    topic, group = names("OrdT"), names("OrdG")
    await _create(namesrv, topic, 1)
    async with Producer(namesrv, names("OrdP")) as p:
        for i in range(8):
            await p.send(Message(topic, f"m{i}".encode()))
    log: list[str] = []
    c = PushConsumer(namesrv, group, orderly=True, suspend=0.1, max_reconsume_times=2, **FAST)  # type: ignore[arg-type]
    c.subscribe(topic)
    fails = {"m2": 2, "m5": 99}  # m2 fails twice then passes; m5 always fails: dead-lettered after 2 retries

    @c.listener
    async def on(msgs: list[MessageExt]) -> ConsumeResult:
        (m,) = msgs
        body = m.body.decode()
        log.append(body)
        await asyncio.sleep(0.01)
        if fails.get(body, 0) > 0:
            fails[body] -= 1
            return ConsumeResult.RECONSUME_LATER
        return ConsumeResult.SUCCESS

    async with c:
        await eventually(lambda: "m7" in log, timeout=20, what="the last message consumed")
        await quiet_period(0.3, "more deliveries", unchanged=lambda: len(log))
    assert log == ["m0", "m1", "m2", "m2", "m2", "m3", "m4", "m5", "m5", "m5", "m6", "m7"], log
    addr = (await routed_addr(namesrv, topic))
    conn = await connect(*addr)
    try:
        r = await api.pull_message(conn, names("DlqReader"), f"%DLQ%{group}", 0, 0, subscription="*")
        assert [m.body for m in r.messages] == [b"m5"], r
    finally:
        conn.close()


def _queues(c: PushConsumer, topic: str) -> int:
    return sum(1 for mq in c.owned_queues() if mq.topic == topic)


async def routed_addr(namesrv: str, topic: str) -> tuple[str, int]:
    async with AdminClient(namesrv) as admin:
        (broker,) = await admin.brokers()
    host, _, port = broker.addrs[0].rpartition(":")
    return host, int(port)


async def test_per_key_order_holds_across_a_rebalance_and_no_two_consumers_hold_a_queue(
    namesrv: str, names: Names
) -> None:
    topic, group = names("OrdR"), names("OrdRG")
    await _create(namesrv, topic, 4)
    keys, per_key = 8, 40
    consumed: list[tuple[str, int]] = []
    inflight: dict[tuple[str, int], str] = {}
    overlaps: list[str] = []
    by: set[str] = set()

    def make(name: str) -> PushConsumer:
        c = PushConsumer(namesrv, group, orderly=True, instance_name=name, **FAST)  # type: ignore[arg-type]
        c.subscribe(topic)

        @c.listener
        async def on(msgs: list[MessageExt]) -> ConsumeResult:
            (m,) = msgs
            q = (m.topic, m.queue_id)
            if q in inflight:
                overlaps.append(f"queue {q}: {inflight[q]} and {name}")
            inflight[q] = name
            try:
                await asyncio.sleep(0.005)
                key, seq = m.body.decode().split(":")
                consumed.append((key, int(seq)))
                by.add(name)
            finally:
                inflight.pop(q, None)
            return ConsumeResult.SUCCESS

        return c

    async def produce() -> None:
        async with Producer(namesrv, names("OrdRP")) as p:
            for seq in range(per_key):
                for k in range(keys):
                    await p.send(Message(topic, f"k{k}:{seq}".encode()), shard_key=f"k{k}")
                await asyncio.sleep(0.02)

    a, b = make("ord-a"), make("ord-b")
    async with a:
        await ready(a, topic, 4)
        producing = asyncio.create_task(produce())
        await eventually(lambda: len(consumed) > keys * per_key // 4, timeout=30, what="a quarter consumed by a")
        async with b:  # joins mid-stream: two queues move from a to b
            await eventually(lambda: _queues(a, topic) == _queues(b, topic) == 2, timeout=30, what="the rebalance")
            await producing
            await eventually(lambda: {(k, s) for k, s in consumed} >= {(f"k{k}", s) for k in range(keys)
                                                                      for s in range(per_key)},
                             timeout=60, what="every message consumed")  # fmt: skip
    assert not overlaps, overlaps
    assert by == {"ord-a", "ord-b"}, f"only {by} consumed: no rebalance happened under load"
    nxt = {f"k{k}": 0 for k in range(keys)}
    for key, seq in consumed:  # a message after a rebalance may come again, but never before its predecessor
        assert seq <= nxt[key], f"{key}:{seq} consumed before {key}:{nxt[key]}"
        if seq == nxt[key]:
            nxt[key] += 1
    assert all(n == per_key for n in nxt.values()), nxt
