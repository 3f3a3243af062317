"""What etcd holds about one broker set under automatic failover, as plain data (docs/failover.md §2).

Two kinds of keys under the set's prefix (``/sievemq/<cluster>/<brokerName>/``):

* ``state`` (no lease): the set's ``SetState``, RocketMQ's names: the master's ``brokerId`` and addresses, its
  ``masterEpoch``, the ``SyncStateSet`` (broker ids whose copy a SYNC master waits for, the master included) with its
  own epoch, and the set's epoch history (``[epoch, startOffset]``: from which commit-log offset each master wrote).
  Written only by etcd transactions that compare its revision first.
* ``brokers/<brokerId>`` (attached to that broker's lease): a ``ReplicaInfo``, the broker's liveness and how much of
  the commit log it holds. A lease that expires removes it; a missing master key is what starts an election.

Pure: JSON in, values out; a value that does not parse is a ``ValueError`` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = ["ReplicaInfo", "SetState", "SetView", "handover_target"]

_MAX_EPOCHS = 1024
"""Epoch history entries kept in ``state`` (the oldest go first; a replica that old copies afresh)."""


def _int(d: Mapping[str, Any], key: str, lo: int = 0) -> int:
    v = d.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or v < lo:
        raise ValueError(f"{key} must be an integer >= {lo}, not {v!r}")
    return v


def _str(d: Mapping[str, Any], key: str) -> str:
    v = d.get(key, "")
    if not isinstance(v, str) or len(v) > 300:
        raise ValueError(f"{key} must be a string, not {v!r}")
    return v


def _object(raw: bytes) -> dict[str, Any]:
    try:
        d = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise ValueError(f"not JSON: {e}") from None
    if not isinstance(d, dict):
        raise ValueError("not a JSON object")
    return d


def handover_target(raw: bytes) -> int:
    """The broker id of a ``handover`` request (``{"brokerId": N, ...}``); ``ValueError`` when it is not one."""
    return _int(_object(raw), "brokerId", 1)


@dataclass(frozen=True)
class SetState:
    """The set's ``state`` key: who is master, in which epoch, and who is in sync."""

    master_id: int
    """The master's ``brokerId`` (RocketMQ's ``masterBrokerId``)."""
    master_address: str
    """The master's remoting address (``ip:port``)."""
    master_ha_address: str
    """Where its HA port is."""
    master_epoch: int
    sync_state_set: frozenset[int]
    """Broker ids in sync (the master included): a SYNC master acknowledges a send once each of them has it, and
    only one of them may become the next master."""
    sync_state_set_epoch: int
    epochs: tuple[tuple[int, int], ...] = field(default=())
    """``(epoch, startOffset)`` from the first epoch on: where each master started writing."""

    def __post_init__(self) -> None:
        if self.master_id not in self.sync_state_set:
            raise ValueError(f"the master {self.master_id} is not in its SyncStateSet {sorted(self.sync_state_set)}")
        last = (-1, -1)
        for epoch, start in self.epochs:
            if epoch <= last[0] or start < last[1]:
                raise ValueError(f"epoch history out of order at {[epoch, start]} after {list(last)}")
            last = (epoch, start)
        if self.epochs and self.epochs[-1][0] != self.master_epoch:
            raise ValueError(f"the history's last epoch {self.epochs[-1][0]} is not masterEpoch {self.master_epoch}")

    def to_json(self) -> bytes:
        """The ``state`` key's value."""
        return orjson.dumps({
            "masterBrokerId": self.master_id,
            "masterAddress": self.master_address,
            "masterHaAddress": self.master_ha_address,
            "masterEpoch": self.master_epoch,
            "syncStateSet": sorted(self.sync_state_set),
            "syncStateSetEpoch": self.sync_state_set_epoch,
            "epochs": [list(e) for e in self.epochs[-_MAX_EPOCHS:]],
        })  # fmt: skip

    @classmethod
    def from_json(cls, raw: bytes) -> SetState:
        """Parse a ``state`` value (``ValueError`` naming what is wrong)."""
        d = _object(raw)
        members = d.get("syncStateSet")
        if not isinstance(members, list) or not all(isinstance(m, int) and m > 0 for m in members):
            raise ValueError(f"syncStateSet must be a list of broker ids > 0, not {members!r}")
        history = d.get("epochs", [])
        if not isinstance(history, list) or not all(
            isinstance(e, list) and len(e) == 2 and all(isinstance(x, int) and x >= 0 for x in e) for e in history
        ):
            raise ValueError(f"epochs must be a list of [epoch, startOffset], not {history!r}")
        return cls(
            master_id=_int(d, "masterBrokerId", 1),
            master_address=_str(d, "masterAddress"),
            master_ha_address=_str(d, "masterHaAddress"),
            master_epoch=_int(d, "masterEpoch", 1),
            sync_state_set=frozenset(members),
            sync_state_set_epoch=_int(d, "syncStateSetEpoch", 1),
            epochs=tuple((int(e[0]), int(e[1])) for e in history),
        )

    def with_set(self, members: frozenset[int]) -> SetState:
        """The same master and epoch with another SyncStateSet (its epoch one higher)."""
        return SetState(self.master_id, self.master_address, self.master_ha_address, self.master_epoch, members,
                        self.sync_state_set_epoch + 1, self.epochs)  # fmt: skip

    def start_of(self, epoch: int) -> int | None:
        """Where ``epoch`` started, or None when the history does not have it."""
        return next((start for e, start in self.epochs if e == epoch), None)


@dataclass(frozen=True)
class ReplicaInfo:
    """A live broker of the set (its ``brokers/<id>`` key)."""

    broker_id: int
    address: str
    ha_address: str
    epoch: int
    """The last epoch in its history (0: none yet)."""
    max_offset: int
    """Its commit log's end when it last said."""

    def to_json(self) -> bytes:
        """The key's value."""
        return orjson.dumps({"brokerId": self.broker_id, "address": self.address, "haAddress": self.ha_address,
                             "epoch": self.epoch, "maxOffset": self.max_offset})  # fmt: skip

    @classmethod
    def from_json(cls, raw: bytes) -> ReplicaInfo:
        """Parse a ``brokers/<id>`` value."""
        d = _object(raw)
        return cls(_int(d, "brokerId", 1), _str(d, "address"), _str(d, "haAddress"), _int(d, "epoch"),
                   _int(d, "maxOffset"))  # fmt: skip


@dataclass(frozen=True)
class SetView:
    """One linearizable read of the set: its state (None before the first master), the state key's revision (0 when
    absent) and the live brokers by id."""

    state: SetState | None
    revision: int
    alive: Mapping[int, ReplicaInfo]
    leases: Mapping[int, int] = field(default_factory=dict)
    """The lease each live broker's key is attached to (a broker tells its own key from its previous run's)."""
    handover: int | None = None
    """The broker an operator asked the master to hand over to (``mqadmin electMaster``), or None."""

    @property
    def master_alive(self) -> bool:
        """True when the state names a master whose key is live."""
        return self.state is not None and self.state.master_id in self.alive
