"""A slave's copy of its master's metadata, every ``interval`` (docs/protocol/replication.md §4).

One round: push our consumer offsets to the master (it keeps the larger per queue: commits made here while the
master was away survive), then take the master's topics, subscription groups, consumer offsets (merged: larger
wins), delay-level progress, SQL92 filters and, with ACL 2.0 on here, its users and ACLs (docs/acl2.md §8). A
failed round is logged (once per change of outcome) and the next one comes. A replicated message of a topic the
slave does not know yet makes the topic readable at once (as many queues as seen) and brings a round at once:
consumers that fail over to the slave read a topic created just before the master died.

A source that holds less of the commit log than we do (a master that came back with its data lost, before the
operator recovers it) has no authority over our metadata: its rounds only add (topics and groups merged, offsets
larger wins, delay progress larger wins), never drop what our log holds messages of; its filters and users are not
taken.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import orjson

from sievemq.auth.replica import AuthCopy
from sievemq.broker.filter_manager import ConsumerFilterManager
from sievemq.broker.groups import SubscriptionGroupManager
from sievemq.broker.offsets import ConsumerOffsetManager
from sievemq.broker.schedule import ScheduleService
from sievemq.broker.topics import TopicConfigManager
from sievemq.protocol.route import TopicConfig
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import ConnectionPool
from sievemq.util.tasks import Background

__all__ = ["MetadataSync"]

log = logging.getLogger(__name__)

KICKED_GAP_S = 1.0
"""The shortest time between two rounds (a flood of messages of unknown topics brings one round a second)."""
TOPIC_PAGE = 2000
"""Topics per GET_ALL_TOPIC_CONFIG page (RocketMQ 5's ``splitMetadataSize``)."""
PAGE_RESTARTS_MAX = 5
"""How many times a copy starts over because the master's topics changed while it was paging."""


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
        own_end: Callable[[], int],
        interval: float = 10.0,
    ) -> None:
        """``master_addr`` names the source (None while unknown); ``own_end`` is our commit log's end."""
        self.pool = pool
        self.own_end = own_end
        self.master_addr = master_addr
        self.topics, self.groups, self.offsets = topics, groups, offsets
        self.schedule, self.filters = schedule, filters
        self.interval = interval
        self.rounds = 0
        self.last_error: str | None = None
        self.source_behind: str | None = None
        """Why the last round only added (the source holds less of the commit log than we do), or None."""
        self.auth: AuthCopy | None = None
        """With ACL 2.0 on: where the master's users and ACLs go (set by the broker once its gate exists)."""
        self.auth_source_off: str | None = None
        """The source that answered GET_ALL_AUTH_METADATA with 3 (its ACL 2.0 is off), or None."""
        self._copied: tuple[bytes, str, bool] | None = None
        """The master's topic data version copied last (with its address and the merge flag)."""
        self._copied_revision = -1
        """Our table's revision right after that copy."""
        self._task = Background("slave-metadata-sync")
        self._kick = asyncio.Event()

    def on_dispatch(self, topic: str, queue_id: int, *_rest: object) -> None:
        """A dispatch listener: a replicated message of a topic (or queue) we do not know yet makes the topic
        readable here at once, with as many queues as seen, and brings the next round (the master's config)."""
        tc = self.topics.table.get(topic)
        if tc is None or queue_id >= tc.read_queue_nums:
            n = queue_id + 1 if tc is None else max(queue_id + 1, tc.read_queue_nums)
            self.topics.update(TopicConfig(topic, n, n) if tc is None else replace(tc, read_queue_nums=n))
            self._kick.set()

    def start(self) -> None:
        """Copy every ``interval`` in the background (the first round at once)."""
        self._task.start(self._loop())

    async def stop(self) -> None:
        """Stop copying."""
        await self._task.stop()

    async def _loop(self) -> None:
        while True:
            self._kick.clear()  # a kick from here on brings the next round early
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
            gap = min(KICKED_GAP_S, self.interval)
            await asyncio.sleep(gap)  # kicked rounds come at most this often
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), self.interval - gap)

    async def _topic_page(self, addr: str, seq: int, version: str, count: int) -> tuple[dict[str, Any], int | None]:
        """One page of the master's topics, and its total (None: a master that does not page sent them all)."""
        fields = {"topicSeq": seq, "maxTopicNum": count, "dataVersion": version}
        resp = await self.pool.request(addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG, fields),
                                       timeout=30.0)  # fmt: skip
        if resp.code != ResponseCode.SUCCESS:
            raise ConnectionError(f"the master answered GET_ALL_TOPIC_CONFIG with [{resp.code}] {resp.remark}")
        body = orjson.loads(resp.body) if resp.body else {}
        total = resp.ext_fields.get("totalTopicNum")
        return (body if isinstance(body, dict) else {}), (int(total) if total is not None else None)

    async def _copy_topics(self, addr: str, merge: bool) -> None:
        """Take the master's topics, in pages; nothing more than a one-topic page when its data version is the one
        copied last and ours did not change since (docs/topic-table.md §5)."""
        probe, total = await self._topic_page(addr, 0, "", 1)
        version = probe.get("dataVersion") or {}
        key = (orjson.dumps(version, option=orjson.OPT_SORT_KEYS), addr, merge)
        if key == self._copied and self.topics.revision == self._copied_revision:
            return
        if total is None or total <= 1:  # all of it came already
            table = probe.get("topicConfigTable") or {}
        else:
            table = {}
            seq, restarts = 0, 0
            while seq < total:
                page, total_now = await self._topic_page(addr, seq, orjson.dumps(version).decode(), TOPIC_PAGE)
                rows = page.get("topicConfigTable") or {}
                if (page.get("dataVersion") or {}) != version:  # changed meanwhile: from the start
                    restarts += 1
                    if restarts > PAGE_RESTARTS_MAX:
                        raise ConnectionError("the master's topics kept changing while they were copied")
                    version, table, seq = page.get("dataVersion") or {}, {}, 0
                    total = total_now if total_now is not None else total
                    key = (orjson.dumps(version, option=orjson.OPT_SORT_KEYS), addr, merge)
                    continue
                if not rows:
                    break
                table.update(rows)
                seq += len(rows)
                total = total_now if total_now is not None else total
        self.topics.replace_all({"dataVersion": version, "topicConfigTable": table}, merge)
        self._copied, self._copied_revision = key, self.topics.revision

    async def _get(self, addr: str, code: int) -> Any:
        resp = await self.pool.request(addr, RemotingCommand.request(code), timeout=10.0)
        if resp.code != ResponseCode.SUCCESS:
            raise ConnectionError(f"the master answered request {code} with [{resp.code}] {resp.remark}")
        return orjson.loads(resp.body) if resp.body else {}

    async def sync_once(self, merge: bool = False) -> bool:
        """One round (False when no master is known yet); ``merge`` keeps our topics and groups beside theirs."""
        addr = self.master_addr()
        if addr is None:
            return False
        behind = await self._source_behind(addr)
        merge = merge or behind
        mine = self.offsets.take_snapshot(force=True, mark=False) or {}
        push = RemotingCommand.request(RequestCode.MERGE_CONSUMER_OFFSET, body=orjson.dumps(mine))
        resp = await self.pool.request(addr, push, timeout=10.0)
        if resp.code != ResponseCode.SUCCESS:
            raise ConnectionError(f"the master refused our offsets: [{resp.code}] {resp.remark}")
        await self._copy_topics(addr, merge)
        self.groups.replace_all((await self._get(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).get(
            "subscriptionGroupTable") or {}, merge)  # fmt: skip
        self.offsets.merge_max((await self._get(addr, RequestCode.GET_ALL_CONSUMER_OFFSET)).get("offsetTable") or {})
        delay = {int(k): int(v) for k, v in ((await self._get(addr, RequestCode.GET_ALL_DELAY_OFFSET)).get(
            "offsetTable") or {}).items()}  # fmt: skip
        if merge:
            ours = self.schedule.offsets
            delay = {level: max(v, ours.get(level, 0)) for level, v in (ours | delay).items()}
        self.schedule.replace_offsets(delay)
        if not behind:  # a source that lost its data lost its filters too
            self.filters.replace_from(await self._get(addr, RequestCode.GET_ALL_CONSUMER_FILTER))
            await self._copy_auth(addr)
        self.rounds += 1
        return True

    async def refresh_auth(self) -> None:
        """Copy the master's users and ACLs now (a write on this slave asks whether the master has it already);
        ConnectionError when no master is known or it does not answer."""
        addr = self.master_addr()
        if addr is None:
            raise ConnectionError("no master known")
        await self._copy_auth(addr)

    async def _copy_auth(self, addr: str) -> None:
        """With ACL 2.0 on here: take the source's users and ACLs (a source without ACL 2.0 answers 3: ours stay, and
        that is said once)."""
        if self.auth is None:
            return
        resp = await self.pool.request(addr, RemotingCommand.request(RequestCode.GET_ALL_AUTH_METADATA), timeout=10.0)
        if resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            if self.auth_source_off != addr:
                log.warning("%s does not serve ACL 2.0 (authenticationEnabled and authorizationEnabled off): this "
                            "broker keeps its own users and ACLs", addr)  # fmt: skip
            self.auth_source_off = addr
            return
        if resp.code != ResponseCode.SUCCESS:
            raise ConnectionError(f"the master answered GET_ALL_AUTH_METADATA with [{resp.code}] {resp.remark}")
        self.auth_source_off = None
        await self.auth.apply(orjson.loads(resp.body) if resp.body else None, addr)

    async def _source_behind(self, addr: str) -> bool:
        """True when the source's commit log ends before ours (its runtime info's ``commitLogMaxOffset``); said once
        per change."""
        table = (await self._get(addr, RequestCode.GET_BROKER_RUNTIME_INFO)).get("table") or {}
        theirs, ours = int(table.get("commitLogMaxOffset", 0)), self.own_end()
        why = None if theirs >= ours else f"{addr} holds the commit log up to {theirs}, this broker up to {ours}"
        if why is not None and self.source_behind is None:
            log.warning("%s: its metadata is only added to ours, nothing of ours is dropped", why)
        elif why is None and self.source_behind is not None:
            log.info("%s holds our whole commit log again: its metadata is copied as it is", addr)
        self.source_behind = why
        return why is not None
