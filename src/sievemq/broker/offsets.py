"""Consumer offsets per (topic, group, queue), persisted to ``config/consumerOffset.json``.

Format is RocketMQ's: ``{"offsetTable": {"<topic>@<group>": {"<queueId>": offset}}}``.

An offset reset (INVOKE_BROKER_TO_RESET_OFFSET, docs/admin.md §4) sets offsets and marks their queues *pending*:
until the group pulls such a queue from the new offset, its commits of it are ignored (a client still working
from its old position must not undo the reset), and its pulls from any other offset are told to move there
(``take_reset``), once ``RESET_GRACE_SECONDS`` have passed: a client told of the reset (RESET_CONSUMER_CLIENT_OFFSET)
moves by itself in that time, and a pull answered "moved" as well would make it drop the queue until its next
rebalance and consume it a third time. A mark lives in memory, for at most ``RESET_PENDING_SECONDS``.

A broker may hold 100,000 topics and their groups' offsets (docs/metrics.md §12): the groups of a topic and the topics
of a group are indexed (QUERY_TOPIC_CONSUME_BY_WHO, consume stats and group deletion do not walk the table), and a
snapshot to persist re-encodes only the entries that changed since the last one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sievemq.protocol.names import group_problem, topic_problem
from sievemq.store.jsonfile import atomic_write_json, read_json

RESET_GRACE_SECONDS = 15.0
"""How long after a reset a pull from elsewhere is still served as asked (RocketMQ's Java client acts on a reset 10 s
after it hears of it)."""
RESET_PENDING_SECONDS = 120.0
"""How long a reset holds back a group's commits at most: every client that was running has moved by then (a
RocketMQ client acts on a reset 10 s after it hears of it, and rebalances every 20 s)."""


class ConsumerOffsetManager:
    """Committed offsets of consumer groups."""

    def __init__(self, config_dir: Path, save: Callable[[Path, Any], None] = atomic_write_json) -> None:
        """``save(path, document)`` writes the file (the broker's ``ConfigWriter.save``: off the event loop)."""
        self.path = config_dir / "consumerOffset.json"
        self.table: dict[str, dict[int, int]] = {}
        self._dirty = False
        self._save = save
        self._resets: dict[tuple[str, str, int], tuple[int, float, float]] = {}
        """(group, topic, queue id) -> (the offset a reset set, monotonic deadline of the mark, monotonic time from
        which other pulls are told to move)."""
        self.clock: Callable[[], float] = time.monotonic
        self.pulled: dict[str, dict[int, int]] = {}
        """``topic@group`` -> queue id -> the offset the group's last pull of it was told to go on from (memory only,
        as RocketMQ's pullOffsetTable): what consume stats report as ``pullOffset``."""
        self._groups_of: dict[str, set[str]] = {}
        """Topic -> groups with an entry in ``table`` (kept by every method that adds or removes one)."""
        self._topics_of: dict[str, set[str]] = {}
        """Group -> topics with an entry in ``table``."""
        self._encoded: dict[str, dict[str, int]] = {}
        """``topic@group`` -> its entry as the persisted document writes it (every entry of ``table``, those in
        ``_changed`` as of the last snapshot)."""
        self._changed: set[str] = set()
        """Keys changed since the last snapshot (their ``_encoded`` entry is stale or missing)."""

    def _queues(self, topic: str, group: str) -> dict[int, int]:
        """The entry of (topic, group), made (and indexed) when there is none; marked changed."""
        key = f"{topic}@{group}"
        queues = self.table.get(key)
        if queues is None:
            queues = self.table[key] = {}
            self._groups_of.setdefault(topic, set()).add(group)
            self._topics_of.setdefault(group, set()).add(topic)
        self._changed.add(key)
        return queues

    def _drop(self, topic: str, group: str) -> None:
        """Remove the entry of (topic, group) and its index entries."""
        key = f"{topic}@{group}"
        self.table.pop(key, None)
        self._encoded.pop(key, None)
        self._changed.discard(key)
        for index, a, b in ((self._groups_of, topic, group), (self._topics_of, group, topic)):
            members = index.get(a)
            if members is not None:
                members.discard(b)
                if not members:
                    del index[a]

    def load(self) -> None:
        """Read the persisted table."""
        data = read_json(self.path, None) or {}
        for key, queues in (data.get("offsetTable") or {}).items():
            topic, _, group = str(key).partition("@")
            self._queues(topic, group).update({int(q): int(o) for q, o in queues.items()})

    def persist(self, force: bool = False) -> None:
        """Save the table if it changed since the last save (or ``force``)."""
        document = self.take_snapshot(force)
        if document is not None:
            self._save(self.path, document)

    def take_snapshot(self, force: bool = False, mark: bool = True) -> dict[str, Any] | None:
        """The document to write when the table changed since the last snapshot (or ``force``); marks it clean
        (unless not ``mark``: a copy for a replica)."""
        if not (self._dirty or force):
            return None
        encoded = self._encoded if mark else dict(self._encoded)
        for key in self._changed:
            queues = self.table.get(key)
            if queues is not None:
                encoded[key] = {str(q): o for q, o in sorted(queues.items())}
        if mark:
            self._dirty = False
            self._changed = set()
        # the entries in the order first written (RocketMQ's file has no order either): a copy of the outer dict,
        # not a sort of 100,000 keys every second the table changed
        return {"offsetTable": dict(encoded)}

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Store a committed offset (negative offsets, as ali-ons sends for untouched queues, are ignored)."""
        if offset < 0 or (self._resets and self.pending_reset(group, topic, queue_id) is not None):
            return
        queues = self.table.get(f"{topic}@{group}")
        if queues is None or queues.get(queue_id) != offset:
            self._queues(topic, group)[queue_id] = offset
            self._dirty = True

    def assign_reset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Set the group's offset of a queue to ``offset`` (a reset) and ignore the group's commits of it until it
        pulls the queue again (``take_reset``)."""
        self._queues(topic, group)[queue_id] = offset
        self._dirty = True
        now = self.clock()
        self._resets[(group, topic, queue_id)] = (offset, now + RESET_PENDING_SECONDS, now + RESET_GRACE_SECONDS)

    def take_reset(self, group: str, topic: str, queue_id: int, pulling_from: int) -> int | None:
        """A pull of the group from ``pulling_from`` while a reset of the queue is pending: the reset offset when the
        pull must move there; None when there is no pending reset, when the pull starts at the reset offset (the
        client has moved: the mark ends), or within ``RESET_GRACE_SECONDS`` of the reset (served as asked)."""
        offset = self.pending_reset(group, topic, queue_id)
        if offset is None:
            return None
        if offset == pulling_from:
            del self._resets[(group, topic, queue_id)]
            return None
        if self.clock() < self._resets[(group, topic, queue_id)][2]:
            return None
        return offset

    def pending_reset(self, group: str, topic: str, queue_id: int) -> int | None:
        """The offset of a reset the group has not pulled from yet (None when none, or when its mark expired)."""
        mark = self._resets.get((group, topic, queue_id))
        if mark is None:
            return None
        if self.clock() >= mark[1]:
            del self._resets[(group, topic, queue_id)]
            return None
        return mark[0]

    def merge_max(self, table: dict[str, Any]) -> int:
        """Take, per queue, the larger of ours and ``table``'s offset (RocketMQ's ``offsetTable`` form); returns how
        many queues moved. Replicas converge this way (docs/protocol/replication.md §4); ValueError if malformed."""
        moved = 0
        for key, queues in table.items():
            topic, sep, group = str(key).partition("@")
            if not sep or topic_problem(topic) or group_problem(group) or not isinstance(queues, dict):
                raise ValueError(f"bad offset table entry {str(key)[:80]!r}")
            mine = self.table.get(f"{topic}@{group}") or {}
            for q, o in queues.items():
                qid, off = int(q), int(o)
                if not 0 <= qid < 1 << 31 or not 0 <= off < 1 << 63:
                    raise ValueError(f"bad offset {o!r} of queue {q!r} in {str(key)[:80]!r}")
                if off > mine.get(qid, -1) and (not self._resets or self.pending_reset(group, topic, qid) is None):
                    mine = self._queues(topic, group)
                    mine[qid] = off
                    moved += 1
        if moved:
            self._dirty = True
        return moved

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1."""
        return self.table.get(f"{topic}@{group}", {}).get(queue_id, -1)

    def note_pulled(self, group: str, topic: str, queue_id: int, next_offset: int) -> None:
        """A pull of ``group`` was answered with ``next_offset`` (RocketMQ's ``commitPullOffset``); the caller has
        checked that the group and the queue exist, which bounds the table."""
        self.pulled.setdefault(f"{topic}@{group}", {})[queue_id] = next_offset

    def pulled_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        """Where the group's last pull of the queue left off (None: no pull since the broker started)."""
        return self.pulled.get(f"{topic}@{group}", {}).get(queue_id)

    def knows(self, group: str, topic: str) -> bool:
        """The group has committed an offset of some queue of ``topic``."""
        return bool(self.table.get(f"{topic}@{group}"))

    def groups_of_topic(self, topic: str) -> list[str]:
        """Groups with committed offsets on ``topic``."""
        return sorted(self._groups_of.get(topic, ()))

    def topics_of_group(self, group: str) -> list[str]:
        """Topics ``group`` has committed offsets of (no copy of the offsets: ``offsets_of_group`` makes one)."""
        return sorted(self._topics_of.get(group, ()))

    def offsets_of_group(self, group: str) -> dict[str, dict[int, int]]:
        """Topic -> queue -> offset for ``group``."""
        return {t: dict(self.table[f"{t}@{group}"]) for t in sorted(self._topics_of.get(group, ()))}

    def groups(self) -> set[str]:
        """Every group with a committed offset."""
        return set(self._topics_of)

    def remove_group(self, group: str) -> bool:
        """Forget every offset (and pending reset) of ``group``; True if it had any."""
        topics = sorted(self._topics_of.get(group, ()))
        for topic in topics:
            self._drop(topic, group)
        for r in [r for r in self._resets if r[0] == group]:
            del self._resets[r]
        for key in [k for k in self.pulled if k.partition("@")[2] == group]:
            del self.pulled[key]
        if topics:
            self._dirty = True
        return bool(topics)

    def remove_topic(self, topic: str) -> None:
        """Forget every offset of ``topic``."""
        for group in sorted(self._groups_of.get(topic, ())):
            self._drop(topic, group)
            self._dirty = True
        for key in [k for k in self.pulled if k.split("@", 1)[0] == topic]:
            del self.pulled[key]
