"""A broker's term under automatic failover: its role in one epoch of its set, as its replication sees it.

The failover supervisor (``broker/failover``) builds one ``Term`` per role it runs a broker in; replication reads it
to know whom a replica follows, which epoch a link must be in, and whether a master may acknowledge now
(docs/failover.md §4).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Term"]


@dataclass(frozen=True)
class Term:
    """This broker's place in its set for one epoch."""

    broker_id: int
    epoch: int
    """The set's ``masterEpoch`` this term belongs to."""
    master_id: int
    master_address: str
    """The master's remoting address (this broker's own when it is the master)."""
    master_ha_address: str
    fence: Callable[[], str | None]
    """Why this master must not acknowledge now (its lease is not surely alive), or None."""
    sync_set: Callable[[], frozenset[int]] = frozenset
    """The SyncStateSet now (the master included), as the master keeps it; a replica's is its term's start's."""
    min_in_sync: int = 1
    """``minInSyncReplicas``: a master with fewer in sync refuses writes."""
    members: frozenset[int] = frozenset()
    """The SyncStateSet when the term began (a master waits for these replicas' copies from its first send)."""
    epochs: tuple[tuple[int, int], ...] = ()
    """The set's epoch history when the term began, ``(epoch, startOffset)`` (this broker's log follows it)."""
    cluster: str = ""
    broker_name: str = ""

    @property
    def is_master(self) -> bool:
        """True when this broker is the term's master."""
        return self.broker_id == self.master_id
