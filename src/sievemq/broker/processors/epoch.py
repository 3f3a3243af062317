"""1007 GET_BROKER_EPOCH_CACHE: a broker's epoch history under automatic failover (``mqadmin getBrokerEpoch``).

RocketMQ 5's controller-mode broker answers with its ``EpochFileCache`` as an ``EpochEntryCache`` body::

    {"clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": 0,
     "epochList": [{"epoch": 1, "startOffset": 0, "endOffset": 4096},
                   {"epoch": 2, "startOffset": 4096, "endOffset": 9223372036854775807}],
     "maxOffset": 5120}

Each entry ends where the next one starts; the last one's ``endOffset`` is Java's ``Long.MAX_VALUE`` (the epoch is
still open; ``mqadmin`` prints the body's ``maxOffset`` in its place). ``brokerId`` is the broker's ``brokerId``
setting as RocketMQ's controller mode keeps it: 0 while the broker is the master, its own id while it is a replica.

sievemq's failover broker answers from its term (``ha.term.Term``): the epoch history it adopted when the term
began (``epochs.json``) and its store's commit-log end. A broker not under failover answers as RocketMQ's broker
outside controller mode does: SYSTEM_ERROR, ``this request only for controllerMode``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from sievemq.ha.term import Term
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.server import ProcessorTable
from sievemq.store import MessageStore

__all__ = ["OPEN_EPOCH_END", "EpochProcessor", "epoch_entry_cache"]

OPEN_EPOCH_END = (1 << 63) - 1
"""The last epoch's ``endOffset`` (Java's ``Long.MAX_VALUE``, what RocketMQ's ``EpochEntry`` starts with)."""
NOT_CONTROLLER_MODE = "this request only for controllerMode "
"""RocketMQ's remark, word for word (its trailing space included)."""


def epoch_entry_cache(
    cluster: str, broker_name: str, broker_id: int, epochs: Sequence[tuple[int, int]], max_offset: int
) -> dict[str, Any]:
    """The ``EpochEntryCache`` of an ``(epoch, startOffset)`` history, oldest first."""
    entries = [
        {"epoch": epoch, "startOffset": start, "endOffset": epochs[i + 1][1] if i + 1 < len(epochs) else OPEN_EPOCH_END}
        for i, (epoch, start) in enumerate(epochs)
    ]
    return {"clusterName": cluster, "brokerName": broker_name, "brokerId": broker_id, "epochList": entries,
            "maxOffset": max_offset}  # fmt: skip


@dataclass
class EpochProcessor:
    """Answers GET_BROKER_EPOCH_CACHE from the broker's failover term (None: not under failover)."""

    term: Term | None
    store: MessageStore
    broker_id: int
    """The broker's ``brokerId`` setting for this term (0 while master)."""

    def register(self, table: ProcessorTable) -> None:
        """Put 1007 into ``table``."""
        table.register(RequestCode.GET_BROKER_EPOCH_CACHE, self.epoch_cache)

    async def epoch_cache(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """1007 GET_BROKER_EPOCH_CACHE: the ``EpochEntryCache`` body."""
        term = self.term
        if term is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, NOT_CONTROLLER_MODE)
        body = epoch_entry_cache(term.cluster, term.broker_name, self.broker_id, term.epochs,
                                 self.store.max_phy_offset)  # fmt: skip
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps(body))
