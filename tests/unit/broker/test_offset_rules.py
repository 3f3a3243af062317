"""What QUERY_CONSUMER_OFFSET answers for a group without a committed offset (broker/offset_rules.py)."""

from __future__ import annotations

import pytest

from sievemq.broker.offset_rules import UnknownOffset, answers_zero

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
