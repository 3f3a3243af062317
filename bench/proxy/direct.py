"""The 4.x rows, in this process: sievemq's Producer and PullConsumer, and POP over one connection."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable

from sievemq import ConsumeFrom, Message, Producer, PullConsumer, Selector, SendStatus
from sievemq.client import api, pop_api
from sievemq.protocol.heartbeat import ConsumerData, HeartbeatData, Subscription
from sievemq.protocol.message import MessageExt
from sievemq.remoting.connection import connect

from .client5 import BenchError
from .measure import Sample, Servers, window

BATCH = 32
INVISIBLE_S = 60
"""Longer than any row: nothing is delivered twice unless something is wrong."""


async def sends(producer: Producer, n: int, inflight: int, make: Callable[[int], Message]) -> list[str]:
    """``n`` sends of ``make(i)``, ``inflight`` tasks each awaiting one send at a time; the statuses that were not
    SEND_OK."""
    counter = iter(range(n))
    failed: list[str] = []

    async def worker() -> None:
        for i in counter:
            r = await producer.send(make(i))
            if r.status is not SendStatus.SEND_OK:
                failed.append(r.status.name)

    await asyncio.gather(*(worker() for _ in range(inflight)))
    return failed


async def produce(
    servers: Servers, producer: Producer, n: int, inflight: int, make: Callable[[int], Message]
) -> Sample:
    """The timed sends of a produce row."""
    with window(servers) as w:
        failed = await sends(producer, n, inflight, make)
    if failed:
        raise BenchError(f"4.x producer: {len(failed)} of {n} sends answered {failed[0]}")
    return w.sample(n, n)


def wanted(m: MessageExt, selector: Selector) -> bool:
    """A message a consumer asked for (the filtered backlog marks the matching ones with w=1)."""
    return selector.expression == "*" or m.properties.get("w") == "1"


async def pull(
    servers: Servers, topic: str, group: str, expected: int, scanned: int, selector: Selector, started: list[float]
) -> Sample:
    """A new group's PullConsumer: ``poll`` of up to 32 then ``commit``, until ``expected`` messages; 0.5 s more
    must bring nothing (the backlog is all stored: anything more would be fetched at once). The clock starts when
    ``start()`` has returned (its duration goes to ``started``)."""
    c = PullConsumer(servers.ns.addr, group, consume_from=ConsumeFrom.FIRST, pull_batch_size=BATCH)
    c.subscribe(topic, selector)
    t0 = time.perf_counter()
    await c.start()
    started.append(time.perf_counter() - t0)
    seen: set[str] = set()
    got = unwanted = 0
    try:
        deadline = time.monotonic() + 300
        with window(servers) as w:
            while got < expected and time.monotonic() < deadline:
                msgs = await c.poll(timeout=1.0, max_records=BATCH)
                got += len(msgs)
                unwanted += sum(1 for m in msgs if not wanted(m, selector))
                seen.update(m.msg_id for m in msgs)
                if msgs:
                    await c.commit()
        extra = len(await c.poll(timeout=0.5))
    finally:
        await c.close()
    if got != expected or len(seen) != expected or unwanted or extra:
        raise BenchError(f"4.x PullConsumer {group}: {got} received ({len(seen)} distinct, {unwanted} not "
                         f"matching), {extra} after the last, expected {expected}")  # fmt: skip
    return w.sample(expected, scanned)


async def pop(servers: Servers, topic: str, group: str, expected: int) -> Sample:
    """A new group's POP of 32 (from the oldest message) and an ACK of each, over one connection to the broker:
    what the proxy does for a 5.x SimpleConsumer, without gRPC."""
    conn = await connect("127.0.0.1", servers.broker.port)
    seen: set[str] = set()
    acked = 0
    try:
        deadline = time.monotonic() + 300
        with window(servers) as w:
            while acked < expected and time.monotonic() < deadline:
                r = await pop_api.pop_message(conn, group, topic, -1, max_nums=BATCH, invisible_ms=INVISIBLE_S * 1000,
                                              from_latest=False)  # fmt: skip
                for pm in r.messages:
                    seen.add(pm.message.msg_id)
                    await pop_api.ack_message(conn, group, pm.handle)
                    acked += 1
        extra = len((await pop_api.pop_message(conn, group, topic, -1, max_nums=BATCH)).messages)  # the rest now
    finally:
        conn.close()
    if acked != expected or len(seen) != expected or extra:
        raise BenchError(f"POP direct {group}: {acked} acked ({len(seen)} distinct), {extra} after the last, "
                         f"expected {expected}")  # fmt: skip
    return w.sample(expected, expected)


async def register_sql(servers: Servers, topic: str, group: str, sql: str) -> None:
    """Register ``group``'s SQL92 filter with a heartbeat, then leave (the filter stays): the broker computes its
    Bloom bits for the backlog written next, as it does for the 5.x groups, which the proxy registers when their
    clients start."""
    conn = await connect("127.0.0.1", servers.broker.port)
    client_id = f"bench-register@{os.getpid()}"
    sub = Subscription(topic, sql, "SQL92")
    consumer = ConsumerData(group, "CONSUME_ACTIVELY", consume_from_where=ConsumeFrom.FIRST.value, subscriptions=[sub])
    try:
        await api.heartbeat(conn, HeartbeatData(client_id, consumers=[consumer]))
        await api.unregister_client(conn, client_id, consumer_group=group)
    finally:
        conn.close()
