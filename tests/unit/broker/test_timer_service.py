"""Timer messages through the send processor and the timer service (broker/timer/service.py) on a real store,
without sockets: parking, delivery when due (and not before), restarts from markers and snapshots, refusals."""

from __future__ import annotations

import time

import pytest

from sievemq.broker.processors.send import SendProcessor, SendSettings
from sievemq.broker.timer import TIMER_TOPIC, TimerService, TimerSettings
from sievemq.broker.timer.book import DONE_QUEUE, PARKED_QUEUE
from sievemq.errors import RemotingError
from sievemq.protocol.batch import BatchEntry, encode_batch
from sievemq.protocol.message import MessageExt, decode_record, properties_to_string
from sievemq.protocol.names import SCHEDULE_TOPIC
from sievemq.protocol.reasons import Reason
from sievemq.protocol.send_header import SendMessageHeader
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.server import settled
from sievemq.store.jsonfile import read_json
from tests.unit.broker.conftest import BROKER, CLUSTER, HOST, Parts

MINUTE = 60_000


def timers(p: Parts, max_pending: int = 100) -> TimerService:
    service = TimerService(p.store, p.root / "config", HOST, TimerSettings(3600, max_pending), p.writer.save)
    service.rebuild()
    return service


def sender(p: Parts, service: TimerService | None) -> SendProcessor:
    settings = SendSettings(BROKER, CLUSTER, HOST, 4096, True, 16, 18)
    return SendProcessor(p.store, p.topics, p.groups, p.stats, settings, timers=service)


def stored(p: Parts, topic: str, queue_id: int = 0) -> list[MessageExt]:
    r = p.store.get_message(topic, queue_id, 0, 64, None)
    return [decode_record(rec)[0] for rec in r.records]


def send_cmd(topic: str, body: bytes, *, code: int = RequestCode.SEND_MESSAGE_V2, queue_id: int = 0,
             props: dict[str, str] | None = None) -> RemotingCommand:  # fmt: skip
    h = SendMessageHeader("p", topic, queue_id=queue_id, born_timestamp=int(time.time() * 1000),
                          properties=properties_to_string(props or {}))  # fmt: skip
    cmd = RemotingCommand.request(code, h.to_fields(v2=code != RequestCode.SEND_MESSAGE), body)
    cmd.version = 409
    return cmd


def now_ms() -> int:
    return int(time.time() * 1000)


async def send_timed(p: Parts, s: SendProcessor, body: bytes, **props: str) -> None:
    resp = await settled(s.send(p.conn(), send_cmd("Orders", body, queue_id=1, props=props)))
    assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)


async def test_a_timer_message_waits_then_arrives_as_sent(parts: Parts) -> None:
    service = timers(parts)
    s = sender(parts, service)
    at = now_ms() + MINUTE
    await send_timed(parts, s, b"later", TAGS="TagA", KEYS="k1", region="eu", TIMER_DELIVER_MS=str(at))
    assert stored(parts, "Orders", 1) == [], "nothing reaches the real queue before its time"
    (parked,) = stored(parts, TIMER_TOPIC, PARKED_QUEUE)
    assert parked.properties["REAL_TOPIC"] == "Orders" and parked.properties["TIMER_OUT_MS"] == str(at), parked
    assert service.waiting() == 1
    assert await service.deliver_due(at - 1) == 0, "one ms early is too early"
    assert await service.deliver_due(at) == 1
    (real,) = stored(parts, "Orders", 1)
    assert real.body == b"later" and real.tags == "TagA" and real.keys == ["k1"], real
    assert real.properties["region"] == "eu" and real.properties["TIMER_DELIVER_MS"] == str(at), real.properties
    assert (real.properties["REAL_TOPIC"], real.properties["REAL_QID"], real.properties["TIMER_OUT_MS"]) == (
        "Orders", "1", str(at)), real.properties  # fmt: skip
    assert real.properties["TIMER_DEQUEUE_MS"] == str(at), "delivered at the round's time"
    (marker,) = stored(parts, TIMER_TOPIC, DONE_QUEUE)
    assert marker.properties["TIMER_DONE"] == "0" and marker.properties["TIMER_OUT_MS"] == str(at), marker.properties
    assert await service.deliver_due(at + MINUTE) == 0, "delivered once"
    assert service.waiting() == 0 and service.delivered == 1


async def test_relative_delays_and_near_times(parts: Parts) -> None:
    service = timers(parts)
    s = sender(parts, service)
    before = now_ms()
    await send_timed(parts, s, b"sec", TIMER_DELAY_SEC="30")
    await send_timed(parts, s, b"ms", TIMER_DELAY_MS="45000")
    await send_timed(parts, s, b"now", TIMER_DELIVER_MS=str(before - 5))
    await send_timed(parts, s, b"soon", TIMER_DELAY_MS="300")
    assert [m.body for m in stored(parts, "Orders", 1)] == [b"now", b"soon"], "past and sub-second: at once"
    outs = [int(m.properties["TIMER_OUT_MS"]) for m in stored(parts, TIMER_TOPIC, PARKED_QUEUE)]
    assert before + 30_000 <= outs[0] <= now_ms() + 30_000 and before + 45_000 <= outs[1] <= now_ms() + 45_000, outs
    await service.deliver_due(now_ms() + 40_000)
    assert [m.body for m in stored(parts, "Orders", 1)] == [b"now", b"soon", b"sec"]


async def test_restart_delivers_what_waits_and_nothing_twice(parts: Parts) -> None:
    service = timers(parts)
    s = sender(parts, service)
    base = now_ms()
    for i in range(6):
        await send_timed(parts, s, f"m{i}".encode(), TIMER_DELIVER_MS=str(base + MINUTE * (6 - i)))
    assert await service.deliver_due(base + 3 * MINUTE) == 3  # m3, m4, m5: their markers are in the log
    # a restart without any snapshot: the last marker tells what was delivered
    again = timers(parts)
    assert again.waiting() == 3 and again.book.floor() == 0, again.book.snapshot()
    assert await again.deliver_due(base + 3 * MINUTE) == 0
    assert await again.deliver_due(base + 10 * MINUTE) == 3
    assert sorted(m.body for m in stored(parts, "Orders", 1)) == [f"m{i}".encode() for i in range(6)]
    assert await again.save_snapshot()
    await parts.writer.flush()
    doc = read_json(parts.root / "config" / "timerProgress.json", None)
    assert doc == {"floor": 6, "deliveredMs": base + 6 * MINUTE, "deliveredOffset": 0}, doc
    third = timers(parts)
    assert third.waiting() == 0 and await third.deliver_due(base + 20 * MINUTE) == 0


async def test_a_snapshot_and_the_markers_after_it_together(parts: Parts) -> None:
    service = timers(parts)
    s = sender(parts, service)
    base = now_ms()
    for i in range(4):  # due in the order 3, 1, 2, 0
        await send_timed(parts, s, f"m{i}".encode(), TIMER_DELIVER_MS=str(base + MINUTE * [9, 2, 3, 1][i]))
    assert await service.deliver_due(base + 2 * MINUTE) == 2  # m3 and m1
    assert await service.save_snapshot()
    await parts.writer.flush()
    assert await service.deliver_due(base + 3 * MINUTE) == 1  # m2: only its marker knows
    again = timers(parts)
    assert again.waiting() == 1 and again.book.peek_due(base + 3 * MINUTE) is None, again.book.snapshot()
    assert again.book.floor() == 0, "the floor waits for m0"
    assert await again.deliver_due(base + 10 * MINUTE) == 1
    assert sorted(m.body for m in stored(parts, "Orders", 1)) == [b"m0", b"m1", b"m2", b"m3"]


async def test_the_cap_on_waiting_messages(parts: Parts) -> None:
    service = timers(parts, max_pending=2)
    s = sender(parts, service)
    at = str(now_ms() + MINUTE)
    await send_timed(parts, s, b"a", TIMER_DELIVER_MS=at)
    await send_timed(parts, s, b"b", TIMER_DELIVER_MS=at)
    with pytest.raises(RemotingError) as e:
        await send_timed(parts, s, b"c", TIMER_DELIVER_MS=at)
    assert (e.value.code, e.value.reason) == (ResponseCode.SYSTEM_BUSY, Reason.TOO_MANY_TIMERS), e.value
    await send_timed(parts, s, b"now", TIMER_DELIVER_MS="0")  # not waiting: not counted
    assert len(stored(parts, TIMER_TOPIC, PARKED_QUEUE)) == 2
    await service.deliver_due(int(at))
    await send_timed(parts, s, b"c", TIMER_DELIVER_MS=str(now_ms() + MINUTE))


async def test_refusals_and_the_delay_level_winning(parts: Parts) -> None:
    s = sender(parts, timers(parts))
    await send_timed(parts, s, b"d", DELAY="2", TIMER_DELIVER_MS=str(now_ms() + MINUTE))
    (delayed,) = stored(parts, SCHEDULE_TOPIC, 1)
    assert "TIMER_DELIVER_MS" not in delayed.properties, "a DELAY level wins and the timer is dropped"
    assert stored(parts, TIMER_TOPIC, PARKED_QUEUE) == []
    for props, reason in (({"TIMER_DELIVER_MS": "tomorrow"}, Reason.TIMER_INVALID),
                          ({"TIMER_DELAY_SEC": "-1"}, Reason.TIMER_INVALID),
                          ({"TIMER_DELAY_SEC": "3601"}, Reason.TIMER_TOO_FAR)):  # fmt: skip
        with pytest.raises(RemotingError) as e:
            await send_timed(parts, s, b"x", **props)
        assert (e.value.code, e.value.reason) == (ResponseCode.MESSAGE_ILLEGAL, reason), (props, e.value)
    with pytest.raises(RemotingError) as e:
        await send_timed(parts, sender(parts, None), b"x", TIMER_DELAY_SEC="5")
    assert (e.value.code, e.value.reason) == (ResponseCode.MESSAGE_ILLEGAL, Reason.TIMER_INVALID), e.value
    with pytest.raises(RemotingError) as e:
        await settled(s.send(parts.conn(), send_cmd(TIMER_TOPIC, b"forged", queue_id=1, props={"TIMER_DONE": "0"})))
    assert e.value.code == ResponseCode.NO_PERMISSION, e.value
    body = encode_batch([BatchEntry(body=b"a"), BatchEntry(body=b"b", properties={"TIMER_DELAY_SEC": "5"})])
    with pytest.raises(RemotingError) as e:
        await settled(s.send(parts.conn(), send_cmd("Orders", body, code=RequestCode.SEND_BATCH_MESSAGE, queue_id=0)))
    assert (e.value.code, e.value.reason) == (ResponseCode.MESSAGE_ILLEGAL, Reason.TIMER_INVALID), e.value
    assert stored(parts, "Orders", 0) == [] and stored(parts, TIMER_TOPIC, PARKED_QUEUE) == []


async def test_a_parked_record_without_a_real_topic_is_dropped_once(parts: Parts) -> None:
    service = timers(parts)
    await parts.put(TIMER_TOPIC, b"odd", PARKED_QUEUE, TIMER_OUT_MS="5")  # no REAL_TOPIC
    await parts.put(TIMER_TOPIC, b"odd", PARKED_QUEUE)  # no TIMER_OUT_MS either
    assert await service.deliver_due(now_ms()) == 0
    assert service.lost == 2 and service.waiting() == 0 and service.book.floor() == 2, service.book.snapshot()
    assert timers(parts).waiting() == 0, "a restart does not try them again"


async def test_nothing_is_parked_before_a_delivery_made(parts: Parts) -> None:
    """A clock set back must not park a message due before one delivered already (the book's watermark)."""
    service = timers(parts)
    s = sender(parts, service)
    first = now_ms() + MINUTE
    await send_timed(parts, s, b"first", TIMER_DELIVER_MS=str(first))
    assert await service.deliver_due(first + 10 * MINUTE) == 1  # as if the clock had gone 10 minutes ahead, then back
    await send_timed(parts, s, b"second", TIMER_DELAY_SEC="5")
    second = stored(parts, TIMER_TOPIC, PARKED_QUEUE)[-1]
    assert int(second.properties["TIMER_OUT_MS"]) == first, second.properties
    assert await service.deliver_due(first) == 1, "it is due with the delivery it may not precede"
