"""5.x consumers (rocketmq-python-client 5.1.2) through ``sievemq proxy``, on the brokers' POP (docs/pop.md,
docs/proxy.md §5): SimpleConsumer with TAG and SQL92 filters gets exactly the matching messages with tag, keys and
properties intact; acked ones never come back, unacked ones do (attempt 2); a PushConsumer's failed message comes
back; subscription consistency holds for 5.x groups; messages of 4.x producers reach 5.x consumers and back."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from sievemq import Message, Producer
from sievemq.cli.devcert import dev_certificate
from sievemq.client import api
from sievemq.protocol.heartbeat import ConsumerData, HeartbeatData, Subscription
from sievemq.protocol.message import MessageExt
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import connect
from tests.interop.clients import DriverProcess, run_driver, start_driver, unique_name
from tests.interop.conftest import dev_and_proxy
from tests.interop.test_against_sievemq import create_topic, ns
from tests.support.procs import Proc, dev_proc, proxy_proc

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[tuple[Proc, Proc]]:
    with dev_and_proxy(tmp_path_factory.mktemp("interop-proxy-consume")) as procs:
        yield procs


def _produce_4x(dev: Proc, topic: str, specs: list[tuple[str, dict[str, str]]]) -> list[str]:
    """Send with sievemq's 4.x producer: (tag, properties) per message, body ``m<i>``, key ``k<i>``."""

    async def go() -> list[str]:
        async with Producer(ns(dev), unique_name("P4")) as p:
            out = []
            for i, (tag, props) in enumerate(specs):
                r = await p.send(Message(topic, f"m{i}".encode(), tags=tag, keys=[f"k{i}"], properties=props))
                out.append(r.msg_id)
            return out

    return asyncio.run(go())


def _consumer(
    proxy: Proc, topic: str, group: str, count: int, *extra: str, kind: str = "simple-consume"
) -> DriverProcess:
    c = start_driver("rmq5", [kind, "--endpoints", proxy.addr, "--topic", topic, "--group", group, "--count",
                              str(count), *extra])  # fmt: skip
    c.wait_for("ready", timeout=90)
    return c


@pytest.mark.parametrize(
    ("expr", "wanted"),
    [(("--tag-expr", "TagA || TagB"), [0, 1, 3, 5]), (("--sql", "a > 5 AND b = 'x'"), [3, 5])],
    ids=["tag", "sql92"],
)
def test_simple_consumer_receives_exactly_the_matching_messages(
    cluster: tuple[Proc, Proc], expr: tuple[str, str], wanted: list[int]
) -> None:
    dev, proxy = cluster
    topic = unique_name("PxC")
    create_topic(dev, topic, queues=2)
    c = _consumer(proxy, topic, unique_name("G5"), len(wanted), *expr, "--timeout", "60")
    tags = ["TagA", "TagB", "TagC", "TagA", "TagC", "TagB"]
    ids = _produce_4x(dev, topic, [(t, {"a": str(i * 2), "b": "x" if i % 2 else "y"}) for i, t in enumerate(tags)])
    assert c.wait(timeout=90) == 0, c.describe()
    got = {e["body"]: e for e in c.of("received")}
    assert sorted(got) == sorted(f"m{i}" for i in wanted), c.describe()
    for i in wanted:
        e = got[f"m{i}"]
        assert (e["tag"], e["keys"], e["message_id"], e["attempt"]) == (tags[i], [f"k{i}"], ids[i], 1), e
        assert e["properties"] == {"a": str(i * 2), "b": "x" if i % 2 else "y"}, e
    assert len(c.of("received")) == len(wanted), "each message delivered once"


def test_an_unacked_message_comes_back_with_attempt_2_and_an_acked_one_never(cluster: tuple[Proc, Proc]) -> None:
    dev, proxy = cluster
    topic = unique_name("PxR")
    create_topic(dev, topic, queues=1)
    c = _consumer(proxy, topic, unique_name("G5"), 3, "--hold-first", "1", "--invisible", "2", "--timeout", "40")
    _produce_4x(dev, topic, [("T", {}), ("T", {}), ("T", {})])
    assert c.wait(timeout=60) == 0, c.describe()
    received = [(e["body"], e["attempt"]) for e in c.of("received")]
    held = received[0][0]
    assert received.count((held, 1)) == 1 and received.count((held, 2)) == 1, received
    assert len(received) == 4, f"the two acked at once were never delivered again: {received}"


def test_a_change_of_invisible_duration_delays_the_redelivery(cluster: tuple[Proc, Proc]) -> None:
    """Received with 1 s of invisible time, changed to 6 s at once: it comes back no earlier than 6 s after the
    change was asked for (the driver's ``asked_at`` precedes the broker's change, so its deadline is later still).
    A change that did nothing would bring it back after the old 1 s (plus at most one long poll of 2 s)."""
    dev, proxy = cluster
    topic = unique_name("PxI")
    create_topic(dev, topic, queues=1)
    old, new = 1, 6
    c = _consumer(proxy, topic, unique_name("G5"), 1, "--hold-first", "1", "--invisible", str(old), "--change",
                  str(new), "--timeout", "40")  # fmt: skip
    _produce_4x(dev, topic, [("T", {})])
    assert c.wait(timeout=60) == 0, c.describe()
    times = [e for e in c.events if e.get("event") in ("received", "changed")]
    assert [e["event"] for e in times] == ["received", "changed", "received"], c.describe()
    first, changed, again = times
    assert [first["attempt"], again["attempt"]] == [1, 2], c.describe()
    assert first["message_id"] == changed["message_id"] == again["message_id"], c.describe()
    # 10 ms for the millisecond rounding of the broker's clock and the driver's (both this machine's time.time()).
    waited = again["ts"] - changed["asked_at"]
    assert waited >= new - 0.01, f"back {waited:.3f} s after the change to {new} s (the old time was {old} s)"


def test_push_consumer_receives_and_a_failed_message_comes_back(cluster: tuple[Proc, Proc]) -> None:
    dev, proxy = cluster
    topic = unique_name("PxP")
    create_topic(dev, topic, queues=2)
    c = _consumer(proxy, topic, unique_name("G5"), 4, "--tag-expr", "TagA", "--fail-first", "1", "--timeout", "60",
                  kind="push-consume")  # fmt: skip
    _produce_4x(dev, topic, [("TagA", {}), ("TagB", {}), ("TagA", {}), ("TagA", {}), ("TagA", {})])
    assert c.wait(timeout=90) == 0, c.describe()
    acked_bodies = {e["body"] for e in c.of("received")}
    assert acked_bodies == {"m0", "m2", "m3", "m4"}, c.describe()
    attempts = sorted(e["attempt"] for e in c.of("received"))
    assert attempts == [1, 1, 1, 1, 2], f"the failed one came back once: {c.describe()}"


def test_5x_producer_to_5x_consumer_with_fifo_group(cluster: tuple[Proc, Proc]) -> None:
    dev, proxy = cluster
    topic = unique_name("PxF")
    create_topic(dev, topic, queues=2)
    c = _consumer(proxy, topic, unique_name("G5"), 4, "--timeout", "60")
    res = run_driver("rmq5", ["produce", "--endpoints", proxy.addr, "--topic", topic, "--count", "4", "--tag", "TagF",
                              "--key-prefix", "k", "--prop", "n={i}", "--group", "orders"], timeout=120)  # fmt: skip
    assert res.returncode == 0, res.describe()
    assert c.wait(timeout=90) == 0, c.describe()
    got = c.of("received")
    assert [e["body"] for e in got] == [f"body-{i}" for i in range(4)], "one message group, one queue, in order"
    assert all(e["group"] == "orders" and e["tag"] == "TagF" for e in got), got
    assert [e["properties"] for e in got] == [{"n": str(i)} for i in range(4)]


def test_two_5x_consumers_of_one_group_with_different_filters_the_second_is_refused(
    cluster: tuple[Proc, Proc],
) -> None:
    dev, proxy = cluster
    topic = unique_name("PxS")
    create_topic(dev, topic, queues=1)
    group = unique_name("G5")
    first = _consumer(proxy, topic, group, 1, "--tag-expr", "TagA", "--timeout", "40")
    second = start_driver("rmq5", ["simple-consume", "--endpoints", proxy.addr, "--topic", topic, "--group", group,
                                   "--count", "1", "--tag-expr", "TagB", "--timeout", "8"])  # fmt: skip
    assert second.wait(timeout=60) == 1, second.describe()
    remark = asyncio.run(_remark_of_a_4x_consumer(dev, group, topic, "TagB"))
    assert remark.startswith("inconsistent subscription:") and "'TagA'" in remark and "'TagB'" in remark, remark
    # The 5.x client turns FORBIDDEN into ForbiddenException with the code (40300) and the proxy's message: the
    # stable reason in brackets (docs/proxy.md §3), then the broker's remark, word for word what the 4.x consumer
    # was told.
    errors = [e["error"] for e in second.of("error")]
    told = f"ForbiddenException: 40300, [{Reason.SUBSCRIPTION_INCONSISTENT}] {remark}"
    assert errors and set(errors) == {told}, f"not told {told!r}:\n{second.describe()}"
    assert not second.of("received"), second.describe()
    _produce_4x(dev, topic, [("TagA", {})])
    assert first.wait(timeout=60) == 0, first.describe()


async def _remark_of_a_4x_consumer(dev: Proc, group: str, topic: str, expr: str) -> str:
    """What the broker tells a 4.x consumer of ``group`` that subscribes ``topic`` with ``expr``: its heartbeat's
    refusal, which its pulls of the topic repeat (checked here too); the client is unregistered afterwards."""
    conn = await connect("127.0.0.1", dev.port)
    client_id = unique_name("c4")
    try:
        sub = Subscription(topic, expr, "TAG", int(time.time() * 1000))
        hb = HeartbeatData(client_id, [], [ConsumerData(group, "CONSUME_PASSIVELY", "CLUSTERING",
                                                        "CONSUME_FROM_LAST_OFFSET", [sub])])  # fmt: skip
        answer = await api.heartbeat(conn, hb)
        (refused,) = [r for r in answer.refused if r.group == group and r.topic == topic]
        pulled = await api.pull_message(conn, group, topic, 0, 0, subscription=expr)
        assert (pulled.reason, pulled.remark) == (Reason.SUBSCRIPTION_INCONSISTENT, refused.remark), pulled
        await api.unregister_client(conn, client_id, consumer_group=group)
        return str(refused.remark)
    finally:
        conn.close()


def test_a_proxy_with_tls_serves_5x_clients_that_trust_its_certificate(
    cluster: tuple[Proc, Proc], tmp_path: Path
) -> None:
    dev, _ = cluster
    issued = dev_certificate(tmp_path, ("127.0.0.1",))
    tls = proxy_proc(tmp_path, ns(dev), "proxy-tls")
    tls.args += ["--tls-mode", "enforcing", "--tls-server-cert-path", str(issued.cert), "--tls-server-key-path",
                 str(issued.key)]  # fmt: skip
    tls.start()
    try:
        topic = unique_name("PxTls")
        create_topic(dev, topic, queues=1)
        env = {"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(issued.cert)}
        c = start_driver("rmq5", ["simple-consume", "--endpoints", tls.addr, "--topic", topic, "--group",
                                  unique_name("G5"), "--count", "2", "--timeout", "40", "--tls"], env=env)  # fmt: skip
        c.wait_for("ready", timeout=90)
        res = run_driver("rmq5", ["produce", "--endpoints", tls.addr, "--topic", topic, "--count", "2", "--tls"],
                         timeout=120, env=env)  # fmt: skip
        assert res.returncode == 0, res.describe()
        assert c.wait(timeout=60) == 0, c.describe()
        plain = run_driver("rmq5", ["produce", "--endpoints", tls.addr, "--topic", topic, "--count", "1"], timeout=120)
        assert plain.returncode == 1, "a plain-TCP client was served by an enforcing proxy"
    finally:
        assert tls.stop() == 0, tls.log()


def test_after_max_delivery_attempts_the_message_is_in_the_dead_letter_topic(cluster: tuple[Proc, Proc]) -> None:
    dev, proxy = cluster
    topic, group = unique_name("PxD"), unique_name("G5")
    create_topic(dev, topic, queues=1)

    async def retry_once() -> None:  # the group's retryMaxTimes 1: two deliveries in all
        conn = await connect("127.0.0.1", dev.port)
        try:
            body = orjson.dumps({"groupName": group, "retryMaxTimes": 1, "consumeEnable": True})
            resp = await conn.request(
                RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
            )
            assert resp.code == ResponseCode.SUCCESS, resp.remark
        finally:
            conn.close()

    asyncio.run(retry_once())
    c = _consumer(proxy, topic, group, 1, "--hold-first", "99", "--invisible", "1", "--timeout", "8")
    _produce_4x(dev, topic, [("TagD", {"k": "v"})])
    c.wait(timeout=60)
    assert [e["attempt"] for e in c.of("received")] == [1, 2], c.describe()

    async def dead() -> list[MessageExt]:
        conn = await connect("127.0.0.1", dev.port)
        try:
            r = await api.pull_message(conn, unique_name("Rd"), f"%DLQ%{group}", 0, 0, subscription="*")
            return r.messages
        finally:
            conn.close()

    (m,) = asyncio.run(dead())
    assert (m.body, m.tags, m.properties.get("k"), m.properties.get("RETRY_TOPIC")) == (b"m0", "TagD", "v", topic)


def test_filter_counts_of_a_5x_sql_group_show_in_sievemq_group_filters(cluster: tuple[Proc, Proc]) -> None:
    dev, proxy = cluster
    topic, group = unique_name("PxQ"), unique_name("G5")
    create_topic(dev, topic, queues=1)
    c = _consumer(proxy, topic, group, 2, "--sql", "a > 5", "--timeout", "40")
    _produce_4x(dev, topic, [("T", {"a": str(i * 2)}) for i in range(6)])  # a = 0..10: 6, 8, 10 match
    assert c.wait(timeout=60) == 0, c.describe()
    out = subprocess.run([sys.executable, "-m", "sievemq.cli", "group", "filters", group, "-n", ns(dev), "--json"],
                         capture_output=True, text=True, timeout=30)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "a > 5" in out.stdout and topic in out.stdout, out.stdout
    doc = orjson.loads(out.stdout)
    assert _number(doc, "matched") >= 2 and _number(doc, "filtered") >= 3, out.stdout


def _number(doc: object, word: str) -> int:
    """The sum of the numbers under keys containing ``word`` anywhere in ``doc``."""
    if isinstance(doc, dict):
        return sum(v if isinstance(v, int) and word in k.lower() else _number(v, word) for k, v in doc.items())
    if isinstance(doc, list):
        return sum(_number(v, word) for v in doc)
    return 0


def test_a_delay_message_is_received_at_its_delivery_time_not_before(cluster: tuple[Proc, Proc]) -> None:
    """Each message is received no earlier than the delivery time its producer set (the producer's and the
    consumer's ``ts`` are this machine's clock), and carries that time."""
    dev, proxy = cluster
    topic = unique_name("PxDl")
    create_topic(dev, topic, queues=1)
    c = _consumer(proxy, topic, unique_name("G5"), 2, "--timeout", "40")
    res = run_driver("rmq5", ["produce", "--endpoints", proxy.addr, "--topic", topic, "--count", "2", "--tag", "TagL",
                              "--delay-s", "4"], timeout=120)  # fmt: skip
    assert res.returncode == 0, res.describe()
    due = {f"body-{e['i']}": e["delivery_s"] for e in res.of("sent")}
    assert len(due) == 2, res.describe()
    assert c.wait(timeout=60) == 0, c.describe()
    got = c.of("received")
    assert sorted(e["body"] for e in got) == ["body-0", "body-1"] and all(e["tag"] == "TagL" for e in got), got
    for e in got:
        assert e["ts"] >= due[e["body"]], f"received {due[e['body']] - e['ts']:.3f} s before its delivery time: {e}"
        assert e["delivery_ms"] == due[e["body"]] * 1000, f"the delivery time travels with the message: {e}"


def test_a_push_consumers_slow_listener_keeps_its_message_invisible(cluster: tuple[Proc, Proc], tmp_path: Path) -> None:
    dev, _ = cluster
    short = proxy_proc(tmp_path, ns(dev), "proxy-short")
    short.args += ["--default-invisible-seconds", "3", "--min-invisible-time-mills-for-recv", "1000"]
    short.start()
    try:
        topic = unique_name("PxSlow")
        create_topic(dev, topic, queues=1)
        c = _consumer(short, topic, unique_name("G5"), 1, "--sleep", "8", "--timeout", "40", kind="push-consume")
        _produce_4x(dev, topic, [("T", {})])
        assert c.wait(timeout=60) == 0, c.describe()
        assert [e["attempt"] for e in c.of("received")] == [1], f"renewed, not delivered again: {c.describe()}"
    finally:
        assert short.stop() == 0, short.log()


def test_sievemq_dev_with_tls_serves_5x_clients_over_tls(tmp_path: Path, interop_clients: Path) -> None:
    """``sievemq dev --tls``: its gRPC proxy serves TLS with dev's certificate and reaches the broker over TLS (the
    broker refuses plain TCP), so a 5.x client trusting that certificate produces and consumes."""
    dev = dev_proc(tmp_path, "--tls").start()
    try:
        banner = re.search(r"--tls-ca (\S+)", dev.log())
        assert banner is not None and "TLS only" in dev.log(), dev.log()
        env = {"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": banner.group(1)}
        grpc_addr = str(dev.extra["grpc"])
        topic = unique_name("DevTls5")
        create = ["topic", "create", topic, "-n", ns(dev), "-q", "1", "--tls", "--tls-ca", banner.group(1)]
        out = subprocess.run([sys.executable, "-m", "sievemq.cli", *create], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stdout + out.stderr
        c = start_driver("rmq5", ["simple-consume", "--endpoints", grpc_addr, "--topic", topic, "--group",
                                  unique_name("G5"), "--count", "2", "--timeout", "40", "--tls"], env=env)  # fmt: skip
        c.wait_for("ready", timeout=90)
        res = run_driver("rmq5", ["produce", "--endpoints", grpc_addr, "--topic", topic, "--count", "2", "--tls"],
                         timeout=120, env=env)  # fmt: skip
        assert res.returncode == 0, f"{res.describe()}\n{dev.log()[-3000:]}"
        assert c.wait(timeout=60) == 0, c.describe()
    finally:
        assert dev.stop() == 0, dev.log()
