"""Where a new group of rocketmq-client 4.9.8 (``java4``) and 5.5.0 (``java5``) starts on ``sievemq dev``:
CONSUME_FROM_FIRST_OFFSET, CONSUME_FROM_LAST_OFFSET and CONSUME_FROM_TIMESTAMP, under RocketMQ's rule (sievemq's
default) and with ``newGroupStartsAtEnd`` (docs/consume-from.md). See test_java_clients.py for the helpers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sievemq import Message, Producer
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import connect
from tests.interop.clients import DriverProcess, unique_name
from tests.interop.test_java_clients import KINDS, holds, java, keys, make_topic, ns, send, start_java, wait_until
from tests.support.procs import Proc, dev_proc

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[Proc]:
    """A ``sievemq dev`` with default settings."""
    p = dev_proc(tmp_path_factory.mktemp("interop-java-from")).start()
    try:
        yield p
    finally:
        assert p.stop() == 0, p.log()


# ------------------------------------------------------------------------------------------ consume from


def _old_then_new(p: Proc, topic: str) -> int:
    """4 messages ``old*``, then, from the second after the next whole one on (the client's timestamp has whole
    seconds), 4 ``mid*``; returns that second (ms). The ``mid*`` are stored nearer it than the ``old*``: the offset
    a timestamp search answers is the same under RocketMQ 4's rule (the nearest) and 5's (the first at or after)."""
    send(p, [Message(topic, b"o", keys=f"old{i}") for i in range(4)], queue_of=lambda i: i)
    stamp = (int(time.time()) + 2) * 1000
    wait_until(lambda: time.time() * 1000 >= stamp, lambda: "the clock")
    send(p, [Message(topic, b"m", keys=f"mid{i}") for i in range(4)], queue_of=lambda i: i)
    return stamp


def _from(kind: str, p: Proc, topic: str, where: str, expect: int, stamp: int) -> DriverProcess:
    extra = ["--timestamp", str(stamp)] if where == "timestamp" else []
    return start_java(kind, "consume", p, topic, unique_name("JFrom"), "--from", where, *extra,
                      "--expect", str(expect), "--linger", "2", "--timeout", "120")  # fmt: skip


OLD, MID, NEW = ({f"{w}{i}" for i in range(4)} for w in ("old", "mid", "new"))


@pytest.mark.parametrize("kind", KINDS)
def test_new_groups_on_young_queues_read_them_whole(dev: Proc, kind: str) -> None:
    """RocketMQ's rule (sievemq's default): a new group's CONSUME_FROM_LAST_OFFSET and CONSUME_FROM_TIMESTAMP start
    at offset 0 of a queue whose first message is still in memory: they read it whole (the same as Apache RocketMQ
    5.5.0's broker answers both clients, observed)."""
    topic = make_topic(dev)
    stamp = _old_then_new(dev, topic)
    with _from(kind, dev, topic, "last", 8, stamp) as last, _from(kind, dev, topic, "timestamp", 8, stamp) as ts:
        assert last.wait() == 0, last.describe()
        assert ts.wait() == 0, ts.describe()
    assert set(keys(last.events)) == OLD | MID, last.describe()
    assert set(keys(ts.events)) == OLD | MID, ts.describe()


@pytest.fixture(scope="module")
def dev_at_end(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[Proc]:
    """A ``sievemq dev`` with ``newGroupStartsAtEnd = true`` (docs/consume-from.md)."""
    tmp = tmp_path_factory.mktemp("interop-java-at-end")
    (tmp / "broker.toml").write_text("newGroupStartsAtEnd = true\n")
    p = dev_proc(tmp, "--config", str(tmp / "broker.toml")).start()
    try:
        yield p
    finally:
        assert p.stop() == 0, p.log()


@pytest.mark.parametrize("kind", KINDS)
def test_consume_from_first_last_and_timestamp(dev_at_end: Proc, kind: str) -> None:
    """With newGroupStartsAtEnd a new group starts where its consume-from says: first reads everything, last only
    what is sent after its queues were handed over, a timestamp from the first message stored at or after it."""
    p = dev_at_end
    topic = make_topic(p)
    stamp = _old_then_new(p, topic)
    with (
        _from(kind, p, topic, "first", 12, stamp) as first,
        _from(kind, p, topic, "last", 4, stamp) as last,
        _from(kind, p, topic, "timestamp", 8, stamp) as ts,
    ):
        for d in (first, last, ts):
            holds(d, 4)
        send(p, [Message(topic, b"n", keys=f"new{i}") for i in range(4)], queue_of=lambda i: i)
        for d in (first, last, ts):
            assert d.wait() == 0, d.describe()
    assert set(keys(first.events)) == OLD | MID | NEW, first.describe()
    assert set(keys(last.events)) == NEW, last.describe()
    assert set(keys(ts.events)) == MID | NEW, ts.describe()


async def _astride(p: Proc, topic: str) -> int:
    """``old`` stored, then ``mid`` stored farther after the next whole second than ``old`` is before it; returns
    that second (ms: the client's timestamp has whole seconds). Store times are read back from the broker, and
    ``mid`` waits for the clock: a slow machine only makes this take longer."""
    async with Producer(ns(p), unique_name("PyP")) as producer:
        await producer.send(Message(topic, b"o", keys="old"))
        old = await earliest_store_time(p, topic)
        stamp = (old // 1000 + 1) * 1000
        while time.time() * 1000 <= stamp + (stamp - old) + 50:
            await asyncio.sleep(0.01)  # waiting for the clock, not for the broker
        await producer.send(Message(topic, b"m", keys="mid"))
    return stamp


async def earliest_store_time(p: Proc, topic: str) -> int:
    """GET_EARLIEST_MSG_STORETIME of queue 0 of ``topic`` on ``p``'s broker."""
    host, port = p.addr.rsplit(":", 1)
    conn = await connect(host, int(port))
    try:
        fields = {"topic": topic, "queueId": 0}
        resp = await conn.request(RemotingCommand.request(RequestCode.GET_EARLIEST_MSG_STORETIME, fields), 30.0)
    finally:
        conn.close()
    assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
    return int(resp.ext_fields["timestamp"])


@pytest.mark.parametrize("kind", KINDS)
def test_consume_from_timestamp_starts_at_or_after_it(dev_at_end: Proc, kind: str) -> None:
    """A message stored just before the timestamp is nearer it than the next one: a group consuming from the
    timestamp still starts after it, as on RocketMQ 5 (rocketmq-client 5.5.0 sends boundaryType LOWER; 4.9.8 sends
    none, which RocketMQ 5 reads as LOWER too)."""
    topic = make_topic(dev_at_end, queues=1)
    stamp = asyncio.run(_astride(dev_at_end, topic))
    got = java(kind, "consume", dev_at_end, topic, unique_name("JFrom"), "--from", "timestamp",
               "--timestamp", str(stamp), "--expect", "1", "--linger", "2", "--timeout", "60")  # fmt: skip
    assert got.ok, got.describe()
    stored = {e["keys"]: e["store_timestamp"] - stamp for e in got.of("received")}
    assert set(keys(got)) == {"mid"}, f"store times relative to the timestamp: {stored}"
