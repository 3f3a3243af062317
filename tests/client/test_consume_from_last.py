"""``consume_from="last"`` (the default) in sievemq's client: a new group gets the messages sent after it started
and none before, even while its queues still hold their first messages (a broker answers offset 0 for those unless
asked with setZeroIfNotFound=false), whenever its rebalance hands the queues over, for a group whose members start
at different times; a restarted group resumes from its committed offsets (client/start_position.py)."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Sequence

from sievemq import Message, MessageQueue, Producer, PullConsumer, PushConsumer
from sievemq.client.allocate import allocate_averagely
from tests.client.conftest import collecting, eventually, ready, routed

Names = Callable[[str], str]


async def _send(namesrv: str, topic: str, prefix: str, n: int = 8) -> None:
    async with Producer(namesrv, f"p-{prefix}-{os.getpid()}") as p:
        for i in range(n):
            await p.send(Message(topic, f"{prefix}-{i}".encode()))


def _bodies(msgs: Sequence[object]) -> set[str]:
    return {m.body.decode() for m in msgs}  # type: ignore[attr-defined]


def _expected(prefix: str, n: int = 8) -> set[str]:
    return {f"{prefix}-{i}" for i in range(n)}


async def test_last_gets_what_was_sent_after_start_even_before_its_queues_are_handed_over(
    namesrv: str, names: Names
) -> None:
    topic = names("T")
    await _send(namesrv, topic, "before")
    await routed(namesrv, topic)
    gate = asyncio.Event()

    def allocate(mqs: Sequence[MessageQueue], cids: Sequence[str], me: str) -> list[MessageQueue]:
        return allocate_averagely(mqs, cids, me) if gate.is_set() else []  # no queue until the gate opens

    consumer = PushConsumer(namesrv, names("g"), allocate=allocate, rebalance_interval=0.5)
    consumer.subscribe(topic)
    got = collecting(consumer)
    await consumer.start()
    try:
        await _send(namesrv, topic, "after")  # sent after start(), before any queue is handed over
        assert consumer.assignment() == set()
        gate.set()
        await eventually(lambda: _expected("after") <= _bodies(got.msgs), what="the messages sent after start")
    finally:
        await consumer.close()  # every listener has run: a message before the start would be in got by now
    assert _bodies(got.msgs) == _expected("after"), sorted(_bodies(got.msgs))


async def test_a_group_starts_once_for_members_that_start_later(namesrv: str, names: Names) -> None:
    topic, group = names("T"), names("g")
    await _send(namesrv, topic, "before")
    await routed(namesrv, topic)
    first = PushConsumer(namesrv, group, instance_name=names("i1"), rebalance_interval=1.0)
    first.subscribe(topic)
    got1 = collecting(first)
    await first.start()
    second = PushConsumer(namesrv, group, instance_name=names("i2"), rebalance_interval=1.0)
    try:
        await ready(first, topic, queues=4)  # every queue's start fixed before "between" is sent
        await _send(namesrv, topic, "between")  # sent after the group started, before its second member did
        second.subscribe(topic)
        got2 = collecting(second)
        await second.start()
        await _send(namesrv, topic, "after")
        wanted = _expected("between") | _expected("after")
        await eventually(lambda: wanted <= _bodies(got1.msgs) | _bodies(got2.msgs), timeout=60,
                         what="every message sent after the group started")  # fmt: skip
        await ready(second, topic)
    finally:
        await second.close()
        await first.close()
    assert not (_bodies(got1.msgs) | _bodies(got2.msgs)) & _expected("before")


async def test_a_restarted_group_resumes_from_its_committed_offsets(namesrv: str, names: Names) -> None:
    topic, group = names("T"), names("g")
    await _send(namesrv, topic, "before")
    await routed(namesrv, topic)
    consumer = PushConsumer(namesrv, group)
    consumer.subscribe(topic)
    got = collecting(consumer)
    async with consumer:
        await ready(consumer, topic, queues=4)  # every queue's start fixed: none begins after "first-run"
        await _send(namesrv, topic, "first-run")
        await eventually(lambda: _expected("first-run") <= _bodies(got.msgs), what="the first run's messages")
    await _send(namesrv, topic, "while-down")
    again = PushConsumer(namesrv, group)
    again.subscribe(topic)
    got_again = collecting(again)
    async with again:
        await eventually(lambda: _expected("while-down") <= _bodies(got_again.msgs), what="what was sent meanwhile")
    assert _bodies(got.msgs) == _expected("first-run")
    assert _bodies(got_again.msgs) == _expected("while-down")


async def test_a_topic_created_after_start_is_read_from_its_first_message(namesrv: str, names: Names) -> None:
    topic = names("T")
    consumer = PushConsumer(namesrv, names("g"), poll_namesrv_interval=0.5, rebalance_interval=0.5)
    consumer.subscribe(topic)  # it does not exist yet
    got = collecting(consumer)
    async with consumer:
        await _send(namesrv, topic, "created")  # auto-created now, after the group started
        await eventually(lambda: _expected("created") <= _bodies(got.msgs), timeout=60, what="the new topic's messages")
    assert _bodies(got.msgs) == _expected("created")


async def test_broadcasting_and_pull_consumers_start_at_the_end_too(namesrv: str, names: Names, tmp_path) -> None:  # type: ignore[no-untyped-def]
    topic = names("T")
    await _send(namesrv, topic, "before")
    await routed(namesrv, topic)
    broadcast = PushConsumer(namesrv, names("b"), broadcasting=True, offset_store_dir=tmp_path)
    broadcast.subscribe(topic)
    got = collecting(broadcast)
    pull = PullConsumer(namesrv, names("pull"))
    async with broadcast, pull:
        queues = await pull.fetch_queues(topic)
        pull.assign(queues)
        # the assignment is applied in the background: its start positions are fixed once assignment() lists the
        # queues (under load a send before that was once behind the fixed position, and was not polled)
        await eventually(lambda: pull.assignment() == set(queues), what="the assigned queues taken")
        await ready(broadcast, topic, queues=len(queues))  # so are the broadcasting consumer's, once it owns them all
        await _send(namesrv, topic, "after")
        polled: list[object] = []

        async def poll_all() -> bool:
            polled.extend(await pull.poll(0.5))
            return _expected("after") <= _bodies(polled)

        await eventually(poll_all, timeout=60, what="the pull consumer's messages")
        await eventually(lambda: _expected("after") <= _bodies(got.msgs), what="the broadcasting consumer's messages")
    assert _bodies(polled) == _expected("after"), sorted(_bodies(polled))
    assert _bodies(got.msgs) == _expected("after"), sorted(_bodies(got.msgs))


async def test_cli_consume_prints_only_what_is_sent_after_it_started(namesrv: str, names: Names) -> None:
    topic = names("T")
    await _send(namesrv, topic, "before")
    await routed(namesrv, topic)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sievemq.cli", "consume", topic, "-n", namesrv, "--count", "8", "--timeout", "30", "-v",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stderr is not None and proc.stdout is not None
        async with asyncio.timeout(30):
            while b" took [" not in (line := await proc.stderr.readline()):  # its queues are handed over
                assert line, "consume ended before it took its queues"
        await _send(namesrv, topic, "after")
        async with asyncio.timeout(30):
            out = (await proc.stdout.read()).decode()
            await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0
    assert {line.rsplit(" ", 1)[-1] for line in out.splitlines()} == _expected("after"), out
