"""Delayed delivery: messages parked in ``SCHEDULE_TOPIC_XXXX`` (queue = level - 1) move to their real topic
when due.

The consume-queue tags slot of a scheduled entry holds its delivery time (store time + level delay). Progress per
level is persisted to ``config/delayOffset.json`` (RocketMQ's format), so a restart neither loses nor repeats
more than the last unsaved step.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from sievemq.errors import RemotingError
from sievemq.protocol.message import MessageExt, PropertyKey, decode_record
from sievemq.protocol.names import SCHEDULE_TOPIC
from sievemq.remoting.codes import ResponseCode
from sievemq.store import MessageStore
from sievemq.store.jsonfile import atomic_write_json, read_json
from sievemq.util.tasks import Background

log = logging.getLogger(__name__)


def park_for_delay(msg: MessageExt, max_level: int) -> None:
    """A message with a DELAY level moves to the schedule topic (queue ``level - 1``; levels above ``max_level``
    become ``max_level``), its real topic and queue kept in properties; level 0 or below means no delay."""
    raw = msg.properties.get(PropertyKey.DELAY)
    if not raw:
        return
    try:
        level = int(raw)
    except ValueError:
        raise RemotingError(
            ResponseCode.MESSAGE_ILLEGAL, f"DELAY property must be a level number, got {raw!r}"
        ) from None
    if level <= 0:
        msg.properties.pop(PropertyKey.DELAY, None)
        return
    level = min(level, max_level)
    msg.properties[PropertyKey.DELAY] = str(level)
    msg.properties[PropertyKey.REAL_TOPIC] = msg.topic
    msg.properties[PropertyKey.REAL_QID] = str(msg.queue_id)
    msg.topic = SCHEDULE_TOPIC
    msg.queue_id = level - 1


def rebuild_due_message(stored: MessageExt) -> MessageExt:
    """The message to deliver for a due scheduled record: real topic and queue restored, DELAY cleared."""
    props = dict(stored.properties)
    props.pop(PropertyKey.DELAY, None)
    topic = props.get(PropertyKey.REAL_TOPIC, stored.topic)
    queue_id = int(props.get(PropertyKey.REAL_QID, "0") or 0)
    return MessageExt(
        topic=topic,
        body=stored.body,
        flag=stored.flag,
        properties=props,
        queue_id=queue_id,
        sys_flag=stored.sys_flag,
        born_timestamp=stored.born_timestamp,
        born_host=stored.born_host,
        store_host=stored.store_host,
        reconsume_times=stored.reconsume_times,
    )


class ScheduleService:
    """Moves due delayed messages to their real topics."""

    def __init__(
        self,
        store: MessageStore,
        levels_ms: list[int],
        config_dir: Path,
        put: Callable[[MessageExt], Awaitable[bool]],
        poll_interval: float = 0.1,
        save: Callable[[Path, Any], None] = atomic_write_json,
    ) -> None:
        """``save(path, document)`` writes the progress file (the broker's ``ConfigWriter.save``)."""
        self.store = store
        self._save = save
        self.levels_ms = levels_ms
        self.path = config_dir / "delayOffset.json"
        self.offsets: dict[int, int] = {}
        self._put = put
        self._poll = poll_interval
        self._task = Background("delay-delivery")
        self._dirty = False

    @property
    def max_level(self) -> int:
        """Highest delay level."""
        return len(self.levels_ms)

    def load(self) -> None:
        """Read persisted progress."""
        data = read_json(self.path, None) or {}
        self.offsets = {int(k): int(v) for k, v in (data.get("offsetTable") or {}).items()}

    def replace_offsets(self, offsets: dict[int, int]) -> None:
        """Take a master's progress (a slave's copy: it delivers nothing itself until it is a master)."""
        if offsets != self.offsets:
            self.offsets = dict(offsets)
            self._dirty = True
            self.persist()

    def persist(self) -> None:
        """Write progress if it moved."""
        if self._dirty:
            self._dirty = False
            self._save(self.path, {"offsetTable": {str(k): v for k, v in sorted(self.offsets.items())}})

    async def deliver_due(self, now_ms: int | None = None) -> int:
        """Deliver every due message now; returns how many moved."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        moved = 0
        for level in range(1, self.max_level + 1):
            qid = level - 1
            offset = max(self.offsets.get(level, 0), self.store.get_min_offset(SCHEDULE_TOPIC, qid))
            while True:
                entries = self.store.read_cq_entries(SCHEDULE_TOPIC, qid, offset, 64)
                if not entries:
                    break
                stop = False
                for phy, _size, deliver_at in entries:
                    if deliver_at > now_ms:
                        stop = True
                        break
                    raw = self.store.look_message_by_offset(phy)
                    if raw is not None:
                        stored, _ = decode_record(raw)
                        if not await self._put(rebuild_due_message(stored)):
                            stop = True  # store refused: try again next round, keep the offset
                            break
                        moved += 1
                    offset += 1
                    self.offsets[level] = offset
                    self._dirty = True
                if stop:
                    break
        return moved

    async def _loop(self) -> None:
        last_persist = time.monotonic()
        while True:
            try:
                await self.deliver_due()
            except Exception:
                log.exception("delayed delivery failed; retrying")
            if time.monotonic() - last_persist > 5:
                self.persist()
                last_persist = time.monotonic()
            await asyncio.sleep(self._poll)

    def start(self) -> None:
        """Start the delivery loop."""
        self._task.start(self._loop())

    async def stop(self) -> None:
        """Stop and persist progress."""
        await self._task.stop()
        self.persist()
