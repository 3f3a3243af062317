"""The POP book and its records, without a broker (docs/pop.md §1, §3): replaying the log rebuilds the state, a
snapshot plus the records after it is the same state, receipt handles are read strictly."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sievemq.broker.pop.book import PopBook
from sievemq.broker.pop.records import Kind, PopRecord, parse_record, record_message
from sievemq.protocol.receipt_handle import HandleError, ReceiptHandle

HOST = ("127.0.0.1", 10911)


def _model(book: PopBook) -> dict[tuple[str, str, int], tuple[int, dict[int, tuple[int, int, int]], str]]:
    return {
        k: (qs.cursor, {o: (ls.token, ls.deadline, ls.attempt) for o, ls in qs.leases.items()}, qs.attempt_id)
        for k, qs in book.queues.items()
    }


_ATTEMPT_IDS = st.sampled_from(["", "", "a1", "b2"])
"""Most leases come from POPs without an attempt id; orderly ones name theirs."""


@st.composite
def _histories(draw: st.DrawFn) -> list[PopRecord]:
    """What a service writes: leases of new offsets and of due ones (some by orderly POPs with an attempt id),
    acks, changes, dead letters, resets."""
    book = PopBook()
    recs: list[PopRecord] = [PopRecord(Kind.INIT, "g", "t", cursors={0: 0, 1: 5})]
    book.apply(recs[0])
    for _ in range(draw(st.integers(0, 40))):
        qid = draw(st.sampled_from([0, 1]))
        qs = book.queue("g", "t", qid)
        assert qs is not None
        action = draw(st.sampled_from(["lease", "ack", "change", "dead", "redeliver", "reset"]))
        leased = sorted(qs.leases)
        if action == "reset":  # an operator's offset reset: the cursor moves (back or on), the leases end
            rec = PopRecord(Kind.RESET, "g", "t", qid, cursor=draw(st.integers(0, 20)))
        elif action == "lease" or not leased:
            n = draw(st.integers(0, 3))
            skip = draw(st.integers(0, 2))
            entries = tuple((qs.cursor + skip + i, book.new_token(0), 1) for i in range(n))
            rec = PopRecord(Kind.LEASE, "g", "t", qid, cursor=qs.cursor + skip + n, deadline=draw(st.integers(0, 99)),
                            entries=entries, attempt_id=draw(_ATTEMPT_IDS))  # fmt: skip
        else:
            offset = draw(st.sampled_from(leased))
            lease = qs.leases[offset]
            token = lease.token if draw(st.booleans()) else lease.token + 1000  # a stale handle sometimes
            if action == "redeliver":
                rec = PopRecord(Kind.LEASE, "g", "t", qid, cursor=qs.cursor, deadline=7,
                                entries=((offset, book.new_token(0), lease.attempt + 1),),
                                attempt_id=draw(_ATTEMPT_IDS))  # fmt: skip
            elif action == "change":
                rec = PopRecord(Kind.CHANGE, "g", "t", qid, offset=offset, token=token, new_token=book.new_token(0),
                                deadline=50)  # fmt: skip
            else:
                rec = PopRecord(Kind.ACK if action == "ack" else Kind.DEAD, "g", "t", qid, offset=offset, token=token)
        book.apply(rec)
        recs.append(rec)
    return recs


@settings(max_examples=150, deadline=None)
@given(_histories(), st.data())
def test_a_snapshot_plus_any_overlapping_suffix_of_the_log_is_the_same_book(
    recs: list[PopRecord], data: st.DataObject
) -> None:
    full = PopBook()
    for r in recs:
        full.apply(r)
    # the records survive their encoding as stored messages
    decoded = [parse_record(record_message(r, HOST, 1)) for r in recs]
    assert decoded == recs, "a record reads back as written"
    # a snapshot taken after record ``cut`` may already hold the effects of some records after ``start``
    start = data.draw(st.integers(0, len(recs)))
    cut = data.draw(st.integers(start, len(recs)))
    book = PopBook()
    for r in recs[:cut]:
        book.apply(r)
    restored = PopBook.from_snapshot(book.snapshot())
    for r in recs[start:]:
        restored.apply(r)
    assert _model(restored) == _model(full), "replaying from the snapshot's offset rebuilds the same state"
    assert restored.last_token == full.last_token


def test_a_reset_moves_the_cursor_and_ends_every_lease_of_its_queue() -> None:
    book = PopBook()
    book.apply(PopRecord(Kind.INIT, "g", "t", cursors={0: 0, 1: 0}))
    for qid in (0, 1):
        book.apply(PopRecord(Kind.LEASE, "g", "t", qid, cursor=5, deadline=9, entries=((3, 11, 1), (4, 12, 2))))
    rec = PopRecord(Kind.RESET, "g", "t", 0, cursor=1)
    assert parse_record(record_message(rec, HOST, 1)) == rec
    book.apply(rec)
    q0, q1 = book.queue("g", "t", 0), book.queue("g", "t", 1)
    assert q0 is not None and q1 is not None
    assert (q0.cursor, q0.leases, q0.floor()) == (1, {}, 1)
    assert book.lease("g", "t", 0, 3, 11) is None, "a receipt handle of before the reset no longer acks"
    assert (q1.cursor, sorted(q1.leases)) == (5, [3, 4]), "other queues keep their state"
    book.apply(PopRecord(Kind.RESET, "g", "t", 7, cursor=2))
    assert book.queue("g", "t", 7) is not None, "a reset of a queue never popped here starts its state"
    assert book.forget_group("g") and not book.queues and not book.forget_group("g")


def test_floor_and_due_follow_the_leases() -> None:
    book = PopBook()
    book.apply(PopRecord(Kind.INIT, "g", "t", cursors={0: 10}))
    book.apply(PopRecord(Kind.LEASE, "g", "t", 0, cursor=14, deadline=100, entries=((10, 1, 1), (12, 2, 1))))
    book.apply(PopRecord(Kind.LEASE, "g", "t", 0, cursor=15, deadline=50, entries=((14, 3, 1),)))
    qs = book.queue("g", "t", 0)
    assert qs is not None and qs.floor() == 10
    assert qs.due(49, 10) == [] and qs.due(60, 10) == [14] and qs.due(100, 10) == [14, 10, 12]
    book.apply(PopRecord(Kind.ACK, "g", "t", 0, offset=10, token=1))
    assert qs.floor() == 12
    book.apply(PopRecord(Kind.ACK, "g", "t", 0, offset=12, token=99))  # a stale token changes nothing
    assert qs.floor() == 12
    book.apply(PopRecord(Kind.CHANGE, "g", "t", 0, offset=12, token=2, new_token=4, deadline=500))
    assert qs.due(100, 10) == [14] and qs.next_deadline() == 50
    book.apply(PopRecord(Kind.ACK, "g", "t", 0, offset=12, token=4))
    book.apply(PopRecord(Kind.DEAD, "g", "t", 0, offset=14, token=3))
    assert qs.floor() == 15 and qs.leases == {}
    assert parse_record(record_message(PopRecord(Kind.ACK, "g", "t"), HOST, 1)) is not None
    junk = record_message(PopRecord(Kind.ACK, "g", "t"), HOST, 1)
    junk.body = b"{not json"
    assert parse_record(junk) is None


def test_receipt_handles_read_back_and_nothing_else_is_one() -> None:
    h = ReceiptHandle("broker-a", "%RETRY%g_t", 3, 1 << 40, 12345)
    assert ReceiptHandle.parse(h.encode()) == h
    for bad in ["", " ", "1 broker-a T 0 0", "1 broker-a T 0 0 1 extra", "0 broker-a T 0 0 1", "1 bro ker T 0 0 1",
                "1 broker-a T/../x 0 0 1", "1 broker-a T +1 0 1", "1 broker-a T 0 -1 1", "1 broker-a T 0 01 1",
                "1 broker-a T 2147483648 0 1", "1 broker-a T 0 0 9223372036854775808", "1 b T 0 0 \u0661",
                "1 " + "b" * 600 + " T 0 0 1"]:  # fmt: skip
        with pytest.raises(HandleError):
            ReceiptHandle.parse(bad)
