"""What QUERY_CONSUMER_OFFSET answers for a group without a committed offset (broker/offset_rules.py)."""

from __future__ import annotations

import pytest

from sievemq.broker.offset_rules import PopStart, UnknownOffset, answers_zero, pop_start

LIMIT = 1000


def facts(zero: bool = True, knows: bool = False, min_offset: int = 0, lag: int | None = 10) -> UnknownOffset:
    return UnknownOffset(zero_if_not_found=zero, group_knows_topic=knows, min_offset=min_offset, head_lag=lag)


@pytest.mark.parametrize(
    ("f", "zero"),
    [
        (facts(), True),  # a young queue: RocketMQ reads it from its first message
        (facts(lag=None), True),  # an empty queue
        (facts(lag=LIMIT), True),
        (facts(lag=LIMIT + 1), False),  # its first message is no longer "in memory"
        (facts(min_offset=5), False),  # its head was deleted
        (facts(zero=False), False),  # the client asked for QUERY_NOT_FOUND (setZeroIfNotFound=false)
        (facts(knows=True), True),
    ],
)
def test_rocketmq_rule_by_default(f: UnknownOffset, zero: bool) -> None:
    assert answers_zero(f, new_group_starts_at_end=False, memory_limit=LIMIT) is zero


def test_new_group_starts_at_end_only_for_groups_new_to_the_topic() -> None:
    assert not answers_zero(facts(knows=False), new_group_starts_at_end=True, memory_limit=LIMIT)
    assert answers_zero(facts(knows=True), new_group_starts_at_end=True, memory_limit=LIMIT), (
        "a group that has offsets of the topic reads a queue added later from its first message"
    )
    assert not answers_zero(facts(knows=True, zero=False), new_group_starts_at_end=True, memory_limit=LIMIT)


def _pop(init_latest: bool = True, *, retry: bool = False, knows: bool = False, lo: int = 0, hi: int = 10,
         lag: int | None = 100) -> PopStart:  # fmt: skip
    return PopStart(init_latest, retry, knows, lo, hi, lag)


@pytest.mark.parametrize(
    ("facts", "start"),
    [
        (_pop(), 0),  # a young queue, its head in memory: read whole
        (_pop(lag=None, hi=0), 0),  # an empty queue
        (_pop(lag=10_000), 9),  # head out of memory: the last message
        (_pop(lo=4, lag=None), 9),  # head deleted: the last message
        (_pop(hi=0, lo=0, lag=10_000), 0),  # never below 0
        (_pop(False, lo=4, lag=10_000), 4),  # MIN: the oldest stored
        (_pop(retry=True, lo=3, lag=10_000), 3),  # a retry topic: always the oldest
    ],
)
def test_pop_start_follows_rocketmq(facts: PopStart, start: int) -> None:
    assert pop_start(facts, check_in_memory=True, new_group_starts_at_end=False, memory_limit=1000) == start


def test_pop_start_without_the_memory_check_or_at_the_end() -> None:
    assert pop_start(_pop(), check_in_memory=False, new_group_starts_at_end=False, memory_limit=1000) == 9
    assert pop_start(_pop(), check_in_memory=True, new_group_starts_at_end=True, memory_limit=1000) == 10
    known = _pop(knows=True)
    assert pop_start(known, check_in_memory=True, new_group_starts_at_end=True, memory_limit=1000) == 0, (
        "a group that knows the topic keeps RocketMQ's rule for a queue it has no offset of"
    )
    assert pop_start(_pop(False), check_in_memory=True, new_group_starts_at_end=True, memory_limit=1000) == 0
