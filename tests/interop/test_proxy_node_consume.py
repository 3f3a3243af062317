"""The Node.js 5.x client's SimpleConsumer (rocketmq-client-nodejs 1.0.8, unchanged) through ``sievemq proxy`` on the
brokers' POP (docs/proxy.md §5, docs/pop.md): ``changeInvisibleDuration`` moves a held message's return to the new
duration (counted from the change, not from the receive); a message never acked comes back each time its invisible
time ends and, after the group's last attempt, is in ``%DLQ%<group>``; a second consumer of a group with another
filter is refused with the same remark the broker gives a 4.x consumer (subscription consistency,
src/sievemq/broker/consistency.py).

The driver prints each event with its own clock (``ts``, epoch ms), so the tests tell when a message came back. The
twins of these tests for the Python 5.x client are in test_proxy_consume.py."""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sievemq import PushConsumer
from sievemq.client import api
from sievemq.client.errors import SubscriptionError
from sievemq.protocol.message import MessageExt
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.connection import connect
from tests.interop.clients import DriverProcess, DriverResult, ready_driver, run_driver, start_driver, unique_name
from tests.interop.conftest import dev_and_proxy
from tests.interop.test_against_sievemq import create_topic, ns
from tests.support.procs import Proc

pytestmark = pytest.mark.interop

KIND = "rmq5-node"
# Clock granularity: the brokers' revive scan and the proxy's long polling round an invisible time's end a little.
TOLERANCE_MS = 300


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, interop_clients: Path) -> Iterator[tuple[Proc, Proc]]:
    with dev_and_proxy(tmp_path_factory.mktemp("interop-proxy-node-consume")) as procs:
        yield procs


def _why(d: DriverProcess | DriverResult, proxy: Proc) -> str:
    return f"{d.describe()}\n---- proxy log (tail) ----\n{proxy.log()[-4000:]}"


def _simple_consumer(proxy: Proc, topic: str, group: str, count: int, *extra: str) -> DriverProcess:
    """A Node SimpleConsumer that has made its first receive call (and was not refused it)."""
    return ready_driver(KIND, ["simple-consume", "--endpoints", proxy.addr, "--topic", topic, "--group", group,
                               "--count", str(count), *extra])  # fmt: skip


def _produce(proxy: Proc, topic: str, *extra: str) -> DriverResult:
    res = run_driver(KIND, ["produce", "--endpoints", proxy.addr, "--topic", topic, *extra], timeout=120)
    assert res.returncode == 0, _why(res, proxy)
    return res


def _group_update(dev: Proc, group: str, *flags: str) -> None:
    out = subprocess.run([sys.executable, "-m", "sievemq.cli", "group", "update", group, "-n", ns(dev), *flags],
                         capture_output=True, text=True, timeout=30)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr


# ------------------------------------------------------------------------------------ changeInvisibleDuration


def test_node_change_invisible_duration_brings_the_message_back_after_the_new_duration(
    cluster: tuple[Proc, Proc],
) -> None:
    """Received with an invisible time of 2 s, then changed to 8 s: it does not come back when the 2 s end (what a
    change that does nothing would show), but 8 s after the change, as attempt 2."""
    dev, proxy = cluster
    topic = unique_name("NdInv")
    create_topic(dev, topic, queues=1)
    c = _simple_consumer(proxy, topic, unique_name("Nd5G"), 1, "--hold-first", "1", "--invisible", "2", "--change",
                         "8", "--await", "1", "--timeout", "30")  # fmt: skip
    with c:
        (sent,) = _produce(proxy, topic, "--tag", "TagI").of("sent")
        code = c.wait(timeout=60)
    why = _why(c, proxy)
    assert code == 0, f"the changed message did not come back (or was not acked then):\n{why}"
    events = [e for e in c.events if e["event"] in ("received", "changed", "acked")]
    assert [e["event"] for e in events] == ["received", "changed", "received", "acked"], why
    first, changed, again, _acked = events
    assert first["message_id"] == changed["message_id"] == again["message_id"] == sent["message_id"], why
    assert (first["attempt"], again["attempt"], changed["invisible_ms"]) == (1, 2, 8000), why
    # The new invisible time runs from the change (which began at change_ts), so nothing before change_ts + 8 s.
    back_after = again["ts"] - changed["change_ts"]
    assert back_after >= 8000 - TOLERANCE_MS, (
        f"back {back_after} ms after the change to 8 s (received with 2 s {again['ts'] - first['ts']} ms before): "
        f"the change did not take:\n{why}"
    )


# ------------------------------------------------------------------------------------ max attempts, DLQ


def _dead_letters(dev: Proc, group: str) -> list[MessageExt]:
    async def go() -> list[MessageExt]:
        conn = await connect("127.0.0.1", dev.port)
        try:
            r = await api.pull_message(conn, unique_name("Rd"), f"%DLQ%{group}", 0, 0, subscription="*")
            return r.messages
        finally:
            conn.close()

    return asyncio.run(go())


def test_node_unacked_message_comes_back_each_time_then_goes_to_the_dead_letter_topic(
    cluster: tuple[Proc, Proc],
) -> None:
    """The group's ``retryMaxTimes`` 2: three deliveries in all. The Node SimpleConsumer never acks: the message
    comes back each time its 2 s invisible time ends (attempts 1, 2, 3, each at least 2 s after the one before), not
    a fourth time, and then it is in ``%DLQ%<group>`` with its body, tag, user property and original topic."""
    dev, proxy = cluster
    topic, group = unique_name("NdD"), unique_name("Nd5G")
    create_topic(dev, topic, queues=1)
    _group_update(dev, group, "--retry-max-times", "2")
    c = _simple_consumer(proxy, topic, group, 1, "--hold-first", "99", "--invisible", "2", "--await", "1",
                         "--timeout", "12")  # fmt: skip
    with c:
        (sent,) = _produce(proxy, topic, "--tag", "TagD", "--prop", "k=v").of("sent")
        code = c.wait(timeout=60)
    why = _why(c, proxy)
    assert code == 3, f"the consumer acks nothing, so it should end by its timeout:\n{why}"
    got = c.of("received")
    assert [e["attempt"] for e in got] == [1, 2, 3], f"three deliveries, then no more:\n{why}"
    assert {e["message_id"] for e in got} == {sent["message_id"]}, why
    # Each delivery's invisible time began inside the receive call that returned it (from receive_ts on).
    for before, after in itertools.pairwise(got):
        assert after["ts"] - before["receive_ts"] >= 2000 - TOLERANCE_MS, f"back before its invisible time:\n{why}"
    assert not c.of("acked") and not c.of("error"), why

    (m,) = _dead_letters(dev, group)
    assert (m.body, m.tags, m.properties.get("k"), m.properties.get("RETRY_TOPIC")) == (b"body-0", "TagD", "v", topic)
    assert m.uniq_key == sent["message_id"], m.properties


# ------------------------------------------------------------------------------------ subscription consistency


def _refusal_to_a_4x_consumer(dev: Proc, topic: str, group: str, expression: str) -> SubscriptionError:
    """What sievemq's 4.x PushConsumer of ``group`` subscribing ``topic`` with ``expression`` is told at start."""

    async def go() -> SubscriptionError:
        c = PushConsumer(ns(dev), group, rebalance_interval=1.0)
        c.subscribe(topic, expression)
        c.listener(lambda msgs: None)
        try:
            await c.start()
        except SubscriptionError as e:
            return e
        await c.close()
        raise AssertionError(f"a 4.x consumer of {group} subscribing {expression!r} was not refused")

    return asyncio.run(go())


def test_node_second_consumer_with_another_filter_is_refused_with_the_brokers_remark(
    cluster: tuple[Proc, Proc],
) -> None:
    """Two Node SimpleConsumers of one group, TagA first, then TagB: the second's receives are refused with FORBIDDEN
    and the broker's remark - word for word what a 4.x consumer of the group subscribing TagB is told (reason
    SUBSCRIPTION_INCONSISTENT); the first keeps consuming."""
    dev, proxy = cluster
    topic, group = unique_name("NdS"), unique_name("Nd5G")
    create_topic(dev, topic, queues=1)
    first = _simple_consumer(proxy, topic, group, 1, "--tag-expr", "TagA", "--timeout", "40")
    with first:
        second = start_driver(KIND, ["simple-consume", "--endpoints", proxy.addr, "--topic", topic, "--group", group,
                                     "--count", "1", "--tag-expr", "TagB", "--timeout", "6"])  # fmt: skip
        with second:
            second.wait_for("error", timeout=60)
            told_4x = _refusal_to_a_4x_consumer(dev, topic, group, "TagB")
            code = second.wait(timeout=60)
        _produce(proxy, topic, "--tag", "TagA")
        assert first.wait(timeout=60) == 0, f"the first consumer stopped getting its messages:\n{_why(first, proxy)}"
    why = _why(second, proxy)

    assert (told_4x.code, told_4x.reason) == (ResponseCode.SUBSCRIPTION_NOT_EXIST, Reason.SUBSCRIPTION_INCONSISTENT)
    remark = told_4x.remark
    for piece in ("inconsistent subscription", f"'{group}'", f"'{topic}'", "with 'TagA'", "with 'TagB'"):
        assert piece in remark, f"{piece!r} not in the broker's remark to the 4.x consumer: {remark}"

    assert code == 3 and not second.of("received"), f"the inconsistent Node consumer got messages:\n{why}"
    errors = second.of("error")
    assert errors and all(e.get("stage") == "receive" for e in errors), why
    for e in errors:
        assert e.get("error_code") == 40300, f"not FORBIDDEN: {e}"
        assert remark in e["error"], f"the Node consumer is not told what the 4.x one is ({remark!r}): {e}"
        assert f"[{Reason.SUBSCRIPTION_INCONSISTENT}]" in e["error"], f"the stable reason, as ACL ones carry it: {e}"
