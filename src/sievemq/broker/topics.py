"""Topic configurations held by a broker, persisted to ``config/topics.json`` (RocketMQ's wrapper format).

Also the topic rules: name validation, system topics, auto-creation from the TBW102 template, retry and
dead-letter topics.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

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


def validate_topic_name(topic: str, code: int = ResponseCode.SYSTEM_ERROR) -> None:
    """Raise RemotingError (``code``: SYSTEM_ERROR as RocketMQ answers most requests, INVALID_PARAMETER as its sends;
    reason INVALID_NAME) when ``topic`` is not a legal name."""
    problem = topic_problem(topic)
    if problem is not None:
        raise RemotingError(code, problem, Reason.INVALID_NAME)


class TopicConfigManager:
    """The broker's topic table."""

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
    ) -> None:
        """``save(path, document)`` writes the file (the broker's ``ConfigWriter.save``: off the event loop);
        ``settled(path)`` waits until what was saved is on disk (``ConfigWriter.settled``; None: ``save`` is
        synchronous); ``max_topics``: ``check_room``'s limit."""
        self.max_topics = max_topics
        self.path = config_dir / "topics.json"
        self._save = save
        self._settled = settled
        self.revision = 0
        """Counts changes of the table in this process (a request that changed it waits for ``saved``)."""
        self.table: dict[str, TopicConfig] = {}
        self.data_version: dict[str, int] = {"counter": 0, "timestamp": int(time.time() * 1000)}
        self.auto_create = auto_create_topic_enable
        self.default_queue_nums = default_queue_nums
        self.on_change: Callable[[], None] | None = None
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

    def load(self) -> None:
        """Read the persisted table (system topics stay)."""
        data = read_json(self.path, None)
        if not data:
            return
        for name, tc in (data.get("topicConfigTable") or {}).items():
            try:
                self.table[name] = TopicConfig.from_json(tc)
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                log.error("%s: topic %.160r skipped: %s", self.path, name, e)
        dv = data.get("dataVersion") or {}
        self.data_version = {"counter": int(dv.get("counter", 0)), "timestamp": int(dv.get("timestamp", 0))}

    def persist(self) -> None:
        """Save the table."""
        self._save(self.path, self.wrapper())

    def wrapper(self) -> dict[str, Any]:
        """TopicConfigSerializeWrapper JSON."""
        return {
            "dataVersion": dict(self.data_version),
            "topicConfigTable": {name: tc.to_json() for name, tc in sorted(self.table.items())},
        }

    async def saved(self) -> None:
        """Wait until the table as it is now is on disk: a send that created a topic answers after this, so a
        ``kill -9`` right after the answer cannot leave its message under a topic the broker forgot. OSError
        when the write failed."""
        if self._settled is not None:
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

    def _changed(self) -> None:
        self.revision += 1
        self.data_version = {"counter": self.data_version["counter"] + 1, "timestamp": int(time.time() * 1000)}
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
        self.table = table
        dv = wrapper.get("dataVersion") or {}
        self.data_version = {"counter": int(dv.get("counter", 0)), "timestamp": int(dv.get("timestamp", 0))}
        self.persist()
        if self.on_change is not None:
            self.on_change()
        return True

    def get(self, topic: str) -> TopicConfig | None:
        """The config of ``topic`` or None."""
        return self.table.get(topic)

    def update(self, tc: TopicConfig) -> None:
        """Create or replace a topic."""
        old = self.table.get(tc.topic_name)
        self.table[tc.topic_name] = tc
        if old != tc:
            log.info("topic %s: %s", "created" if old is None else "updated", tc)
            self._changed()

    def delete(self, topic: str) -> bool:
        """Remove a topic; True if it existed."""
        if self.table.pop(topic, None) is None:
            return False
        log.info("topic %s deleted", topic)
        self._changed()
        return True

    def counted(self) -> int:
        """Topics that count toward ``max_topics``: not the broker's own system topics, not retry or DLQ topics
        (those are bounded by the groups' limit)."""
        own = self._own
        return sum(1 for t in self.table if t not in own and not is_system_topic(t))

    def check_room(self, topic: str) -> None:
        """Raise RemotingError (SYSTEM_ERROR, reason TOO_MANY_TOPICS) when creating ``topic`` would pass
        ``max_topics``; a topic that exists, or one that does not count, always has room."""
        if topic in self.table or topic in self._own or is_system_topic(topic):
            return
        if self.counted() >= self.max_topics:
            raise RemotingError(
                ResponseCode.SYSTEM_ERROR,
                f"topic [{topic}] not created: this broker holds maxTopics ({self.max_topics}) topics already; "
                "use an existing topic, delete unused ones (sievemq topic delete) or raise maxTopics",
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
