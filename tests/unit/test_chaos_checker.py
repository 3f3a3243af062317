"""The chaos checker (tests/support/chaos), pure: handcrafted histories for each verdict, failing when they should
and passing when they should, and hypothesis for its invariants."""

from __future__ import annotations

import itertools
import random
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.chaos import (
    FINAL_READ,
    Delivered,
    Event,
    Fault,
    FinalRead,
    History,
    SendAttempt,
    SendFailed,
    SendOk,
    Stored,
    check,
    percentile,
)

A = "10.0.0.1:10911"  # broker-a's first master
B = "10.0.0.2:10911"  # its slave, master after a failover
C = "10.0.0.3:10911"  # broker-b's master
GROUPS = ("g1", "g2")


def send(
    h: History,
    key: str,
    t: float,
    *,
    addr: str = A,
    name: str = "broker-a",
    epoch: int | None = 1,
    queue: int = 0,
    offset: int = 0,
    producer: str = "p1",
    topic: str | None = None,
) -> None:
    """An attempt at ``t`` acknowledged 10 ms later."""
    h.send_attempt(key, producer, topic=topic, t=t)
    h.send_ok(key, broker_addr=addr, broker_name=name, epoch=epoch, queue_id=queue, queue_offset=offset, t=t + 0.01)


def deliver(
    h: History, key: str, t: float, *, group: str = "g1", name: str = "broker-a", queue: int = 0, offset: int = 0
) -> None:
    h.delivered(key, group=group, consumer=f"{group}-c1", broker_name=name, queue_id=queue, queue_offset=offset, t=t)


def clean(n: int = 3) -> History:
    """``n`` keys acknowledged by broker-a, delivered once to g1 and g2."""
    h = History()
    for i in range(n):
        send(h, f"k{i}", float(i), offset=i)
    for group in GROUPS:
        for i in range(n):
            deliver(h, f"k{i}", 10.0 + i, group=group, offset=i)
    return h


def test_a_clean_history_passes() -> None:
    v = check(clean(), sync=True, expected_groups=GROUPS)
    assert v.ok, v.summary()
    assert (v.keys, v.acked, v.failed, v.indeterminate) == (3, 3, 0, 0)
    assert v.delivered == {"g1": 3, "g2": 3}
    assert not v.lost and not v.duplicates and not v.split_brain and not v.order and not v.unexpected
    assert v.summary().startswith("verdict: OK (sync replication)")


def test_outcomes_are_acked_failed_or_indeterminate() -> None:
    h = History()
    h.send_attempt("refused", "p1", t=0.0)
    h.send_failed("refused", code=14, reason="this broker is a slave", t=0.1)  # SERVICE_NOT_AVAILABLE
    h.send_attempt("timeout", "p1", t=1.0)
    h.send_failed("timeout", code=None, reason="timed out", t=4.0)
    h.send_attempt("unreplicated", "p1", t=2.0)
    h.send_failed("unreplicated", code=12, reason="FLUSH_SLAVE_TIMEOUT", t=2.5)
    h.send_attempt("unanswered", "p1", t=3.0)  # the producer was killed before the outcome
    h.send_attempt("retried", "p1", t=5.0)
    h.send_failed("retried", code=14, reason="slave", t=5.1)
    send(h, "retried", 6.0, offset=0)
    h.send_attempt("half", "p1", t=7.0)  # one definite failure, one attempt without outcome
    h.send_failed("half", code=16, reason="not writable", t=7.1)
    h.send_attempt("half", "p1", t=8.0)
    deliver(h, "unreplicated", 9.0, offset=1)
    v = check(h, sync=True, expected_groups=["g1"])
    assert (v.keys, v.acked, v.failed, v.indeterminate, v.indeterminate_present) == (6, 1, 1, 4, 1)
    assert [lost.key for lost in v.lost["g1"]] == ["retried"]  # acknowledged, never delivered
    # which codes are definite is the caller's: with none, the refused send is indeterminate too
    v = check(h, sync=True, expected_groups=["g1"], definite_failure_codes=())
    assert (v.failed, v.indeterminate) == (0, 5)


def test_an_acknowledged_key_missing_for_one_group_is_lost_under_sync() -> None:
    h = clean()
    send(h, "k9", 5.0, offset=9)
    deliver(h, "k9", 20.0, group="g1", offset=9)
    v = check(h, sync=True, expected_groups=GROUPS)
    assert not v.ok and list(v.lost) == ["g2"] and [lost.key for lost in v.lost["g2"]] == ["k9"]
    assert v.lost_keys == ["k9"] and "1 acknowledged keys lost for g2" in v.failures
    assert "no fault at or after it explains the loss" in v.lost["g2"][0].explanation
    # a key the final read found is not lost: the group may just not have got to it yet
    h.stored("k9", broker_name="broker-a", queue_id=0, queue_offset=9)
    assert check(h, sync=True, expected_groups=GROUPS).ok
    # a group not expected to get everything is not judged
    unstored = [e for e in h.events if not isinstance(e, Stored)]
    assert check(unstored, sync=True, expected_groups=["g1"]).ok


def failover(*, lost_at: float = 10.0) -> History:
    """broker-a's master A acknowledges k1 (epoch 1), is killed at 10.2, B takes over in epoch 2 at 15; k1 never
    reaches the consumers."""
    h = History()
    send(h, "k0", 1.0, offset=0)
    deliver(h, "k0", 1.5, offset=0)
    send(h, "k1", lost_at - 0.01, offset=1)
    h.fault("kill-master", A, t_start=10.2, t_end=30.0, note="kill -9")
    send(h, "k2", 14.99, addr=B, epoch=2, offset=1)
    deliver(h, "k2", 16.0, offset=1)
    return h


def test_an_async_loss_is_explained_by_the_failover_that_followed() -> None:
    v = check(failover(), sync=False, expected_groups=["g1"])
    assert v.ok, v.summary()
    [lost] = v.lost["g1"]
    assert lost.key == "k1" and lost.tolerated and lost.fault is not None and lost.fault.kind == "kill-master"
    assert "0.200 s before kill-master 10.0.0.1:10911" in lost.explanation
    assert f"next acked by {B} in epoch 2 at t=15.000" in lost.explanation
    assert "1 explained by a fault" in v.summary()
    # with synchronous replication the same loss fails
    v = check(failover(), sync=True, expected_groups=["g1"])
    assert not v.ok and not v.lost["g1"][0].tolerated


def test_an_async_loss_no_fault_explains_fails() -> None:
    h = failover()
    send(h, "k3", 40.0, addr=B, epoch=2, offset=2)  # after the fault ended, and nothing after it
    v = check(h, sync=False, expected_groups=["g1"])
    assert not v.ok and [(lost.key, lost.tolerated) for lost in v.lost["g1"]] == [("k1", True), ("k3", False)]
    assert "1 acknowledged keys lost that no fault explains for g1" in v.failures


def test_a_loss_window_bounds_how_far_a_fault_explains() -> None:
    h = failover(lost_at=1.0)  # acknowledged 9.2 s before the kill
    assert check(h, sync=False, expected_groups=["g1"]).ok
    v = check(h, sync=False, expected_groups=["g1"], loss_window=5.0)
    assert not v.ok and "more than the loss window of 5.0 s" in v.lost["g1"][0].explanation
    assert check(h, sync=False, expected_groups=["g1"], loss_window=10.0).ok


def test_a_loss_relates_to_the_fault_under_way_and_prefers_one_aimed_at_its_broker() -> None:
    h = History()
    h.fault("partition", "namesrv", t_start=4.0, t_end=6.0)
    h.fault("pause", "broker-a", t_start=5.0, t_end=8.0)
    send(h, "k1", 7.0)  # acknowledged while broker-a was paused (a zombie's answer)
    v = check(h, sync=False, expected_groups=["g1"])
    fault = v.lost["g1"][0].fault
    assert v.ok and fault is not None and fault.kind == "pause"
    assert "during pause broker-a at t=5.000" in v.lost["g1"][0].explanation
    h2 = History()
    h2.fault("partition", "namesrv", t_start=9.0)
    send(h2, "k1", 7.0)
    lost = check(h2, sync=False, expected_groups=["g1"]).lost["g1"][0]
    assert lost.tolerated and "(a fault on another target)" in lost.explanation


def test_the_final_read_is_one_more_reader() -> None:
    h = clean()
    for i in (0, 1):
        h.stored(f"k{i}", broker_name="broker-a", queue_id=0, queue_offset=i, broker_addr=B)
    h.final_read(["broker-a"], t=50.0)
    v = check(h, sync=True, expected_groups=GROUPS)  # k2 was delivered, then vanished from the store
    assert not v.ok and list(v.lost) == [FINAL_READ] and v.lost[FINAL_READ][0].key == "k2"
    # a read of other sets does not judge broker-a's keys
    events = [e for e in h.events if not isinstance(e, FinalRead)] + [FinalRead(50.0, ("broker-b",))]
    assert check(events, sync=True, expected_groups=GROUPS).ok
    # the final read alone judges a producer-only workload
    only = [e for e in h.events if not isinstance(e, Delivered)]
    v = check(only, sync=True, expected_groups=[])
    assert [lost.key for lost in v.lost[FINAL_READ]] == ["k2"] and not v.ok
    v = check([e for e in only if not isinstance(e, FinalRead)], sync=True, expected_groups=[])
    assert v.ok and "nothing judges loss" in v.notes[0]


def test_duplicates_are_counted_not_failed() -> None:
    h = clean()
    deliver(h, "k1", 30.0, group="g2", offset=1)
    deliver(h, "k1", 31.0, group="g2", offset=1)
    h.stored("k0", broker_name="broker-a", queue_id=0, queue_offset=0, broker_addr=A)
    h.stored("k0", broker_name="broker-a", queue_id=0, queue_offset=0, broker_addr=B)  # one slot, two replicas
    h.stored("k1", broker_name="broker-a", queue_id=0, queue_offset=1)
    h.stored("k1", broker_name="broker-a", queue_id=1, queue_offset=0)  # a retried send stored twice
    v = check(h, sync=True, expected_groups=GROUPS)
    assert v.ok, v.summary()
    assert v.duplicates == {"g2": {"k1": 3}} and v.duplicate_deliveries == 2
    assert v.stored_twice == {"k1": (("broker-a", 0, 1), ("broker-a", 1, 0))}
    assert "1 keys stored more than once" in v.summary()


def test_two_addresses_acknowledging_in_one_epoch_is_split_brain() -> None:
    h = clean()
    send(h, "k9", 5.0, addr=B, epoch=1, offset=9)
    for group in GROUPS:
        deliver(h, "k9", 20.0, group=group, offset=9)
    v = check(h, sync=False, expected_groups=GROUPS)
    assert not v.ok and [sb.kind for sb in v.split_brain] == ["epoch"]
    assert f"broker-a epoch 1 acknowledged by 2 addresses: {A}" in v.split_brain[0].detail
    # a new epoch for the new master is a failover
    h2 = clean()
    send(h2, "k9", 5.0, addr=B, epoch=2, offset=9)
    for group in GROUPS:
        deliver(h2, "k9", 20.0, group=group, offset=9)
    assert check(h2, sync=False, expected_groups=GROUPS).ok
    # without epochs there is nothing to compare
    h3 = History()
    send(h3, "k1", 1.0, epoch=None)
    send(h3, "k2", 2.0, addr=B, epoch=None, offset=1)
    assert check(h3, sync=True, expected_groups=[]).ok


def two_writers(epochs: tuple[int | None, int | None], *, deliver_both: bool = True) -> History:
    """k1 (A) and k2 (B) acknowledged at the same slot of broker-a."""
    h = History()
    send(h, "k1", 1.0, addr=A, epoch=epochs[0], offset=5)
    send(h, "k2", 2.0, addr=B, epoch=epochs[1], offset=5)
    if deliver_both:
        deliver(h, "k1", 1.5, offset=5)
    deliver(h, "k2", 2.5, offset=5)
    return h


def test_two_surviving_keys_acknowledged_at_one_slot_is_split_brain() -> None:
    v = check(two_writers((1, 2)), sync=True, expected_groups=["g1"])
    assert not v.ok and [sb.kind for sb in v.split_brain] == ["slot"]
    assert "broker-a/0@5 acknowledged for 2 keys that all survive" in v.split_brain[0].detail
    # without sync, a later epoch rewriting an unreplicated slot is a rewrite, tolerated...
    v = check(two_writers((1, 2)), sync=False, expected_groups=["g1"])
    assert v.ok and [sb.kind for sb in v.rewrites] == ["slot"]
    # ...but not within one epoch or when the epochs are unknown
    assert not check(two_writers((None, None)), sync=False, expected_groups=["g1"]).ok
    assert not check(two_writers((None, 2)), sync=False, expected_groups=["g1"]).ok
    # one survivor: the other is a loss (explained or not), not a conflict
    v = check(two_writers((1, 2), deliver_both=False), sync=True, expected_groups=["g1"])
    assert not v.split_brain and v.lost_keys == ["k1"]


def test_replicas_that_disagree_at_the_final_read_fail() -> None:
    h = History()
    send(h, "k1", 1.0, offset=0)
    h.stored("k1", broker_name="broker-a", queue_id=0, queue_offset=0, broker_addr=A)
    h.send_attempt("k2", "p1", t=2.0)  # indeterminate: it may be anywhere
    h.stored("k2", broker_name="broker-a", queue_id=0, queue_offset=0, broker_addr=B)
    v = check(h, sync=False, expected_groups=[])
    assert not v.ok and [sb.kind for sb in v.split_brain] == ["diverged"]
    assert "the final read found 2 keys at broker-a/0@0: k1, k2" in v.failures[0]


def orderly_history(delivered: list[str], *, topic: str = "orders") -> History:
    h = History()
    for i in range(4):
        send(h, f"a{i}", float(i), offset=10 + i, topic=topic)  # p1, queue 0
        send(h, f"b{i}", i + 0.5, producer="p2", offset=20 + i, topic=topic)  # p2 later in the same queue
    for n, key in enumerate(delivered):
        deliver(h, key, 100.0 + n)
    return h


def test_deliveries_keep_each_producers_queue_order() -> None:
    ok = ["a0", "b0", "a1", "b1", "b2", "a2", "a3", "b3"]  # producers interleave freely
    assert check(orderly_history(ok), sync=True, expected_groups=["g1"], orderly=True).ok
    redelivered = [*ok, "a1", "a0"]  # a redelivery does not count: each key's first delivery does
    assert check(orderly_history(redelivered), sync=True, expected_groups=["g1"], orderly=True).ok
    bad = ["a0", "a2", "a1", "a3", "b0", "b1", "b2", "b3"]
    v = check(orderly_history(bad), sync=True, expected_groups=["g1"], orderly=True)
    assert not v.ok and len(v.order) == 1
    assert v.order[0].describe() == "g1: p1 on broker-a/0: a2 (offset 12) delivered before a1 (offset 11)"
    assert check(orderly_history(bad), sync=True, expected_groups=["g1"]).ok  # order not asked for
    assert check(orderly_history(bad), sync=True, expected_groups=["g1"], orderly={"other"}).ok
    assert not check(orderly_history(bad), sync=True, expected_groups=["g1"], orderly={"orders"}).ok


def test_order_skips_lost_keys_and_follows_delivery_time_across_consumers() -> None:
    h = orderly_history([])
    h.delivered("a0", group="g1", consumer="c2", broker_name="broker-a", queue_id=0, queue_offset=10, t=50.0)
    h.delivered("a2", group="g1", consumer="c1", broker_name="broker-a", queue_id=0, queue_offset=12, t=60.0)
    h.delivered("a3", group="g1", consumer="c2", broker_name="broker-a", queue_id=0, queue_offset=13, t=55.0)
    v = check(h, sync=False, expected_groups=["g1"], orderly=True)
    assert [(o.first, o.second) for o in v.order] == [("a3", "a2")]


def test_a_key_never_sent_is_unexpected() -> None:
    h = clean()
    deliver(h, "ghost", 30.0)
    v = check(h, sync=False, expected_groups=GROUPS)
    assert not v.ok and v.unexpected == ["ghost"]
    h2 = clean()
    h2.stored("ghost2", broker_name="broker-a", queue_id=3, queue_offset=0)
    assert check(h2, sync=False, expected_groups=GROUPS).unexpected == ["ghost2"]


def test_a_definitely_failed_send_that_is_present_is_a_phantom() -> None:
    h = clean()
    h.send_attempt("k9", "p1", t=5.0)
    h.send_failed("k9", code=14, reason="this broker is a slave", t=5.1)
    deliver(h, "k9", 30.0)
    v = check(h, sync=False, expected_groups=GROUPS)
    assert not v.ok and v.phantoms == ["k9"]
    v = check(h, sync=False, expected_groups=GROUPS, definite_failure_codes={2})
    assert v.ok and v.indeterminate_present == 1


def rto_history() -> History:
    h = History()
    send(h, "k1", 9.0)  # A masters broker-a in epoch 1
    send(h, "c1", 9.5, addr=C, name="broker-b")
    h.fault("kill-master", A, t_start=10.0)
    h.send_attempt("k2", "p1", t=9.99)
    h.send_ok("k2", broker_addr=A, broker_name="broker-a", epoch=1, queue_id=0, queue_offset=2, t=10.01)  # in flight
    send(h, "c2", 11.0, addr=C, name="broker-b", offset=1)  # another set's answer
    send(h, "k3", 13.99, addr=B, epoch=2, offset=2)  # failover: B in epoch 2 at 14.0
    h.fault("pause", "broker-b", t_start=20.0, t_end=22.0)
    send(h, "c3", 22.49, addr=C, name="broker-b", offset=2)  # the same master, back at 22.5
    h.fault("kill", B, t_start=30.0)  # nothing acknowledged after it
    h.fault("partition", "10.0.0.9:10911", t_start=31.0)  # names no broker
    h.fault("kill", A, t_start=32.0)  # A is not broker-a's master any more
    return h


def test_recovery_time_of_each_fault_on_a_master() -> None:
    v = check(rto_history(), sync=False, expected_groups=[])
    assert [(r.fault.kind, r.broker_name) for r in v.rto] == [
        ("kill-master", "broker-a"),
        ("pause", "broker-b"),
        ("kill", "broker-a"),
    ]
    kill, pause, dead = v.rto
    assert kill.seconds == pytest.approx(4.0) and kill.ignored == 1 and kill.ack is not None and kill.ack.key == "k3"
    assert kill.note.startswith(f"failover from {A} epoch 1")
    assert pause.seconds == pytest.approx(2.5) and pause.note == "the same master, after the fault ended"
    assert dead.seconds is None and dead.note == "no acknowledgement from broker-a after it"
    assert [v.rto_p50, v.rto_p90, v.rto_max] == pytest.approx([2.5, 4.0, 4.0])
    assert any("10.0.0.9:10911" in n and "names no broker" in n for n in v.notes)
    assert any("kill 10.0.0.1:10911 at t=32.000 not timed" in n for n in v.notes)
    assert v.ok  # times are reported, not judged...
    v = check(rto_history(), sync=False, expected_groups=[], max_rto=3.0)  # ...unless a bound is given
    assert [f.split(":")[0] for f in v.failures] == ["recovery beyond 3.0 s"] * 2
    v = check(rto_history(), sync=False, expected_groups=[], rto_kinds={"partition", "pause"})
    assert [(r.fault.kind, r.seconds) for r in v.rto] == [("pause", pytest.approx(2.5)), ("partition", None)]
    assert "rto: 2 faults on a master" in v.summary()


def test_percentiles_are_nearest_rank() -> None:
    assert percentile([], 50) is None
    assert percentile([1.0], 90) == 1.0
    values = [float(i) for i in range(1, 11)]
    assert (percentile(values, 50), percentile(values, 90), percentile(values, 100)) == (5.0, 9.0, 10.0)


def test_the_summary_lists_a_limited_number_of_items() -> None:
    h = History()
    for i in range(30):
        send(h, f"k{i:02}", float(i), offset=i)
    text = check(h, sync=True, expected_groups=["g1"]).summary(limit=5)
    assert text.startswith("verdict: FAILED") and "lost for g1: 30 keys (0 explained by a fault)" in text
    assert "  k04: acked by" in text and "k05: " not in text and "... and 25 more" in text


def test_the_recorder_stamps_events_and_ends_faults() -> None:
    ticks = itertools.count(100)
    h = History(clock=lambda: float(next(ticks)))
    attempt = h.send_attempt("k1", "p1", topic="t")
    handle = h.begin_fault("partition", A, note="iptables")
    ended = h.end_fault(handle)
    with h.faulting("pause", B):
        h.send_failed("k1", code=None, reason="timeout")
    assert attempt == SendAttempt("k1", "p1", 100.0, "t")
    assert ended == Fault("partition", A, 101.0, 102.0, "iptables") == h.events[1]
    assert h.events[2:] == [Fault("pause", B, 103.0, 105.0), SendFailed("k1", 104.0, None, "timeout")]
    with pytest.raises(ValueError, match="not a fault"):
        h.end_fault(0)


def test_the_recorder_takes_events_from_many_threads() -> None:
    h = History()

    def produce(p: int) -> None:
        for i in range(500):
            h.send_attempt(f"{p}-{i}", f"p{p}")

    threads = [threading.Thread(target=produce, args=(p,)) for p in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(h) == 4000 and len({e.key for e in h if isinstance(e, SendAttempt)}) == 4000


def test_dump_and_load_round_trip(tmp_path: Path) -> None:
    h = rto_history()
    h.stored("k1", broker_name="broker-a", queue_id=0, queue_offset=0, broker_addr=B, t=60.0)
    h.final_read(["broker-a", "broker-b"], t=61.0)
    h.send_failed("k9", code=None, reason='timeout: "quoted"\nand a newline', t=62.0)
    deliver(h, "k1", 63.0)
    path = tmp_path / "history.jsonl"
    h.dump(path)
    assert len(path.read_text().splitlines()) == len(h)
    assert History.load(path).events == h.events


# Invariants over generated histories.

BROKERS = {"broker-a": (A, B), "broker-b": (C, "10.0.0.4:10911")}


@st.composite
def messy(draw: st.DrawFn) -> list[Event]:
    """Any mix of outcomes, deliveries, final reads and faults, at distinct times."""
    t = itertools.count(0.0, 0.125)
    events: list[Event] = []
    slots: dict[tuple[str, int], int] = {}
    for i in range(draw(st.integers(0, 25))):
        key = f"k{i}"
        name = draw(st.sampled_from(sorted(BROKERS)))
        queue = draw(st.integers(0, 1))
        offset = slots.get((name, queue), 0) + draw(st.integers(0, 1))  # sometimes a slot twice
        slots[(name, queue)] = offset + 1
        events.append(SendAttempt(key, draw(st.sampled_from(["p1", "p2"])), next(t), draw(st.sampled_from(["x", "y"]))))
        outcome = draw(st.sampled_from(["ok", "definite", "timeout", "none"]))
        if outcome == "ok":
            addr = draw(st.sampled_from(BROKERS[name]))
            epoch = draw(st.sampled_from([None, 1, 2]))
            events.append(SendOk(key, next(t), addr, name, epoch, queue, offset, f"id{i}"))
        elif outcome != "none":
            events.append(SendFailed(key, next(t), 14 if outcome == "definite" else None, outcome))
        for group in GROUPS:
            for _ in range(draw(st.integers(0, 2))):
                events.append(Delivered(key, next(t), group, "c1", name, queue, offset))
        if draw(st.booleans()):
            events.append(Stored(key, name, queue, offset))
    for _ in range(draw(st.integers(0, 3))):
        start = next(t) - draw(st.integers(0, 20)) * 0.125 - 0.0625
        end = draw(st.one_of(st.none(), st.just(start + 1.0)))
        events.append(
            Fault(draw(st.sampled_from(["kill-master", "pause"])), draw(st.sampled_from([A, B, C])), start, end)
        )
    if draw(st.booleans()):
        events.append(FinalRead(next(t), ()))
    if draw(st.booleans()):
        events.append(Delivered("stranger", next(t), "g1", "c1", "broker-a", 0, 99))
    return events


@st.composite
def healthy(draw: st.DrawFn) -> list[Event]:
    """Every send acknowledged at its own slot by its set's one master, delivered exactly once to each group."""
    t = itertools.count(0.0, 0.5)
    events: list[Event] = []
    next_offset: dict[tuple[str, int], int] = {}
    keys = [f"k{i}" for i in range(draw(st.integers(1, 30)))]
    for key in keys:
        name = draw(st.sampled_from(sorted(BROKERS)))
        queue = draw(st.integers(0, 3))
        offset = next_offset.get((name, queue), 0)
        next_offset[(name, queue)] = offset + 1
        events.append(SendAttempt(key, draw(st.sampled_from(["p1", "p2", "p3"])), next(t)))
        events.append(SendOk(key, next(t), BROKERS[name][0], name, 1, queue, offset, ""))
    for key in keys:  # in order: every queue's keys arrive in offset order
        ok = next(e for e in events if isinstance(e, SendOk) and e.key == key)
        for group in GROUPS:
            events.append(Delivered(key, next(t), group, "c", ok.broker_name, ok.queue_id, ok.queue_offset))
    return events


SETTINGS = settings(max_examples=200, deadline=None)


@SETTINGS
@given(healthy())
def test_every_acked_key_delivered_once_is_neither_lost_nor_duplicated(events: list[Event]) -> None:
    v = check(events, sync=True, expected_groups=GROUPS, orderly=True)
    assert v.ok, v.summary()
    assert v.acked == v.keys and not v.lost and not v.duplicates and not v.order


@SETTINGS
@given(healthy(), st.data())
def test_dropping_a_keys_deliveries_to_a_group_loses_that_key(events: list[Event], data: st.DataObject) -> None:
    key = data.draw(st.sampled_from(sorted({e.key for e in events if isinstance(e, SendAttempt)})))
    group = data.draw(st.sampled_from(GROUPS))
    kept = [e for e in events if not (isinstance(e, Delivered) and e.key == key and e.group == group)]
    v = check(kept, sync=True, expected_groups=GROUPS)
    assert not v.ok and list(v.lost) == [group] and v.lost_keys == [key]
    assert check(kept, sync=False, expected_groups=GROUPS).failures == [
        f"1 acknowledged keys lost that no fault explains for {group}"
    ]


@SETTINGS
@given(healthy(), st.lists(st.integers(0, 10**6), min_size=1, max_size=10))
def test_redelivering_counts_duplicates_and_keeps_the_verdict(events: list[Event], picks: list[int]) -> None:
    deliveries = [e for e in events if isinstance(e, Delivered)]
    again = [deliveries[p % len(deliveries)] for p in picks]
    late: list[Event] = [
        Delivered(d.key, 1000.0 + n, d.group, "c2", d.broker_name, d.queue_id, d.queue_offset)
        for n, d in enumerate(again)
    ]
    v = check(events + late, sync=True, expected_groups=GROUPS, orderly=True)
    assert v.ok and v.duplicate_deliveries == len(late)


@SETTINGS
@given(messy(), st.randoms(use_true_random=False))
def test_the_order_events_are_recorded_in_does_not_matter(events: list[Event], rnd: random.Random) -> None:
    shuffled = list(events)
    rnd.shuffle(shuffled)
    for sync in (True, False):
        first = check(events, sync=sync, expected_groups=GROUPS, orderly={"x"})
        assert check(shuffled, sync=sync, expected_groups=GROUPS, orderly={"x"}) == first
        assert first.acked + first.failed + first.indeterminate == first.keys
        assert first.ok == (not first.failures)


@SETTINGS
@given(messy())
def test_unexpected_keys_are_exactly_the_ones_never_sent(events: list[Event]) -> None:
    v = check(events, sync=False, expected_groups=GROUPS)
    sent = {e.key for e in events if isinstance(e, SendAttempt | SendOk | SendFailed)}
    present = {e.key for e in events if isinstance(e, Delivered | Stored)}
    assert v.unexpected == sorted(present - sent)
    if v.unexpected:
        assert not v.ok


@SETTINGS
@given(messy())
def test_any_history_survives_dump_and_load(events: list[Event]) -> None:
    h = History()
    for e in events:
        h.add(e)
    with tempfile.TemporaryDirectory() as d:
        h.dump(Path(d) / "h.jsonl")
        assert History.load(Path(d) / "h.jsonl").events == events


@SETTINGS
@given(st.lists(st.floats(0, 1e4, allow_nan=False), max_size=50))
def test_percentiles_are_ordered_values_of_the_sample(values: list[float]) -> None:
    ordered = sorted(values)
    p50, p90 = percentile(ordered, 50), percentile(ordered, 90)
    if not values:
        assert p50 is None and p90 is None
    else:
        assert p50 is not None and p90 is not None
        assert p50 in values and p90 in values and p50 <= p90 <= ordered[-1]
