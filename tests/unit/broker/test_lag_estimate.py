"""RocketMQ's consumer lag of a filtered group, estimated on the consume queue (broker/metrics/rocketmq_lag.py):
exact within its limits, extrapolated past them, and a whole scrape's reading bounded, so that many filtered groups
with deep backlogs cannot hold the broker's event loop for seconds."""

from __future__ import annotations

from sievemq.broker.metrics.rocketmq_lag import FilterEstimate, ScanBudget
from sievemq.filter.tags import TagExpression
from tests.unit.broker.conftest import Parts


class Counting:
    """The store, counting the consume-queue entries read through it."""

    def __init__(self, parts: Parts) -> None:
        self.store = parts.store
        self.read = 0

    def read_cq_entries(self, topic: str, queue_id: int, offset: int, n: int) -> list[tuple[int, int, int]]:
        entries = self.store.read_cq_entries(topic, queue_id, offset, n)
        self.read += len(entries)
        return entries


async def test_a_pass_reads_at_most_its_budget_then_counts_ranges_whole(parts: Parts) -> None:
    parts.topics.create_system_topic("T", 1)
    for i in range(300):
        await parts.put("T", b"x", TAGS="TagA" if i % 10 == 0 else "TagB")
    store = Counting(parts)
    codes = TagExpression.parse("TagA").codes
    exact = FilterEstimate(store, codes=codes, budget=ScanBudget(10_000))  # type: ignore[arg-type]
    assert exact.count("T", 0, 0, 300) == 30 and store.read == 300
    budget = ScanBudget(100)
    estimate = FilterEstimate(store, codes=codes, budget=budget)  # type: ignore[arg-type]
    store.read = 0
    assert estimate.count("T", 0, 0, 300) == 30, "100 entries read, 10 matched: 30 of 300 extrapolated"
    assert store.read == 100 and budget.left == 0
    assert estimate.count("T", 0, 0, 300) == 300, "no budget left: the whole range, nothing read"
    assert store.read == 100
