"""Where a new group starts on a queue whose head retention deleted: CONSUME_FROM_FIRST starts at the oldest stored
message, LAST at the end, TIMESTAMP at that time; a committed offset wins over all three (young queues, which a
broker would answer offset 0 for: test_consume_from_last.py).

This module's broker keeps commit-log segments of 64 KiB for a fraction of a second, so the head goes within one
retention run (every 10 s).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sievemq import Message, MessageQueue, Producer, PullConsumer, PushConsumer
from sievemq.admin.api import AdminClient
from sievemq.client import api
from sievemq.remoting.codes import RequestCode
from sievemq.remoting.connection import connect
from tests.client.conftest import collecting, eventually, ready, start_dev
from tests.support.procs import Proc
from tests.support.quiet import quiet_period

Names = Callable[[str], str]
TOPIC = "ConsumeFromTopic"
BODY = b"x" * 4000  # under the 4 KiB compression threshold: segments fill predictably


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Proc]:
    """``sievemq dev`` with tiny, short-lived commit-log segments."""
    tmp = tmp_path_factory.mktemp("dev-retention")
    cfg = Path(tmp) / "broker.toml"
    cfg.write_text("mapped_file_size_commitlog = 65536\nfile_reserved_time = 0.0001\ndelete_when = -1\n")
    proc = start_dev(tmp, "--config", str(cfg))
    request.module.__dict__.setdefault("_client_test_procs", []).append(proc)
    try:
        yield proc
    finally:
        proc.stop(timeout=10.0)


@pytest.fixture(scope="module")
def trimmed(dev: Proc) -> dict[str, int]:
    """One queue whose head was deleted by retention; returns its min/max offsets and a time between the
    old and the new messages."""

    async def go() -> dict[str, int]:
        ns = str(dev.extra["namesrv"])
        to_q0 = {"queue_selector": lambda queues, msg: queues[0]}
        async with Producer(ns, "cf-p", default_topic_queue_nums=1) as p:
            for i in range(60):
                await p.send(Message(TOPIC, BODY, keys=[f"old{i}"]), **to_q0)  # type: ignore[arg-type]
            conn = await connect("127.0.0.1", dev.port)
            try:

                async def head_deleted() -> int:
                    return await api.queue_offset(conn, RequestCode.GET_MIN_OFFSET, TOPIC, 0)

                low = await eventually(head_deleted, timeout=25.0, interval=0.5, what="retention deleting the head")
                await asyncio.sleep(0.05)
                between = int(time.time() * 1000)
                await asyncio.sleep(0.05)
                for i in range(5):
                    await p.send(Message(TOPIC, BODY, keys=[f"new{i}"]), **to_q0)  # type: ignore[arg-type]
                high = await api.queue_offset(conn, RequestCode.GET_MAX_OFFSET, TOPIC, 0)
            finally:
                conn.close()
        return {"min": low, "max": high, "between": between}

    return asyncio.run(go())


async def _first_keys(namesrv: str, group: str, **kwargs: object) -> tuple[list[str], int]:
    consumer = PushConsumer(namesrv, group, **kwargs)  # type: ignore[arg-type]
    consumer.subscribe(TOPIC)
    got = collecting(consumer)
    await consumer.start()
    try:
        await ready(consumer, TOPIC, 1)
        async with Producer(namesrv, f"{group}-p") as p:
            sent = await p.send(Message(TOPIC, BODY, keys=["after-start"]), queue_selector=lambda qs, _m: qs[0])
        # this test's own message (the module's other tests sent theirs to the same queue before), and every one
        # before it from where the group started: batches are consumed concurrently, an earlier one may end later
        def through_own() -> bool:
            offsets = {m.queue_offset for m in got.msgs}
            return sent.queue_offset in offsets and len(offsets) == max(offsets) - min(offsets) + 1

        await eventually(through_own, what="every message up to the one sent after start")
        await quiet_period(0.2, "more deliveries", unchanged=lambda: len(got.msgs))
        first_offset = min(m.queue_offset for m in got.msgs)
    finally:
        await consumer.close()
    return [k for m in got.msgs for k in m.keys], first_offset


async def test_consume_from_first_starts_at_the_oldest_stored_message(
    namesrv: str, names: Names, trimmed: dict[str, int]
) -> None:
    keys, first = await _first_keys(namesrv, names("g"), consume_from="first")
    assert first == trimmed["min"] > 0
    assert [k for k in keys if k.startswith("new")] == [f"new{i}" for i in range(5)]
    assert len(keys) == trimmed["max"] - trimmed["min"] + 1


async def test_consume_from_last_skips_everything_already_stored(
    namesrv: str, names: Names, trimmed: dict[str, int]
) -> None:
    keys, first = await _first_keys(namesrv, names("g"), consume_from="last")
    assert keys == ["after-start"] and first >= trimmed["max"]


async def test_consume_from_timestamp_starts_at_that_time(namesrv: str, names: Names, trimmed: dict[str, int]) -> None:
    keys, _ = await _first_keys(namesrv, names("g"), consume_from="timestamp", consume_timestamp=trimmed["between"])
    assert keys[:5] == [f"new{i}" for i in range(5)] and "old59" not in keys


async def test_a_committed_offset_wins_over_consume_from(namesrv: str, names: Names, trimmed: dict[str, int]) -> None:
    group = names("g")
    async with AdminClient(namesrv) as admin:  # a broker takes commits of the groups it has (RocketMQ 5's rule)
        await admin.update_group(group, {})
    async with PullConsumer(namesrv, group) as pc:
        pc.assign([MessageQueue(TOPIC, "broker-a", 0)])
        await pc.commit({MessageQueue(TOPIC, "broker-a", 0): trimmed["max"] - 2})
    _, first = await _first_keys(namesrv, group, consume_from="first")
    assert first == trimmed["max"] - 2
