"""Queue locks for orderly consumption (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ): one holder per queue of a group. Pure.

A lock is held by a client id and expires ``LOCK_MAX_LIVE_SECONDS`` after its holder last (re)locked it, so a
crashed consumer's queues are free again within a minute, as in RocketMQ.
"""

from __future__ import annotations

__all__ = ["LOCK_MAX_LIVE_SECONDS", "Queue", "QueueLocks"]

LOCK_MAX_LIVE_SECONDS = 60.0

Queue = tuple[str, str, int]
"""(topic, broker name, queue id)."""


class QueueLocks:
    """group -> queue -> (holder client id, time of its last lock)."""

    def __init__(self, max_live: float = LOCK_MAX_LIVE_SECONDS) -> None:
        self.max_live = max_live
        self._table: dict[str, dict[Queue, tuple[str, float]]] = {}

    def lock(self, group: str, client_id: str, queues: list[Queue], now: float) -> list[Queue]:
        """Lock (or renew) each queue that is free, expired or already ``client_id``'s; returns those it holds."""
        table = self._table.setdefault(group, {})
        held = []
        for mq in queues:
            holder = table.get(mq)
            if holder is None or holder[0] == client_id or now - holder[1] > self.max_live:
                table[mq] = (client_id, now)
                held.append(mq)
        return held

    def unlock(self, group: str, client_id: str, queues: list[Queue]) -> None:
        """Release the queues ``client_id`` holds (others' locks stay)."""
        table = self._table.get(group, {})
        for mq in queues:
            if table.get(mq, ("",))[0] == client_id:
                del table[mq]

    def holder(self, group: str, mq: Queue, now: float) -> str | None:
        """The client holding ``mq`` for ``group`` now, if any."""
        h = self._table.get(group, {}).get(mq)
        return h[0] if h is not None and now - h[1] <= self.max_live else None
