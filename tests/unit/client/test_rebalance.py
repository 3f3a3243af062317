"""Averaged queue allocation (Java ``AllocateMessageQueueAveragely``): pure function, no sockets."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sievemq.client.allocate import allocate_averagely
from sievemq.client.message import MessageQueue


def mqs(n: int, brokers: tuple[str, ...] = ("broker-a",)) -> list[MessageQueue]:
    return [MessageQueue("T", b, i) for b in brokers for i in range(n)]


def cids(n: int) -> list[str]:
    return [f"10.0.0.{i}@{i}" for i in range(n)]


def table(n_mqs: int, n_cids: int) -> list[list[int]]:
    qs, cs = mqs(n_mqs), cids(n_cids)
    return [[mq.queue_id for mq in allocate_averagely(qs, cs, c)] for c in cs]


@pytest.mark.parametrize(
    ("n_mqs", "n_cids", "expected"),
    [
        (8, 3, [[0, 1, 2], [3, 4, 5], [6, 7]]),  # the first len % n clients get one more
        (8, 2, [[0, 1, 2, 3], [4, 5, 6, 7]]),
        (4, 4, [[0], [1], [2], [3]]),
        (3, 5, [[0], [1], [2], [], []]),  # more clients than queues: the last ones idle
        (1, 3, [[0], [], []]),
        (10, 4, [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]),
        (5, 1, [[0, 1, 2, 3, 4]]),
    ],
)
def test_known_allocations_match_java(n_mqs: int, n_cids: int, expected: list[list[int]]) -> None:
    assert table(n_mqs, n_cids) == expected


def test_unknown_client_and_empty_inputs_get_nothing() -> None:
    assert allocate_averagely(mqs(4), cids(2), "stranger@1") == []
    assert allocate_averagely([], cids(2), cids(2)[0]) == []
    assert allocate_averagely(mqs(4), [], "x") == []


def test_input_order_does_not_matter() -> None:
    qs, cs = mqs(4, ("broker-a", "broker-b")), cids(3)
    expected = {c: allocate_averagely(qs, cs, c) for c in cs}
    for _ in range(20):
        q2, c2 = qs[:], cs[:]
        random.shuffle(q2)
        random.shuffle(c2)
        assert {c: allocate_averagely(q2, c2, c) for c in cs} == expected


def test_queues_sort_by_topic_then_broker_then_id() -> None:
    qs = mqs(2, ("broker-b", "broker-a"))
    assert allocate_averagely(qs, ["only"], "only") == [
        MessageQueue("T", "broker-a", 0),
        MessageQueue("T", "broker-a", 1),
        MessageQueue("T", "broker-b", 0),
        MessageQueue("T", "broker-b", 1),
    ]


@given(st.integers(0, 64), st.integers(1, 20), st.integers(1, 3))
def test_every_queue_has_exactly_one_owner_and_shares_are_even(n: int, c: int, brokers: int) -> None:
    qs = mqs(n, tuple(f"broker-{i}" for i in range(brokers)))
    cs = sorted(cids(c))  # the allocation walks clients in sorted order
    shares = [allocate_averagely(qs, cs, cid) for cid in cs]
    owned = [mq for s in shares for mq in s]
    assert sorted(owned) == sorted(qs), "every queue exactly once"
    sizes = [len(s) for s in shares]
    assert max(sizes) - min(sizes) <= 1
    assert sizes == sorted(sizes, reverse=True), "bigger shares go to the first clients"
    for s in shares:  # each client's share is a contiguous block of the sorted queues
        if s:
            i = sorted(qs).index(s[0])
            assert s == sorted(qs)[i : i + len(s)]


@given(st.integers(1, 40), st.integers(1, 10))
def test_duplicate_client_ids_count_once(n: int, c: int) -> None:
    cs = cids(c)
    assert [allocate_averagely(mqs(n), cs + cs, x) for x in cs] == [allocate_averagely(mqs(n), cs, x) for x in cs]
