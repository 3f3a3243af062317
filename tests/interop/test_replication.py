"""Real RocketMQ consumers across a master's loss: the C++ core (rocketmq-client-python 0.5.0rc2) and ali-ons read
a SYNC_MASTER set, the master is killed (``kill -9``) while they still have messages to read, and they finish them
from the slave: every acknowledged message arrives (at least once), and the offsets they commit meanwhile land on
the slave."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from sievemq import Message, Producer
from sievemq.admin.api import AdminClient
from sievemq.client import api
from sievemq.client.message import SendStatus
from sievemq.remoting.codes import RequestCode
from sievemq.remoting.connection import connect
from tests.interop.clients import DriverProcess, DriverTimeout, start_driver, unique_name
from tests.support.procs import Proc
from tests.support.replica_sets import ReplicaSets, in_step, rsets, split_addr, until

__all__ = ["rsets"]

pytestmark = pytest.mark.interop

BEFORE = 20
# Both clients keep one pull per queue, of at most 32 messages; a pull the master held (long polling) may be
# answered into the frozen consumer's socket before the kill. 400 across 4 queues is well beyond that, so most of
# the second batch can only come from the slave.
AFTER = 400


async def _slave_offsets(slave: Proc, group: str, topic: str) -> list[int]:
    conn = await connect(*split_addr(slave.addr))
    try:
        return [await api.query_offset(conn, group, topic, q) for q in range(4)]
    finally:
        conn.close()


async def _slave_committed_all(slave: Proc, group: str, topic: str) -> list[int]:
    """The slave's committed offsets once they sum to every message sent; AssertionError (with them) before."""
    offsets = await _slave_offsets(slave, group, topic)
    if sum(offsets) != BEFORE + AFTER:
        raise AssertionError(f"the slave's committed offsets {offsets} sum to {sum(offsets)}, not {BEFORE + AFTER}")
    return offsets


async def _set_up(rsets: ReplicaSets, topic: str) -> tuple[Proc, Proc]:
    master = rsets.broker("master-a", "SYNC_MASTER").start()
    slave = rsets.broker("slave-a", "SLAVE", 1).start()
    await in_step(rsets.namesrv)
    async with AdminClient(rsets.namesrv) as admin:
        await admin.create_topic(topic, queues=4)

    async def copied() -> bool:
        async with AdminClient("") as admin:
            resp = await admin._call(slave.addr, RequestCode.GET_TOPIC_NAME_LIST)
        return topic.encode() in resp.body

    await until(copied, 20.0, "the slave copying the topic")
    return master, slave


async def _send(namesrv: str, topic: str, keys: list[str]) -> None:
    async with Producer(namesrv, unique_name("ReplP"), send_timeout=5.0) as p:
        for k in keys:
            r = await p.send(Message(topic, k.encode(), tags="TagA", keys=[k]))
            assert r.status == SendStatus.SEND_OK, r


def _received(d: DriverProcess) -> Counter[str]:
    return Counter(str(e["keys"]) for e in d.of("received"))


def _wait_all_received(d: DriverProcess, keys: list[str], timeout: float) -> list[str]:
    """Wait until ``d`` received every key (redeliveries count once); the keys still missing when it gives up."""
    deadline = time.monotonic() + timeout
    while True:
        got = _received(d)
        missing = [k for k in keys if got[k] == 0]
        if not missing or time.monotonic() > deadline:
            return missing
        try:
            d.wait_for("received", sum(got.values()) + 1, timeout=max(0.1, deadline - time.monotonic()))
        except DriverTimeout:
            pass


def _consumer(kind: str, namesrv: str, topic: str, group: str) -> DriverProcess:
    args = ["consume", "--namesrv", namesrv, "--topic", topic, "--group", group, "--expr", "*",
            "--expect", str(BEFORE + AFTER), "--timeout", "170", "--from", "first", "--linger", "170"]  # fmt: skip
    if kind == "ons":  # ali-ons polls routes every 30 s by default; the C++ core's 30 s cannot be changed
        args += ["--poll-namesrv-interval-ms", "1000", "--rebalance-interval-ms", "1000"]
    return start_driver(kind, args)


@pytest.mark.parametrize("kind", ["rmqcp", "ons"])
def test_a_real_consumer_finishes_from_the_slave_after_kill_9(
    rsets: ReplicaSets, interop_clients: Path, kind: str
) -> None:
    topic, group = unique_name("ReplT"), unique_name("ReplG")
    master, slave = asyncio.run(_set_up(rsets, topic))
    first = [f"b{i}" for i in range(BEFORE)]
    second = [f"a{i}" for i in range(AFTER)]
    with _consumer(kind, rsets.namesrv, topic, group) as d:
        d.wait_for("started", timeout=60)
        asyncio.run(_send(rsets.namesrv, topic, first))
        d.wait_for("received", BEFORE, timeout=90)
        # the consumer is frozen: what comes next is acknowledged by the set but not yet read by it
        os.killpg(d.proc.pid, signal.SIGSTOP)
        try:
            asyncio.run(_send(rsets.namesrv, topic, second))  # SEND_OK only once the slave has each one
            master.kill9()
        finally:
            os.killpg(d.proc.pid, signal.SIGCONT)
        missing = _wait_all_received(d, first + second, timeout=200)
        assert not missing, f"{kind} lost {missing} with the master gone\n{d.describe()}"
        # with the master gone the client commits where RocketMQ's clients do: the slave, which keeps them. It
        # commits every 5 s while it runs (its last commit on shutdown is a oneway request a client may exit before
        # sending): it stays up until the slave holds every offset.
        asyncio.run(until(lambda: _slave_committed_all(slave, group, topic), 60.0, "the slave keeping the offsets"))
        code = d.stop()
        assert code == 0, d.describe()
