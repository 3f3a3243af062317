"""The two sides of a compatibility test: Apache RocketMQ and sievemq, each a name server and a master broker.

A scenario runs the same steps against both ``Side``s and compares what a client observes. The steps here speak the
4.x remoting protocol through sievemq's client library, which is also a RocketMQ client: it sends exactly the
requests the Java client sends (docs/protocol/requests.md), and for filtering it lets a test ask each broker to
evaluate a selector over the same stored messages.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sievemq.admin.api import AdminClient
from sievemq.client.api import check_client_config, pull_message, queue_offset
from sievemq.client.errors import RemotingError
from sievemq.client.message import Message
from sievemq.client.producer import Producer
from sievemq.protocol.heartbeat import Subscription
from sievemq.protocol.message import decode_records
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection, connect
from tests.support.procs import Proc, broker_proc, namesrv_proc
from tests.support.rocketmq import rocketmq
from tests.support.wire import wait_routed


@dataclass(frozen=True)
class Side:
    """One broker under comparison."""

    name: str
    """``rocketmq`` or ``sievemq``."""
    namesrv: str
    broker: str


@contextmanager
def sievemq_side(tmp: Path, *broker_flags: str) -> Iterator[Side]:
    """A sievemq name server and broker (``broker_flags`` added to the broker's command line)."""
    ns = namesrv_proc(tmp)
    procs: list[Proc] = [ns]
    try:
        ns.start()
        br = broker_proc(tmp, ns.addr, "sv-a", *broker_flags)
        procs.append(br)
        br.start()
        yield Side("sievemq", ns.addr, br.addr)
    finally:
        for p in reversed(procs):
            p.stop()


@contextmanager
def rocketmq_side(tmp: Path, **broker: object) -> Iterator[Side]:
    """Apache RocketMQ (tests/support/rocketmq.py) with ``broker`` settings."""
    with rocketmq(tmp, broker=broker) as ref:
        yield Side("rocketmq", ref.namesrv, ref.broker)


async def broker_connection(side: Side) -> Connection:
    """A connection to the side's master broker."""
    host, port = side.broker.rsplit(":", 1)
    return await connect(host, int(port))


async def create_topic(side: Side, topic: str, queues: int = 1) -> None:
    """UPDATE_AND_CREATE_TOPIC on the side's broker, then wait until the name server routes it."""
    async with AdminClient(side.namesrv) as admin:
        await admin.create_topic(topic, queues=queues, broker=side.broker)
    await wait_routed(side.namesrv, [topic], who=side.name)


async def send_all(side: Side, topic: str, messages: list[Message]) -> None:
    """Send ``messages`` in order to queue 0 of ``topic``, and wait until the broker's consume queue holds them
    (RocketMQ builds it after answering the send)."""
    producer = Producer(side.namesrv, group="compat_producer", queue_selector=lambda queues, _m: queues[0])
    await producer.start()
    last = -1
    try:
        for m in messages:
            last = (await producer.send(m)).queue_offset
    finally:
        await producer.close()
    conn = await broker_connection(side)
    try:
        for _ in range(1200):
            if await queue_offset(conn, RequestCode.GET_MAX_OFFSET, topic, 0, 30.0) > last:
                return
            await asyncio.sleep(0.05)  # polling for a state: the broker's dispatch of what it stored
        raise AssertionError(f"{side.name}: {topic} queue 0 never reached offset {last + 1}")
    finally:
        conn.close()


async def selector_accepted(conn: Connection, topic: str, expression: str, kind: str = "SQL92") -> int:
    """The code CHECK_CLIENT_CONFIG answers for a subscription (0: the broker can serve it; 23: it does not
    compile)."""
    try:
        await check_client_config(conn, "compat@1", "compat_check", Subscription(topic, expression, kind))
    except RemotingError as e:
        return e.code
    return ResponseCode.SUCCESS


async def matched(conn: Connection, topic: str, expression: str, kind: str = "SQL92") -> tuple[int, frozenset[str]]:
    """Pull queue 0 of ``topic`` from the start with the subscription carried in the pull (FLAG_SUBSCRIPTION):
    the code of the last answer and the bodies the broker delivered."""
    offset, got = 0, set()
    while True:
        r = await pull_message(conn, "compat_pull", topic, 0, offset, max_nums=32, subscription=expression,
                               expression_type=kind)  # fmt: skip
        if r.code == ResponseCode.SUCCESS:
            got.update(m.body.decode() for m in r.messages)
        elif r.code not in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY):
            return r.code, frozenset(got)
        if r.code == ResponseCode.PULL_NOT_FOUND or r.next_begin_offset >= r.max_offset:
            return ResponseCode.SUCCESS, frozenset(got)
        offset = r.next_begin_offset


async def pop_bodies(conn: Connection, group: str, topic: str, init_mode: int, queue_id: int = 0) -> list[str]:
    """One POP_MESSAGE (200050) as RocketMQ's clients send it (``initMode`` 0: MIN, 1: MAX): the bodies handed out,
    in order (none: PULL_NOT_FOUND)."""
    fields = {
        "consumerGroup": group,
        "topic": topic,
        "queueId": queue_id,
        "maxMsgNums": 32,
        "invisibleTime": 60_000,
        "pollTime": 0,
        "bornTime": int(time.time() * 1000),
        "initMode": init_mode,
        "expType": "TAG",
        "exp": "*",
    }
    resp = await conn.request(RemotingCommand.request(RequestCode.POP_MESSAGE, fields), 30.0)
    if resp.code == ResponseCode.PULL_NOT_FOUND:
        return []
    assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
    return [m.body.decode() for m in decode_records(resp.body)] if resp.body else []


async def query_offset_answer(conn: Connection, group: str, topic: str, zero_if_not_found: bool | None) -> int:
    """QUERY_CONSUMER_OFFSET (14) for a queue the group has no offset of: the offset answered, or -code."""
    fields: dict[str, object] = {"consumerGroup": group, "topic": topic, "queueId": 0}
    if zero_if_not_found is not None:
        fields["setZeroIfNotFound"] = zero_if_not_found
    resp = await conn.request(RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, fields), 30.0)
    if resp.code != ResponseCode.SUCCESS:
        return -resp.code
    return int(resp.ext_fields["offset"])
