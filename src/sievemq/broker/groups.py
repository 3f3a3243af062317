"""Subscription-group configs (retry queues, max retries, consume switches), persisted to
``config/subscriptionGroup.json`` in RocketMQ's format."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from sievemq.broker.config_files import ConfigWriter
from sievemq.errors import RemotingError
from sievemq.protocol.names import IllegalName, group_problem
from sievemq.protocol.reasons import Reason
from sievemq.protocol.route import json_int
from sievemq.remoting.codes import ResponseCode
from sievemq.store.jsonfile import atomic_write_json, read_json

log = logging.getLogger(__name__)

_INT64_MAX = (1 << 63) - 1
_INT_RANGES = {
    "retryQueueNums": (0, 1024),
    "retryMaxTimes": (-1, (1 << 31) - 1),
    "brokerId": (0, _INT64_MAX),
    "whichBrokerWhenConsumeSlowly": (0, _INT64_MAX),
}


@dataclass(slots=True)
class GroupConfig:
    """One consumer group's settings (RocketMQ SubscriptionGroupConfig defaults)."""

    groupName: str
    consumeEnable: bool = True
    consumeFromMinEnable: bool = True
    consumeBroadcastEnable: bool = True
    consumeMessageOrderly: bool = False
    """A FIFO group: its 5.x consumers are told ``fifo`` and receive by orderly POP (docs/pop.md §5)."""
    retryQueueNums: int = 1
    retryMaxTimes: int = 16
    brokerId: int = 0
    whichBrokerWhenConsumeSlowly: int = 1
    notifyConsumerIdsChangedEnable: bool = True

    @classmethod
    def from_json(cls, cfg: Any) -> GroupConfig:
        """RocketMQ's SubscriptionGroupConfig JSON, checked: a legal name, booleans, integers in range (ValueError)."""
        if not isinstance(cfg, dict):
            raise ValueError("a SubscriptionGroupConfig must be a JSON object")
        name = cfg.get("groupName")
        problem = group_problem(name) if isinstance(name, str) else "groupName must be a string"
        if problem is not None:
            raise IllegalName(problem)
        kw: dict[str, Any] = {"groupName": name}
        for f in fields(cls):
            if f.name == "groupName" or f.name not in cfg:
                continue
            if f.name in _INT_RANGES:
                kw[f.name] = json_int(cfg, f.name, 0, *_INT_RANGES[f.name])
            elif isinstance(cfg[f.name], bool):
                kw[f.name] = cfg[f.name]
            else:
                raise ValueError(f"{f.name} must be true or false, got {str(cfg[f.name])[:40]}")
        return cls(**kw)


def encode_groups(table: dict[str, GroupConfig], option: int = 0) -> bytes:
    """``{"subscriptionGroupTable": ...}`` as RocketMQ's JSON, sorted (orjson encodes the dataclasses directly)."""
    return orjson.dumps({"subscriptionGroupTable": table}, option=option | orjson.OPT_SORT_KEYS)


class SubscriptionGroupManager:
    """The broker's group table."""

    def __init__(
        self,
        config_dir: Path,
        auto_create: bool,
        max_reconsume_times: int,
        save: Callable[[Path, Any], None] = atomic_write_json,
        max_groups: int = 1_000_000,
        writer: ConfigWriter | None = None,
    ) -> None:
        """``save(path, document)`` writes the file (the broker's ``ConfigWriter.save``: off the event loop);
        ``writer``: instead, the table is snapshotted once per actual write and encoded in the writer's thread
        (docs/topic-table.md §6); ``max_groups``: how many groups the table holds at most
        (``maxSubscriptionGroups``)."""
        self.max_groups = max_groups
        self.path = config_dir / "subscriptionGroup.json"
        self._save = save
        self._writer = writer
        self.table: dict[str, GroupConfig] = {}
        self.auto_create = auto_create
        self.max_reconsume_times = max_reconsume_times

    def load(self) -> None:
        """Read the persisted table."""
        data = read_json(self.path, None) or {}
        for name, cfg in (data.get("subscriptionGroupTable") or {}).items():
            try:
                self.table[name] = GroupConfig.from_json(cfg)
            except ValueError as e:
                log.error("%s: group %.160r skipped: %s", self.path, name, e)

    def persist(self) -> None:
        """Save the table (a ``GroupConfig`` in it is never changed in place, it is replaced: a shallow copy is a
        consistent snapshot)."""
        if self._writer is not None:
            self._writer.save_lazy(self.path, self._take)
        else:
            self._save(self.path, {"subscriptionGroupTable": {n: asdict(c) for n, c in sorted(self.table.items())}})

    def _take(self) -> Callable[[], bytes]:
        return partial(encode_groups, dict(self.table), orjson.OPT_INDENT_2)

    def find(self, group: str) -> GroupConfig | None:
        """The group's config; created with defaults when auto-creation is on and ``group`` is a legal name, as
        RocketMQ creates one (RemotingError TOO_MANY_GROUPS when the table is full)."""
        cfg = self.table.get(group)
        if cfg is None and self.auto_create and group_problem(group) is None:
            self.check_room(group)
            cfg = GroupConfig(group, retryMaxTimes=self.max_reconsume_times)
            self.table[group] = cfg
            self.persist()
        return cfg

    def get(self, group: str) -> GroupConfig | None:
        """The group's config, never creating it."""
        return self.table.get(group)

    def check_room(self, group: str) -> None:
        """Raise RemotingError (SUBSCRIPTION_GROUP_NOT_EXIST, reason TOO_MANY_GROUPS) when creating ``group`` would
        pass ``max_groups``."""
        if group not in self.table and len(self.table) >= self.max_groups:
            raise RemotingError(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"consumer group [{group}] not created: this broker holds maxSubscriptionGroups ({self.max_groups}) "
                "groups already; delete unused ones (sievemq group delete) or raise maxSubscriptionGroups",
                Reason.TOO_MANY_GROUPS,
            )

    def update(self, cfg: dict[str, Any]) -> GroupConfig:
        """Create or replace a group from RocketMQ's JSON form (ValueError for an illegal one; RemotingError
        TOO_MANY_GROUPS for a new one past ``max_groups``)."""
        gc = GroupConfig.from_json(cfg)
        self.check_room(gc.groupName)
        self.table[gc.groupName] = gc
        self.persist()
        return gc

    def replace_all(self, table: dict[str, Any], merge: bool = False) -> bool:
        """Hold exactly the groups of a master's ``subscriptionGroupTable`` (a slave's copy), or with ``merge`` ours
        and theirs (theirs winning); True if it changed."""
        new: dict[str, GroupConfig] = dict(self.table) if merge else {}
        for name, cfg in table.items():
            try:
                new[name] = GroupConfig.from_json(cfg)
            except ValueError as e:
                log.error("master's group %.160r skipped: %s", name, e)
        if new == self.table:
            return False
        self.table = new
        self.persist()
        return True

    def delete(self, group: str) -> bool:
        """Remove a group; True if it existed."""
        if self.table.pop(group, None) is None:
            return False
        self.persist()
        return True
