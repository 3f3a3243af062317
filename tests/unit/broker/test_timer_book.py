"""Timer messages, the pure part (broker/timer/book.py): what a timer property asks for, parking and bringing
back, markers, and the book of waiting and delivered offsets (checked against a plain set model)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sievemq.broker.timer.book import (
    DONE_QUEUE,
    IMMEDIATE_WITHIN_MS,
    NOTHING,
    PARKED_QUEUE,
    TIMER_TOPIC,
    Due,
    TimerBook,
    deliver_time,
    done_marker,
    due_message,
    park,
    parked_deliver_ms,
    parse_marker,
    refuse_timer_in_batch,
    refuse_timer_in_transaction,
)
from sievemq.errors import RemotingError
from sievemq.protocol.message import MessageExt, PropertyKey
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import ResponseCode

NOW = 1_700_000_000_000
MAX = 259_200 * 1000


def refusal(props: dict[str, str]) -> RemotingError:
    with pytest.raises(RemotingError) as e:
        deliver_time(props, NOW, MAX)
    return e.value


def test_deliver_time_absolute_and_relative() -> None:
    assert deliver_time({}, NOW, MAX) is None, "no timer property: no timer"
    assert deliver_time({"TIMER_DELIVER_MS": str(NOW + 5000)}, NOW, MAX) == NOW + 5000
    assert deliver_time({"TIMER_DELAY_SEC": "7"}, NOW, MAX) == NOW + 7000
    assert deliver_time({"TIMER_DELAY_MS": "2500"}, NOW, MAX) == NOW + 2500
    both = {"TIMER_DELAY_SEC": "3", "TIMER_DELAY_MS": "9000", "TIMER_DELIVER_MS": str(NOW + 60_000)}
    assert deliver_time(both, NOW, MAX) == NOW + 3000, "TIMER_DELAY_SEC is read first, as RocketMQ does"


def test_past_and_near_times_are_delivered_at_once() -> None:
    assert deliver_time({"TIMER_DELIVER_MS": "0"}, NOW, MAX) is None, "the epoch is long past"
    assert deliver_time({"TIMER_DELIVER_MS": str(NOW - 1)}, NOW, MAX) is None
    assert deliver_time({"TIMER_DELIVER_MS": str(NOW + IMMEDIATE_WITHIN_MS)}, NOW, MAX) is None
    assert deliver_time({"TIMER_DELAY_MS": "0"}, NOW, MAX) is None
    assert deliver_time({"TIMER_DELIVER_MS": str(NOW + IMMEDIATE_WITHIN_MS + 1)}, NOW, MAX) is not None


def test_illegal_values_are_refused_with_stable_reasons() -> None:
    for raw in ("soon", "", "1.5", "1e3", " 5", "12345678901234567890"):
        e = refusal({"TIMER_DELIVER_MS": raw})
        assert (e.code, e.reason) == (ResponseCode.MESSAGE_ILLEGAL, Reason.TIMER_INVALID), (raw, e)
        assert "TIMER_DELIVER_MS" in e.remark, e.remark  # the remark names the property
    e = refusal({"TIMER_DELAY_SEC": "-5"})
    assert (e.code, e.reason) == (ResponseCode.MESSAGE_ILLEGAL, Reason.TIMER_INVALID), e
    e = refusal({"TIMER_DELIVER_MS": str(NOW + MAX + 1)})
    assert (e.code, e.reason) == (ResponseCode.MESSAGE_ILLEGAL, Reason.TIMER_TOO_FAR), e
    assert "timerMaxDelaySec 259200" in e.remark, e.remark  # names the setting and its value
    assert deliver_time({"TIMER_DELIVER_MS": str(NOW + MAX)}, NOW, MAX) == NOW + MAX, "the limit itself is allowed"


def test_batches_and_transactions_cannot_carry_timers() -> None:
    plain = MessageExt("T", b"x")
    refuse_timer_in_batch([plain, plain])
    refuse_timer_in_transaction(plain)
    timed = MessageExt("T", b"x", properties={"TIMER_DELAY_SEC": "5"})
    for check in (lambda: refuse_timer_in_batch([plain, timed]), lambda: refuse_timer_in_transaction(timed)):
        with pytest.raises(RemotingError) as e:
            check()
        assert e.value.reason == Reason.TIMER_INVALID, e.value
    with pytest.raises(RemotingError) as e:
        refuse_timer_in_batch([MessageExt(TIMER_TOPIC, b"x")])
    assert e.value.code == ResponseCode.NO_PERMISSION, "only the broker writes to the timer topic"


def test_park_and_bring_back_keep_the_message_as_sent() -> None:
    props = {"TAGS": "TagA", "KEYS": "k1 k2", "region": "eu", "TIMER_DELIVER_MS": str(NOW + 9000)}
    msg = MessageExt("Orders", b"body", flag=3, properties=dict(props), queue_id=2, sys_flag=4, reconsume_times=1)
    park(msg, NOW + 9000)
    assert (msg.topic, msg.queue_id) == (TIMER_TOPIC, PARKED_QUEUE), msg
    assert msg.properties[PropertyKey.REAL_TOPIC] == "Orders" and msg.properties[PropertyKey.REAL_QID] == "2"
    assert parked_deliver_ms(msg) == NOW + 9000, msg.properties
    msg.store_timestamp = NOW + 5
    real = due_message(msg, NOW + 9001)
    assert (real.topic, real.queue_id, real.body, real.flag, real.sys_flag) == ("Orders", 2, b"body", 3, 4), real
    timer = {"TIMER_OUT_MS": str(NOW + 9000), "REAL_TOPIC": "Orders", "REAL_QID": "2",
             "TIMER_ENQUEUE_MS": str(NOW + 5), "TIMER_DEQUEUE_MS": str(NOW + 9001)}  # fmt: skip
    assert real.properties == {**props, **timer}, "what it was sent with, and RocketMQ 5's timer properties"
    assert real.reconsume_times == 1
    with pytest.raises(ValueError):
        due_message(MessageExt(TIMER_TOPIC, b"x", properties={"TIMER_OUT_MS": "1"}), NOW)
    assert parked_deliver_ms(MessageExt("Orders", b"x", properties={"TIMER_OUT_MS": "1"})) is None


def test_markers_round_trip() -> None:
    m = done_marker(Due(NOW, 42), ("10.0.0.1", 10911), NOW)
    assert (m.topic, m.queue_id) == (TIMER_TOPIC, DONE_QUEUE)
    assert parse_marker(m) == Due(NOW, 42)
    assert parse_marker(MessageExt(TIMER_TOPIC, b"", properties={"TIMER_DONE": "x", "TIMER_OUT_MS": "1"})) is None
    assert parse_marker(MessageExt(TIMER_TOPIC, b"", properties={"TIMER_DONE": "4"})) is None
    assert parse_marker(MessageExt("Other", b"", properties={"TIMER_DONE": "4", "TIMER_OUT_MS": "1"})) is None


def test_book_delivers_in_time_order_and_each_once() -> None:
    book = TimerBook()
    for offset, at in enumerate([500, 100, 300, 100]):
        assert book.scan(offset, at)
    assert book.pending == 4 and book.next_due() == Due(100, 1)
    assert book.peek_due(99) is None, "nothing is due before its time"
    order = []
    while (due := book.peek_due(1000)) is not None:
        order.append(due)
        book.settle(due)
    assert order == [Due(100, 1), Due(100, 3), Due(300, 2), Due(500, 0)], order
    assert book.pending == 0 and book.floor() == 4 and book.watermark == Due(500, 0), book.snapshot()
    with pytest.raises(ValueError):
        book.settle(Due(500, 0))


def test_book_floor_and_scan() -> None:
    book = TimerBook(floor=10)
    assert not book.scan(10, None), "an unreadable entry does not wait"
    assert book.scan(11, 900) and book.scan(12, 100) and book.scan(13, 500)
    with pytest.raises(ValueError):
        book.scan(20, 10)
    assert book.floor() == 11, book.snapshot()
    book.settle(Due(100, 12))
    assert book.floor() == 11
    book.settle(Due(500, 13))
    book.settle(Due(900, 11))
    assert book.floor() == 14 and book.pending == 0, book.snapshot()


def test_snapshot_round_trip_and_garbage() -> None:
    book = TimerBook(floor=3)
    for offset, at in ((3, 50), (4, 20), (5, 70)):
        book.scan(offset, at)
    book.settle(Due(20, 4))
    doc = book.snapshot()
    assert doc == {"floor": 3, "deliveredMs": 20, "deliveredOffset": 4}, doc
    again = TimerBook.from_snapshot(doc, 0, 6)
    for offset, at in ((3, 50), (4, 20), (5, 70)):
        again.scan(offset, at)
    assert (again.pending, again.next_due()) == (2, Due(50, 3)), "what was delivered does not wait again"
    assert TimerBook.from_snapshot(doc, 5, 6).scanned == 5, "a floor below the queue's first offset moves up"
    assert TimerBook.from_snapshot(doc, 0, 2).scanned == 2, "a floor past the queue's end comes back to it"
    for bad in (None, {}, {"floor": "x"}, {"floor": -1, "deliveredMs": 0, "deliveredOffset": 0}):
        fresh = TimerBook.from_snapshot(bad, 1, 9)
        assert (fresh.scanned, fresh.watermark) == (1, NOTHING), bad
    book = TimerBook()
    book.delivered(Due(5, 2))
    book.delivered(Due(3, 1))
    assert book.watermark == Due(5, 2), "the watermark never goes back"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["park", "park", "tick", "restart"]), st.integers(1, 30)),
                max_size=80))  # fmt: skip
def test_a_restart_from_any_snapshot_and_the_last_delivery_repeats_and_loses_nothing(
    ops: list[tuple[str, int]],
) -> None:
    """The model: messages parked at least a second ahead of ``now``, delivered in time order when due, each once;
    a restart rebuilds the book from a snapshot taken at any earlier moment plus the last delivery (the last
    marker), reading the parked entries again from the snapshot's floor."""
    now = 0
    parked: list[int] = []  # deliver time by offset
    delivered: list[Due] = []
    book = TimerBook()
    snapshots = [book.snapshot()]
    for op, n in ops:
        if op == "park":
            at = max(now + IMMEDIATE_WITHIN_MS + n * 100, book.watermark.deliver_ms)  # as the service parks
            parked.append(at)
            book.scan(len(parked) - 1, at)
        elif op == "tick":
            now += n * 100
            while (due := book.peek_due(now)) is not None:
                assert due.deliver_ms <= now, due
                book.settle(due)
                delivered.append(due)
        else:
            old = snapshots[n % len(snapshots)]
            book = TimerBook.from_snapshot(old, 0, len(parked))
            if delivered:
                book.delivered(delivered[-1])
            for offset in range(book.scanned, len(parked)):
                book.scan(offset, parked[offset])
        snapshots.append(book.snapshot())
        assert len(set(delivered)) == len(delivered), f"delivered twice: {delivered}"
        assert delivered == sorted(delivered), f"out of time order: {delivered}"
        done = {d.offset for d in delivered}
        due_by_now = {o for o, at in enumerate(parked) if at <= now}
        assert due_by_now <= done | {d.offset for d in [book.peek_due(now)] if d}, "a due message was lost"
        assert book.pending == len(parked) - len(done), (book.pending, parked, delivered)
        assert book.floor() == min(set(range(len(parked))) - done, default=len(parked)), book.snapshot()
