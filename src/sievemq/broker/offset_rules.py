"""What QUERY_CONSUMER_OFFSET answers for a queue its group has no committed offset of (pure; docs/consume-from.md).

A consumer that takes a queue asks the broker for its group's offset; without one, the broker answers either 0 or
QUERY_NOT_FOUND, and a client hearing QUERY_NOT_FOUND decides by its consume-from setting (CONSUME_FROM_LAST_OFFSET:
the queue's end, CONSUME_FROM_FIRST_OFFSET: its start, CONSUME_FROM_TIMESTAMP: the offset stored at that time).

RocketMQ's rule, kept by default because its clients depend on it: 0 while the queue still starts at offset 0 and
its first message is still "in memory" (its commit-log position is no more than ``accessMessageInMemoryMaxRatio``
percent of the machine's memory behind the commit log's end); otherwise QUERY_NOT_FOUND. So a new group that
consumes from the last offset reads a young queue from its first message.

QUERY_NOT_FOUND is answered instead of 0:
- when the request says ``setZeroIfNotFound = false`` (RocketMQ 5's field; sievemq's client always sends it, so its
  consume-from setting always decides);
- with ``newGroupStartsAtEnd``, when the group has committed no offset of the topic on this broker (a new group):
  RocketMQ's clients then start at the queue's end when they consume from the last offset. A group that has
  committed offsets of the topic keeps RocketMQ's rule for queues it has none of (a queue added later is read from
  its first message).

A POP consumer (RocketMQ 5's clients through a proxy, ``POP_MESSAGE``) has no committed offset to ask for: the
broker picks where a group starts in a queue it has none of (``pop_start``, RocketMQ's
``PopMessageProcessor.getInitOffset``). With the request's ``initMode`` MIN, and always in a retry topic, the queue's
first stored message. With MAX (what the proxies send): offset 0 while the queue still starts there and its first
message is in memory (``initPopOffsetByCheckMsgInMem``, on by default), so a new group on a young queue reads it
whole; otherwise the queue's **last** message (max - 1, RocketMQ's "pop the last one"). ``newGroupStartsAtEnd``
starts a new group at the end for POP too.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class UnknownOffset:
    """The facts the answer depends on."""

    zero_if_not_found: bool
    """The request's ``setZeroIfNotFound`` (absent: True)."""
    group_knows_topic: bool
    """The group has a committed offset of some queue of the topic on this broker."""
    min_offset: int
    """The queue's smallest stored offset."""
    head_lag: int | None
    """Bytes from the queue's first message (offset 0) to the commit log's end; None when it has none."""


def answers_zero(facts: UnknownOffset, *, new_group_starts_at_end: bool, memory_limit: int) -> bool:
    """True: answer offset 0; False: answer QUERY_NOT_FOUND (``memory_limit``: the bytes that count as in memory)."""
    if not facts.zero_if_not_found:
        return False
    if new_group_starts_at_end and not facts.group_knows_topic:
        return False
    in_memory = facts.head_lag is None or facts.head_lag <= memory_limit
    return facts.min_offset <= 0 and in_memory


@dataclass(frozen=True, slots=True)
class PopStart:
    """The facts where a POP group starts depends on."""

    init_latest: bool
    """The request's ``initMode`` is MAX (1), not MIN (0)."""
    retry_topic: bool
    """The queue is a ``%RETRY%`` topic's."""
    group_knows_topic: bool
    """The group has a committed offset of some queue of the topic here."""
    min_offset: int
    max_offset: int
    head_lag: int | None
    """Bytes from the queue's first message (offset 0) to the commit log's end; None when it has none."""


def pop_start(facts: PopStart, *, check_in_memory: bool, new_group_starts_at_end: bool, memory_limit: int) -> int:
    """The offset a POP group without one starts at in a queue (``check_in_memory``: RocketMQ's
    ``initPopOffsetByCheckMsgInMem``; ``memory_limit``: the bytes that count as in memory)."""
    if not facts.init_latest or facts.retry_topic:
        return facts.min_offset
    if new_group_starts_at_end and not facts.group_knows_topic:
        return facts.max_offset
    in_memory = facts.head_lag is None or facts.head_lag <= memory_limit
    if check_in_memory and facts.min_offset <= 0 and in_memory:
        return 0
    return max(0, facts.max_offset - 1)
