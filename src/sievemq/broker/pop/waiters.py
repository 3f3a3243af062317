"""Orderly POPs waiting on locked queues (docs/pop.md §5): a long-polling orderly POP whose queues are locked waits
here until one of them is free (its last lease acked or dead-lettered) or a change of invisible time moved its lock,
so the next batch of a FIFO queue goes out as soon as the previous one is done, not when the poll times out."""

from __future__ import annotations

import asyncio

from sievemq.broker.pop.book import QueueKey

__all__ = ["LeaseWaiters"]


class LeaseWaiters:
    """Futures per (group, topic, queue), woken by ``changed``."""

    def __init__(self) -> None:
        self._waiting: dict[QueueKey, list[asyncio.Future[None]]] = {}

    def watch(self, key: QueueKey) -> asyncio.Future[None]:
        """A future done at the queue's next lease change."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, []).append(fut)
        return fut

    def release(self, key: QueueKey, fut: asyncio.Future[None]) -> None:
        """Forget ``fut`` (after it woke or the wait timed out)."""
        futs = self._waiting.get(key)
        if futs is None:
            return
        futs[:] = [f for f in futs if f is not fut]
        if not futs:
            del self._waiting[key]

    def watched(self, key: QueueKey) -> bool:
        """True when a POP waits on the queue."""
        return key in self._waiting

    def changed(self, key: QueueKey) -> None:
        """A lease of the queue ended or changed: wake its waiters."""
        for fut in self._waiting.get(key, ()):
            if not fut.done():
                fut.set_result(None)

    def waiting(self) -> int:
        """How many POPs wait."""
        return sum(len(f) for f in self._waiting.values())
