"""A slave's copy of its master's metadata, every ``interval`` (docs/protocol/replication.md §4).

One round: push our consumer offsets to the master (it keeps the larger per queue: commits made here while the
master was away survive), then take the master's topics, subscription groups, consumer offsets (merged: larger
wins), delay-level progress and SQL92 filters. A failed round is logged (once per change of outcome) and the next
one comes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import orjson

from sievemq.broker.filter_manager import ConsumerFilterManager
from sievemq.broker.groups import SubscriptionGroupManager
from sievemq.broker.offsets import ConsumerOffsetManager
from sievemq.broker.schedule import ScheduleService
from sievemq.broker.topics import TopicConfigManager
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import ConnectionPool

__all__ = ["MetadataSync"]

log = logging.getLogger(__name__)


class MetadataSync:
    """Keeps a slave's topics, groups, offsets, delay progress and filters in step with its master."""

    def __init__(
        self,
        pool: ConnectionPool,
        master_addr: Callable[[], str | None],
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        schedule: ScheduleService,
        filters: ConsumerFilterManager,
        interval: float = 10.0,
    ) -> None:
        self.pool = pool
        self.master_addr = master_addr
        self.topics, self.groups, self.offsets = topics, groups, offsets
        self.schedule, self.filters = schedule, filters
        self.interval = interval
        self.rounds = 0
        self.last_error: str | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Copy every ``interval`` in the background (the first round at once)."""
        self._task = asyncio.create_task(self._loop(), name="slave-metadata-sync")

    async def stop(self) -> None:
        """Stop copying."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
            self._task = None

    async def _loop(self) -> None:
        while True:
            try:
                if await self.sync_once():
                    if self.last_error is not None:
                        log.info("metadata copy from the master works again")
                    self.last_error = None
            except asyncio.CancelledError:
                raise
            except Exception as e:
                why = f"{type(e).__name__}: {e}"
                if why != self.last_error:
                    log.warning("metadata copy from the master failed: %s (retrying every %.0fs)", why, self.interval)
                self.last_error = why
            await asyncio.sleep(self.interval)

    async def _get(self, addr: str, code: int) -> Any:
        resp = await self.pool.request(addr, RemotingCommand.request(code), timeout=10.0)
        if resp.code != ResponseCode.SUCCESS:
            raise ConnectionError(f"the master answered request {code} with [{resp.code}] {resp.remark}")
        return orjson.loads(resp.body) if resp.body else {}

    async def sync_once(self) -> bool:
        """One round (False when no master is known yet)."""
        addr = self.master_addr()
        if addr is None:
            return False
        mine = self.offsets.take_snapshot(force=True, mark=False) or {}
        push = RemotingCommand.request(RequestCode.MERGE_CONSUMER_OFFSET, body=orjson.dumps(mine))
        resp = await self.pool.request(addr, push, timeout=10.0)
        if resp.code != ResponseCode.SUCCESS:
            raise ConnectionError(f"the master refused our offsets: [{resp.code}] {resp.remark}")
        self.topics.replace_all(await self._get(addr, RequestCode.GET_ALL_TOPIC_CONFIG))
        self.groups.replace_all((await self._get(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).get(
            "subscriptionGroupTable") or {})  # fmt: skip
        self.offsets.merge_max((await self._get(addr, RequestCode.GET_ALL_CONSUMER_OFFSET)).get("offsetTable") or {})
        delay = (await self._get(addr, RequestCode.GET_ALL_DELAY_OFFSET)).get("offsetTable") or {}
        self.schedule.replace_offsets({int(k): int(v) for k, v in delay.items()})
        self.filters.replace_from(await self._get(addr, RequestCode.GET_ALL_CONSUMER_FILTER))
        self.rounds += 1
        return True
