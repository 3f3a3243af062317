"""Retry and dead letters (CONSUMER_SEND_MSG_BACK), and producer-side delayed messages."""

from __future__ import annotations

import time

from sievemq.client import api
from sievemq.protocol.msgid import parse_offset_msg_id
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.connection import Connection
from tests.integration.conftest import Cluster, OpenConn
from tests.integration.helpers import call, create_topic, eventually, max_offset, pull_all
from tests.support import wire
from tests.support.procs import Proc

GROUP = "retry-group"
RETRY = f"%RETRY%{GROUP}"
DLQ = f"%DLQ%{GROUP}"


async def _send_back(
    conn: Connection, msg_id: str, topic: str, delay_level: int, version: int | None = None, **extra: object
) -> None:
    _, _, phy = parse_offset_msg_id(msg_id)
    fields = {
        "offset": phy,
        "group": GROUP,
        "delayLevel": delay_level,
        "originMsgId": msg_id,
        "originTopic": topic,
        "unitMode": False,
        **extra,
    }
    resp = await call(conn, RequestCode.CONSUMER_SEND_MSG_BACK, fields, version=version)
    assert resp.code == ResponseCode.SUCCESS, f"[{resp.code}] {resp.remark}"


async def test_send_back_with_delay_level_1_reaches_retry_topic_after_about_a_second(
    broker: Proc, open_conn: OpenConn
) -> None:
    conn = await open_conn(broker)
    await create_topic(conn, "WorkTopic", queues=1)
    sent = await wire.send_message(conn, "WorkTopic", b"please retry", tags="TagR", keys=["rk"], queue_id=0)

    t0 = time.monotonic()
    await _send_back(conn, sent.msg_id, "WorkTopic", delay_level=1)
    assert await max_offset(conn, RETRY, 0) == 0, "a delay-level-1 retry must not be visible at once"
    await eventually(lambda: _has_messages(conn, RETRY), timeout=5.0, what="message in the retry topic")
    elapsed = time.monotonic() - t0
    assert 0.8 <= elapsed <= 3.0, f"delay level 1 (1 s) delivered after {elapsed:.2f}s"

    (msg,) = await pull_all(conn, RETRY, 0, group=GROUP)
    assert msg.body == b"please retry"
    assert msg.reconsume_times == 1
    assert msg.properties.get("RETRY_TOPIC") == "WorkTopic"
    assert msg.properties.get("ORIGIN_MESSAGE_ID") == sent.msg_id
    assert msg.tags == "TagR" and msg.keys == ["rk"]
    assert "DELAY" not in msg.properties, "the delay level is spent once delivered"
    assert await max_offset(conn, DLQ, 0) == 0


async def test_send_back_with_max_reconsume_times_0_goes_to_dlq_at_once(broker: Proc, open_conn: OpenConn) -> None:
    conn = await open_conn(broker)
    await create_topic(conn, "DeadTopic", queues=1)
    sent = await wire.send_message(conn, "DeadTopic", b"poison", queue_id=0)

    # Request version 409 (>= 121): the header's maxReconsumeTimes is honoured.
    await _send_back(conn, sent.msg_id, "DeadTopic", delay_level=1, maxReconsumeTimes=0)
    assert await max_offset(conn, DLQ, 0) == 1, "dead-lettered at once, no delay"
    (msg,) = await pull_all(conn, DLQ, 0, group=GROUP)
    assert msg.body == b"poison"
    assert msg.properties.get("RETRY_TOPIC") == "DeadTopic"
    assert msg.reconsume_times == 1
    assert "DELAY" not in msg.properties
    assert await max_offset(conn, RETRY, 0) == 0

    # An old client (version < 121) cannot set maxReconsumeTimes: the message is retried instead.
    sent2 = await wire.send_message(conn, "DeadTopic", b"old-client", queue_id=0)
    await _send_back(conn, sent2.msg_id, "DeadTopic", delay_level=1, version=100, maxReconsumeTimes=0)
    assert await max_offset(conn, DLQ, 0) == 1
    await eventually(lambda: _has_messages(conn, RETRY), timeout=5.0, what="old client's message retried")

    # delayLevel < 0 dead-letters whatever the count.
    sent3 = await wire.send_message(conn, "DeadTopic", b"negative-delay", queue_id=0)
    await _send_back(conn, sent3.msg_id, "DeadTopic", delay_level=-1)
    assert await max_offset(conn, DLQ, 0) == 2


async def test_retry_exhaustion_through_sends_to_the_retry_topic(broker: Proc, open_conn: OpenConn) -> None:
    """A consumer's fallback send to %RETRY% with reconsumeTimes >= maxReconsumeTimes is dead-lettered."""
    conn = await open_conn(broker)
    await call(conn, RequestCode.HEART_BEAT, body=b'{"clientID":"x","consumerDataSet":[{"groupName":"retry-group"}]}')
    fields = {
        "a": "pg",
        "b": RETRY,
        "c": "TBW102",
        "d": 1,
        "e": 0,
        "f": 0,
        "g": int(time.time() * 1000),
        "h": 0,
        "i": "RETRY_TOPIC\x01OrigTopic",
        "j": 3,
        "l": 3,
    }
    resp = await call(conn, RequestCode.SEND_MESSAGE_V2, fields, b"exhausted")
    assert resp.code == ResponseCode.SUCCESS, resp
    (msg,) = await pull_all(conn, DLQ, 0, group=GROUP)
    assert msg.body == b"exhausted" and msg.reconsume_times == 3


async def test_producer_delay_level_1_is_hidden_then_delivered(broker: Proc, open_conn: OpenConn) -> None:
    conn = await open_conn(broker)
    await create_topic(conn, "DelayTopic", queues=2)
    t0 = time.monotonic()
    sent = await wire.send_message(conn, "DelayTopic", b"later", queue_id=1, delay_level=1, tags="TagD")
    assert sent.code == ResponseCode.SUCCESS
    assert await max_offset(conn, "DelayTopic", 1) == 0, "a delayed message is not in its topic at once"
    r = await api.pull_message(conn, "delay-group", "DelayTopic", 1, 0)
    assert r.code == ResponseCode.PULL_NOT_FOUND

    await eventually(lambda: _has_messages(conn, "DelayTopic", 1), timeout=5.0, what="delayed message delivered")
    elapsed = time.monotonic() - t0
    assert 0.8 <= elapsed <= 3.0, f"delay level 1 delivered after {elapsed:.2f}s"
    (msg,) = await pull_all(conn, "DelayTopic", 1)
    assert (msg.body, msg.tags, msg.queue_id) == (b"later", "TagD", 1)
    assert msg.properties.get("REAL_TOPIC") == "DelayTopic"
    assert await max_offset(conn, "DelayTopic", 0) == 0, "delivered to the queue it was sent to"

    # A held pull is woken by the delayed delivery too.
    t0 = time.monotonic()
    await wire.send_message(conn, "DelayTopic", b"later-2", queue_id=1, delay_level=1)
    r = await api.pull_message(conn, "delay-group", "DelayTopic", 1, 1, suspend_ms=8000, timeout=12)
    assert r.code == ResponseCode.SUCCESS and [m.body for m in r.messages] == [b"later-2"]
    assert 0.8 <= time.monotonic() - t0 <= 3.0


async def _has_messages(conn: Connection, topic: str, queue_id: int = 0) -> bool:
    return await max_offset(conn, topic, queue_id) > 0


async def test_delayed_messages_survive_a_clean_restart_and_are_delivered_once(
    cluster: Cluster, ns: Proc, open_conn: OpenConn
) -> None:
    broker = cluster.broker(ns.addr)
    conn = await open_conn(broker)
    await create_topic(conn, "DelayRestart", queues=1)

    # Pending at the stop: delivered after the restart.
    await wire.send_message(conn, "DelayRestart", b"pending", queue_id=0, delay_level=1)
    conn.close()
    assert broker.stop() == 0
    broker = cluster.restart(broker)
    conn = await open_conn(broker)
    await eventually(lambda: _has_messages(conn, "DelayRestart"), timeout=5.0, what="pending delayed message")

    # Delivered before a clean stop: not delivered again after it. A later delayed message of the same level
    # is delivered after the earlier ones, so once it is there, a duplicate would be too.
    conn.close()
    assert broker.stop() == 0
    broker = cluster.restart(broker)
    conn = await open_conn(broker)
    await wire.send_message(conn, "DelayRestart", b"marker", queue_id=0, delay_level=1)
    await eventually(lambda: _count_at_least(conn, "DelayRestart", 2), timeout=5.0, what="marker delivered")
    assert [m.body for m in await pull_all(conn, "DelayRestart", 0)] == [b"pending", b"marker"]


async def _count_at_least(conn: Connection, topic: str, n: int) -> bool:
    return await max_offset(conn, topic, 0) >= n
