"""Orderly POP (FIFO groups) on a real broker over TCP, with sievemq's own POP API (docs/pop.md §5): one batch of a
queue at a time, the same message first again when its invisible time ran out, a long-polling POP woken by the ack
that frees the queue (or ends its lock sooner), TAG and SQL92 filters passing over what they drop, the dead-letter
topic after the last attempt and the queue moving on, a retried POP (same attempt id) getting its batch again, the
lock and the leases surviving a ``kill -9``; and the group's ``consumeMessageOrderly`` set with ``sievemq group
update`` and read back."""

from __future__ import annotations

import asyncio

import orjson

from sievemq.client import pop_api
from sievemq.client.pop_api import PopResult
from sievemq.errors import RemotingError
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.connection import Connection
from tests.integration.conftest import Cluster, OpenConn
from tests.integration.helpers import call, create_topic, eventually, pull_all
from tests.integration.test_cli import run_cli
from tests.support import wire
from tests.support.quiet import quiet_period

TOPIC = "FifoTopic"


async def _send(conn: Connection, queue: int, bodies: list[str], tags: str | None = None) -> None:
    for b in bodies:
        await wire.send_message(conn, TOPIC, b.encode(), queue_id=queue, tags=tags)


async def _pop(conn: Connection, group: str, queue: int, **kw: object) -> PopResult:
    """An orderly POP (``order``) of one queue, or of every queue for -1."""
    kw.setdefault("invisible_ms", 30_000)
    return await pop_api.pop_message(conn, group, TOPIC, queue, order=True, **kw)  # type: ignore[arg-type]


def _got(r: PopResult) -> list[tuple[str, int]]:
    return [(m.message.body.decode(), m.attempt) for m in r.messages]


async def _fresh(cluster: Cluster, open_conn: OpenConn, queues: int = 2, *extra: str) -> Connection:
    ns = cluster.namesrv()
    conn = await open_conn(cluster.broker(ns.addr, "broker-fifo", *extra))
    await create_topic(conn, TOPIC, queues=queues)
    return conn


async def test_one_batch_of_a_queue_at_a_time_and_the_same_message_first_when_it_ran_out(
    cluster: Cluster, open_conn: OpenConn
) -> None:
    conn = await _fresh(cluster, open_conn)
    assert (await _pop(conn, "fifo", -1)).messages == [], "a new group starts at the queues' ends"
    for i in range(4):
        await _send(conn, 0, [f"a{i}"])
        if i < 3:
            await _send(conn, 1, [f"b{i}"])

    first = await _pop(conn, "fifo", 0, max_nums=2, invisible_ms=2000)
    assert _got(first) == [("a0", 1), ("a1", 1)]
    assert (await _pop(conn, "fifo", 0)).messages == [], "queue 0 is locked while a0, a1 are out"
    assert _got(await _pop(conn, "fifo", 1)) == [("b0", 1), ("b1", 1), ("b2", 1)], "other queues are not"
    await pop_api.ack_message(conn, "fifo", first.messages[0].handle)
    assert (await _pop(conn, "fifo", 0)).messages == [], "a1 is still out: still locked"

    again = await _pop(conn, "fifo", 0, poll_ms=6000)  # waits for a1's invisible time to run out
    assert _got(again) == [("a1", 2), ("a2", 1), ("a3", 1)], "a1 again first, attempt 2, then what follows it"
    for m in again.messages:
        await pop_api.ack_message(conn, "fifo", m.handle)
    assert (await _pop(conn, "fifo", 0)).messages == [], "everything of queue 0 consumed, each once"
    try:
        await pop_api.ack_message(conn, "fifo", first.messages[1].handle)
        raise AssertionError("the handle of a1's first delivery acked it after it was delivered again")
    except RemotingError as e:
        assert e.reason == Reason.RECEIPT_HANDLE_EXPIRED, e


async def test_a_long_polling_orderly_pop_gets_the_next_message_when_the_batch_is_acked(
    cluster: Cluster, open_conn: OpenConn
) -> None:
    conn = await _fresh(cluster, open_conn, 2)
    await _pop(conn, "lp", -1)
    await _send(conn, 0, ["x0", "x1"])
    out = await _pop(conn, "lp", -1)
    assert _got(out) == [("x0", 1), ("x1", 1)], "a POP of queue -1 takes from an unlocked queue"
    waiting = asyncio.create_task(_pop(conn, "lp", -1, poll_ms=20_000))
    await _send(conn, 0, ["x2"])
    await quiet_period(1.0, "x2 handed out while x0, x1 lock the queue", unchanged=waiting.done)
    assert not waiting.done(), "x2 must wait for x0, x1: the locked queue hands out nothing"
    await pop_api.ack_message(conn, "lp", out.messages[0].handle)
    await quiet_period(0.5, "x2 handed out while x1 is still out", unchanged=waiting.done)
    assert not waiting.done(), "x1 is still out"
    await pop_api.ack_message(conn, "lp", out.messages[1].handle)
    # the poll time is 20 s: an answer within 10 s comes from the ack that freed the queue
    assert _got(await asyncio.wait_for(waiting, 10)) == [("x2", 1)]


async def test_an_ack_that_ends_the_lock_sooner_wakes_a_waiting_orderly_pop(
    cluster: Cluster, open_conn: OpenConn
) -> None:
    conn = await _fresh(cluster, open_conn, 1)
    await _pop(conn, "lp2", 0)
    await _send(conn, 0, ["y0", "y1"])
    out = await _pop(conn, "lp2", 0, invisible_ms=60_000)
    await pop_api.change_invisible_time(conn, "lp2", out.messages[1].handle, 3000)  # y1's lease ends first
    waiting = asyncio.create_task(_pop(conn, "lp2", 0, poll_ms=20_000))  # locked by y0 for a minute
    await asyncio.sleep(0.5)
    await pop_api.ack_message(conn, "lp2", out.messages[0].handle)  # now only y1 holds the lock, for ~3 s
    # y0's lease would have kept it waiting past its 20 s poll time: an answer within 12 s means the ack woke it
    assert _got(await asyncio.wait_for(waiting, 12)) == [("y1", 2)]


async def test_filters_pass_over_and_the_last_attempt_goes_to_the_dead_letter_topic_then_the_queue_moves_on(
    cluster: Cluster, open_conn: OpenConn
) -> None:
    conn = await _fresh(cluster, open_conn, 1)
    resp = await call(conn, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                      body=orjson.dumps({"groupName": "fdlq", "retryMaxTimes": 1}))  # fmt: skip
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    tag = {"expression": "TagA"}
    await _pop(conn, "fdlq", 0, **tag)
    await _send(conn, 0, ["m0"], "TagA")
    await _send(conn, 0, ["m1"], "TagB")
    await _send(conn, 0, ["m2", "m3"], "TagA")
    assert _got(await _pop(conn, "fdlq", 0, max_nums=1, invisible_ms=1000, **tag)) == [("m0", 1)]
    second = await _pop(conn, "fdlq", 0, max_nums=1, invisible_ms=1000, poll_ms=5000, **tag)
    assert _got(second) == [("m0", 2)], "m0 again, its second and last attempt (retryMaxTimes 1)"
    moved_on = await _pop(conn, "fdlq", 0, max_nums=32, invisible_ms=5000, poll_ms=5000, **tag)
    assert _got(moved_on) == [("m2", 1), ("m3", 1)], "m0 went to the DLQ, m1 is not TagA: the queue moves on"

    async def dead() -> list[bytes] | None:
        got = [m.body for m in await pull_all(conn, "%DLQ%fdlq", 0)]
        return got or None

    assert await eventually(dead, what="m0 in %DLQ%fdlq") == [b"m0"]


async def test_a_sql92_filter_passes_over_what_it_drops_and_keeps_the_order_of_the_rest(
    cluster: Cluster, open_conn: OpenConn
) -> None:
    conn = await _fresh(cluster, open_conn, 1)
    sql = {"expression": "step >= 2", "expression_type": "SQL92"}
    await _pop(conn, "fsql", 0, **sql)
    for i in range(6):
        await wire.send_message(conn, TOPIC, f"s{i}".encode(), queue_id=0, properties={"step": str(i % 4)})
    first = await _pop(conn, "fsql", 0, max_nums=2, **sql)
    assert _got(first) == [("s2", 1), ("s3", 1)], "steps 0, 1 passed over"
    assert (await _pop(conn, "fsql", 0, **sql)).messages == [], "locked while s2, s3 are out"
    for m in first.messages:
        await pop_api.ack_message(conn, "fsql", m.handle)
    assert (await _pop(conn, "fsql", 0, **sql)).messages == [], "s4, s5 are steps 0, 1: nothing left that matches"


async def test_a_retried_pop_gets_its_batch_again_and_hostile_attempt_ids_are_refused(
    cluster: Cluster, open_conn: OpenConn
) -> None:
    conn = await _fresh(cluster, open_conn, 1)
    await _pop(conn, "retry", 0)
    await _send(conn, 0, ["r0", "r1"])
    lost = await _pop(conn, "retry", 0, attempt_id="7f9c-attempt-1")
    assert _got(lost) == [("r0", 1), ("r1", 1)]
    assert (await _pop(conn, "retry", 0, attempt_id="other-2")).messages == [], "another POP is locked out"
    again = await _pop(conn, "retry", 0, attempt_id="7f9c-attempt-1")
    assert _got(again) == [("r0", 1), ("r1", 1)], "the retry gets the same batch, attempts unchanged"
    try:
        await pop_api.ack_message(conn, "retry", lost.messages[0].handle)
        raise AssertionError("a handle of the lost answer still acks")
    except RemotingError as e:
        assert e.reason == Reason.RECEIPT_HANDLE_EXPIRED, e
    for m in again.messages:
        await pop_api.ack_message(conn, "retry", m.handle)
    base = {"consumerGroup": "retry", "topic": TOPIC, "queueId": "0", "maxMsgNums": "4", "invisibleTime": "5000",
            "order": "true"}  # fmt: skip
    for bad in ("a b", "x" * 65, "caf\u00e9", "a;b", "../x"):
        resp = await call(conn, RequestCode.POP_MESSAGE, {**base, "attemptId": bad})
        assert resp.code == ResponseCode.SYSTEM_ERROR and resp.ext_fields.get("reason") == Reason.INVALID_HEADER, (
            bad, resp.code, resp.remark)  # fmt: skip


async def test_after_kill9_the_queue_is_still_locked_and_its_messages_come_back_first_in_order(
    cluster: Cluster, open_conn: OpenConn
) -> None:
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-fifo", flush="SYNC_FLUSH")
    conn = await open_conn(broker)
    await create_topic(conn, TOPIC, queues=1)
    await _pop(conn, "k9", 0)
    await _send(conn, 0, ["k0", "k1", "k2", "k3"])
    out = await _pop(conn, "k9", 0, invisible_ms=600_000)
    assert _got(out) == [("k0", 1), ("k1", 1), ("k2", 1), ("k3", 1)]
    await pop_api.ack_message(conn, "k9", out.messages[0].handle)
    broker.kill9()
    broker = cluster.restart(broker)
    conn = await open_conn(broker)
    await _send(conn, 0, ["k4"])
    assert (await _pop(conn, "k9", 0)).messages == [], "the batch handed out before the crash still locks the queue"
    for m in out.messages[1:]:  # the consumer gives them back: visible again now (the handles survived)
        await pop_api.change_invisible_time(conn, "k9", m.handle, 0)
    back = await _pop(conn, "k9", 0)
    assert _got(back) == [("k1", 2), ("k2", 2), ("k3", 2), ("k4", 1)], "k0 was acked; the rest first, in order"


async def test_group_update_sets_consume_message_orderly_and_keeps_the_other_settings(
    cluster: Cluster, open_conn: OpenConn
) -> None:
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-fifo", "--auto-create-subscription-group", "false")
    conn = await open_conn(broker)

    async def config(group: str) -> tuple[int, dict[str, object]]:
        resp = await call(conn, RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": group})
        return resp.code, orjson.loads(resp.body) if resp.code == ResponseCode.SUCCESS else {}

    assert (await config("nobody"))[0] == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    nsc = await open_conn(ns)

    async def registered() -> bool:
        info = orjson.loads((await call(nsc, RequestCode.GET_BROKER_CLUSTER_INFO)).body)
        return "broker-fifo" in info["brokerAddrTable"]

    await eventually(registered, what="the broker registered")
    rc, out, err = await run_cli("group", "update", "ord", "--orderly", "--retry-max-times", "3", "-n", ns.addr)
    assert rc == 0, err
    assert "orderly=true" in out and broker.addr in out, out
    code, cfg = await config("ord")
    assert code == ResponseCode.SUCCESS and cfg["consumeMessageOrderly"] is True and cfg["retryMaxTimes"] == 3, cfg
    rc, out, err = await run_cli("group", "update", "ord", "--consume-disable", "-n", ns.addr)
    assert rc == 0, err
    _, cfg = await config("ord")
    assert (cfg["consumeMessageOrderly"], cfg["retryMaxTimes"], cfg["consumeEnable"]) == (True, 3, False), cfg
    rc, out, err = await run_cli("group", "update", "ord", "--not-orderly", "-n", ns.addr)
    assert rc == 0 and "orderly=false" in out, (out, err)
    assert (await config("ord"))[1]["consumeMessageOrderly"] is False
    resp = await call(conn, RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "../etc"})
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.ext_fields.get("reason") == Reason.INVALID_NAME

