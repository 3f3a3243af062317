"""Read a topic with sievemq's push consumer until enough messages arrived (for tests against real processes)."""

from __future__ import annotations

import asyncio
from typing import Any

from sievemq import ConsumeResult, MessageExt, PushConsumer, Selector


async def consume(
    namesrv: str, topic: str, group: str, count: int, timeout: float = 30.0, **client: Any
) -> list[MessageExt]:
    """The first ``count`` (or more) messages of ``topic`` for a new ``group``, from its first offset; ``client``
    holds more PushConsumer arguments (TLS, say). TimeoutError when they do not all arrive in ``timeout`` s."""
    got: list[MessageExt] = []
    done = asyncio.Event()
    consumer = PushConsumer(namesrv, group, consume_from="first", rebalance_interval=1.0, **client)
    consumer.subscribe(topic, Selector.tag("*"))

    @consumer.listener
    async def take(msgs: list[MessageExt]) -> ConsumeResult:
        got.extend(msgs)
        if len(got) >= count:
            done.set()
        return ConsumeResult.SUCCESS

    await consumer.start()
    try:
        await asyncio.wait_for(done.wait(), timeout)
    finally:
        await consumer.close()
    return got
