"""The book of open transactions decides checks and expiries, and is rebuilt from op records alone. Pure."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sievemq.broker.transactions.book import Check, CheckSettings, Expire, TransactionBook
from sievemq.broker.transactions.records import OpKind, OpRecord, commit_message, half_message, op_message, parse_op
from sievemq.protocol.message import MessageExt
from sievemq.protocol.names import TRANS_HALF_TOPIC
from sievemq.protocol.sysflag import TRANSACTION_COMMIT_TYPE, transaction_value

S = CheckSettings(timeout_ms=100, check_max=3, interval_ms=1000)


def test_a_half_is_checked_after_its_timeout_then_every_interval_then_expired() -> None:
    b = TransactionBook(S)
    b.add_half(0, 10, "g", stored_ms=1000, immunity_s=None)
    assert b.due(1099) == []
    steps = []
    now = 1100
    for _ in range(4):
        (step,) = b.due(now)
        steps.append(type(step))
        if isinstance(step, Check):
            b.checked(0, now)
        else:
            b.resolve(0)  # the service wrote the expiry
        assert b.due(now + 999) == [], "a check comes again only after the interval"
        now += 1000
    assert steps == [Check, Check, Check, Expire]
    assert b.is_resolved(0) and not b.pending


def test_check_immunity_replaces_the_timeout() -> None:
    b = TransactionBook(S)
    b.add_half(0, 10, "g", stored_ms=0, immunity_s=5)
    assert b.due(4999) == [] and len(b.due(5000)) == 1


def test_the_floor_moves_over_settled_halves_only() -> None:
    b = TransactionBook(S)
    for h in range(4):
        b.add_half(h, h * 100, "g", 0, None)
    b.resolve(1)
    b.resolve(2)
    assert b.half_floor == 0 and b.is_resolved(1) and not b.is_resolved(0)
    b.resolve(0)
    assert b.half_floor == 3 and list(b.pending) == [3]


@given(st.lists(st.tuples(st.integers(0, 9), st.sampled_from(list(OpKind))), max_size=40))
def test_replaying_the_op_records_gives_the_same_book(ops: list[tuple[int, OpKind]]) -> None:
    """What a running broker knows equals what a restarted one rebuilds from its op and half queues."""
    live = TransactionBook(S)
    for h in range(10):
        live.add_half(h, h, "g", 0, None)
    for i, (h, kind) in enumerate(ops):
        live.note_op(i, OpRecord(h, kind), replay=False)
        if kind.resolves:
            live.resolve(h)
        else:
            live.checked(h, 0)
    again = TransactionBook(S)
    for i, (h, kind) in enumerate(ops):
        again.note_op(i, OpRecord(h, kind))
    for h in range(10):
        if not again.is_resolved(h):
            again.add_half(h, h, "g", 0, None)
    assert again.half_floor == live.half_floor
    assert {h: p.checks for h, p in again.pending.items()} == {h: p.checks for h, p in live.pending.items()}
    assert again.op_floor <= len(ops) and all(
        not (h >= again.half_floor) or i >= again.op_floor for i, (h, _k) in enumerate(ops)
    ), "an op of an open half lies below the op floor: a restart would not read it"


def test_records_round_trip() -> None:
    props = {"TAGS": "A", "TRAN_MSG": "true", "PGROUP": "g", "UNIQ_KEY": "U1"}
    msg = MessageExt(topic="Orders", body=b"x", properties=props, queue_id=3, sys_flag=0x4)
    half = half_message(msg)
    assert (half.topic, half.queue_id, transaction_value(half.sys_flag)) == (TRANS_HALF_TOPIC, 0, 0)
    half.commit_log_offset = 4096
    real = commit_message(half)
    assert (real.topic, real.queue_id, real.prepared_transaction_offset) == ("Orders", 3, 4096)
    assert transaction_value(real.sys_flag) == TRANSACTION_COMMIT_TYPE
    assert "REAL_TOPIC" not in real.properties and real.tags == "A"
    # As Apache RocketMQ stores a commit (tests/compat/test_transactions.py): TRAN_MSG stays, the id is the
    # transaction id, and a commit answering the n-th check-back says so.
    assert (real.properties["TRAN_MSG"], real.properties["__transactionId__"]) == ("true", "U1")
    assert "TRANSACTION_CHECK_TIMES" not in real.properties
    assert commit_message(half, 2).properties["TRANSACTION_CHECK_TIMES"] == "2"
    op = op_message(7, OpKind.ROLLBACK, ("127.0.0.1", 1), 0)
    assert parse_op(op) == OpRecord(7, OpKind.ROLLBACK)
    assert parse_op(MessageExt(topic="x", body=b"not a number")) is None


def test_a_held_half_keeps_the_floors_below_it_until_released() -> None:
    b = TransactionBook(S)
    for h in range(3):
        b.add_half(h, h, "g", 0, None)
    b.note_op(0, OpRecord(0, OpKind.COMMIT), replay=False)
    b.hold(0)  # its commit record could not be written yet
    b.resolve(0)
    b.note_op(1, OpRecord(1, OpKind.ROLLBACK), replay=False)
    b.resolve(1)
    assert b.is_resolved(0) and b.half_floor == 0 and b.op_floor == 0, "a restart must read the held op again"
    b.release(0)
    assert b.half_floor == 2 and b.op_floor == 2
