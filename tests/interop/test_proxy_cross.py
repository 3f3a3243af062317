"""Messages cross between the real 4.x and 5.x clients through ``sievemq proxy`` (docs/proxy.md §4-5):

- the C++ core (rocketmq-client-python 0.5.0rc2) and ali-ons producers send to a name server and broker, and the 5.x
  SimpleConsumers (Python rocketmq-python-client 5.1.2 and Node.js rocketmq-client-nodejs 1.0.8) receive exactly the
  messages their TAG filter matches, with the 4.x message id (ali-ons sets none: the one the broker gave the message,
  as RocketMQ 5's broker does), tag, keys and user properties intact;
- the Node.js 5.x Producer sends through the proxy, and the C++ core and ali-ons consumers receive exactly the
  messages their tag expression matches, with the Node client's message id, tag, keys and user properties intact.

The Python 5.x Producer read by the C++ core and ali-ons is in ``test_proxy.py``; the Node.js Producer read by
sievemq's own 4.x consumers in ``test_proxy_node.py``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sievemq.protocol.message import decode_records
from sievemq.protocol.msgid import parse_offset_msg_id
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import connect
from tests.interop.clients import run_driver, start_driver, unique_name
from tests.interop.conftest import dev_and_proxy
from tests.interop.test_against_sievemq import consume_args, create_topic, ns
from tests.support.procs import Proc

pytestmark = pytest.mark.interop

async def stored_uniq_key(dev: Proc, offset_msg_id: str) -> str:
    """The UNIQ_KEY of the record an offsetMsgId names (VIEW_MESSAGE_BY_ID on ``dev``'s broker)."""
    _host, _port, offset = parse_offset_msg_id(offset_msg_id)
    conn = await connect("127.0.0.1", dev.port)
    try:
        resp = await conn.request(RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset}), 30.0)
    finally:
        conn.close()
    assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
    (record,) = decode_records(resp.body)
    return record.properties["UNIQ_KEY"]


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
        # ali-ons sends no UNIQ_KEY and reports the stored record's id (offsetMsgId): the broker gave the message one
        want = asyncio.run(stored_uniq_key(dev, ids[i])) if producer == "ons" else ids[i]
        assert e["message_id"] == want, f"the 5.x message id is not the 4.x message's id {want}: {e}"
        assert (e["tag"], e["keys"], e["attempt"]) == (TAGS[i], [f"k{i}"], 1), e
        assert e["properties"] == {"color": "red", "n": str(i)}, f"properties not intact (or system ones leaked): {e}"


@pytest.mark.parametrize("consumer", ["rmqcp", "ons"])
def test_node_producers_messages_reach_4x_consumers_intact(cluster: tuple[Proc, Proc], consumer: str) -> None:
    """Four messages tagged TagN and two tagged TagX from the Node Producer, each with two keys and two user
    properties; a 4.x consumer subscribing TagN gets exactly the four, each once."""
    dev, proxy = cluster
    topic = unique_name("XnT")
    create_topic(dev, topic, queues=2)
    sent: dict[str, dict[str, Any]] = {}
    for tag, prefix, count in (("TagN", "n", 4), ("TagX", "x", 2)):
        res = run_driver("rmq5-node", ["produce", "--endpoints", proxy.addr, "--topic", topic, "--count", str(count),
                                       "--tag", tag, "--key-prefix", prefix, "--key", f"order-{prefix}{{i}}",
                                       "--prop", "color=red", "--prop", f"n={prefix}{{i}}"], timeout=120)  # fmt: skip
        assert res.returncode == 0, f"{res.describe()}\n---- proxy log ----\n{proxy.log()[-3000:]}"
        assert len(res.of("sent")) == count, res.describe()
        sent.update({f"{prefix}{e['i']}": e for e in res.of("sent")})
    c = run_driver(consumer, consume_args(dev, topic, unique_name("C4"), "TagN", 4, kind=consumer), timeout=150)
    assert c.returncode == 0, c.describe()
    got = c.of("received")
    keys = [sorted(str(e["keys"]).split()) for e in got]
    assert sorted(keys) == [[f"n{i}", f"order-n{i}"] for i in range(4)], f"not the TagN ones, once:\n{c.describe()}"
    for e in got:
        name = min(str(e["keys"]).split())  # n<i>
        assert e["tags"] == "TagN", e
        assert e["props"].get("UNIQ_KEY") == sent[name]["message_id"], f"not the Node client's message id: {e}"
        assert (e["props"].get("color"), e["props"].get("n")) == ("red", name), f"user properties not intact: {e}"
