"""``sievemq explain`` (docs/filtering.md) on messages the real 5.x Python client (rocketmq-python-client 5.1.2)
sent through ``sievemq proxy``: for a SQL92 selector and for a tag expression, the counts it reports, and the
messages it says match, are what a 5.x SimpleConsumer of that selector receives (docs/proxy.md §5, docs/pop.md)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.interop.clients import DriverProcess, run_driver, start_driver, unique_name
from tests.interop.conftest import dev_and_proxy
from tests.interop.test_against_sievemq import create_topic, ns
from tests.support.procs import Proc

pytestmark = pytest.mark.interop

TAGS = ("TagA", "TagB", "TagC")
# 12 messages with a = i (keys p0..p11, tags A, B, C in turn), then 3 without any property (keys q0..q2, tags
# A, B, C): 15 in all, at most 10 matching or not matching either selector, so explain's samples (10 each) list
# every message.
SELECTORS = {
    "sql92": (("--sql", "a >= 3 AND a < 9"), {f"p{i}" for i in range(3, 9)}),
    "tag": (("--tag", "TagA || TagC"), {f"p{i}" for i in range(12) if i % 3 != 1} | {"q0", "q2"}),
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[tuple[Proc, Proc]]:
    with dev_and_proxy(tmp_path_factory.mktemp("interop-proxy-py-explain")) as procs:
        yield procs


def _explain(dev: Proc, topic: str, *selector: str) -> tuple[str, list[dict[str, Any]]]:
    """``sievemq explain``'s text and its ``--json`` reports (one per broker)."""
    outs = []
    for extra in ((), ("--json",)):
        out = subprocess.run([sys.executable, "-m", "sievemq.cli", "explain", "--topic", topic, *selector, "-n",
                              ns(dev), *extra], capture_output=True, text=True, timeout=60)  # fmt: skip
        assert out.returncode == 0, out.stdout + out.stderr
        outs.append(out.stdout)
    return outs[0], orjson.loads(outs[1])


def _position(e: dict[str, Any]) -> tuple[int, int]:
    """(queue id, queue offset) of a received message, from its receipt handle (docs/pop.md §2)."""
    _version, _broker, _topic, queue_id, offset, _token = e["handle"].split(" ")
    return int(queue_id), int(offset)


def test_explain_counts_are_what_a_5x_simple_consumer_of_the_selector_receives(cluster: tuple[Proc, Proc]) -> None:
    dev, proxy = cluster
    topic = unique_name("PxE")
    create_topic(dev, topic, queues=2)
    consumers: dict[str, DriverProcess] = {}
    for name, ((flag, expr), want) in SELECTORS.items():  # consumers first, then the sends
        # One more than matches: each waits out its timeout, so a message it should not get has time to come.
        driver_flag = {"--sql": "--sql", "--tag": "--tag-expr"}[flag]
        consumers[name] = start_driver("rmq5", ["simple-consume", "--endpoints", proxy.addr, "--topic", topic,
                                                "--group", unique_name("G5"), driver_flag, expr, "--count",
                                                str(len(want) + 1), "--timeout", "20"])  # fmt: skip
    for c in consumers.values():
        c.wait_for("ready", timeout=90)
    for prefix, count, props in (("p", 12, ["--prop", "a={i}"]), ("q", 3, [])):
        res = run_driver("rmq5", ["produce", "--endpoints", proxy.addr, "--topic", topic, "--count", str(count),
                                  "--tags", ",".join(TAGS), "--key-prefix", prefix, *props], timeout=120)  # fmt: skip
        assert res.returncode == 0 and len(res.of("sent")) == count, res.describe()

    for name, ((flag, expr), want) in SELECTORS.items():
        text, reports = _explain(dev, topic, flag, expr)
        kind = "SQL92" if flag == "--sql" else "TAG"
        assert f"{kind} {expr!r} on topic {topic}: {len(want)} of 15 messages match" in text, text
        (report,) = reports
        assert (report["scanned"], report["matched"], report["notMatched"]) == (15, len(want), 15 - len(want)), report
        if kind == "SQL92":  # the three q messages have no 'a': NULL, not FALSE
            assert (report["nullResults"], report["messagesMissingProperty"]) == (3, {"a": 3}), report
        said = {(r["queueId"], r["queueOffset"]): r["properties"]["KEYS"] for r in report["sample"]}
        said_not = {(r["queueId"], r["queueOffset"]) for r in report["notMatchedSample"]}
        assert set(said.values()) == want and len(said) + len(said_not) == 15, report

        c = consumers[name]
        assert c.wait(timeout=60) == 1, f"it got more than {name} matches: {c.describe()}"
        got = c.of("received")
        assert sorted(e["keys"] for e in got) == sorted([k] for k in want), c.describe()
        assert all(e["attempt"] == 1 for e in got), c.describe()
        assert {_position(e): e["keys"][0] for e in got} == said, f"explain's matches are the received ones: {report}"
        assert all(e["tag"] == _tag(e["keys"][0]) for e in got), c.describe()


def _tag(key: str) -> str:
    """The tag the producers gave the message of ``key`` (tags in turn, from each run's first message)."""
    i = int(key[1:])
    return TAGS[i % len(TAGS)]
