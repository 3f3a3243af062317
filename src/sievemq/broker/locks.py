"""Queue locks for orderly consumption (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ): one holder per queue of a group. Pure.

A lock is held by a client id and expires ``LOCK_MAX_LIVE_SECONDS`` after its holder last (re)locked it, so a
crashed consumer's queues are free again within a minute, as in RocketMQ.
"""

from __future__ import annotations

from typing import Any

from sievemq.errors import RemotingError
from sievemq.protocol.header_rules import check_name
from sievemq.protocol.reasons import Reason
from sievemq.protocol.route import json_int
from sievemq.remoting.codes import ResponseCode

__all__ = ["LOCK_MAX_LIVE_SECONDS", "MAX_LOCK_QUEUES", "Queue", "QueueLocks", "lock_request"]

LOCK_MAX_LIVE_SECONDS = 60.0
MAX_LOCK_QUEUES = 4096
"""Queues one LOCK_BATCH_MQ / UNLOCK_BATCH_MQ may name (a consumer locks the queues it was allocated)."""

Queue = tuple[str, str, int]
"""(topic, broker name, queue id)."""


def _bad(what: str) -> RemotingError:
    return RemotingError(ResponseCode.SYSTEM_ERROR, f"malformed lock request: {what}", Reason.INVALID_HEADER)


def lock_request(body: dict[str, Any]) -> tuple[str, str, list[Queue]]:
    """``(consumerGroup, clientId, queues)`` of a Lock/UnlockBatchRequestBody, checked (RemotingError if not)."""
    group, client, mq_set = body.get("consumerGroup"), body.get("clientId"), body.get("mqSet") or []
    if not isinstance(group, str) or not isinstance(client, str) or not client:
        raise _bad("consumerGroup and clientId must be strings")
    check_name("consumerGroup", group)
    if not isinstance(mq_set, list) or len(mq_set) > MAX_LOCK_QUEUES:
        raise _bad(f"mqSet must be a list of at most {MAX_LOCK_QUEUES} queues")
    queues: list[Queue] = []
    for m in mq_set:
        if not isinstance(m, dict):
            raise _bad("each mqSet entry must be an object")
        topic, broker = m.get("topic"), m.get("brokerName")
        if not isinstance(topic, str) or not isinstance(broker, str):
            raise _bad("topic and brokerName must be strings")
        try:
            qid = json_int(m, "queueId", -1, 0)
        except ValueError as e:
            raise _bad(str(e)) from None
        check_name("topic", topic)
        check_name("brokerName", broker)
        queues.append((topic, broker, qid))
    return group, client, queues


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
