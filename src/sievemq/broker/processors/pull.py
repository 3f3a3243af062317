"""PULL_MESSAGE (11): read a queue from an offset through the subscription's filter, with long polling.

Store status -> response code follows ``docs/protocol/requests.md`` (pull). A pull that finds nothing new and may
be suspended is parked (``PullHoldService``) until a matching message is dispatched to its queue or its suspend
time runs out, then runs once more without suspension. A pull that needs no hold is answered in the turn of the loop
that read it (``ProcessorTable.answer``: no task of its own), its records copied from the commit log straight into
the answer's body (``Reader.get_message(joined=True)``).

A pull of a queue whose offset an operator reset is told to move there (PULL_OFFSET_MOVED, before and after a
hold) unless it already asks for the new offset (docs/admin.md §4). A pull of ``TOOLS_CONSUMER`` (``sievemq topic
peek``) needs no subscription group and leaves none behind, and commits nothing (docs/admin.md §5).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable
from dataclasses import dataclass

from sievemq.broker.clients import ConsumerGroupInfo, ConsumerManager
from sievemq.broker.filter_manager import ConsumerFilterManager
from sievemq.broker.filters import MessageFilter, build_filter
from sievemq.broker.groups import SubscriptionGroupManager
from sievemq.broker.long_polling import PullHoldService
from sievemq.broker.offsets import ConsumerOffsetManager
from sievemq.broker.stats import BrokerStats
from sievemq.broker.topics import TopicConfigManager
from sievemq.errors import RemotingError
from sievemq.protocol.heartbeat import Subscription
from sievemq.protocol.names import TOOLS_CONSUMER_GROUP
from sievemq.protocol.pull_header import PullMessageHeader
from sievemq.protocol.reasons import Reason
from sievemq.protocol.route import PERM_READ
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import FLAG_RESPONSE, RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.server import ProcessorTable
from sievemq.store import GetResult, GetStatus, MessageStore

MAX_HOLD_MS = 25_000
"""A pull is never held longer than this, whatever it asks for (clients time out at 30 s)."""

_STATUS_CODE = {
    GetStatus.FOUND: ResponseCode.SUCCESS,
    GetStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}


def response_code(result: GetResult, offset: int) -> ResponseCode:
    """The pull answer's code for a store result (an unknown or empty queue: not found at 0, moved elsewhere)."""
    if result.status in (GetStatus.NO_MATCHED_LOGIC_QUEUE, GetStatus.NO_MESSAGE_IN_QUEUE):
        return ResponseCode.PULL_OFFSET_MOVED if offset != 0 else ResponseCode.PULL_NOT_FOUND
    return _STATUS_CODE.get(result.status, ResponseCode.SYSTEM_ERROR)


@dataclass(frozen=True, slots=True)
class PullSettings:
    """The broker settings a pull depends on."""

    long_polling: bool = True
    short_polling_ms: int = 1000
    """How long a pull is held when long polling is off."""
    property_filter: bool = True
    """SQL92 subscriptions allowed."""
    slave_read_bytes: int | None = None
    """With ``slaveReadEnable``: how far (bytes) a pull may lag the commit log's end before the answer sends the
    group to its ``whichBrokerWhenConsumeSlowly``; None: every answer suggests the master."""


def memory_share(ratio_percent: int, memory: int | None = None) -> int:
    """``ratio_percent`` of ``memory`` (this machine's, by default): the bytes behind the commit log's end that count
    as "in memory" (RocketMQ's ``accessMessageInMemoryMaxRatio``)."""
    if memory is None:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return memory * ratio_percent // 100


def slave_read_limit(enabled: bool, ratio_percent: int, memory: int | None = None) -> int | None:
    """``PullSettings.slave_read_bytes``: ``memory_share`` when ``slaveReadEnable``, else None."""
    return memory_share(ratio_percent, memory) if enabled else None


@dataclass
class PullProcessor:
    """Serves pulls."""

    store: MessageStore
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    consumers: ConsumerManager
    filters: ConsumerFilterManager
    offsets: ConsumerOffsetManager
    hold: PullHoldService
    stats: BrokerStats
    settings: PullSettings

    def register(self, table: ProcessorTable) -> None:
        """Put PULL_MESSAGE into ``table``, and LITE_PULL_MESSAGE (361: what rocketmq-client 5.x's
        DefaultLitePullConsumer sends), which RocketMQ's broker serves the same way."""
        table.register(RequestCode.PULL_MESSAGE, self.answer)
        table.register(RequestCode.LITE_PULL_MESSAGE, self.answer)

    # ------------------------------------------------------------------------------------------ checks
    def _check_queue(self, h: PullMessageHeader) -> None:
        """The group may consume and the topic's queue exists and is readable (the tools group always may)."""
        gc = self.groups.find(h.consumer_group) if h.consumer_group != TOOLS_CONSUMER_GROUP else None
        if gc is None and h.consumer_group != TOOLS_CONSUMER_GROUP:
            raise RemotingError(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{h.consumer_group}] does not exist"
            )
        if gc is not None and not gc.consumeEnable:
            raise RemotingError(
                ResponseCode.NO_PERMISSION, f"subscription group [{h.consumer_group}] consumption is disabled"
            )
        tc = self.topics.get(h.topic)
        if tc is None:
            raise RemotingError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist, apply first please!")
        if not tc.perm & PERM_READ:
            raise RemotingError(ResponseCode.NO_PERMISSION, f"the topic[{h.topic}] pulling message is forbidden")
        if h.queue_id < 0 or h.queue_id >= tc.read_queue_nums:
            raise RemotingError(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{h.queue_id}] is illegal, topic:[{h.topic}] topicConfig.readQueueNums:[{tc.read_queue_nums}]",
                Reason.INVALID_HEADER,
            )

    def subscription(self, client_id: str | None, h: PullMessageHeader) -> Subscription | None:
        """The subscription to filter this pull with: the header's (FLAG_SUBSCRIPTION), else the group's.

        An inconsistent client is refused (SUBSCRIPTION_INCONSISTENT); the pull is noted as the client's.
        """
        group, topic = h.consumer_group, h.topic
        info = self.consumers.get(group)
        if info is not None and client_id is not None:
            remark = info.remark(client_id, topic)
            if remark is not None:
                raise RemotingError(ResponseCode.SUBSCRIPTION_NOT_EXIST, remark, Reason.SUBSCRIPTION_INCONSISTENT)
            info.pulls[(topic, h.queue_id)] = (client_id, time.monotonic())
        if h.has_subscription:
            return Subscription(topic, h.subscription or "*", h.expression_type or "TAG", h.sub_version)
        if info is None:
            entry = self.filters.get(group, topic)
            if entry is not None:  # a persisted SQL92 filter keeps serving until the group's next heartbeat
                return Subscription(topic, entry.expression, "SQL92", entry.client_version)
            raise RemotingError(
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"the consumer's group info not exist: group {group} has sent no heartbeat to this broker",
            )
        sub = info.subscription(topic)
        if sub is None:
            raise RemotingError(
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"the consumer's subscription not exist: group {group} has no subscription of topic {topic}",
            )
        if _registered_version(info, client_id, topic, sub) < h.sub_version:
            raise RemotingError(
                ResponseCode.SUBSCRIPTION_NOT_LATEST,
                f"the consumer's subscription not latest: group {group} topic {topic}",
            )
        return sub

    def _filter(self, client_id: str | None, h: PullMessageHeader) -> MessageFilter | None:
        if h.class_filter:  # the filter server already ran the group's function: deliver everything
            return None
        sub = self.subscription(client_id, h)
        if sub is not None and not sub.is_tag and not h.has_subscription:
            error = self.filters.error(h.consumer_group, h.topic)
            if error is not None:
                raise RemotingError(
                    ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                    f"SQL92 expression of group {h.consumer_group}, topic {h.topic} does not compile {error}",
                )
        return build_filter(sub, h.consumer_group, self.filters, self.settings.property_filter)

    # ------------------------------------------------------------------------------------------ pull
    def answer(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | Awaitable[RemotingCommand]:
        """11 PULL_MESSAGE, answered at once unless the pull is held (then what to await: ``ProcessorTable.answer``);
        every answer, a refusal too, is timed in ``stats.pull_latency``, less the time the pull was held."""
        started = time.perf_counter()
        held = False
        try:
            h = PullMessageHeader.parse(cmd.ext_fields)
            self._check_queue(h)
            flt = self._filter(conn.attrs.get("client_id"), h)
            moved = self.offsets.take_reset(h.consumer_group, h.topic, h.queue_id, h.queue_offset)
            if moved is not None:
                return self._moved(cmd, h, moved)
            if h.commits_offset and h.commit_offset >= 0 and h.consumer_group != TOOLS_CONSUMER_GROUP:
                self.offsets.commit(h.consumer_group, h.topic, h.queue_id, h.commit_offset)
            result = self._read(h, flt)
            code = response_code(result, h.queue_offset)
            if code == ResponseCode.PULL_NOT_FOUND and h.suspend and h.suspend_timeout_millis > 0:
                held = True
                return self._held(cmd, h, flt, started)
            return self._answer(cmd, h, result, code)
        finally:
            if not held:
                self.stats.pull_latency.observe(time.perf_counter() - started)

    async def _held(
        self, cmd: RemotingCommand, h: PullMessageHeader, flt: MessageFilter | None, started: float
    ) -> RemotingCommand:
        """A pull that found nothing new: held until a matching message arrives or its time is up, then read again."""
        held = 0.0
        try:
            hold_started = time.perf_counter()
            await self._hold(h, flt)
            held = time.perf_counter() - hold_started
            moved = self.offsets.take_reset(h.consumer_group, h.topic, h.queue_id, h.queue_offset)
            if moved is not None:  # reset while held
                return self._moved(cmd, h, moved)
            result = self._read(h, flt)
            return self._answer(cmd, h, result, response_code(result, h.queue_offset))
        finally:
            self.stats.pull_latency.observe(time.perf_counter() - started - held)

    def _read(self, h: PullMessageHeader, flt: MessageFilter | None) -> GetResult:
        """The store's answer to the pull, its records joined into the body (one copy from the commit log)."""
        return self.store.get_message(h.topic, h.queue_id, h.queue_offset, h.max_msg_nums, flt, joined=True)

    def _answer(
        self, cmd: RemotingCommand, h: PullMessageHeader, result: GetResult, code: ResponseCode
    ) -> RemotingCommand:
        """The pull's answer (the records when found; delivered messages and bytes are counted, and where the group
        goes on from is noted for its consume stats, as RocketMQ's pullOffset)."""
        if h.consumer_group != TOOLS_CONSUMER_GROUP:
            self.offsets.note_pulled(h.consumer_group, h.topic, h.queue_id, result.next_begin_offset)
        if code == ResponseCode.SUCCESS:
            self.stats.get(h.topic, result.message_count, result.buffer_total_size, h.consumer_group)
        found = code == ResponseCode.SUCCESS
        fields = {
            "suggestWhichBrokerId": str(self._suggest(h.consumer_group, result)),
            "nextBeginOffset": str(result.next_begin_offset),
            "minOffset": str(result.min_offset),
            "maxOffset": str(result.max_offset),
        }
        body = b"".join(result.records) if found else b""  # (joined: the one body itself, no copy)
        return RemotingCommand(int(code), cmd.opaque, FLAG_RESPONSE, remark=None if found else result.status.name,
                               ext_fields=fields, body=body, serialize_type=cmd.serialize_type)  # fmt: skip

    def _moved(self, cmd: RemotingCommand, h: PullMessageHeader, offset: int) -> RemotingCommand:
        """PULL_OFFSET_MOVED to where an operator reset the group's offset of the queue."""
        return cmd.response(
            ResponseCode.PULL_OFFSET_MOVED,
            "OFFSET_RESET",
            {
                "suggestWhichBrokerId": 0,
                "nextBeginOffset": offset,
                "minOffset": self.store.get_min_offset(h.topic, h.queue_id),
                "maxOffset": self.store.get_max_offset(h.topic, h.queue_id),
            },
        )

    def _suggest(self, group: str, result: GetResult) -> int:
        """``suggestWhichBrokerId`` as RocketMQ answers it (docs/protocol/replication.md §4): the master (0) unless
        ``slaveReadEnable``; then the group's ``whichBrokerWhenConsumeSlowly`` when the pull reads further behind
        the commit log's end than ``slave_read_bytes``, else the group's ``brokerId``."""
        limit = self.settings.slave_read_bytes
        if limit is None or group == TOOLS_CONSUMER_GROUP:
            return 0
        gc = self.groups.find(group)
        if gc is None:
            return 0
        slow = result.last_phy >= 0 and self.store.max_phy_offset - result.last_phy > limit
        return gc.whichBrokerWhenConsumeSlowly if slow else gc.brokerId

    async def _hold(self, h: PullMessageHeader, flt: MessageFilter | None) -> None:
        """Wait until a matching message reaches the queue at the pull's offset, or the hold time ends."""
        hold_ms = h.suspend_timeout_millis if self.settings.long_polling else self.settings.short_polling_ms
        fut = self.hold.hold(h.topic, h.queue_id, h.queue_offset, flt.match_code if flt is not None else None)
        try:
            if self.store.get_max_offset(h.topic, h.queue_id) > h.queue_offset:
                return  # it came after the pull read, before this hold began (a turn later): read again
            await asyncio.wait_for(asyncio.shield(fut), max(0.0, min(hold_ms, MAX_HOLD_MS) / 1000.0))
        except TimeoutError:
            pass
        finally:
            self.hold.release(h.topic, h.queue_id, fut)


def _registered_version(info: ConsumerGroupInfo, client_id: str | None, topic: str, group_sub: Subscription) -> int:
    """The subscription version the pulling client itself registered (the group's when the client is unknown).

    A client that joined after the group's expression was registered carries a newer ``subVersion`` in its pulls
    than the group's subscription: what must be at least as new is the client's own registration.
    """
    own = info.subscriptions.get(client_id or "", {}).get(topic)
    return own.sub_version if own is not None else group_sub.sub_version
