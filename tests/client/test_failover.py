"""Failures: a consumer process killed mid-stream (its queues move, nothing is lost) and a broker killed under a
producer (sends go on through the other broker)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sievemq import Message, Producer, PushConsumer
from sievemq.admin.api import AdminClient
from tests.client.conftest import collecting, eventually, routed
from tests.support.procs import Proc, broker_proc, namesrv_proc

Names = Callable[[str], str]
REPO = Path(__file__).resolve().parents[2]


async def test_killed_consumer_loses_no_message(namesrv: str, names: Names) -> None:
    topic, group = names("Kill"), names("g")
    async with Producer(namesrv, names("p"), default_topic_queue_nums=8) as p:
        await p.send(Message(topic, b"create"))
        await routed(namesrv, topic)

        victim = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.client.consumer_proc", namesrv, group, topic, "victim",
            stdout=asyncio.subprocess.PIPE, cwd=REPO, env=dict(os.environ, PYTHONUNBUFFERED="1"),
            start_new_session=True,
        )  # fmt: skip
        victim_ids: set[str] = set()

        async def read_victim() -> None:
            assert victim.stdout is not None
            async for line in victim.stdout:
                parts = line.decode().split()
                if parts and parts[0] == "MSG":
                    victim_ids.add(parts[1])

        reader = asyncio.create_task(read_victim())
        survivor = PushConsumer(namesrv, group, instance_name="survivor", consume_from="first")
        survivor.subscribe(topic)
        got = collecting(survivor)
        try:
            await survivor.start()
            owned = lambda: {mq for mq in survivor.assignment() if mq.topic == topic}  # noqa: E731
            await eventually(lambda: len(owned()) == 4, timeout=15.0, what="the survivor owning half the queues")
            sent: set[str] = set()
            for i in range(150):
                sent.add((await p.send(Message(topic, f"{i}".encode()))).msg_id)
                if i == 60:
                    await eventually(lambda: victim_ids, what="the victim consuming")
                    victim.send_signal(signal.SIGKILL)
                await asyncio.sleep(0.005)
            await eventually(lambda: len(owned()) == 8, timeout=10.0, what="the survivor taking every queue")
            consumed = lambda: {m.msg_id for m in got.msgs} | victim_ids  # noqa: E731
            await eventually(lambda: sent <= consumed(), timeout=15.0, what="every message consumed")
            assert victim_ids and {m.msg_id for m in got.msgs} - victim_ids
        finally:
            with contextlib.suppress(ProcessLookupError):
                victim.kill()
            await victim.wait()
            reader.cancel()
            await survivor.close()


@pytest.fixture
def two_brokers(tmp_path: Path) -> Iterator[tuple[Proc, Proc, Proc]]:
    """A name server and brokers a and b (always stopped)."""
    procs: list[Proc] = []
    try:
        ns = namesrv_proc(tmp_path).start()
        procs.append(ns)
        for name in ("broker-a", "broker-b"):
            procs.append(broker_proc(tmp_path, ns.addr, name).start())
        yield procs[0], procs[1], procs[2]
    finally:
        for proc in reversed(procs):
            proc.stop(timeout=5.0)


async def test_producer_retries_on_the_other_broker_when_one_dies(two_brokers: tuple[Proc, Proc, Proc]) -> None:
    ns, _, b = two_brokers
    topic = "FailoverTopic"
    async with AdminClient(ns.addr) as admin:
        await eventually(lambda: admin.brokers(), what="brokers registered")
        await eventually(lambda: _two(admin), what="both brokers registered")
        await admin.create_topic(topic, queues=2)

        async def both_in_route() -> bool:
            try:
                return len((await admin.route(topic)).queue_datas) == 2
            except Exception:
                return False

        await eventually(both_in_route, what="the route over both brokers")
    async with Producer(ns.addr, "failover-p", send_timeout=5.0) as p:
        before = [(await p.send(Message(topic, f"{i}".encode()))).message_queue.broker_name for i in range(8)]
        assert set(before) == {"broker-a", "broker-b"}
        b.kill9()
        after = [(await p.send(Message(topic, f"after{i}".encode()))).message_queue.broker_name for i in range(8)]
    assert set(after) == {"broker-a"}


async def _two(admin: AdminClient) -> bool:
    return len(await admin.brokers()) == 2
