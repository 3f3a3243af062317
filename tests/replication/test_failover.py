"""A master lost (``kill -9``, hung by SIGSTOP, or its network cut) under consumers and producers: sievemq's
consumer goes on from the slave without a gap, commits its offsets there, and those offsets survive the master's
return; producers move to the topic's other broker set; the master comes back and the set converges."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator

import pytest

from sievemq import ConsumeResult, Message, MessageExt, Producer, PushConsumer
from sievemq.admin.api import AdminClient
from sievemq.admin.progress import group_list, group_progress
from sievemq.client import api
from sievemq.client.message import MessageQueue, SendStatus
from sievemq.remoting.codes import RequestCode
from sievemq.remoting.connection import connect
from tests.support.procs import Proc
from tests.support.replica_sets import ReplicaSets, in_step, set_status, split_addr, until

TOPIC = "FailoverT"
GROUP = "failover-g"


class Slow:
    """A listener that takes ``delay`` per message and records what it saw."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.bodies: list[bytes] = []

    async def __call__(self, msgs: list[MessageExt]) -> ConsumeResult:
        await asyncio.sleep(self.delay * len(msgs))
        self.bodies.extend(m.body for m in msgs)
        return ConsumeResult.SUCCESS


@contextlib.asynccontextmanager
async def consumer(namesrv: str, listener: Slow, name: str) -> AsyncIterator[PushConsumer]:
    c = PushConsumer(namesrv, GROUP, instance_name=name, consume_from="first", concurrency=1, pull_batch_size=4,
                     max_cached_messages=8, pull_suspend=1.0, pull_timeout=4.0, poll_namesrv_interval=1.0,
                     rebalance_interval=2.0, persist_interval=1.0, request_timeout=2.0)  # fmt: skip
    c.subscribe(TOPIC)
    c.listener(listener)
    await c.start()
    try:
        yield c
    finally:
        await c.close()


async def committed(addr: str, queues: int) -> list[int]:
    """The group's committed offset of each queue on the broker at ``addr``."""
    conn = await connect(*split_addr(addr))
    try:
        return [await api.query_offset(conn, GROUP, TOPIC, q) for q in range(queues)]
    finally:
        conn.close()


async def max_offsets(addr: str, queues: int) -> list[int]:
    conn = await connect(*split_addr(addr))
    try:
        return [await api.queue_offset(conn, RequestCode.GET_MAX_OFFSET, TOPIC, q) for q in range(queues)]
    finally:
        conn.close()


async def two_sets(rsets: ReplicaSets) -> tuple[Proc, Proc, Proc]:
    """broker-a (SYNC_MASTER and a slave) and broker-b (a master alone), the topic on both masters."""
    master = rsets.broker("master-a", "SYNC_MASTER").start()
    slave = rsets.broker("slave-a", "SLAVE", 1).start()
    other = rsets.broker("master-b", "ASYNC_MASTER", name="broker-b").start()
    await in_step(rsets.namesrv)
    async with AdminClient(rsets.namesrv) as admin:
        await until(lambda: _masters(admin), 15.0, "both masters registered")
        await admin.create_topic(TOPIC, queues=4)
    await until(lambda: _copied(slave), 20.0, "the slave copying the topic")
    return master, slave, other


async def _masters(admin: AdminClient) -> bool:
    return sum(1 for b in await admin.brokers() if 0 in b.addrs) == 2


async def _copied(slave: Proc) -> bool:
    async with AdminClient("") as admin:
        resp = await admin._call(slave.addr, RequestCode.GET_TOPIC_NAME_LIST)
    return TOPIC.encode() in resp.body


async def lose_master(rsets: ReplicaSets, master: Proc, how: str) -> None:
    if how == "kill -9":
        master.kill9()
    elif how == "SIGSTOP":  # a hung master: connections open, nothing answered
        assert master.popen is not None
        master.popen.send_signal(signal.SIGSTOP)
    else:
        rsets.host("master-a").link_down()


@pytest.mark.parametrize("how", ["kill -9", "SIGSTOP", "link down"])
async def test_consumers_go_on_from_the_slave_and_their_offsets_survive(rsets: ReplicaSets, how: str) -> None:
    if how == "link down" and not rsets.namespaces:
        pytest.skip("cutting a host's network needs network namespaces (run as root with iproute2)")
    master, slave, _other = await two_sets(rsets)
    async with Producer(rsets.namesrv, "failover-p", poll_namesrv_interval=1.0, send_timeout=2.0) as p:
        first = [f"a{i}".encode() for i in range(80)]
        for body in first:  # all on broker-a's queues, acknowledged only once the slave has them
            r = await p.send(Message(TOPIC, body), queue_selector=on_a)
            assert r.status == SendStatus.SEND_OK
        got = Slow(0.03)
        async with consumer(rsets.namesrv, got, "c1"):
            await until(lambda: _at_least(got, 15), 30.0, "some messages consumed from the master")
            await lose_master(rsets, master, how)
            # the consumer finishes broker-a's queues from the slave
            await until(lambda: _all_of(got, first), 60.0, "every message of broker-a consumed after the loss")
            # producers go on through broker-b
            during = []
            for i in range(10):
                r = await p.send(Message(TOPIC, f"b{i}".encode()))
                assert r.message_queue.broker_name == "broker-b"
                during.append(f"b{i}".encode())
            await until(lambda: _all_of(got, during), 30.0, "messages sent to broker-b during the loss")
            # its offsets of broker-a's queues are committed on the slave
            ends = await max_offsets(slave.addr, 4)
            await until(lambda: _equal(committed(slave.addr, 4), ends), 15.0, "offsets committed on the slave")

        # the master returns: the set converges, and it takes the slave's offsets
        if how == "kill -9":
            rsets.broker("master-a", "SYNC_MASTER").start()
        elif how == "SIGSTOP":
            assert master.popen is not None
            master.popen.send_signal(signal.SIGCONT)
        else:
            rsets.host("master-a").link_up()
        # as soon as the master is listed again, before the slave's next metadata round brings the offsets over:
        # admin reads ask every replica, so the group neither looks deleted nor behind (issue 33 item 2)
        await until(lambda: _master_listed(rsets.namesrv), 40.0, "the master listed again")
        async with AdminClient(rsets.namesrv) as admin:
            progress = await group_progress(admin, GROUP)
            mine = [q.consumer_offset for q in progress.queues if (q.topic, q.broker) == (TOPIC, "broker-a")]
            assert sorted(mine) == sorted(ends), progress.queues
            assert GROUP in {s.group for s in await group_list(admin)}
        await in_step(rsets.namesrv, timeout=40.0)
        rows = await set_status(rsets.namesrv)
        await until(lambda: _equal(committed(rows[0]["addr"], 4), ends), 30.0, "the master holding the slave's offsets")

        # the producer's route holds the master again (its route is refreshed every second: in step and the
        # offsets can come first, and a send to broker-a's queues found none of them once)
        async def routes_to_a() -> bool:
            return any(q.broker_name == "broker-a" for q in (await p.publish_info(TOPIC)).queues)

        await until(routes_to_a, 30.0, "the producer's route to the returned master")

        # a new consumer of the group starts where the first left off: nothing of before comes again
        again = Slow(0.0)
        async with consumer(rsets.namesrv, again, "c2"):
            after = []
            for i in range(10):
                r = await p.send(Message(TOPIC, f"c{i}".encode()), queue_selector=on_a)
                assert r.status == SendStatus.SEND_OK
                after.append(f"c{i}".encode())
            await until(lambda: _all_of(again, after), 30.0, "messages sent after the master returned")
            assert not set(again.bodies) & set(first), "messages consumed before came again"


async def _master_listed(namesrv: str) -> bool:
    async with AdminClient(namesrv) as admin:
        return any(b.name == "broker-a" and 0 in b.addrs for b in await admin.brokers())


def _on_set(queues: list[MessageQueue], name: str) -> MessageQueue:
    return next(q for q in queues if q.broker_name == name)


def on_a(queues: list[MessageQueue], _msg: Message) -> MessageQueue:
    """The first queue of broker-a."""
    return _on_set(queues, "broker-a")


async def _at_least(got: Slow, n: int) -> bool:
    return len(got.bodies) >= n


async def _all_of(got: Slow, want: list[bytes]) -> bool:
    return set(want) <= set(got.bodies)


async def _equal(values: object, want: list[int]) -> bool:
    return await values == want  # type: ignore[misc]
