"""``slaveReadEnable``: a pull that reads far behind the commit log's end (beyond ``accessMessageInMemoryMaxRatio``
of memory) is answered with ``suggestWhichBrokerId`` = the group's ``whichBrokerWhenConsumeSlowly``, and sievemq's
consumer then reads from the slave; without it every answer suggests the master."""

from __future__ import annotations

import asyncio

from sievemq import ConsumeResult, Message, MessageExt, Producer, PushConsumer
from sievemq.admin.api import AdminClient
from sievemq.client import api
from sievemq.client.message import MessageQueue, SendStatus
from sievemq.remoting.codes import RequestCode
from sievemq.remoting.connection import connect
from tests.support.replica_sets import ReplicaSets, in_step, split_addr, until

TOPIC = "SlaveReadT"
SLOW = ("--slave-read-enable", "true", "--access-message-in-memory-max-ratio", "0")
"""Ratio 0: any pull behind the end counts as slow."""


async def suggestions(addr: str, group: str) -> list[int]:
    """``suggestWhichBrokerId`` of a pull of one message from the start, and of one at the queue's end (nothing
    behind)."""
    conn = await connect(*split_addr(addr))
    try:
        first = await api.pull_message(conn, group, TOPIC, 0, 0, max_nums=1)
        end = await api.queue_offset(conn, RequestCode.GET_MAX_OFFSET, TOPIC, 0)
        last = await api.pull_message(conn, group, TOPIC, 0, end, max_nums=1)
        return [first.suggest_broker_id, last.suggest_broker_id]
    finally:
        conn.close()


async def test_slow_pulls_are_sent_to_the_slave_and_the_consumer_follows(rsets: ReplicaSets) -> None:
    master = rsets.broker("master", "SYNC_MASTER", 0, *SLOW).start()
    slave = rsets.broker("slave", "SLAVE", 1, *SLOW).start()
    await in_step(rsets.namesrv)
    async with Producer(rsets.namesrv, "slave-read-p") as p:
        for i in range(40):
            r = await p.send(Message(TOPIC, f"m{i}".encode()), queue_selector=first_queue)
            assert r.status == SendStatus.SEND_OK
    await in_step(rsets.namesrv)
    # behind: the group's whichBrokerWhenConsumeSlowly (1); at the end: the group's brokerId (0)
    seen = await suggestions(master.addr, "slave-read-g")
    assert seen == [1, 0], seen

    got: list[bytes] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeResult:
        got.extend(m.body for m in msgs)
        return ConsumeResult.SUCCESS

    c = PushConsumer(rsets.namesrv, "slave-read-g", consume_from="first", pull_batch_size=1, poll_namesrv_interval=1.0)
    c.subscribe(TOPIC)
    c.listener(listener)
    await c.start()
    try:
        await until(lambda: _has(got, 40), 30.0, "every message consumed")
    finally:
        await c.close()
    assert sorted(set(got)) == sorted(f"m{i}".encode() for i in range(40))
    # the slave delivered messages (told to by the master's answers), the master not all of them
    async with AdminClient("") as admin:
        from_slave = int((await admin.runtime_info(slave.addr))["msgGetTotalTodayNow"])
        from_master = int((await admin.runtime_info(master.addr))["msgGetTotalTodayNow"])
    assert from_slave > 0 and from_master < 40 + 2, (from_slave, from_master)


async def test_without_slave_read_every_answer_suggests_the_master(rsets: ReplicaSets) -> None:
    master = rsets.broker("master", "SYNC_MASTER").start()
    rsets.broker("slave", "SLAVE", 1).start()
    await in_step(rsets.namesrv)
    async with Producer(rsets.namesrv, "slave-read-p") as p:
        for i in range(5):
            await p.send(Message(TOPIC, f"m{i}".encode()), queue_selector=first_queue)
    seen = await suggestions(master.addr, "slave-read-g")
    assert seen == [0, 0], seen


def first_queue(queues: list[MessageQueue], _msg: Message) -> MessageQueue:
    return min(queues, key=lambda q: q.queue_id)


async def _has(got: list[bytes], n: int) -> bool:
    await asyncio.sleep(0)
    return len(set(got)) >= n
