"""What a broker answers its replicas: consumer offsets (43), delay offsets (45), and sievemq's private
replication codes: HA_CHECK (30020), GET_ALL_CONSUMER_FILTER (30021), MERGE_CONSUMER_OFFSET (30022).

A successful HA_CHECK also hands the requester a one-time ticket for the HA port (``haTicket``) and this broker's
HA address (``haServerAddr``): see docs/protocol/replication.md §1, §2 and §4.
"""

from __future__ import annotations

import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson

from sievemq.broker.filter_manager import ConsumerFilterManager
from sievemq.broker.offsets import ConsumerOffsetManager
from sievemq.broker.schedule import ScheduleService
from sievemq.errors import RemotingError
from sievemq.protocol.reasons import Reason
from sievemq.remoting.codes import RequestCode, ResponseCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import Connection
from sievemq.remoting.headers import require_int
from sievemq.remoting.server import ProcessorTable
from sievemq.store import MessageStore

__all__ = ["HaProcessor", "log_crc"]

MAX_CHECK_BYTES = 1 << 20


def log_crc(store: MessageStore, start: int, end: int) -> int | None:
    """CRC32 of the commit-log bytes ``[start, end)``, None when some of them are not stored."""
    crc = 0
    at = start
    while at < end:
        chunk = store.read_commitlog(at, end - at)
        if not chunk:
            return None
        crc = zlib.crc32(chunk, crc)
        at += len(chunk)
    return crc


@dataclass
class HaProcessor:
    """Answers the metadata and checks a slave (or a recovering master) asks for."""

    store: MessageStore
    offsets: ConsumerOffsetManager
    schedule: ScheduleService
    filters: ConsumerFilterManager
    on_replica_ahead: Callable[[str, int], None] | None = None
    """Told ``(peer, offset)`` when a replica's HA_CHECK shows it holds more of the commit log than this broker."""
    link_fields: Callable[[str, dict[str, str]], Awaitable[dict[str, str]]] | None = None
    """``link_fields(ip)``: what a successful HA_CHECK from ``ip`` adds (a ticket for the HA port and its address);
    raises ``RemotingError`` when the HA port cannot be offered."""

    def register(self, table: ProcessorTable) -> None:
        """Put the replication codes into ``table``."""
        table.register(RequestCode.GET_ALL_CONSUMER_OFFSET, self.all_offsets)
        table.register(RequestCode.GET_ALL_DELAY_OFFSET, self.all_delay_offsets)
        table.register(RequestCode.HA_CHECK, self.check)
        table.register(RequestCode.GET_ALL_CONSUMER_FILTER, self.all_filters)
        table.register(RequestCode.MERGE_CONSUMER_OFFSET, self.merge_offsets)

    async def all_offsets(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """43 GET_ALL_CONSUMER_OFFSET: RocketMQ's ``{"offsetTable": {"topic@group": {"queueId": offset}}}``."""
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps(self.offsets.take_snapshot(force=True, mark=False)))

    async def all_delay_offsets(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """45 GET_ALL_DELAY_OFFSET: ``{"offsetTable": {"level": offset}}``."""
        table = {str(k): v for k, v in sorted(self.schedule.offsets.items())}
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps({"offsetTable": table}))

    async def all_filters(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """30021 GET_ALL_CONSUMER_FILTER: the SQL92 filters as ``consumerFilter.json`` holds them."""
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps(self.filters.document()))

    async def merge_offsets(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """30022 MERGE_CONSUMER_OFFSET: keep, per queue, the larger of ours and the body's (a slave's table)."""
        try:
            table = orjson.loads(cmd.body).get("offsetTable") or {}
            merged = self.offsets.merge_max(table)
        except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError) as e:
            why = f"malformed offset table: {e}"
            raise RemotingError(ResponseCode.SYSTEM_ERROR, why, Reason.INVALID_HEADER) from None
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"merged": merged})

    async def check(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """30020 HA_CHECK: do our commit-log bytes ``[offset - length, offset)`` have the CRC the replica has?"""
        f = cmd.ext_fields
        offset, length, crc = require_int(f, "offset"), require_int(f, "length"), require_int(f, "crc")
        if offset < 0 or not 0 <= length <= MAX_CHECK_BYTES or length > offset:
            why = "HA_CHECK needs 0 <= length <= offset"
            raise RemotingError(ResponseCode.SYSTEM_ERROR, why, Reason.INVALID_HEADER)
        end = self.store.max_phy_offset
        info: dict[str, Any] = {"maxOffset": end, "minOffset": self.store.min_phy_offset}
        if offset > end:
            if self.on_replica_ahead is not None:
                self.on_replica_ahead(f"{conn.peer[0]}:{conn.peer[1]}", offset)
            return cmd.response(
                ResponseCode.SYSTEM_ERROR,
                f"this broker's commit log ends at {end}, before the replica's {offset}",
                {"reason": Reason.HA_MASTER_BEHIND, **info},
            )
        ours = log_crc(self.store, offset - length, offset) if length else 0
        if ours is not None and ours != crc:
            return cmd.response(
                ResponseCode.SYSTEM_ERROR,
                f"the commit logs differ in the {length} bytes before offset {offset}",
                {"reason": Reason.HA_DIVERGED, **info},
            )
        if self.link_fields is not None:
            info.update(await self.link_fields(conn.peer[0], {k: str(v) for k, v in f.items()}))
        return cmd.response(ResponseCode.SUCCESS, ext_fields=info)
