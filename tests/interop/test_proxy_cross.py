"""Messages of the real 4.x clients reach the real 5.x clients through ``sievemq proxy`` (docs/proxy.md §4-5):
the C++ core (rocketmq-client-python 0.5.0rc2) and ali-ons producers send to a name server and broker, and the 5.x
SimpleConsumers (Python rocketmq-python-client 5.1.2 and Node.js rocketmq-client-nodejs 1.0.8) receive exactly the
messages their TAG filter matches, with the 4.x message id, tag, keys and user properties intact.

The other direction (5.x producers read by the C++ core, ali-ons and sievemq's consumers) is in ``test_proxy.py``
and ``test_proxy_node.py``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.clients import run_driver, start_driver, unique_name
from tests.interop.conftest import dev_and_proxy
from tests.interop.test_against_sievemq import create_topic, ns
from tests.support.procs import Proc

pytestmark = pytest.mark.interop

TAGS = ["TagA", "TagB", "TagC", "TagA", "TagC", "TagB"]
WANTED = [i for i, t in enumerate(TAGS) if t in ("TagA", "TagB")]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[tuple[Proc, Proc]]:
    with dev_and_proxy(tmp_path_factory.mktemp("interop-proxy-cross")) as procs:
        yield procs


@pytest.mark.parametrize("consumer", ["rmq5", "rmq5-node"])
@pytest.mark.parametrize("producer", ["rmqcp", "ons"])
def test_4x_producers_messages_reach_5x_simple_consumers_intact(
    cluster: tuple[Proc, Proc], producer: str, consumer: str
) -> None:
    dev, proxy = cluster
    topic = unique_name("XcT")
    create_topic(dev, topic, queues=2)
    c = start_driver(consumer, ["simple-consume", "--endpoints", proxy.addr, "--topic", topic, "--group",
                                unique_name("G5"), "--tag-expr", "TagA || TagB", "--count", str(len(WANTED)),
                                "--timeout", "90"])  # fmt: skip
    c.wait_for("ready", timeout=90)
    sent = run_driver(producer, ["produce", "--namesrv", ns(dev), "--topic", topic, "--group", unique_name("P4"),
                                 "--count", str(len(TAGS)), "--tags", ",".join(TAGS), "--key-prefix", "k",
                                 "--prop", "color=red", "--prop", "n={i}"], timeout=120)  # fmt: skip
    assert sent.returncode == 0, sent.describe()
    ids = {e["i"]: e["msg_id"] for e in sent.of("sent")}
    assert sorted(ids) == list(range(len(TAGS))), sent.describe()
    assert c.wait(timeout=120) == 0, f"{c.describe()}\n---- proxy log ----\n{proxy.log()[-3000:]}"
    got = c.of("received")
    assert sorted(e["body"] for e in got) == sorted(f"body-{i}" for i in WANTED), c.describe()
    for e in got:
        i = int(e["body"].removeprefix("body-"))
        assert e["message_id"] == ids[i], f"the 5.x message id is not the 4.x producer's msgId {ids[i]}: {e}"
        assert (e["tag"], e["keys"], e["attempt"]) == (TAGS[i], [f"k{i}"], 1), e
        assert e["properties"] == {"color": "red", "n": str(i)}, f"properties not intact (or system ones leaked): {e}"
