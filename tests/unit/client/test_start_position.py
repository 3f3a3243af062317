"""Where a queue without a committed offset starts (client/start_position.py): the plan, without I/O."""

from __future__ import annotations

from sievemq.client.message import ConsumeFrom, MessageQueue
from sievemq.client.start_position import Ask, StartPosition

Q0 = MessageQueue("T", "broker-a", 0)
Q1 = MessageQueue("T", "broker-a", 1)
NEW = MessageQueue("T", "broker-b", 0)
RETRY = MessageQueue("%RETRY%g", "broker-a", 0)


def test_last_starts_where_the_start_pinned_it_and_new_queues_at_their_first_message() -> None:
    pos = StartPosition(ConsumeFrom.LAST, 0, pinned={Q0: 42}, known={Q0, Q1})
    assert pos.plan(Q0) == 42
    assert pos.plan(Q1) is Ask.END, "known at start but not pinned (its broker did not answer): its end when taken"
    assert pos.plan(NEW) == 0, "not in any route at start: everything in it came after the start"
    assert pos.plan(RETRY) == 0


def test_first_and_timestamp() -> None:
    assert StartPosition(ConsumeFrom.FIRST, 0, pinned={Q0: 42}, known={Q0}).plan(Q0) == 0
    pos = StartPosition(ConsumeFrom.TIMESTAMP, 123, known={Q0})
    assert pos.plan(Q0) is Ask.TIME and pos.plan(NEW) is Ask.TIME
    assert pos.plan(RETRY) is Ask.END
