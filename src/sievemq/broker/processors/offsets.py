"""Offsets: QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15), GET_MAX_OFFSET (30), GET_MIN_OFFSET (31),
SEARCH_OFFSET_BY_TIMESTAMP (29), GET_EARLIEST_MSG_STORETIME (32)."""

from __future__ import annotations

from dataclasses import dataclass

from sievemq.broker.config_files import ConfigWriter
from sievemq.broker.groups import SubscriptionGroupManager
from sievemq.broker.offset_rules import UnknownOffset, answers_zero
from sievemq.broker.offsets import ConsumerOffsetManager
from sievemq.broker.topics import TopicConfigManager
from sievemq.errors import RemotingError
from sievemq.protocol.names import TOOLS_CONSUMER_GROUP, TOOLS_DLQ_RESEND_GROUP
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.headers import get_bool, get_str, require_int, require_str
from sievemq.remoting.server import ProcessorTable
from sievemq.store import MessageStore


@dataclass
class OffsetProcessor:
    """Consumer offsets and queue offset queries.

    ``sync_flush``: a commit that waits for its answer is on disk when answered (``writer`` writes it).
    ``new_group_starts_at_end`` and ``memory_limit``: what a group without a committed offset is told
    (``broker/offset_rules.py``). A commit names a group and a topic the broker has (``groups``, ``topics``), as
    RocketMQ 5 requires, and a queue the topic has: the offset table grows only with what exists.
    """

    offsets: ConsumerOffsetManager
    store: MessageStore
    writer: ConfigWriter
    groups: SubscriptionGroupManager
    topics: TopicConfigManager
    sync_flush: bool = False
    new_group_starts_at_end: bool = False
    memory_limit: int = 1 << 62

    def register(self, table: ProcessorTable) -> None:
        """Put the offset codes into ``table``."""
        table.register(RequestCode.QUERY_CONSUMER_OFFSET, self.query_consumer_offset)
        table.register(RequestCode.UPDATE_CONSUMER_OFFSET, self.update_consumer_offset)
        table.register(RequestCode.GET_MAX_OFFSET, self.max_offset)
        table.register(RequestCode.GET_MIN_OFFSET, self.min_offset)
        table.register(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, self.search_by_time)
        table.register(RequestCode.GET_EARLIEST_MSG_STORETIME, self.earliest_store_time)

    async def query_consumer_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """14: the committed offset; without one, 0 or QUERY_NOT_FOUND (``broker/offset_rules.py``)."""
        f = cmd.ext_fields
        group, topic, qid = require_str(f, "consumerGroup"), require_str(f, "topic"), require_int(f, "queueId")
        offset = self.offsets.query(group, topic, qid)
        if offset >= 0:
            return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": offset})
        head = self.store.read_cq_entries(topic, qid, 0, 1)
        facts = UnknownOffset(
            zero_if_not_found=get_bool(f, "setZeroIfNotFound", True),
            group_knows_topic=self.offsets.knows(group, topic),
            min_offset=self.store.get_min_offset(topic, qid),
            head_lag=self.store.max_phy_offset - head[0][0] if head and head[0][0] >= 0 else None,
        )
        if answers_zero(facts, new_group_starts_at_end=self.new_group_starts_at_end, memory_limit=self.memory_limit):
            return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": 0})
        return cmd.response(
            ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"
        )

    async def update_consumer_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """15: commit an offset. Under SYNC_FLUSH a request that waits for its answer is on disk when answered;
        every other commit reaches disk within a second."""
        f = cmd.ext_fields
        group, topic, queue_id = require_str(f, "consumerGroup"), require_str(f, "topic"), require_int(f, "queueId")
        offset = require_int(f, "commitOffset")
        self._check_commit(group, topic, queue_id)
        self.offsets.commit(group, topic, queue_id, offset)
        if self.sync_flush and not cmd.is_oneway:
            document = self.offsets.take_snapshot(force=True)
            assert document is not None
            await self.writer.write(self.offsets.path, document)
        return cmd.response(ResponseCode.SUCCESS)

    def _check_commit(self, group: str, topic: str, queue_id: int) -> None:
        """RemotingError unless ``group`` (or one of sievemq's tools groups) and ``topic`` exist, as RocketMQ 5 answers
        (26, 17), and ``queue_id`` is below the topic's queue count (29: RocketMQ stores any id; docs/compat.md)."""
        if self.groups.get(group) is None and group not in (TOOLS_CONSUMER_GROUP, TOOLS_DLQ_RESEND_GROUP):
            raise RemotingError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"Group {group} not exist!",
                                Reason.GROUP_NOT_FOUND)  # fmt: skip
        tc = self.topics.get(topic)
        if tc is None:
            raise RemotingError(ResponseCode.TOPIC_NOT_EXIST, f"Topic {topic} not exist!")
        queues = max(tc.read_queue_nums, tc.write_queue_nums)
        if queue_id >= queues:
            raise RemotingError(ResponseCode.INVALID_PARAMETER,
                                f"queueId {queue_id} is not a queue of topic {topic} ({queues} queues)",
                                Reason.INVALID_HEADER)  # fmt: skip

    async def max_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """30: the next offset to be written."""
        f = cmd.ext_fields
        offset = self.store.get_max_offset(require_str(f, "topic"), require_int(f, "queueId"))
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": offset})

    async def min_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """31: the smallest offset still stored."""
        f = cmd.ext_fields
        offset = self.store.get_min_offset(require_str(f, "topic"), require_int(f, "queueId"))
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": offset})

    async def search_by_time(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """29: the first offset stored at or after ``timestamp``; with ``boundaryType`` ``upper`` (any case, as
        RocketMQ 5 reads it), the last offset stored at or before it."""
        f = cmd.ext_fields
        upper = (get_str(f, "boundaryType") or "").lower() == "upper"
        offset = self.store.get_offset_by_time(
            require_str(f, "topic"), require_int(f, "queueId"), require_int(f, "timestamp"), upper
        )
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": offset})

    async def earliest_store_time(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """32: store time of the first message still in the queue."""
        f = cmd.ext_fields
        ts = self.store.get_earliest_store_time(require_str(f, "topic"), require_int(f, "queueId"))
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"timestamp": ts})
