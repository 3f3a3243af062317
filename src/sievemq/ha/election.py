"""Deciding, apart from doing: who becomes master, who is in sync, what a returning replica must cut (pure).

The functions here read a ``SetView`` (one read of etcd) and local facts, and say what to write; ``etcd_set.py``
writes it with a transaction that compares the state's revision first, so two brokers deciding at once cannot both
win (docs/failover.md §3).

* ``bootstrap``: the first broker of a set with no state becomes master of epoch 1.
* ``elect``: when the state's master has no live key, an in-sync live broker takes over with the next epoch; the
  best-placed one (the highest epoch, then the longest log, then the lowest id) at once, any other only after
  ``grace_s`` without a master (the best one may be stuck). Without a live in-sync broker nobody is elected, unless
  ``unclean`` (RocketMQ's ``enableElectUncleanMaster``) lets any live broker take over, losing what it lacks.
* ``sync_set_change``: the master drops a member that has not caught up for ``max_not_catchup_s`` (or whose link
  closed ``link_grace_s`` ago) and adds a live broker that has caught up.
* ``truncation_point``: how much of its log a broker keeps before following a master (an old master coming back
  holds bytes that no later master has; RocketMQ's epoch comparison).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sievemq.ha.set_state import ReplicaInfo, SetState, SetView
from sievemq.store.epochs import EpochHistory, consistent_point

__all__ = ["Progress", "bootstrap", "elect", "sync_set_change", "truncation_point"]


def bootstrap(me: ReplicaInfo) -> SetState:
    """The state of a set whose first master is ``me`` (epoch 1, starting at its log's end)."""
    return SetState(me.broker_id, me.address, me.ha_address, 1, frozenset({me.broker_id}), 1, ((1, me.max_offset),))


def _rank(info: ReplicaInfo) -> tuple[int, int, int]:
    return (info.epoch, info.max_offset, -info.broker_id)


def elect(view: SetView, me: ReplicaInfo, *, masterless_for: float, grace_s: float, unclean: bool) -> SetState | None:
    """The new state if ``me`` should take over now (its log ends at ``me.max_offset``), else None.

    ``masterless_for``: how long this broker has seen the set without a live master."""
    state = view.state
    if state is None or view.master_alive or me.broker_id not in view.alive:
        return None
    candidates = [a for a in view.alive.values() if a.broker_id in state.sync_state_set]
    if not candidates and unclean:
        candidates = list(view.alive.values())
    if me.broker_id not in {c.broker_id for c in candidates}:
        return None
    best = max(candidates, key=_rank)
    if best.broker_id != me.broker_id and masterless_for < grace_s:
        return None
    epoch = state.master_epoch + 1
    history = (*state.epochs, (epoch, me.max_offset))
    return SetState(me.broker_id, me.address, me.ha_address, epoch, frozenset({me.broker_id}),
                    state.sync_state_set_epoch + 1, history)  # fmt: skip


@dataclass(frozen=True)
class Progress:
    """What the master knows of one replica's copy (``HAServer.progress``)."""

    acked: int
    """The replica's newest reported commit-log end."""
    caught_up_at: float
    """When it last reported holding everything the master held at that moment (monotonic seconds)."""
    connected: bool
    changed_at: float
    """When its link opened or closed last."""


def sync_set_change(
    state: SetState,
    alive: Mapping[int, ReplicaInfo],
    progress: Mapping[int, Progress],
    now: float,
    *,
    max_not_catchup_s: float,
    link_grace_s: float,
) -> frozenset[int] | None:
    """The SyncStateSet the master (``state.master_id``) should write, or None to keep it."""
    me = state.master_id
    members = set(state.sync_state_set)
    for bid in sorted(members - {me}):
        p = progress.get(bid)
        if (
            p is None
            or now - p.caught_up_at > max_not_catchup_s
            or (not p.connected and now - p.changed_at > link_grace_s)
        ):
            members.discard(bid)
    for bid, p in progress.items():
        if bid not in members and bid in alive and p.connected and now - p.caught_up_at <= link_grace_s:
            members.add(bid)
    new = frozenset(members)
    return None if new == state.sync_state_set else new


def truncation_point(mine: tuple[tuple[int, int], ...], my_end: int, theirs: tuple[tuple[int, int], ...]) -> int:
    """The offset up to which a log with history ``mine`` (ending at ``my_end``) is the same as the master's, whose
    history is ``theirs`` and whose last epoch is still open: keep that much, cut the rest (``consistent_point``).

    Bytes written before any epoch (a store that ran before failover was switched on) count as one epoch 0 from
    offset 0 on both sides (their agreement is checked by HA_CHECK's CRC when the link opens)."""
    first = ((0, 0),)
    return consistent_point(EpochHistory(first + mine), my_end, EpochHistory(first + theirs), None)
