"""The replication wire format (RocketMQ's HA port), pure: bytes in, values out (docs/protocol/replication.md §1).

Two streams on one TCP connection, both big-endian:

* slave -> master: the slave's commit-log end, 8 bytes (``long``), sent when it connects, after every batch it
  appended and at least every heartbeat interval. Only the newest report matters.
* master -> slave: frames ``phyOffset:long | size:int | size bytes of commit log``; a frame of size 0 is a
  heartbeat. A frame's offset is where its bytes belong in the slave's log.
"""

from __future__ import annotations

import struct

__all__ = ["HEADER", "MAX_FRAME_BODY", "FrameDecoder", "ReportDecoder", "WireError", "encode_frame", "encode_report"]

HEADER = struct.Struct(">qi")
"""A frame's header: physical offset, body size (12 bytes)."""
_REPORT = struct.Struct(">q")
MAX_FRAME_BODY = 4 * 1024 * 1024
"""Largest frame body a slave accepts (RocketMQ's master sends at most 32 KiB: haTransferBatchSize)."""


class WireError(ValueError):
    """The peer sent something that is not the replication protocol (the connection is closed)."""


def encode_report(offset: int) -> bytes:
    """A slave's report of its commit-log end."""
    return _REPORT.pack(offset)


def encode_frame(offset: int, data: bytes | memoryview) -> list[bytes | memoryview]:
    """A master's frame for ``data`` belonging at ``offset`` (header and body, to write as they are)."""
    return [HEADER.pack(offset, len(data)), data]


class ReportDecoder:
    """The master's reading side: feed bytes, get the newest complete report (None while there is none)."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> int | None:
        """The newest offset in the complete 8-byte reports seen so far; a negative offset is a protocol error."""
        buf = self._buf + data
        whole = len(buf) - len(buf) % 8
        self._buf = buf[whole:]
        if not whole:
            return None
        (offset,) = _REPORT.unpack_from(buf, whole - 8)
        if offset < 0:
            raise WireError(f"a slave reported the negative offset {offset}")
        return int(offset)


class FrameDecoder:
    """The slave's reading side: feed bytes, get whole frames ``(offset, body)`` (heartbeats have an empty body)."""

    __slots__ = ("_buf", "_max")

    def __init__(self, max_body: int = MAX_FRAME_BODY) -> None:
        self._buf = bytearray()
        self._max = max_body

    @property
    def buffered(self) -> int:
        """Bytes received that do not yet form a whole frame."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        """Every frame completed by ``data``; a negative offset or an oversized body is a protocol error."""
        buf = self._buf
        buf += data
        out: list[tuple[int, bytes]] = []
        pos = 0
        n = len(buf)
        while n - pos >= HEADER.size:
            offset, size = HEADER.unpack_from(buf, pos)
            if offset < 0 or size < 0 or size > self._max:
                raise WireError(f"bad replication frame: offset {offset}, size {size}")
            end = pos + HEADER.size + size
            if end > n:
                break
            out.append((int(offset), bytes(buf[pos + HEADER.size : end])))
            pos = end
        if pos:
            del buf[:pos]
        return out
