"""Group reads over every replica of a broker set (admin/progress.py ``merge_replicas``): a master back from an
outage may not yet have the offsets its slave took while it was away (issue 33 item 2); the merged view keeps the
highest committed offset and queue end of each queue, whichever replica has it."""

from __future__ import annotations

from sievemq.admin.progress import merge_replicas
from sievemq.protocol.admin_bodies import ConsumeStats, OffsetWrapper
from sievemq.protocol.mq_json import QueueKey

Q0, Q1, Q2 = (QueueKey("Orders", "broker-a", q) for q in range(3))


def test_a_master_without_the_groups_offsets_is_filled_in_by_its_slave() -> None:
    master = ConsumeStats({})
    slave = ConsumeStats({Q0: OffsetWrapper(10, 8, 8, 111), Q1: OffsetWrapper(5, 5, 5, 222)})
    assert merge_replicas([master, slave]).offsets == slave.offsets


def test_each_queue_takes_the_highest_commit_and_the_highest_end() -> None:
    master = ConsumeStats(
        {Q0: OffsetWrapper(12, 4, 6, 100), Q1: OffsetWrapper(7, 7, 7, 300), Q2: OffsetWrapper(3, 0, 0, 0)}
    )
    slave = ConsumeStats({Q0: OffsetWrapper(10, 8, 8, 200), Q1: OffsetWrapper(9, 6, 6, 250)})
    merged = merge_replicas([master, slave]).offsets
    assert merged[Q0] == OffsetWrapper(12, 8, 8, 200)  # the slave's commit, the master's end
    assert merged[Q1] == OffsetWrapper(9, 7, 7, 300)  # the master's commit, the slave's end
    assert merged[Q2] == master.offsets[Q2]


def test_one_replica_is_its_own_view() -> None:
    only = ConsumeStats({Q0: OffsetWrapper(1, 1, 1, 1)}, consume_tps=2.5)
    assert merge_replicas([only]) == only
