"""Where a consumer keeps its offsets: on the brokers (clustering) or in a local JSON file (broadcasting).

Both keep an in-memory table that consumption updates; ``persist_all`` writes it out (every 5 s and on close).
An offset is "the next message to consume" of a queue; -1 means "none known".
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import orjson

from sievemq.client import api
from sievemq.client.message import MessageQueue
from sievemq.remoting.codes import RequestCode
from sievemq.remoting.command import RemotingCommand

if TYPE_CHECKING:
    from sievemq.client.instance import ClientInstance

log = logging.getLogger(__name__)


class OffsetStore(Protocol):
    """Offsets of one consumer group."""

    def update(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        """Set the in-memory offset of ``mq``."""
        ...

    def read_memory(self, mq: MessageQueue) -> int:
        """In-memory offset, or -1."""
        ...

    async def read_store(self, mq: MessageQueue) -> int:
        """Persisted offset, or -1 when none (raises when the store cannot be asked)."""
        ...

    async def persist(self, mq: MessageQueue, *, oneway: bool = False) -> None:
        """Write one queue's in-memory offset out."""
        ...

    async def persist_all(self, mqs: Iterable[MessageQueue], *, oneway: bool = True) -> None:
        """Write the offsets of ``mqs`` out."""
        ...

    def remove(self, mq: MessageQueue) -> None:
        """Forget ``mq`` in memory."""
        ...


class _MemoryTable:
    def __init__(self) -> None:
        self.table: dict[MessageQueue, int] = {}

    def update(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        old = self.table.get(mq)
        if old is not None and increase_only and offset < old:
            return
        self.table[mq] = offset

    def read_memory(self, mq: MessageQueue) -> int:
        return self.table.get(mq, -1)

    def remove(self, mq: MessageQueue) -> None:
        self.table.pop(mq, None)


class RemoteOffsetStore(_MemoryTable):
    """Offsets kept by the brokers (QUERY_CONSUMER_OFFSET / UPDATE_CONSUMER_OFFSET on the queue's master, or on a
    slave of its set while the routes list no master: the master takes the slave's larger offsets when it returns)."""

    def __init__(self, instance: ClientInstance, group: str) -> None:
        super().__init__()
        self.instance = instance
        self.group = group

    async def _addr(self, mq: MessageQueue) -> str:
        addr = self.instance.broker_addr(mq.broker_name)
        if addr is None:
            await self.instance.update_route(mq.topic)
            addr = self.instance.broker_addr(mq.broker_name)
        if addr is None:
            raise ConnectionError(f"broker {mq.broker_name} is not in any route")
        return addr

    async def read_store(self, mq: MessageQueue) -> int:
        """QUERY_CONSUMER_OFFSET: -1 when the broker has none (code 22); asked with ``setZeroIfNotFound=false``,
        so that the consumer's ``consume_from`` decides where a group without an offset starts."""
        conn = await self.instance.conn(await self._addr(mq))
        offset = await api.query_offset(
            conn, self.group, mq.topic, mq.queue_id, self.instance.config.request_timeout, zero_if_not_found=False
        )
        if offset >= 0:
            self.update(mq, offset)
        return offset

    async def persist(self, mq: MessageQueue, *, oneway: bool = False) -> None:
        """UPDATE_CONSUMER_OFFSET for one queue (negative offsets are never sent)."""
        offset = self.table.get(mq, -1)
        if offset < 0:
            return
        addr = await self._addr(mq)
        fields = {"consumerGroup": self.group, "topic": mq.topic, "queueId": mq.queue_id, "commitOffset": offset}
        if oneway:
            await self.instance.pool.send_oneway(
                addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, fields, oneway=True)
            )
        else:
            conn = await self.instance.conn(addr)
            await api.update_offset(
                conn, self.group, mq.topic, mq.queue_id, offset, self.instance.config.request_timeout
            )

    async def persist_all(self, mqs: Iterable[MessageQueue], *, oneway: bool = True) -> None:
        """Persist every given queue; failures are logged, not raised."""
        for mq in list(mqs):
            try:
                await self.persist(mq, oneway=oneway)
            except Exception as e:
                log.warning("persisting offset of %s for group %s failed: %s", mq, self.group, e)


class LocalFileOffsetStore(_MemoryTable):
    """Offsets in ``<dir>/<clientId>/<group>/offsets.json`` (broadcasting; each client keeps its own)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self._stored: dict[MessageQueue, int] = {}
        self._load()

    def _load(self) -> None:
        for candidate in (self.path, self.path.with_suffix(".json.bak")):
            try:
                raw = orjson.loads(candidate.read_bytes())
            except FileNotFoundError:
                continue
            except (OSError, orjson.JSONDecodeError) as e:
                log.warning("offset file %s unreadable: %s", candidate, e)
                continue
            table = raw.get("offsetTable") or {}
            self._stored = {MessageQueue.from_key(k): int(v) for k, v in table.items()}
            self.table.update(self._stored)
            return

    async def read_store(self, mq: MessageQueue) -> int:
        """The offset last written to the file, or -1."""
        offset = self._stored.get(mq, -1)
        if offset >= 0:
            self.update(mq, offset)
        return offset

    async def persist(self, mq: MessageQueue, *, oneway: bool = False) -> None:
        """Write the file (all known queues)."""
        self._write()

    async def persist_all(self, mqs: Iterable[MessageQueue], *, oneway: bool = True) -> None:
        """Write the file (all known queues)."""
        try:
            self._write()
        except OSError as e:
            log.warning("writing offsets to %s failed: %s", self.path, e)

    def _write(self) -> None:
        snapshot = {mq: off for mq, off in self.table.items() if off >= 0}
        if snapshot == self._stored and self.path.exists():
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = orjson.dumps({"offsetTable": {mq.key(): off for mq, off in sorted(snapshot.items())}})
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_bytes(data)
        if self.path.exists():
            with contextlib.suppress(OSError):
                os.replace(self.path, self.path.with_suffix(".json.bak"))
        os.replace(tmp, self.path)
        self._stored = snapshot
