"""Topic configurations held by a broker, persisted to ``config/topics.json`` (RocketMQ's wrapper format).

Also the topic rules: name validation, system topics, auto-creation from the TBW102 template, retry and
dead-letter topics.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson

from sievemq.broker.config_files import ConfigWriter
from sievemq.broker.config_journal import Journal
from sievemq.errors import RemotingError
from sievemq.protocol.names import (
    AUTO_CREATE_TOPIC_KEY,
    OFFSET_MOVED_EVENT,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    is_system_topic,
    reply_topic,
    topic_problem,
)
from sievemq.protocol.reasons import Reason
from sievemq.protocol.route import PERM_INHERIT, PERM_READ, PERM_WRITE, TopicConfig
from sievemq.remoting.codes import ResponseCode
from sievemq.store.jsonfile import atomic_write_json, read_json

log = logging.getLogger(__name__)


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def validate_topic_name(topic: str, code: int = ResponseCode.SYSTEM_ERROR) -> None:
    """Raise RemotingError (``code``: SYSTEM_ERROR as RocketMQ answers most requests, INVALID_PARAMETER as its sends;
    reason INVALID_NAME) when ``topic`` is not a legal name."""
    problem = topic_problem(topic)
    if problem is not None:
        raise RemotingError(code, problem, Reason.INVALID_NAME)


COMPACT_MIN_BYTES = 1 << 20
"""The journal is compacted into ``topics.json`` once it holds more than this, and more than ``topics.json``."""
COMPACT_IDLE_S = 2.0
"""And once no change came for this long (or ten times the last compaction's time, if longer): ``topics.json`` is
current a few seconds after a burst of changes, for whoever reads it."""


class _Snapshot:
    """The table at one instant (shallow copies: a ``TopicConfig`` in the table is never changed in place, it is
    replaced), encoded in the writer's thread as RocketMQ's TopicConfigSerializeWrapper."""

    def __init__(self, table: dict[str, TopicConfig], data_version: dict[str, int], covered: int) -> None:
        self.table, self.data_version, self.covered = table, data_version, covered
        self.size = 0

    def __call__(self) -> bytes:
        doc = {"dataVersion": self.data_version, "topicConfigTable": {n: tc.to_json() for n, tc in self.table.items()}}
        data = orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
        self.size = len(data)
        return data


def stored_topics(config_dir: Path) -> dict[str, dict[str, Any]]:
    """The topics ``config_dir`` holds on disk, as RocketMQ's TopicConfig JSON: ``topics.json`` with its journal
    replayed (what a broker loads; read-only, safe while the broker runs: a tool's or a test's view)."""
    path = config_dir / "topics.json"
    data = read_json(path, None) or {}
    table = dict(data.get("topicConfigTable") or {})
    for entry in Journal(path).replay():
        if isinstance(entry, dict) and isinstance(entry.get("put"), dict):
            table[str(entry["put"].get("topicName"))] = entry["put"]
        elif isinstance(entry, dict) and isinstance(entry.get("del"), str):
            table.pop(entry["del"], None)
    return table


class TopicConfigManager:
    """The broker's topic table (docs/topic-table.md)."""

    def __init__(
        self,
        config_dir: Path,
        broker_name: str,
        cluster_name: str,
        default_queue_nums: int,
        auto_create_topic_enable: bool,
        save: Callable[[Path, Any], None] = atomic_write_json,
        settled: Callable[[Path], Awaitable[None]] | None = None,
        max_topics: int = 1_000_000,
        writer: ConfigWriter | None = None,
    ) -> None:
        """``writer``: the broker's ``ConfigWriter``: changes go to the journal, ``topics.json`` is rewritten by
        compactions (docs/topic-table.md). Without it: ``save(path, document)`` writes the whole file at each change
        and ``settled(path)`` waits until it is on disk (None: ``save`` is synchronous). ``max_topics``:
        ``check_room``'s limit."""
        self.max_topics = max_topics
        self.path = config_dir / "topics.json"
        self._save = save
        self._settled = settled
        self._writer = writer
        self.journal: Journal | None = Journal(self.path) if writer is not None else None
        self._compacting = False
        self._compaction_started = 0.0
        self._compaction_took = 0.0
        self._idle: asyncio.TimerHandle | None = None
        self._snapshot_bytes = 0
        """The size of the last ``topics.json`` written or read."""
        self.revision = 0
        """Counts changes of the table in this process (a request that changed it waits for ``saved``)."""
        self.table: dict[str, TopicConfig] = {}
        """Read freely; change only through this class's methods (a ``TopicConfig`` in it is never changed in
        place: ``update`` replaces it)."""
        self.data_version: dict[str, int] = {"counter": 0, "timestamp": int(time.time() * 1000)}
        self.auto_create = auto_create_topic_enable
        self.default_queue_nums = default_queue_nums
        self.on_change: Callable[[], None] | None = None
        self._counted, self._counted_len = 0, -1
        self._names: list[str] | None = None
        """The table's names sorted (GET_ALL_TOPIC_CONFIG's pages), None after a change."""
        self._system_topics(broker_name, cluster_name)

    def _system_topics(self, broker_name: str, cluster_name: str) -> None:
        self._own = frozenset((cluster_name, broker_name, reply_topic(cluster_name)))
        """Topics the broker makes for itself whose names are not system names."""
        n = self.default_queue_nums
        rw = PERM_READ | PERM_WRITE
        self.table[SELF_TEST_TOPIC] = TopicConfig(SELF_TEST_TOPIC, 1, 1)
        if self.auto_create:
            self.table[AUTO_CREATE_TOPIC_KEY] = TopicConfig(AUTO_CREATE_TOPIC_KEY, n, n, rw | PERM_INHERIT)
        self.table[cluster_name] = TopicConfig(cluster_name, 16, 16, rw)
        self.table[broker_name] = TopicConfig(broker_name, 1, 1, rw)
        self.table[OFFSET_MOVED_EVENT] = TopicConfig(OFFSET_MOVED_EVENT, 1, 1)
        self.table[SCHEDULE_TOPIC] = TopicConfig(SCHEDULE_TOPIC, 18, 18)
        self.table[reply_topic(cluster_name)] = TopicConfig(reply_topic(cluster_name), 1, 1, rw)

    # ------------------------------------------------------------------ disk
    def load(self) -> None:
        """Read the persisted table (system topics stay), then replay the journal onto it."""
        data = read_json(self.path, None)
        if data:
            for name, tc in (data.get("topicConfigTable") or {}).items():
                try:
                    self.table[name] = TopicConfig.from_json(tc)
                except (ValueError, KeyError, TypeError, AttributeError) as e:
                    log.error("%s: topic %.160r skipped: %s", self.path, name, e)
            self._set_version(data.get("dataVersion"))
            with contextlib.suppress(OSError):
                self._snapshot_bytes = self.path.stat().st_size
        if self.journal is not None:
            entries = self.journal.replay()
            for entry in entries:
                self._apply(entry)
            self.journal.size = sum(p.stat().st_size for _, p in self.journal.generations())
            if entries:
                log.info("%s: %d changes replayed from its journal", self.path, len(entries))
        self._names, self._counted_len = None, -1

    def _set_version(self, dv: Any) -> None:
        dv = dv if isinstance(dv, dict) else {}
        try:
            self.data_version = {"counter": int(dv.get("counter", 0)), "timestamp": int(dv.get("timestamp", 0))}
        except (TypeError, ValueError):
            log.error("%s: data version %.100r skipped", self.path, dv)

    def _apply(self, entry: Any) -> None:
        """One journal entry: ``{"put": TopicConfig JSON}`` or ``{"del": name}``, with the ``dv`` after it."""
        if not isinstance(entry, dict):
            return
        try:
            if "put" in entry:
                tc = TopicConfig.from_json(entry["put"])
                self.table[tc.topic_name] = tc
            elif isinstance(entry.get("del"), str):
                self.table.pop(entry["del"], None)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            log.error("%s journal: entry %.200r skipped: %s", self.path, entry, e)
        if "dv" in entry:
            self._set_version(entry["dv"])

    def persist(self) -> None:
        """Save the whole table (with a ``writer``: a compaction, in the writer's thread)."""
        if self._writer is None:
            self._save(self.path, self.wrapper())
        else:
            self._compacting = True
            self._writer.save_lazy(self.path, self._take, self._written)

    def _take(self) -> _Snapshot:
        """On the loop, when the writer starts a write: the table now; the journal's entries so far are in it."""
        covered = self.journal.rotate() if self.journal is not None else -1
        self._compaction_started = time.monotonic()
        return _Snapshot(dict(self.table), dict(self.data_version), covered)

    def _written(self, encode: Callable[[], bytes], error: OSError | None) -> None:
        self._compacting = False
        self._compaction_took = time.monotonic() - self._compaction_started
        if error is not None or not isinstance(encode, _Snapshot):
            return  # the journal keeps the changes; the next change tries again
        self._snapshot_bytes = encode.size
        if self.journal is not None and encode.covered >= 0:
            self.journal.retire(encode.covered)
        if self.journal is not None and self.journal.size > 0 and _loop_running():  # changes came meanwhile
            self._compact_when_idle()

    def wrapper(self) -> dict[str, Any]:
        """TopicConfigSerializeWrapper JSON (not sorted)."""
        return {
            "dataVersion": dict(self.data_version),
            "topicConfigTable": {name: tc.to_json() for name, tc in self.table.items()},
        }

    def page(self, begin: int, count: int) -> dict[str, TopicConfig]:
        """Topics ``begin .. begin+count-1`` in name order (GET_ALL_TOPIC_CONFIG's pages)."""
        if self._names is None:
            self._names = sorted(self.table)
        return {n: self.table[n] for n in self._names[begin : begin + count] if n in self.table}

    def _compact_when_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
        delay = max(COMPACT_IDLE_S, 10 * self._compaction_took)
        self._idle = asyncio.get_running_loop().call_later(delay, self._idle_compaction)

    def _idle_compaction(self) -> None:
        self._idle = None
        if self.journal is not None and self.journal.size > 0 and not self._compacting:
            self.persist()

    async def close(self) -> None:
        """Wait for the journal's pending appends and stop its thread."""
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        if self.journal is not None:
            await self.journal.close()

    async def saved(self) -> None:
        """Wait until the table as it is now is on disk: a send that created a topic answers after this, so a
        ``kill -9`` right after the answer cannot leave its message under a topic the broker forgot. OSError
        when the write failed."""
        if self.journal is not None:
            await self.journal.synced()
        elif self._settled is not None:
            await self._settled(self.path)

    async def saved_since(self, revision: int, what: str = "message") -> None:
        """``saved`` if the table changed since ``revision`` (a request's topic creations); a failed write is
        SYSTEM_ERROR saying so (the ``what`` is stored, but a restart before the next good write forgets its
        topic)."""
        if self.revision == revision:
            return
        try:
            await self.saved()
        except OSError as e:
            raise RemotingError(
                ResponseCode.SYSTEM_ERROR,
                f"the {what} is stored, but the topic created for it could not be saved to {self.path} ({e}); "
                "free space there: the broker saves it again with the next topic change",
            ) from None

    def _changed(self, entries: list[dict[str, Any]], data_version: dict[str, int] | None = None) -> None:
        """Record changes already made to ``table``: a new data version, the journal (or the whole file)."""
        self.revision += 1
        self._names = None
        if data_version is None:
            data_version = {"counter": self.data_version["counter"] + 1, "timestamp": int(time.time() * 1000)}
        self.data_version = data_version
        if entries:
            entries[-1]["dv"] = dict(data_version)
        else:
            entries = [{"dv": dict(data_version)}]
        if self.journal is not None and _loop_running():
            for entry in entries:
                self.journal.append(entry)
            if not self._compacting and self.journal.size > max(COMPACT_MIN_BYTES, self._snapshot_bytes):
                self.persist()
            else:
                self._compact_when_idle()
        else:
            self.persist()
        if self.on_change is not None:
            self.on_change()

    def replace_all(self, wrapper: dict[str, Any], merge: bool = False) -> bool:
        """Hold exactly the topics of a master's TopicConfigSerializeWrapper (a slave's copy), or with ``merge``
        ours and theirs (theirs winning: a master recovering from a slave); True if it changed."""
        table: dict[str, TopicConfig] = dict(self.table) if merge else {}
        for name, tc in (wrapper.get("topicConfigTable") or {}).items():
            try:
                table[name] = TopicConfig.from_json(tc)
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                log.error("master's topic %.160r skipped: %s", name, e)
        if table == self.table:
            return False
        entries: list[dict[str, Any]] = [{"del": n} for n in self.table if n not in table]
        entries += [{"put": tc.to_json()} for n, tc in table.items() if self.table.get(n) != tc]
        self.table, self._counted_len = table, -1
        dv = wrapper.get("dataVersion") or {}
        self._changed(entries, {"counter": int(dv.get("counter", 0)), "timestamp": int(dv.get("timestamp", 0))})
        return True

    def get(self, topic: str) -> TopicConfig | None:
        """The config of ``topic`` or None."""
        return self.table.get(topic)

    def update(self, tc: TopicConfig) -> None:
        """Create or replace a topic."""
        self.update_many([tc])

    def update_many(self, configs: list[TopicConfig]) -> None:
        """Create or replace topics: one change (one data version, one journal write) for all."""
        entries = []
        for tc in configs:
            old = self.table.get(tc.topic_name)
            if old == tc:
                continue
            self.table[tc.topic_name] = tc
            if old is None and self._counted_len == len(self.table) - 1:  # else counted again when asked
                self._counted += self._counts(tc.topic_name)
                self._counted_len = len(self.table)
            if len(configs) < 20:
                log.info("topic %s: %s", "created" if old is None else "updated", tc)
            entries.append({"put": tc.to_json()})
        if entries:
            if len(configs) >= 20:
                log.info("%d topics created or updated", len(entries))
            self._changed(entries)

    def delete(self, topic: str) -> bool:
        """Remove a topic; True if it existed."""
        if self.table.pop(topic, None) is None:
            return False
        if self._counted_len == len(self.table) + 1:
            self._counted -= self._counts(topic)
            self._counted_len = len(self.table)
        else:
            self._counted_len = -1
        log.info("topic %s deleted", topic)
        self._changed([{"del": topic}])
        return True

    def _counts(self, topic: str) -> bool:
        return topic not in self._own and not is_system_topic(topic)

    def counted(self) -> int:
        """Topics that count toward ``max_topics``: not the broker's own system topics, not retry or DLQ topics
        (those are bounded by the groups' limit). O(1): kept up to date, counted again only when the table was
        changed other than through this class."""
        if self._counted_len != len(self.table):
            self._counted = sum(1 for t in self.table if self._counts(t))
            self._counted_len = len(self.table)
        return self._counted

    def check_room(self, topic: str) -> None:
        """Raise RemotingError (SYSTEM_ERROR, reason TOO_MANY_TOPICS) when creating ``topic`` would pass
        ``max_topics``; a topic that exists, or one that does not count, always has room."""
        self.check_room_for([topic])

    def check_room_for(self, topics: list[str]) -> None:
        """``check_room`` for creating all of ``topics`` at once."""
        new = {t for t in topics if t not in self.table and self._counts(t)}
        if new and self.counted() + len(new) > self.max_topics:
            topic = next(iter(new)) if len(new) == 1 else f"{len(new)} topics, {min(new)}..."
            raise RemotingError(
                ResponseCode.SYSTEM_ERROR,
                f"topic [{topic}] not created: this broker holds {self.counted()} of maxTopics ({self.max_topics}) "
                "topics already; use an existing topic, delete unused ones (sievemq topic delete) or raise maxTopics",
                Reason.TOO_MANY_TOPICS,
            )

    def create_in_send(self, topic: str, default_topic: str, request_queue_nums: int) -> TopicConfig | None:
        """Auto-create ``topic`` from template ``default_topic`` (RocketMQ's createTopicInSendMessageMethod);
        RemotingError TOO_MANY_TOPICS past ``max_topics``."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        self.check_room(topic)
        template = self.table.get(default_topic or AUTO_CREATE_TOPIC_KEY)
        if template is None and self.auto_create:
            template = self.table.get(AUTO_CREATE_TOPIC_KEY)
        if template is None or not template.perm & PERM_INHERIT:
            return None
        queues = max(1, min(request_queue_nums or template.write_queue_nums, template.write_queue_nums))
        tc = TopicConfig(topic, queues, queues, template.perm & ~PERM_INHERIT)
        self.update(tc)
        return tc

    def create_system_topic(self, topic: str, queue_nums: int, perm: int = PERM_READ | PERM_WRITE) -> TopicConfig:
        """Find or create a retry/DLQ topic."""
        tc = self.table.get(topic)
        if tc is None:
            tc = TopicConfig(topic, queue_nums, queue_nums, perm)
            self.update(tc)
        return tc
