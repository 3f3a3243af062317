"""Timer messages (docs/timer.md) on real brokers over TCP: nothing shows before its time, then the message is in
its queue as sent (tags, keys, properties; tag and SQL92 filters match it); refusals with stable reasons; a
``kill -9`` loses none and repeats none; a slave delivers nothing itself."""

from __future__ import annotations

import time
from collections import Counter

from sievemq import Message, Producer
from sievemq.client import api
from sievemq.errors import RemotingError
from sievemq.protocol.message import MessageExt
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import ResponseCode
from sievemq.remoting.connection import Connection
from tests.integration.conftest import Cluster, OpenConn
from tests.integration.helpers import create_topic, eventually, pull_all
from tests.support import wire
from tests.support.procs import broker_proc
from tests.support.quiet import quiet_period
from tests.support.replica_sets import FAST

TOPIC = "Timed"


def now_ms() -> int:
    return int(time.time() * 1000)


async def everything(conn: Connection, queues: int = 1) -> list[MessageExt]:
    out: list[MessageExt] = []
    for q in range(queues):
        out += await pull_all(conn, TOPIC, q)
    return out


async def bodies(conn: Connection, queues: int = 1) -> list[bytes]:
    return sorted(m.body for m in await everything(conn, queues))


async def pulled(conn: Connection, sub: str, kind: str) -> list[bytes]:
    r = await api.pull_message(conn, "timer-filter", TOPIC, 0, 0, subscription=sub, expression_type=kind)
    assert r.code in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND), (r.code, r.remark)
    return sorted(m.body for m in r.messages)


async def refused(conn: Connection, **props: str) -> RemotingError:
    try:
        await wire.send_message(conn, TOPIC, b"refused", properties=props, queue_id=0)
    except RemotingError as e:
        return e
    raise AssertionError(f"a send with {props} was accepted")


async def test_nothing_shows_before_its_time_then_it_arrives_as_sent(cluster: Cluster, open_conn: OpenConn) -> None:
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr)
    conn = await open_conn(broker)
    await create_topic(conn, TOPIC, queues=1)
    sent = now_ms()
    due_a = sent + 2500
    await wire.send_message(conn, TOPIC, b"a", tags="TagA", keys=["ka"], queue_id=0,
                            properties={"region": "eu", "TIMER_DELIVER_MS": str(due_a)})  # fmt: skip
    await wire.send_message(conn, TOPIC, b"b", tags="TagB", queue_id=0,
                            properties={"region": "us", "TIMER_DELAY_SEC": "2"})  # fmt: skip
    await wire.send_message(conn, TOPIC, b"now", tags="TagA", queue_id=0, properties={"TIMER_DELIVER_MS": "1"})
    assert await bodies(conn) == [b"now"], "only the message without a future time is there at once"
    await quiet_period(1.0, "a timed message showing before its time")
    seen, checked = await bodies(conn), now_ms()
    if checked < sent + 1900:  # (a machine too slow to look in time checks the store times below only)
        assert seen == [b"now"], f"{seen} at {checked - sent} ms: nothing shows before its time"
    await eventually(lambda: bodies_ready(conn), timeout=15.0, what="both timers delivered")
    msgs = {m.body: m for m in await everything(conn)}
    a, b = msgs[b"a"], msgs[b"b"]
    assert a.store_timestamp >= due_a, f"stored at {a.store_timestamp}, before its time {due_a}"
    assert b.store_timestamp >= sent + 2000, f"stored at {b.store_timestamp}, before {sent + 2000}"
    assert (a.tags, a.keys, a.properties["region"]) == ("TagA", ["ka"], "eu"), a.properties
    # RocketMQ 5's timer properties: where it was parked from, its time, when it was parked and delivered
    assert (a.properties["REAL_TOPIC"], a.properties["TIMER_OUT_MS"]) == (a.topic, str(due_a)), a.properties
    assert int(a.properties["TIMER_ENQUEUE_MS"]) <= int(a.properties["TIMER_DEQUEUE_MS"]) <= a.store_timestamp
    assert await pulled(conn, "TagA", "TAG") == [b"a", b"now"], "tag filtering sees the delivered message"
    assert await pulled(conn, "region = 'eu'", "SQL92") == [b"a"], "SQL92 sees its properties"
    assert await pulled(conn, "region = 'us'", "SQL92") == [b"b"]


async def bodies_ready(conn: Connection) -> bool:
    return await bodies(conn) == [b"a", b"b", b"now"]


async def test_refusals_carry_stable_reasons(cluster: Cluster, open_conn: OpenConn) -> None:
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-a", "--timer-max-delay-sec", "60", "--timer-max-pending", "2")
    conn = await open_conn(broker)
    await create_topic(conn, TOPIC, queues=1)
    for props, code, reason in (
        ({"TIMER_DELIVER_MS": "next-week"}, ResponseCode.MESSAGE_ILLEGAL, Reason.TIMER_INVALID),
        ({"TIMER_DELAY_MS": "-10"}, ResponseCode.MESSAGE_ILLEGAL, Reason.TIMER_INVALID),
        ({"TIMER_DELAY_SEC": "61"}, ResponseCode.MESSAGE_ILLEGAL, Reason.TIMER_TOO_FAR),
    ):
        e = await refused(conn, **props)
        assert (e.code, e.reason) == (code, reason), (props, e)
    for i in range(2):
        await wire.send_message(conn, TOPIC, f"w{i}".encode(), queue_id=0, properties={"TIMER_DELAY_SEC": "50"})
    e = await refused(conn, TIMER_DELAY_SEC="50")
    assert (e.code, e.reason) == (ResponseCode.SYSTEM_BUSY, Reason.TOO_MANY_TIMERS), e
    await wire.send_message(conn, TOPIC, b"plain", queue_id=0)  # the cap is on timers only
    assert await bodies(conn) == [b"plain"], "refused and waiting messages are not in the queue"


async def test_kill9_loses_no_timer_and_repeats_none(cluster: Cluster, open_conn: OpenConn) -> None:
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr)
    conn = await open_conn(broker)
    await create_topic(conn, TOPIC, queues=2)
    base = now_ms()
    early = [f"early-{i}".encode() for i in range(10)]
    late = [f"late-{i}".encode() for i in range(20)]
    for i, body in enumerate(early):
        await wire.send_message(conn, TOPIC, body, queue_id=i % 2, properties={"TIMER_DELIVER_MS": str(base + 1500)})
    async with Producer(namesrv=ns.addr, group="timer-producer") as producer:  # sievemq's client: deliver_at_ms
        for body in late:
            await producer.send(Message(TOPIC, body, tags="late", deliver_at_ms=base + 5000))

    async def early_delivered() -> bool:
        return await bodies(conn, 2) == sorted(early)

    await eventually(early_delivered, timeout=10.0, what="the early timers delivered before the kill")
    assert now_ms() < base + 4500, "the late timers must still be waiting at the kill (the machine is too slow)"
    broker.kill9()
    again = cluster.restart(broker)
    conn = await open_conn(again)

    async def all_delivered() -> bool:
        return len(await everything(conn, 2)) >= len(early) + len(late)

    await eventually(all_delivered, timeout=15.0, what="every timer delivered after the restart")
    counts = Counter(m.body for m in await everything(conn, 2))
    assert set(counts) == set(early + late), f"lost: {set(early + late) - set(counts)}"
    assert all(n == 1 for n in counts.values()), f"delivered twice: {[b for b, n in counts.items() if n > 1]}"
    for m in await everything(conn, 2):
        if m.body in late:
            assert m.tags == "late" and m.store_timestamp >= base + 5000, (m.tags, m.store_timestamp, base)


async def test_a_slave_delivers_nothing_itself(cluster: Cluster, open_conn: OpenConn) -> None:
    ns = cluster.namesrv()
    master = cluster.broker(ns.addr, "broker-a", "--broker-role", "ASYNC_MASTER", "--broker-id", "0", *FAST)
    slave = broker_proc(cluster.tmp, ns.addr, "broker-a", "--broker-role", "SLAVE", "--broker-id", "1", *FAST,
                        label="broker-a-slave")  # fmt: skip
    cluster.procs.append(slave)
    slave.start()
    mconn = await open_conn(master)
    sconn = await open_conn(slave)
    await create_topic(mconn, TOPIC, queues=1)
    r = await wire.send_message(mconn, TOPIC, b"once", queue_id=0, properties={"TIMER_DELAY_SEC": "2"})
    assert r.code == ResponseCode.SUCCESS, r

    async def on_both() -> bool:
        return bool(await everything(mconn)) and bool(await everything(sconn))

    await eventually(on_both, timeout=20.0, what="the delivered message on the master and in the slave's copy")
    await wire.send_message(mconn, TOPIC, b"after", queue_id=0)  # the slave's copy goes on: it wrote nothing itself

    async def after_on_slave() -> bool:
        return [m.body for m in await everything(sconn)] == [b"once", b"after"]

    await eventually(after_on_slave, timeout=20.0, what="the slave still following its master after the delivery")
    on_master, on_slave = await everything(mconn), await everything(sconn)
    assert [m.body for m in on_master] == [b"once", b"after"], on_master
    mine = [(m.commit_log_offset, m.store_timestamp) for m in on_master]
    assert [(m.commit_log_offset, m.store_timestamp) for m in on_slave] == mine, "the slave's are the master's copies"
