"""sievemq's queue allocation strategies (client/allocate.py) against rocketmq-client 5.5.0's own classes: a seeded
corpus of groups (1-12 clients with RocketMQ-style ids, 1-3 brokers of 1-16 queues each), every strategy, every
client's share compared. A group of Java and sievemq consumers must share its queues the same way on both sides.
"""

from __future__ import annotations

import os
import random
import subprocess

import pytest

from sievemq.client.allocate import AllocateStrategy, allocate_averagely, allocate_by_circle, consistent_hash
from sievemq.client.message import MessageQueue
from tests.support.rocketmq import LATEST, interop_dir, java, reference_lib

CASES = 400
STRATEGIES: dict[str, AllocateStrategy] = {
    "averagely": allocate_averagely,
    "circle": allocate_by_circle,
    "hash10": consistent_hash(10),
    "hash3": consistent_hash(3),
}


def corpus(seed: int = 20261204) -> list[tuple[list[str], list[MessageQueue]]]:
    """Groups: client ids as RocketMQ clients make them (``ip@pid``, some with an instance name) and the queues of
    a topic on 1-3 brokers."""
    rnd = random.Random(seed)
    cases = []
    for _ in range(CASES):
        instance = lambda: f"#{rnd.randrange(9)}" if rnd.random() < 0.2 else ""  # noqa: E731
        ids = (f"10.0.{rnd.randrange(4)}.{rnd.randrange(256)}@{rnd.randrange(1, 99999)}{instance()}"
               for _ in range(rnd.randint(1, 12)))
        cids = sorted(set(ids))
        topic = rnd.choice(["T", "Orders", "%RETRY%g"])
        brokers = "abc"[: rnd.randint(1, 3)]
        mqs = [MessageQueue(topic, f"broker-{b}", q) for b in brokers for q in range(rnd.randint(1, 16))]
        rnd.shuffle(mqs)
        cases.append((cids, mqs))
    return cases


def queue_text(mq: MessageQueue) -> str:
    return f"{mq.topic}/{mq.broker_name}/{mq.queue_id}"


def java_shares(lines: list[str]) -> dict[tuple[str, str], list[str]]:
    """Run AllocateCorpus (tests/compat/drivers) over ``lines``: (case id, client id) -> its queues."""
    lib = reference_lib(LATEST)
    drivers = interop_dir() / f"rocketmq-{LATEST}" / "drivers"
    assert (drivers / "AllocateCorpus.class").exists(), "tests/compat/setup_reference.sh compiles AllocateCorpus"
    proc = subprocess.run([java(), "-Xmx128m", "-XX:+UseSerialGC", "-cp", f"{lib}/*{os.pathsep}{drivers}",
                           "AllocateCorpus"], input="\n".join(lines) + "\n", capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out: dict[tuple[str, str], list[str]] = {}
    for row in proc.stdout.splitlines():
        case, cid, queues = row.split("\t")
        out[(case, cid)] = queues.split(",") if queues else []
    return out


@pytest.fixture(scope="module")
def shares() -> tuple[list[tuple[list[str], list[MessageQueue]]], dict[tuple[str, str], list[str]]]:
    cases = corpus()
    lines = [f"{i}:{name}\t{name}\t{','.join(cids)}\t{','.join(queue_text(q) for q in mqs)}"
             for name in STRATEGIES for i, (cids, mqs) in enumerate(cases)]  # fmt: skip
    return cases, java_shares(lines)


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_each_client_takes_the_share_rocketmq_client_gives_it(
    shares: tuple[list[tuple[list[str], list[MessageQueue]]], dict[tuple[str, str], list[str]]], name: str
) -> None:
    cases, theirs = shares
    allocate = STRATEGIES[name]
    differ = []
    for i, (cids, mqs) in enumerate(cases):
        for cid in cids:
            ours = [queue_text(q) for q in allocate(mqs, cids, cid)]
            if ours != theirs[(f"{i}:{name}", cid)]:
                differ.append((i, cid, theirs[(f"{i}:{name}", cid)], ours))
    assert not differ, f"{len(differ)} shares differ, first: {differ[:3]}"


def test_every_queue_has_one_owner_under_each_strategy() -> None:
    """Whatever the strategy, the group's shares cover the queues exactly once."""
    for cids, mqs in corpus()[:100]:
        for allocate in STRATEGIES.values():
            owned = [q for cid in cids for q in allocate(mqs, cids, cid)]
            assert sorted(owned) == sorted(mqs)
