"""Subscription-group configs (retry queues, max retries, consume switches), persisted to
``config/subscriptionGroup.json`` in RocketMQ's format."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sievemq.store.jsonfile import atomic_write_json, read_json


@dataclass(slots=True)
class GroupConfig:
    """One consumer group's settings (RocketMQ SubscriptionGroupConfig defaults)."""

    groupName: str
    consumeEnable: bool = True
    consumeFromMinEnable: bool = True
    consumeBroadcastEnable: bool = True
    retryQueueNums: int = 1
    retryMaxTimes: int = 16
    brokerId: int = 0
    whichBrokerWhenConsumeSlowly: int = 1
    notifyConsumerIdsChangedEnable: bool = True


class SubscriptionGroupManager:
    """The broker's group table."""

    def __init__(
        self,
        config_dir: Path,
        auto_create: bool,
        max_reconsume_times: int,
        save: Callable[[Path, Any], None] = atomic_write_json,
    ) -> None:
        """``save(path, document)`` writes the file (the broker's ``ConfigWriter.save``: off the event loop)."""
        self.path = config_dir / "subscriptionGroup.json"
        self._save = save
        self.table: dict[str, GroupConfig] = {}
        self.auto_create = auto_create
        self.max_reconsume_times = max_reconsume_times

    def load(self) -> None:
        """Read the persisted table."""
        data = read_json(self.path, None) or {}
        fields = set(GroupConfig.__dataclass_fields__)
        for name, cfg in (data.get("subscriptionGroupTable") or {}).items():
            self.table[name] = GroupConfig(**{k: v for k, v in cfg.items() if k in fields})

    def persist(self) -> None:
        """Save the table."""
        self._save(self.path, {"subscriptionGroupTable": {n: asdict(c) for n, c in sorted(self.table.items())}})

    def find(self, group: str) -> GroupConfig | None:
        """The group's config; created with defaults when auto-creation is on."""
        cfg = self.table.get(group)
        if cfg is None and self.auto_create:
            cfg = GroupConfig(group, retryMaxTimes=self.max_reconsume_times)
            self.table[group] = cfg
            self.persist()
        return cfg

    def update(self, cfg: dict[str, Any]) -> GroupConfig:
        """Create or replace a group from RocketMQ's JSON form."""
        fields = set(GroupConfig.__dataclass_fields__)
        gc = GroupConfig(**{k: v for k, v in cfg.items() if k in fields})
        self.table[gc.groupName] = gc
        self.persist()
        return gc

    def delete(self, group: str) -> bool:
        """Remove a group; True if it existed."""
        if self.table.pop(group, None) is None:
            return False
        self.persist()
        return True
