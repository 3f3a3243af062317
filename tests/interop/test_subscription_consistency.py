"""Inconsistent subscriptions in one consumer group, with real ali-ons consumers that know nothing of sievemq.

Two consumers of one group subscribe one topic with ``TagA || TagB`` (first) and ``TagC`` (second); 10 messages
tagged A, B, C in turn go to 4 queues. RocketMQ shares the queues out regardless and loses the A/B messages that
land on the TagC consumer's queues. sievemq (strict, the default) leaves the TagC consumer out of the group's
consumer list and delivers every A/B message; with ``subscriptionConsistency = "rocketmq"`` the loss comes back,
which shows the difference is the setting and not luck.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.interop.clients import DriverProcess, run_driver, start_driver, unique_name
from tests.interop.test_against_sievemq import wait_until
from tests.support.procs import Proc, dev_proc
from tests.support.quiet import quiet_period_blocking

pytestmark = pytest.mark.interop

WANT_AB = {f"m{i}" for i in range(10) if i % 3 != 2}


@pytest.fixture
def dev_factory(tmp_path: Path, interop_clients: Path) -> Iterator[Any]:
    started: list[Proc] = []

    def make(mode: str) -> Proc:
        os.environ["SIEVEMQ_SUBSCRIPTION_CONSISTENCY"] = mode
        try:
            p = dev_proc(tmp_path / mode).start()
        finally:
            del os.environ["SIEVEMQ_SUBSCRIPTION_CONSISTENCY"]
        started.append(p)
        return p

    yield make
    for p in started:
        p.stop()


def cli(p: Proc, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "sievemq.cli", *args, "-n", str(p.extra["namesrv"])],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def ons_consumer(p: Proc, topic: str, group: str, expr: str) -> DriverProcess:
    return start_driver(
        "ons",
        [
            "consume",
            "--namesrv",
            str(p.extra["namesrv"]),
            "--topic",
            topic,
            "--group",
            group,
            "--expr",
            expr,
            "--expect",
            "0",
            "--linger",
            "600",
            "--timeout",
            "600",
            "--from",
            "first",
            "--rebalance-interval-ms",
            "1000",
            "--heartbeat-interval-ms",
            "1000",
            "--persist-interval-ms",
            "1000",
        ],
    )


def owned(d: DriverProcess) -> set[int] | None:
    """The queues a consumer says it owns now (its last ``queues`` event), None before it said."""
    events = d.of("queues")
    return set(events[-1]["queues"]) if events else None


def queues_settled(ab: DriverProcess, c: DriverProcess, shared: bool) -> None:
    """Until both consumers' own rebalances put the queues where the mode does: all with the consistent one
    (strict: the inconsistent one is left out), or some with each and none with both (rocketmq: shared out regardless;
    messages sent while the first still owned the second's queues would reach it, and there would be no loss)."""

    def settled() -> bool:
        qa, qc = owned(ab), owned(c)
        if qa is None or qc is None:
            return False
        if shared:
            return bool(qa) and bool(qc) and not qa & qc and qa | qc == set(range(4))
        return qa == set(range(4)) and not qc

    wait_until(settled, 60.0, lambda: f"queues owned: {owned(ab)} (TagA || TagB), {owned(c)} (TagC)")


def run_scenario(p: Proc, shared: bool) -> tuple[set[str], set[str], str]:
    topic, group = unique_name("T"), unique_name("G")
    cli(p, "topic", "create", topic, "-q", "4")
    ab = ons_consumer(p, topic, group, "TagA || TagB")
    c = None
    try:
        ab.wait_for("started", timeout=60)
        c = ons_consumer(p, topic, group, "TagC")
        c.wait_for("started", timeout=60)
        queues_settled(ab, c, shared)
        sent = run_driver(
            "rmqcp",
            [
                "produce",
                "--namesrv",
                str(p.extra["namesrv"]),
                "--topic",
                topic,
                "--group",
                unique_name("P"),
                "--count",
                "10",
                "--tags",
                "TagA,TagB,TagC",
                "--key-prefix",
                "m",
            ],
        )
        assert sent.returncode == 0, sent.describe()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and {e["keys"] for e in ab.of("received")} < WANT_AB:
            time.sleep(0.5)
        quiet_period_blocking(3.0, "no more messages to either consumer",
                              unchanged=lambda: (len(ab.of("received")), len(c.of("received"))))  # fmt: skip
        status = cli(p, "group", "status", group)
        status_json = cli(p, "group", "status", group, "--json")
    finally:  # the inconsistent one first: once the group's only other member left, it would be consistent and
        # get the queues (it did once under load, in the moment between the two stops)
        if c is not None:
            c.stop()
        ab.stop()
    got_ab = {e["keys"] for e in ab.result().of("received")}
    got_c = {e["keys"] for e in c.result().of("received")} if c else set()
    return got_ab, got_c, status + "\n" + status_json


def test_strict_loses_nothing_and_reports_the_inconsistent_client(dev_factory: Any) -> None:
    p = dev_factory("strict")
    got_ab, got_c, status = run_scenario(p, shared=False)
    assert got_ab == WANT_AB, status
    assert got_c == set(), "the inconsistent consumer must get no queues"
    assert "INCONSISTENT" in status and "TagC" in status, status
    statuses = json.loads(status[status.index("[\n") :])
    clients = statuses[0]["clients"]
    assert sorted(c["consistent"] for c in clients) == [False, True]
    assert "inconsistent subscription" in p.log() and "TagC" in p.log()


def test_rocketmq_mode_reproduces_the_loss(dev_factory: Any) -> None:
    p = dev_factory("rocketmq")
    got_ab, got_c, status = run_scenario(p, shared=True)
    assert got_ab < WANT_AB, f"expected RocketMQ's loss, got every message: {status}"
    assert all(int(k[1:]) % 3 == 2 for k in got_c)
    assert "WILL be lost" in p.log()
