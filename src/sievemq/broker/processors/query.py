"""Message lookup: VIEW_MESSAGE_BY_ID (33) by commit-log offset and QUERY_MESSAGE (12) by key or unique key."""

from __future__ import annotations

from dataclasses import dataclass

from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.headers import get_bool, int_or, require_int, require_str
from sievemq.remoting.server import ProcessorTable
from sievemq.store import MessageStore

DEFAULT_QUERY_MAX_NUM = 32
QUERY_MAX_NUM = 64
"""Most records one QUERY_MESSAGE answers, whatever ``maxNum`` asks (RocketMQ's ``maxMsgsNumBatch``)."""
QUERY_MAX_BYTES = 8 * 1024 * 1024
"""Most record bytes one QUERY_MESSAGE answers (at least one record): the answer stays well inside a frame."""


@dataclass
class QueryProcessor:
    """Finds stored messages."""

    store: MessageStore

    def register(self, table: ProcessorTable) -> None:
        """Put the lookup codes into ``table``."""
        table.register(RequestCode.VIEW_MESSAGE_BY_ID, self.view_by_id)
        table.register(RequestCode.QUERY_MESSAGE, self.query_by_key)

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
