"""A new group of RocketMQ's C++ core (rocketmq-client-python) with CONSUME_FROM_LAST_OFFSET, against sievemq in both
settings of ``newGroupStartsAtEnd`` (docs/consume-from.md).

RocketMQ's behaviour, kept by default: the broker answers offset 0 for a young queue, so the new group reads what
the queues held before it started. With ``newGroupStartsAtEnd = true`` it is told it has no offset and starts at
each queue's end: it gets only what is sent after its queues were handed over.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from sievemq.admin.api import AdminClient
from tests.interop.clients import start_driver, unique_name
from tests.interop.test_against_sievemq import create_topic, ns, produce, received_keys
from tests.support.procs import Proc, dev_proc

pytestmark = pytest.mark.interop

QUEUES = 4


def wait_pulling(p: Proc, group: str, topic: str, timeout: float = 60.0) -> None:
    """Until the group's clients pull every queue of ``topic`` (its rebalance handed them over)."""

    async def pulled() -> set[int]:
        async with AdminClient(ns(p)) as admin:
            statuses = await admin.group_status(group)
        return {q for st in statuses for c in st["clients"] for t, q in c["queues"] if t == topic}

    deadline = time.monotonic() + timeout
    while (seen := asyncio.run(pulled())) != set(range(QUEUES)):
        assert time.monotonic() < deadline, f"the consumer pulls only queues {sorted(seen)} of {topic}"
        time.sleep(0.3)


@pytest.mark.parametrize("at_end", [False, True], ids=["rocketmq-default", "newGroupStartsAtEnd"])
def test_cpp_core_new_group_consuming_from_the_last_offset(tmp_path: Path, interop_clients: Path, at_end: bool) -> None:
    extra: list[str] = []
    if at_end:
        (tmp_path / "broker.toml").write_text("newGroupStartsAtEnd = true\n")
        extra = ["--config", str(tmp_path / "broker.toml")]
    p = dev_proc(tmp_path, *extra).start()
    topic, group = unique_name("T"), unique_name("G")
    try:
        create_topic(p, topic, QUEUES)
        produce("rmqcp", p, topic, 8, "TagA", "old")
        expect = 4 if at_end else 12
        consumer = start_driver("rmqcp", [
            "consume", "--namesrv", ns(p), "--topic", topic, "--group", group, "--expr", "*", "--from", "last",
            "--expect", str(expect), "--timeout", "90", "--linger", "3",
        ])  # fmt: skip
        try:
            consumer.wait_for("started", timeout=60)
            wait_pulling(p, group, topic)
            produce("rmqcp", p, topic, 4, "TagA", "new")
            assert consumer.wait(timeout=120) == 0, consumer.describe()
        finally:
            consumer.stop()
        got = set(received_keys(consumer.events))
        new = {f"new{i}" for i in range(4)}
        if at_end:
            assert got == new, consumer.describe()
        else:
            assert got == {f"old{i}" for i in range(8)} | new, consumer.describe()
    finally:
        p.stop()
