"""POP consumption on a real broker over TCP (docs/pop.md): leases, acks, changes of invisible time, redelivery
with the attempt raised, dead letters after the last attempt, filters, long polling, and a ``kill -9`` with
messages handed out and not acked."""

from __future__ import annotations

import asyncio
import time

import orjson

from sievemq.client import pop_api
from sievemq.errors import RemotingError
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.connection import Connection
from tests.integration.conftest import Cluster, OpenConn
from tests.integration.helpers import call, create_topic, eventually, pull_all
from tests.support import wire
from tests.support.quiet import quiet_period

TOPIC = "PopTopic"


async def _send(conn: Connection, n: int, tags: list[str] | None = None, props: list[dict[str, str]] | None = None,
                prefix: str = "m") -> list[bytes]:  # fmt: skip
    bodies = []
    for i in range(n):
        body = f"{prefix}{i}".encode()
        await wire.send_message(conn, TOPIC, body, queue_id=0, tags=tags[i] if tags else None,
                                properties=props[i] if props else None)  # fmt: skip
        bodies.append(body)
    return bodies


async def _start(conn: Connection, group: str, **kw: object) -> None:
    """A group's first POP, on an empty queue: nothing to hand out yet, and the group's cursor is set."""
    r = await pop_api.pop_message(conn, group, TOPIC, 0, invisible_ms=1000, **kw)  # type: ignore[arg-type]
    assert r.messages == [], "a new group on an empty queue gets nothing"


async def test_leases_acks_and_redelivery_with_the_attempt_raised(cluster: Cluster, open_conn: OpenConn) -> None:
    ns = cluster.namesrv()
    conn = await open_conn(cluster.broker(ns.addr, "broker-pop"))
    await create_topic(conn, TOPIC, queues=1)
    await _send(conn, 2, prefix="before")
    start = await pop_api.pop_message(conn, "g1", TOPIC, 0, max_nums=32, invisible_ms=5000)
    assert [m.message.body for m in start.messages] == [b"before0", b"before1"], (
        "a new group reads a young queue from its first message (RocketMQ's rule)"
    )
    for m in start.messages:
        await pop_api.ack_message(conn, "g1", m.handle)
    bodies = await _send(conn, 6)

    r = await pop_api.pop_message(conn, "g1", TOPIC, 0, max_nums=4, invisible_ms=1500)
    assert [m.message.body for m in r.messages] == bodies[:4], "the group goes on after what it acked"
    assert {m.attempt for m in r.messages} == {1}
    again = await pop_api.pop_message(conn, "g1", TOPIC, 0, max_nums=32, invisible_ms=1500)
    assert [m.message.body for m in again.messages] == bodies[4:], "leased messages are invisible to the group"

    first = r.messages
    await pop_api.ack_message(conn, "g1", first[0].handle)
    await pop_api.ack_message(conn, "g1", first[1].handle)
    changed = await pop_api.change_invisible_time(conn, "g1", first[2].handle, 6000)
    assert changed != first[2].handle, "a change of invisible time gives a new receipt handle"
    for m in again.messages:
        await pop_api.ack_message(conn, "g1", m.handle)

    late = await eventually(lambda: _popped(conn, "g1", invisible_ms=5000), timeout=15, interval=0.1,
                            what="a message back once its invisible time ran out")  # fmt: skip
    assert [(m.message.body, m.attempt) for m in late.messages] == [(bodies[3], 2)], (
        "only the unacked message whose invisible time ran out comes back, attempt 2"
    )
    try:
        await pop_api.ack_message(conn, "g1", first[3].handle)
        raise AssertionError("the handle of an earlier delivery acked a message delivered again")
    except RemotingError as e:
        assert e.code == ResponseCode.NO_MESSAGE and e.reason == Reason.RECEIPT_HANDLE_EXPIRED, e
    try:
        await pop_api.ack_message(conn, "g1", first[0].handle)
        raise AssertionError("an acked message was acked twice")
    except RemotingError as e:
        assert e.reason == Reason.RECEIPT_HANDLE_EXPIRED, e
    await pop_api.ack_message(conn, "g1", late.messages[0].handle)
    await pop_api.ack_message(conn, "g1", changed)

    # Another group is not disturbed by g1's leases, and a 4.x pull group reads everything as before.
    other = await pop_api.pop_message(conn, "g2", TOPIC, 0, max_nums=32, invisible_ms=5000, from_latest=False)
    assert [m.message.body for m in other.messages] == [b"before0", b"before1", *bodies], (
        "a group that starts at the oldest messages gets all of them, whatever g1 holds"
    )
    pulled = [m.body for m in await pull_all(conn, TOPIC, 0)]
    assert pulled[-6:] == bodies


async def test_hostile_receipt_handles_and_numbers_are_refused(cluster: Cluster, open_conn: OpenConn) -> None:
    ns = cluster.namesrv()
    conn = await open_conn(cluster.broker(ns.addr, "broker-pop"))
    await create_topic(conn, TOPIC, queues=1)
    hostile = ["", "x" * 600, "1 broker-pop PopTopic 0 0", "2 broker-pop PopTopic 0 0 1", "1 broker-pop ../etc 0 0 1",
               "1 broker-pop PopTopic -1 0 1", "1 broker-pop PopTopic 0 0 99999999999999999999",
               "1 other-broker PopTopic 0 0 1"]  # fmt: skip
    for handle in hostile:
        resp = await call(conn, RequestCode.ACK_MESSAGE, {"consumerGroup": "g", "extraInfo": handle})
        assert resp.code != ResponseCode.SUCCESS, f"handle {handle[:40]!r} was accepted"
    resp = await call(conn, RequestCode.ACK_MESSAGE, {"consumerGroup": "g", "extraInfo": "1 broker-pop PopTopic 0 0 5"})
    assert resp.code == ResponseCode.NO_MESSAGE, (resp.code, resp.remark)
    for fields in ({"invisibleTime": "999"}, {"invisibleTime": str(13 * 3600 * 1000)}, {"maxMsgNums": "0"},
                   {"maxMsgNums": "100000"}, {"queueId": "7"}):  # fmt: skip
        base = {"consumerGroup": "g", "topic": TOPIC, "queueId": "0", "maxMsgNums": "4", "invisibleTime": "5000"}
        resp = await call(conn, RequestCode.POP_MESSAGE, {**base, **fields})
        assert resp.code != ResponseCode.SUCCESS and resp.code != ResponseCode.PULL_NOT_FOUND, (fields, resp.code)


async def test_tag_and_sql92_filters_hand_out_exactly_the_matching_messages(
    cluster: Cluster, open_conn: OpenConn
) -> None:
    ns = cluster.namesrv()
    conn = await open_conn(cluster.broker(ns.addr, "broker-pop"))
    await create_topic(conn, TOPIC, queues=1)
    await _start(conn, "tags", expression="TagA || TagB")
    await _start(conn, "sql", expression="a > 5 AND b = 'x'", expression_type="SQL92")
    tags = ["TagA", "TagB", "TagC", "TagA", "TagC", "TagB"]
    props = [{"a": str(i * 2), "b": "x" if i % 2 else "y"} for i in range(6)]
    bodies = await _send(conn, 6, tags, props)
    r = await pop_api.pop_message(conn, "tags", TOPIC, 0, invisible_ms=5000, expression="TagA || TagB")
    assert [m.message.body for m in r.messages] == [bodies[i] for i in (0, 1, 3, 5)]
    s = await pop_api.pop_message(conn, "sql", TOPIC, 0, invisible_ms=5000, expression="a > 5 AND b = 'x'",
                                  expression_type="SQL92")  # fmt: skip
    assert [m.message.body for m in s.messages] == [bodies[3], bodies[5]], "a = 6, 10 with b = 'x'"
    bad = await call(conn, RequestCode.POP_MESSAGE, {"consumerGroup": "sql", "topic": TOPIC, "queueId": "0",
                     "invisibleTime": "5000", "expType": "SQL92", "exp": "a >"})  # fmt: skip
    assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED, (bad.code, bad.remark)


async def test_a_pop_waits_for_a_message_when_asked_to(cluster: Cluster, open_conn: OpenConn) -> None:
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-pop")
    conn = await open_conn(broker)
    await create_topic(conn, TOPIC, queues=1)
    await _start(conn, "lp")
    t0 = time.monotonic()
    task = asyncio.create_task(pop_api.pop_message(conn, "lp", TOPIC, 0, invisible_ms=5000, poll_ms=8000))
    await quiet_period(0.5, "a long-polling pop answering with nothing before its time", unchanged=task.done)
    assert not task.done(), "a long-polling pop answered with nothing before its time"
    await _send(await open_conn(broker), 1, prefix="late")
    r = await asyncio.wait_for(task, 5)
    assert [m.message.body for m in r.messages] == [b"late0"] and time.monotonic() - t0 < 6


async def test_after_the_last_attempt_a_message_goes_to_the_dead_letter_topic(
    cluster: Cluster, open_conn: OpenConn
) -> None:
    ns = cluster.namesrv()
    conn = await open_conn(cluster.broker(ns.addr, "broker-pop"))
    await create_topic(conn, TOPIC, queues=1)
    resp = await call(conn, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                      body=orjson.dumps({"groupName": "dlq-g", "retryMaxTimes": 1, "consumeEnable": True}))  # fmt: skip
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    await _start(conn, "dlq-g")
    (body,) = await _send(conn, 1, ["TagD"], [{"k": "v"}])
    attempts = []
    for _ in range(2):  # the first delivery, then the second once the first lease (1 s) ran out
        r = await eventually(lambda: _popped(conn, "dlq-g", invisible_ms=1000), timeout=15, interval=0.1,
                             what="a delivery")  # fmt: skip
        attempts += [m.attempt for m in r.messages]
    assert attempts == [1, 2], f"two deliveries (retryMaxTimes 1), got attempts {attempts}"

    async def dead_letters() -> list[bytes]:
        return [m.body for m in await pull_all(conn, "%DLQ%dlq-g", 0)] if await _has_topic(conn, "%DLQ%dlq-g") else []

    dead = await eventually(dead_letters, timeout=15, interval=0.3, what="the dead letter, once the last lease ran out")
    assert dead == [body], "the message is in the group's dead-letter topic"
    (m,) = await pull_all(conn, "%DLQ%dlq-g", 0)
    assert m.properties.get("RETRY_TOPIC") == TOPIC and m.tags == "TagD" and m.properties.get("k") == "v"
    r = await pop_api.pop_message(conn, "dlq-g", TOPIC, 0, invisible_ms=1000, poll_ms=1500)
    assert r.messages == [], "a dead-lettered message is not delivered again"


async def _popped(conn: Connection, group: str, invisible_ms: int) -> pop_api.PopResult | None:
    """A POP of queue 0 of TOPIC that brought something (None when it brought nothing)."""
    r = await pop_api.pop_message(conn, group, TOPIC, 0, max_nums=32, invisible_ms=invisible_ms)
    return r if r.messages else None


async def _has_topic(conn: Connection, topic: str) -> bool:
    resp = await call(conn, RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": 0})
    return resp.code == ResponseCode.SUCCESS and int(resp.ext_fields.get("offset", "0")) > 0


async def test_after_kill9_unacked_messages_come_back_and_acked_ones_never(
    cluster: Cluster, open_conn: OpenConn
) -> None:
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-pop", flush="SYNC_FLUSH")
    conn = await open_conn(broker)
    await create_topic(conn, TOPIC, queues=1)
    await _start(conn, "k9")
    bodies = await _send(conn, 10)
    r = await pop_api.pop_message(conn, "k9", TOPIC, 0, max_nums=10, invisible_ms=2500)
    assert [m.message.body for m in r.messages] == bodies
    for m in r.messages[::2]:
        await pop_api.ack_message(conn, "k9", m.handle)
    broker.kill9()
    broker = cluster.restart(broker)
    conn = await open_conn(broker)
    after = await _send(conn, 2, prefix="after")
    got: list[tuple[bytes, int]] = []
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline and len(got) < 7:
        p = await pop_api.pop_message(conn, "k9", TOPIC, 0, max_nums=10, invisible_ms=30000, poll_ms=1000)
        got += [(m.message.body, m.attempt) for m in p.messages]
    redelivered = sorted(b for b, a in got if a == 2)
    assert redelivered == sorted(bodies[1::2]), f"the unacked ones come back once, attempt 2: {got}"
    assert sorted(b for b, a in got if a == 1) == sorted(after), f"new messages after the restart: {got}"
    assert not set(bodies[::2]) & {b for b, _ in got}, "an acked message was delivered again"


async def test_no_client_may_write_the_pop_log_or_the_timer_topic(cluster: Cluster, open_conn: OpenConn) -> None:
    ns = cluster.namesrv()
    conn = await open_conn(cluster.broker(ns.addr, "broker-pop"))
    for topic in ("RMQ_SYS_POP_LOG", "rmq_sys_wheel_timer"):
        try:
            await wire.send_message(conn, topic, b'{"g": "victim", "t": "T", "c": {"0": 0}}', tags="init")
            raise AssertionError(f"a client wrote {topic}")
        except RemotingError as e:
            assert e.code != ResponseCode.SUCCESS, e


async def test_a_pop_of_queue_minus_one_takes_from_every_queue_and_waits_on_all(
    cluster: Cluster, open_conn: OpenConn
) -> None:
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-pop")
    conn = await open_conn(broker)
    await create_topic(conn, TOPIC, queues=4)
    first = await pop_api.pop_message(conn, "any", TOPIC, -1, invisible_ms=5000)
    assert first.messages == [], "nothing in any queue yet"
    for q in range(4):
        await wire.send_message(conn, TOPIC, f"q{q}".encode(), queue_id=q)
    r = await pop_api.pop_message(conn, "any", TOPIC, -1, max_nums=32, invisible_ms=5000)
    assert sorted(m.message.body for m in r.messages) == [b"q0", b"q1", b"q2", b"q3"]
    task = asyncio.create_task(pop_api.pop_message(conn, "any", TOPIC, -1, invisible_ms=5000, poll_ms=8000))
    await quiet_period(0.5, "a long-polling pop of every queue answering with nothing before its time",
                       unchanged=task.done)  # fmt: skip
    assert not task.done(), "a long-polling pop of every queue answered with nothing before its time"
    await wire.send_message(await open_conn(broker), TOPIC, b"late", queue_id=3)
    late = await asyncio.wait_for(task, 5)
    assert [m.message.body for m in late.messages] == [b"late"]


async def _first_pop(conn: Connection, group: str, **kw: object) -> list[bytes]:
    r = await pop_api.pop_message(conn, group, TOPIC, 0, max_nums=32, invisible_ms=5000, **kw)  # type: ignore[arg-type]
    return [m.message.body for m in r.messages]


async def test_where_a_new_group_starts_follows_rocketmq(cluster: Cluster, open_conn: OpenConn) -> None:
    """A group new to a queue starts (docs/pop.md, RocketMQ's PopMessageProcessor.getInitOffset): with initMode MAX,
    what RocketMQ 5's proxies send, at 0 while the queue's first message is in memory, else at its last message;
    with MIN at its first message; with newGroupStartsAtEnd at its end."""
    ns = cluster.namesrv()
    young = await open_conn(cluster.broker(ns.addr, "broker-young"))
    await create_topic(young, TOPIC, queues=1)
    bodies = await _send(young, 3)
    assert await _first_pop(young, "max") == bodies, "a young queue is read whole"
    assert await _first_pop(young, "min", from_latest=False) == bodies

    # accessMessageInMemoryMaxRatio 0: no message counts as in memory, as on a queue whose head is long gone from
    # memory; so does initPopOffsetByCheckMsgInMem false.
    for name, flags in (("broker-old", ("--access-message-in-memory-max-ratio", "0")),
                        ("broker-nocheck", ("--init-pop-offset-by-check-msg-in-mem", "false"))):  # fmt: skip
        conn = await open_conn(cluster.broker(ns.addr, name, *flags))
        await create_topic(conn, TOPIC, queues=1)
        bodies = await _send(conn, 3)
        assert await _first_pop(conn, "max") == bodies[-1:], f"{name}: the queue's last message first"
        assert await _first_pop(conn, "min", from_latest=False) == bodies, f"{name}: MIN starts at the first"

    at_end = await open_conn(cluster.broker(ns.addr, "broker-end", "--new-group-starts-at-end", "true"))
    await create_topic(at_end, TOPIC, queues=1)
    await _send(at_end, 3)
    assert await _first_pop(at_end, "max") == [], "newGroupStartsAtEnd: a new group starts at the end"
    later = await _send(at_end, 1, prefix="later")
    assert await _first_pop(at_end, "max") == later
