"""FIFO consumption by the real 5.x clients through ``sievemq proxy`` (docs/proxy.md §8, docs/pop.md §5).

A consumer group made FIFO with ``sievemq group update G --orderly`` (RocketMQ's ``consumeMessageOrderly``): a 5.x
FIFO producer sends several message groups interleaved over a topic of several queues, and

- the Python client's PushConsumer (told ``fifo`` by the proxy) consumes each message group in order, one message
  at a time; a message its listener fails is consumed again before the next of its group; after the group's last
  attempt it goes to ``%DLQ%<group>`` and the group moves on;
- the Python SimpleConsumer (no FIFO mode of its own: the broker's orderly POP does it) gets a message it did not
  ack again, attempt 2, before anything after it;
- the Node.js client's PushConsumer consumes each message group in order (its FIFO mode gives a failed message
  straight to the dead-letter topic: it reads no retry policy from a customized backoff, so it has one attempt).

The same consumers of a group that is *not* orderly break the order (the control test below): that is what the
checks here catch."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

import pytest

from sievemq.client import api
from sievemq.remoting.connection import connect
from tests.interop.clients import DriverProcess, run_driver, start_driver, unique_name
from tests.interop.conftest import dev_and_proxy
from tests.interop.test_against_sievemq import create_topic, ns
from tests.support.procs import Proc

pytestmark = pytest.mark.interop

GROUPS = ["ga", "gb", "gc", "gd", "ge"]
PER_GROUP = 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[tuple[Proc, Proc]]:
    with dev_and_proxy(tmp_path_factory.mktemp("interop-proxy-fifo")) as procs:
        yield procs


def _group(dev: Proc, *flags: str) -> str:
    """A new consumer group with ``sievemq group update`` (``--orderly``: FIFO)."""
    name = unique_name("GF")
    out = subprocess.run([sys.executable, "-m", "sievemq.cli", "group", "update", name, "-n", ns(dev), *flags],
                         capture_output=True, text=True, timeout=30)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    return name


def _produce_fifo(proxy: Proc, topic: str, groups: list[str] = GROUPS, per_group: int = PER_GROUP) -> None:
    """``per_group`` FIFO messages of each message group, interleaved (body ``<group>-<n>``)."""
    res = run_driver("rmq5", ["produce", "--endpoints", proxy.addr, "--topic", topic, "--count",
                              str(len(groups) * per_group), "--groups", ",".join(groups)], timeout=120)  # fmt: skip
    assert res.returncode == 0, res.describe()


def _consumer(kind: str, mode: str, proxy: Proc, topic: str, group: str, count: int, *extra: str) -> DriverProcess:
    c = start_driver(kind, [mode, "--endpoints", proxy.addr, "--topic", topic, "--group", group, "--count",
                            str(count), *extra])  # fmt: skip
    c.wait_for("ready", timeout=90)
    return c


def _by_group(events: list[dict[str, Any]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for e in events:
        out.setdefault(e["body"].rsplit("-", 1)[0], []).append(e["body"])
    return out


def _fifo_problems(c: DriverProcess, dead: AbstractSet[str] = frozenset()) -> list[str]:
    """Where a push consumer's events break FIFO: per message group, the acks must be its messages in order (the
    dead-lettered ones left out), a message handed out again must come before anything after it (consecutive
    deliveries), and no two messages of a group may be in the listener at once."""
    problems = [f"overlap: {e['body']} while another of {e['group']} was consumed" for e in c.of("overlap")]
    expected = {g: [f"{g}-{i}" for i in range(PER_GROUP)] for g in GROUPS}
    acked = _by_group(c.of("acked"))
    received = _by_group(c.of("received"))
    for g, want in expected.items():
        if acked.get(g, []) != [b for b in want if b not in dead]:
            problems.append(f"acks of {g}: {acked.get(g)}")
        runs = [b for i, b in enumerate(received.get(g, [])) if i == 0 or received[g][i - 1] != b]
        if runs != want:
            problems.append(f"deliveries of {g}: {received.get(g)}")
    return problems


def _dead_letters(dev: Proc, group: str) -> list[bytes]:
    async def go() -> list[bytes]:
        conn = await connect("127.0.0.1", dev.port)
        try:
            r = await api.pull_message(conn, unique_name("Rd"), f"%DLQ%{group}", 0, 0, subscription="*")
            return [m.body for m in r.messages]
        finally:
            conn.close()

    return asyncio.run(go())


def _push_with_a_failing_message(dev: Proc, proxy: Proc, *group_flags: str) -> DriverProcess:
    """A Python PushConsumer of a new group whose listener fails ga-0 twice (takes 50 ms over each message), and
    all the message groups' messages sent."""
    topic = unique_name("PxFifo")
    create_topic(dev, topic, queues=4)
    group = _group(dev, *group_flags)
    c = _consumer("rmq5", "push-consume", proxy, topic, group, len(GROUPS) * PER_GROUP, "--fail-body", "ga-0",
                  "--fail-times", "2", "--sleep", "0.05", "--timeout", "120")  # fmt: skip
    _produce_fifo(proxy, topic)
    assert c.wait(timeout=150) == 0, c.describe()
    assert [e["body"] for e in c.of("failed")] == ["ga-0", "ga-0"], c.describe()
    return c


def test_fifo_push_consumer_gets_each_message_group_in_order_and_a_failed_message_again_first(
    cluster: tuple[Proc, Proc],
) -> None:
    dev, proxy = cluster
    c = _push_with_a_failing_message(dev, proxy, "--orderly")
    assert _fifo_problems(c) == [], c.describe()
    ga = [e["body"] for e in c.of("received") if e["group"] == "ga"]
    assert ga[:3] == ["ga-0"] * 3, f"ga-0 twice failed, then consumed, before ga-1: {ga}"


def test_control_the_same_consumer_of_a_group_not_orderly_breaks_the_order(cluster: tuple[Proc, Proc]) -> None:
    """Without consumeMessageOrderly the client consumes concurrently: ga-1.. are consumed while ga-0 waits for its
    retries (1 s, then 5 s): the checks of the test above fail."""
    dev, proxy = cluster
    c = _push_with_a_failing_message(dev, proxy)
    problems = _fifo_problems(c)
    assert any(p.startswith("acks of ga") for p in problems), f"{problems}\n{c.describe()}"


def test_after_the_last_attempt_a_fifo_message_goes_to_the_dlq_and_its_group_moves_on(
    cluster: tuple[Proc, Proc],
) -> None:
    dev, proxy = cluster
    topic = unique_name("PxFifoD")
    create_topic(dev, topic, queues=4)
    group = _group(dev, "--orderly", "--retry-max-times", "1")  # two attempts in all
    c = _consumer("rmq5", "push-consume", proxy, topic, group, len(GROUPS) * PER_GROUP - 1, "--fail-body", "gb-1",
                  "--timeout", "120")  # fmt: skip
    _produce_fifo(proxy, topic)
    assert c.wait(timeout=150) == 0, c.describe()
    assert [e["body"] for e in c.of("failed")] == ["gb-1", "gb-1"], c.describe()
    assert _fifo_problems(c, dead={"gb-1"}) == [], c.describe()
    assert _dead_letters(dev, group) == [b"gb-1"]


def test_fifo_simple_consumer_gets_an_unacked_message_again_before_anything_after_it(
    cluster: tuple[Proc, Proc],
) -> None:
    dev, proxy = cluster
    topic = unique_name("PxFifoS")
    create_topic(dev, topic, queues=1)
    group = _group(dev, "--orderly")
    groups = ["ga", "gb", "gc"]
    c = _consumer("rmq5", "simple-consume", proxy, topic, group, 6, "--batch", "1", "--hold-first", "1",
                  "--invisible", "2", "--timeout", "60")  # fmt: skip
    _produce_fifo(proxy, topic, groups, 2)
    assert c.wait(timeout=90) == 0, c.describe()
    got = [(e["body"], e["attempt"]) for e in c.of("received")]
    assert got == [("ga-0", 1), ("ga-0", 2), ("gb-0", 1), ("gc-0", 1), ("ga-1", 1), ("gb-1", 1), ("gc-1", 1)], (
        "the held message again (attempt 2) before anything after it, then the rest in order"
    )


def test_node_fifo_push_consumer_gets_each_message_group_in_order(cluster: tuple[Proc, Proc]) -> None:
    dev, proxy = cluster
    topic = unique_name("PxFifoN")
    create_topic(dev, topic, queues=4)
    group = _group(dev, "--orderly")
    c = _consumer("rmq5-node", "push-consume", proxy, topic, group, len(GROUPS) * PER_GROUP, "--sleep", "0.05",
                  "--timeout", "120")  # fmt: skip
    _produce_fifo(proxy, topic)
    assert c.wait(timeout=150) == 0, c.describe()
    assert _fifo_problems(c) == [], c.describe()


def test_node_fifo_push_consumer_gives_a_failed_message_to_the_dlq_and_its_group_moves_on(
    cluster: tuple[Proc, Proc],
) -> None:
    """The Node.js client 1.0.8 reads no retry policy from a customized backoff: its FIFO mode has one attempt, so a
    failed message goes to the dead-letter topic at once, and the next of its group follows."""
    dev, proxy = cluster
    topic = unique_name("PxFifoND")
    create_topic(dev, topic, queues=4)
    group = _group(dev, "--orderly")
    c = _consumer("rmq5-node", "push-consume", proxy, topic, group, len(GROUPS) * PER_GROUP - 1, "--fail-body",
                  "gc-2", "--timeout", "120")  # fmt: skip
    _produce_fifo(proxy, topic)
    assert c.wait(timeout=150) == 0, c.describe()
    assert [e["body"] for e in c.of("failed")] == ["gc-2"], c.describe()
    assert _fifo_problems(c, dead={"gc-2"}) == [], c.describe()
    assert _dead_letters(dev, group) == [b"gc-2"], "forwarded before gc-3 was consumed"
