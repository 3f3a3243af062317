"""The Node.js 5.x client's Producer (rocketmq-client-nodejs 1.0.8, unchanged) through ``sievemq proxy``
(docs/proxy.md): delay messages (``deliveryTimestamp``) are not receivable before their time and are received
after it; FIFO messages (``messageGroup``) of several message groups keep each group on one queue and are consumed in
order per group by a FIFO consumer; transactional messages are seen when committed and never when rolled back, and an
un-ended transaction is settled by the brokers' check-back, which the proxy passes to the Node client's transaction
checker over its Telemetry stream (docs/proxy.md §6).

The twins of these tests for the Python 5.x client are in test_proxy_consume.py, test_proxy_fifo.py and
test_proxy_transactions.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sievemq.client import api
from sievemq.protocol.message import MessageExt
from sievemq.remoting.connection import connect
from tests.interop.clients import DriverProcess, DriverResult, ready_driver, run_driver, start_driver, unique_name
from tests.interop.conftest import dev_and_proxy
from tests.interop.test_against_sievemq import create_topic
from tests.interop.test_proxy import _read_all
from tests.interop.test_proxy_fifo import GROUPS, PER_GROUP, _fifo_problems, _group
from tests.support.procs import Proc

pytestmark = pytest.mark.interop

KIND = "rmq5-node"
# Check-backs soon after a half message is left open (as in test_proxy_transactions.py).
FAST_CHECKS = {"SIEVEMQ_TRANSACTION_TIMEOUT": "500", "SIEVEMQ_TRANSACTION_CHECK_INTERVAL": "1000"}
# Clock granularity: the broker's timer wheel and the proxy's long polling round a delivery time a little.
TOLERANCE_MS = 300


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[tuple[Proc, Proc]]:
    with dev_and_proxy(tmp_path_factory.mktemp("interop-proxy-node-produce"), FAST_CHECKS) as procs:
        yield procs


def _why(d: DriverProcess | DriverResult, proxy: Proc) -> str:
    return f"{d.describe()}\n---- proxy log (tail) ----\n{proxy.log()[-4000:]}"


def _pull(dev: Proc, topic: str, queue: int = 0) -> list[MessageExt]:
    """What a 4.x pull of one queue of ``topic`` finds, from its beginning."""

    async def go() -> list[MessageExt]:
        conn = await connect("127.0.0.1", dev.port)
        try:
            r = await api.pull_message(conn, unique_name("Rd"), topic, queue, 0, max_nums=64, subscription="*")
            return r.messages
        finally:
            conn.close()

    return asyncio.run(go())


def _simple_consumer(proxy: Proc, topic: str, group: str, count: int, *extra: str) -> DriverProcess:
    """A Node SimpleConsumer that has made its first receive call."""
    return ready_driver(KIND, ["simple-consume", "--endpoints", proxy.addr, "--topic", topic, "--group", group,
                               "--count", str(count), *extra])  # fmt: skip


# ------------------------------------------------------------------------------------------------ delay


def test_node_delay_message_is_received_at_its_delivery_time_not_before(cluster: tuple[Proc, Proc]) -> None:
    """Two messages with ``deliveryTimestamp`` 4 s after the send: while the time has not come, they are not in
    their topic (a 4.x pull finds nothing) and the Node SimpleConsumer, receiving all along, gets nothing; each
    arrives at least 4 s after its send, with its delivery time, tag and body."""
    dev, proxy = cluster
    topic = unique_name("NdDl")
    create_topic(dev, topic, queues=1)
    delay_ms = 4000
    with _simple_consumer(proxy, topic, unique_name("Nd5G"), 2, "--await", "1", "--timeout", "40") as c:
        res = run_driver(KIND, ["produce", "--endpoints", proxy.addr, "--topic", topic, "--count", "2", "--tag",
                                "TagL", "--delay-ms", str(delay_ms)], timeout=120)  # fmt: skip
        assert res.returncode == 0, _why(res, proxy)
        sent = {e["message_id"]: e for e in res.of("sent")}
        assert len(sent) == 2 and all(e["delivery_ms"] == e["send_ts"] + delay_ms for e in sent.values()), res
        if time.time() * 1000 < min(e["delivery_ms"] for e in sent.values()) - 1000:  # still well before its time
            assert _pull(dev, topic) == [], "a delay message was in its topic before its time"
        code = c.wait(timeout=60)
    why = _why(c, proxy)
    assert code == 0, why
    got = c.of("received")
    assert sorted(e["message_id"] for e in got) == sorted(sent), why
    for e in got:
        s = sent[e["message_id"]]
        assert (e["body"], e["tag"], e["attempt"]) == (f"body-{s['i']}", "TagL", 1), e
        early = s["send_ts"] + delay_ms - TOLERANCE_MS - e["ts"]
        assert early <= 0, f"received {early} ms before its delivery time ({delay_ms} ms after the send):\n{why}"
        assert e["delivery_ms"] == s["delivery_ms"], f"the delivery time does not travel with the message: {e}"
    assert len(got) == 2, f"each once:\n{why}"


# ------------------------------------------------------------------------------------------------ FIFO


def test_node_fifo_messages_keep_each_group_on_one_queue_and_are_consumed_in_order(
    cluster: tuple[Proc, Proc],
) -> None:
    """The Node producer sends ``PER_GROUP`` messages of each of ``GROUPS``, interleaved, to a topic of four queues:
    each message group's messages are on one queue, in the order sent, with the group as their ``__SHARDINGKEY``; a
    FIFO group's Node PushConsumer consumes each message group in order, one message at a time."""
    dev, proxy = cluster
    topic = unique_name("NdFifo")
    create_topic(dev, topic, queues=4)
    group = _group(dev, "--orderly")
    c = start_driver(KIND, ["push-consume", "--endpoints", proxy.addr, "--topic", topic, "--group", group, "--count",
                            str(len(GROUPS) * PER_GROUP), "--sleep", "0.05", "--timeout", "120"])  # fmt: skip
    with c:
        c.wait_for("ready", timeout=90)
        res = run_driver(KIND, ["produce", "--endpoints", proxy.addr, "--topic", topic, "--count",
                                str(len(GROUPS) * PER_GROUP), "--groups", ",".join(GROUPS)], timeout=120)  # fmt: skip
        assert res.returncode == 0, _why(res, proxy)
        code = c.wait(timeout=150)
    why = _why(c, proxy)
    assert code == 0, why
    assert _fifo_problems(c) == [], why
    assert all(e["group"] == e["body"].rsplit("-", 1)[0] for e in c.of("received")), why

    # Where the messages are (the queue a receipt names is the client's pick; the proxy, as RocketMQ's, picks the
    # queue of a FIFO message by its message group).
    stored: dict[str, list[tuple[int, int, str]]] = {}
    for m in _read_all(dev.port, topic, 4):
        body = m.body.decode()
        stored.setdefault(body.rsplit("-", 1)[0], []).append((m.queue_id, m.queue_offset, body))
        assert m.properties.get("__SHARDINGKEY") == body.rsplit("-", 1)[0], m.properties
    assert sorted(stored) == sorted(GROUPS), stored
    for g in GROUPS:
        assert len({q for q, _, _ in stored[g]}) == 1, f"message group {g} on several queues: {stored[g]}"
        assert [b for _, _, b in sorted(stored[g])] == [f"{g}-{i}" for i in range(PER_GROUP)], stored[g]


# ------------------------------------------------------------------------------------------------ transactions


@pytest.mark.parametrize(("end", "seen"), [("commit", [b"tx-0", b"tx-1"]), ("rollback", [])])
def test_node_transaction_commit_is_seen_and_rollback_is_not(
    cluster: tuple[Proc, Proc], end: str, seen: list[bytes]
) -> None:
    dev, proxy = cluster
    topic = unique_name("NdTx")
    create_topic(dev, topic, queues=1)
    res = run_driver(KIND, ["tx-produce", "--endpoints", proxy.addr, "--topic", topic, "--count", "2", "--end", end],
                     timeout=120)  # fmt: skip
    assert res.returncode == 0, _why(res, proxy)
    assert len(res.of("ended")) == 2 and all(e["transaction_id"] for e in res.of("sent")), res.describe()
    # An ended transaction is never checked back: the half message is settled before the check could come.
    got = _pull(dev, topic)
    assert sorted(m.body for m in got) == seen, _why(res, proxy)
    if seen:
        ids = {e["message_id"] for e in res.of("sent")}
        assert {m.uniq_key for m in got} == ids, "the committed messages are not the ones the Node client sent"
        assert sorted(k for m in got for k in m.keys) == ["tx-0", "tx-1"], [m.keys for m in got]


@pytest.mark.parametrize(("answer", "seen"), [("commit", [b"tx-0"]), ("rollback", [])])
def test_node_unended_transaction_is_settled_by_the_check_back(
    cluster: tuple[Proc, Proc], answer: str, seen: list[bytes]
) -> None:
    """The transaction is left open: the broker asks, the proxy passes the question over the producer's Telemetry
    stream (RecoverOrphanedTransactionCommand), the Node client's checker answers, and the client ends the
    transaction with that answer (EndTransaction, source SERVER_CHECK)."""
    dev, proxy = cluster
    topic = unique_name("NdTc")
    create_topic(dev, topic, queues=1)
    res = run_driver(KIND, ["tx-produce", "--endpoints", proxy.addr, "--topic", topic, "--count", "1", "--end",
                            "none", "--check-answer", answer, "--linger", "20"], timeout=120)  # fmt: skip
    why = _why(res, proxy)
    assert res.returncode == 0, why
    (sent,) = res.of("sent")
    assert {e["body"] for e in res.of("checked")} == {"tx-0"}, f"the Node checker was never asked:\n{why}"
    assert res.of("checked")[0]["message_id"] == sent["message_id"], why
    assert res.of("settled"), f"the Node client did not end the checked transaction:\n{why}"
    assert [m.body for m in _pull(dev, topic)] == seen, why
