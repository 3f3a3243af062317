"""Message lookup: VIEW_MESSAGE_BY_ID (33) by commit-log offset, QUERY_MESSAGE (12) by key or unique key, and
QUERY_CONSUME_QUEUE (321: a queue's entries, ``mqadmin queryCq``)."""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from sievemq.broker.clients import ConsumerManager
from sievemq.errors import RemotingError
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.headers import get_bool, get_str, int_or, require_int, require_str
from sievemq.remoting.server import ProcessorTable
from sievemq.store import MessageStore

DEFAULT_QUERY_MAX_NUM = 32
QUERY_MAX_NUM = 64
"""Most records one QUERY_MESSAGE answers, whatever ``maxNum`` asks (RocketMQ's ``maxMsgsNumBatch``)."""
QUERY_MAX_BYTES = 8 * 1024 * 1024
"""Most record bytes one QUERY_MESSAGE answers (at least one record): the answer stays well inside a frame."""
QUERY_CQ_MAX = 1024
"""Most entries one QUERY_CONSUME_QUEUE answers, whatever ``count`` asks."""


@dataclass
class QueryProcessor:
    """Finds stored messages."""

    store: MessageStore
    consumers: ConsumerManager | None = None
    """Who subscribes what (QUERY_CONSUME_QUEUE with a ``consumerGroup`` shows its subscription)."""

    def register(self, table: ProcessorTable) -> None:
        """Put the lookup codes into ``table``."""
        table.register(RequestCode.VIEW_MESSAGE_BY_ID, self.view_by_id)
        table.register(RequestCode.QUERY_MESSAGE, self.query_by_key)
        table.register(RequestCode.QUERY_CONSUME_QUEUE, self.query_consume_queue)

    async def view_by_id(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """33: one stored record by its commit-log offset (decoded from an offsetMsgId)."""
        offset = require_int(cmd.ext_fields, "offset")
        raw = self.store.look_message_by_offset(offset)
        if raw is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
        return cmd.response(ResponseCode.SUCCESS, body=raw)

    async def query_by_key(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """12: stored records whose KEYS word or UNIQ_KEY equals ``key``, within the time range (at most
        ``QUERY_MAX_NUM`` records and ``QUERY_MAX_BYTES`` bytes)."""
        f = cmd.ext_fields
        max_num = min(max(1, int_or(f, "maxNum", DEFAULT_QUERY_MAX_NUM)), QUERY_MAX_NUM)
        if get_bool(f, "_UNIQUE_KEY_QUERY"):
            max_num = DEFAULT_QUERY_MAX_NUM
        records = self.store.query_message(
            require_str(f, "topic"),
            require_str(f, "key"),
            max_num,
            int_or(f, "beginTimestamp", 0),
            int_or(f, "endTimestamp", 2**62),
            QUERY_MAX_BYTES,
        )
        header = {"indexLastUpdateTimestamp": 0, "indexLastUpdatePhyoffset": self.store.max_phy_offset}
        if not records:
            return cmd.response(
                ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct", header
            )
        return cmd.response(ResponseCode.SUCCESS, ext_fields=header, body=b"".join(records))

    async def query_consume_queue(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """321: header ``topic``, ``queueId``, ``index``, ``count``, optional ``consumerGroup``. Answer:
        QueryConsumeQueueResponseBody (the queue's max and min offsets and up to ``count`` entries from ``index``:
        ``physicOffset``, ``physicSize``, ``tagsCode``, an extension unit's JSON; with a group, its subscription).
        SYSTEM_ERROR when the queue does not exist; an index outside the queue is answered as RocketMQ does:
        SUCCESS, a remark, no body."""
        f = cmd.ext_fields
        topic, queue_id = require_str(f, "topic"), require_int(f, "queueId")
        index, count = require_int(f, "index"), min(max(0, require_int(f, "count")), QUERY_CQ_MAX)
        if queue_id not in self.store.topic_queues().get(topic, ()):
            raise RemotingError(ResponseCode.SYSTEM_ERROR, f"{queue_id}@{topic} is not exist!")
        lo, hi = self.store.get_min_offset(topic, queue_id), self.store.get_max_offset(topic, queue_id)
        body: dict[str, object] = {"maxQueueIndex": hi, "minQueueIndex": lo}
        group = get_str(f, "consumerGroup")
        if group:
            info = self.consumers.get(group) if self.consumers is not None else None
            sub = info.subscription(topic) if info is not None else None
            if sub is None:
                body["filterData"] = f"{group}@{topic} is not online!"
            else:
                body["subscriptionData"] = sub.to_json()
                body["filterData"] = "null"
        if not lo <= index < hi:
            return cmd.response(ResponseCode.SUCCESS, f"Index {index} of {queue_id}@{topic} is not exist!")
        rows = []
        for i, (phy, size, tags) in enumerate(self.store.read_cq_entries(topic, queue_id, index, count)):
            row: dict[str, object] = {"eval": False, "physicOffset": phy, "physicSize": size, "tagsCode": tags}
            unit = self.store.get_cq_ext_unit(topic, queue_id, index + i)
            if unit is not None:
                row["extendDataJson"] = orjson.dumps({"filterBitMap": unit.bitmap.hex() or None,
                                                      "msgStoreTime": unit.store_time,
                                                      "tagsCode": unit.tags_code}).decode()  # fmt: skip
            rows.append(row)
        body["queueData"] = rows
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps(body))
