"""Apache RocketMQ's ``mqadmin consumerStatus`` against sievemq's own 4.x clients (GET_CONSUMER_RUNNING_INFO 307,
docs/clients.md): a real ``sievemq dev``; sievemq PushConsumers (concurrent and orderly) and a PullConsumer running in
the test; RocketMQ 5.5.0's mqadmin (tests/compat/mqadmin.py) asks the broker, which asks each client. The command
must list every client, print its analysis of a healthy group and write each client's ConsumerRunningInfo (its
properties, subscriptions and held queues) to a file."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator

import pytest

from sievemq import Message, MessageExt, Producer, PullConsumer, PushConsumer
from sievemq.client.running_info import CLIENT_VERSION
from tests.client.conftest import eventually, routed, start_dev
from tests.compat.mqadmin import MqAdmin, Run
from tests.support.procs import Proc

TOPIC = "RunInfoTopic"
QUEUES = 4
ROW = re.compile(r"^(\d+)\s+(\S+)\s+(\S+)\s+(\S+)$")
"""One client row of consumerStatus: index, client id, version, the file written."""
_filled: set[str] = set()


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    proc = start_dev(tmp_path_factory.mktemp("running-info-dev"))
    try:
        yield proc
    finally:
        proc.stop(timeout=10.0)


@pytest.fixture(scope="module")
def mqadmin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MqAdmin]:
    with MqAdmin(tmp_path_factory.mktemp("running-info-mqadmin")) as admin:
        yield admin


@pytest.fixture
async def namesrv(dev: Proc) -> AsyncIterator[str]:
    """The name server; ``TOPIC`` holds two messages on each of its queues (sent once)."""
    addr = str(dev.extra["namesrv"])
    if addr not in _filled:
        async with Producer(addr, "running-info-p", default_topic_queue_nums=QUEUES) as p:
            for i in range(2 * QUEUES):
                await p.send(Message(TOPIC, f"m{i}".encode()), queue_selector=lambda qs, m, i=i: qs[i % len(qs)])
        await routed(addr, TOPIC)
        _filled.add(addr)
    yield addr


class Counted:
    """A listener that records the queue offsets it got."""

    def __init__(self) -> None:
        self.got: set[tuple[int, int]] = set()

    async def __call__(self, msgs: list[MessageExt]) -> None:
        self.got.update((m.queue_id, m.queue_offset) for m in msgs)


async def mqadmin_run(admin: MqAdmin, *args: str) -> Run:
    """``mqadmin args...`` in a thread: the clients it asks answer from this test's event loop."""
    return await asyncio.to_thread(admin.run, *args)


async def consumer_status(admin: MqAdmin, namesrv: str, group: str) -> tuple[Run, dict[str, tuple[str, str]]]:
    """``mqadmin consumerStatus -g group``: the run, and per client id its version and the text of its file."""
    run = await mqadmin_run(admin, "consumerStatus", "-g", group, "-n", namesrv)
    assert run.exit == 0 and "Exception" not in run.err and "command failed" not in run.out, run
    rows = {}
    for ln in run.out.splitlines():
        m = ROW.match(ln.strip())
        if m:
            rows[m.group(2)] = (m.group(3), (admin.home / m.group(4)).read_text())
    return run, rows


def section(text: str, title: str, following: str) -> str:
    """The lines of a client's file between the headings ``#title#`` and ``#following#``."""
    return text.split(f"#{title}#", 1)[1].split(f"#{following}#", 1)[0]


def offsets_listed(text: str) -> dict[tuple[str, int], int]:
    """The ``#Consumer Offset#`` section of a client's file: (topic, queue id) -> commit offset."""
    out = {}
    for ln in section(text, "Consumer Offset", "Consumer MQ Detail").splitlines()[1:]:
        cells = ln.split()
        if len(cells) == 4:
            out[(cells[0], int(cells[2]))] = int(cells[3])
    return out


def held(consumer: PushConsumer | PullConsumer) -> set[tuple[str, int]]:
    return {(mq.topic, mq.queue_id) for mq in consumer.assignment() if mq.topic == TOPIC}


async def test_consumer_status_of_concurrent_push_consumers(namesrv: str, mqadmin: MqAdmin) -> None:
    group = "running-info-push"
    listeners = [Counted(), Counted()]
    consumers = [PushConsumer(namesrv, group, instance_name=f"rinfo-{i}", consume_from="first", persist_interval=0.2)
                 for i in range(2)]  # fmt: skip
    try:
        for c, listener in zip(consumers, listeners, strict=True):
            c.subscribe(TOPIC, "*")
            c.listener(listener)
            await c.start()
        await eventually(lambda: all(len(held(c)) == QUEUES // 2 for c in consumers), 30.0, what="queues shared")
        every = {(q, o) for q in range(QUEUES) for o in range(2)}
        await eventually(lambda: set().union(*(n.got for n in listeners)) == every, 30.0, what="all consumed")
        run, rows = await consumer_status(mqadmin, namesrv, group)
        assert set(rows) == {c.client_id for c in consumers}
        assert "Same subscription in the same group of consumer" in run.out and "Rebalance OK" in run.out
        assert "can't consume" not in run.out
        for c in consumers:
            version, text = rows[c.client_id]
            assert version == CLIENT_VERSION
            assert re.search(r"PROP_CONSUME_TYPE\s*: CONSUME_PASSIVELY", text)
            assert re.search(r"PROP_CONSUMEORDERLY\s*: false", text)
            assert re.search(rf"consumerGroup\s*: {group}\n", text)
            assert re.search(rf"Topic: {TOPIC}\s+ClassFilter: false\s+SubExpression: \*", text)
            assert re.search(rf"Topic: %RETRY%{group}\s+ClassFilter: false\s+SubExpression: \*", text)
            listed = {q: off for q, off in offsets_listed(text).items() if q[0] == TOPIC}
            assert set(listed) == held(c) and all(off == 2 for off in listed.values())  # two consumed from each
            assert "#Consumer RT&TPS#\n" in text and re.search(rf"^{TOPIC}\s", text, re.MULTILINE)
    finally:
        for c in consumers:
            await c.close()


async def test_consumer_status_of_an_orderly_push_consumer(namesrv: str, mqadmin: MqAdmin) -> None:
    group = "running-info-orderly"
    c = PushConsumer(namesrv, group, instance_name="rinfo-orderly", orderly=True, consume_from="first")
    c.subscribe(TOPIC, "*")
    c.listener(Counted())
    await c.start()
    try:
        await eventually(lambda: len(held(c)) == QUEUES, 30.0, what="every queue locked and held")
        run, rows = await consumer_status(mqadmin, namesrv, group)
        assert set(rows) == {c.client_id} and "Rebalance OK" in run.out
        assert "can't lock" not in run.out and "still failed" not in run.out
        text = rows[c.client_id][1]
        assert re.search(r"PROP_CONSUMEORDERLY\s*: true", text)
        assert {q for q in offsets_listed(text) if q[0] == TOPIC} == held(c)
        detail = [ln for ln in section(text, "Consumer MQ Detail", "Consumer Pop Detail").splitlines()
                  if ln.startswith(TOPIC)]  # fmt: skip
        assert len(detail) == QUEUES and all("locked=true" in ln and "droped=false" in ln for ln in detail)
    finally:
        await c.close()


async def test_consumer_status_of_a_pull_consumer(namesrv: str, mqadmin: MqAdmin) -> None:
    group = "running-info-pull"
    c = PullConsumer(namesrv, group, instance_name="rinfo-pull", consume_from="first")
    c.subscribe(TOPIC, "*")
    await c.start()
    try:
        await eventually(lambda: len(held(c)) == QUEUES, 30.0, what="every queue fetched")
        run, rows = await consumer_status(mqadmin, namesrv, group)
        client_id = c.config.client_id
        assert set(rows) == {client_id} and "Rebalance OK" in run.out
        text = rows[client_id][1]
        assert re.search(r"PROP_CONSUME_TYPE\s*: CONSUME_ACTIVELY", text) and "PROP_CONSUMEORDERLY" not in text
        assert re.search(rf"Topic: {TOPIC}\s+ClassFilter: false\s+SubExpression: \*", text)
        assert "%RETRY%" not in section(text, "Consumer Subscription", "Consumer Offset")
        assert set(offsets_listed(text)) == held(c)
    finally:
        await c.close()


async def test_a_client_asked_directly_prints_its_running_info(namesrv: str, mqadmin: MqAdmin) -> None:
    """``consumerStatus -g G -i clientId`` prints the one client's ConsumerRunningInfo; with ``-s`` its stacks."""
    group = "running-info-direct"
    c = PushConsumer(namesrv, group, instance_name="rinfo-direct", consume_from="first")
    c.subscribe(TOPIC, "*")
    c.listener(Counted())
    await c.start()
    try:
        await eventually(lambda: len(held(c)) == QUEUES, 30.0, what="every queue held")
        run = await mqadmin_run(mqadmin, "consumerStatus", "-g", group, "-i", c.client_id, "-s", "-n", namesrv)
        assert run.exit == 0 and "Exception" not in run.err and "command failed" not in run.out, run
        assert "#Consumer Properties#" in run.out and re.search(r"instanceName\s*: rinfo-direct\n", run.out)
        assert "#Consumer jstack#" in run.out and '"MainThread"' in run.out
    finally:
        await c.close()
