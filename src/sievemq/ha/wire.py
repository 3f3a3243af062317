"""The replication wire format (RocketMQ's HA port), pure: bytes in, values out (docs/protocol/replication.md §1).

A link opens with the slave's hello, then carries two streams on one TCP connection, all big-endian:

* slave -> master, once, first: the hello ``magic "SVHA" | version:short (1) | ticket: 32 ASCII hex characters``
  (38 bytes; the ticket comes with a successful HA_CHECK, see ``tickets.py``). sievemq's own: RocketMQ's slave
  sends no hello, and a master closes a connection whose first bytes are not a good one.
* slave -> master: the slave's commit-log end, 8 bytes (``long``), sent when it connects, after every batch it
  appended and at least every heartbeat interval. Only the newest report matters.
* master -> slave: frames ``phyOffset:long | size:int | size bytes of commit log``; a frame of size 0 is a
  heartbeat. A frame's offset is where its bytes belong in the slave's log.
"""

from __future__ import annotations

import struct

from sievemq.ha.tickets import TICKET_CHARS

__all__ = [
    "HEADER",
    "HELLO",
    "HELLO_MAGIC",
    "HELLO_VERSION",
    "MAX_FRAME_BODY",
    "FrameDecoder",
    "ReportDecoder",
    "WireError",
    "decode_hello",
    "encode_frame",
    "encode_hello",
    "encode_report",
]

HEADER = struct.Struct(">qi")
"""A frame's header: physical offset, body size (12 bytes)."""
_REPORT = struct.Struct(">q")
MAX_FRAME_BODY = 4 * 1024 * 1024
"""Largest frame body a slave accepts (RocketMQ's master sends at most 32 KiB: haTransferBatchSize)."""


HELLO_MAGIC = b"SVHA"
HELLO_VERSION = 1
TICKET_BYTES = TICKET_CHARS
HELLO = struct.Struct(f">4sH{TICKET_BYTES}s")
"""The slave's hello: magic, version, ticket (38 bytes)."""
_HEX = frozenset(b"0123456789abcdef")


class WireError(ValueError):
    """The peer sent something that is not the replication protocol (the connection is closed)."""


def encode_hello(ticket: str) -> bytes:
    """The hello that opens a link with ``ticket`` (32 lowercase hex characters)."""
    raw = ticket.encode("ascii")
    if len(raw) != TICKET_BYTES or not set(raw) <= _HEX:
        raise ValueError("a replication ticket is 32 lowercase hex characters")
    return HELLO.pack(HELLO_MAGIC, HELLO_VERSION, raw)


def decode_hello(data: bytes) -> str:
    """The ticket of a hello (exactly ``HELLO.size`` bytes); anything else is a ``WireError`` (say nothing back)."""
    if len(data) != HELLO.size:
        raise WireError(f"a hello is {HELLO.size} bytes, not {len(data)}")
    magic, version, raw = HELLO.unpack(data)
    if magic != HELLO_MAGIC:
        raise WireError("no hello (a replication link starts with one; RocketMQ's slave sends none)")
    if version != HELLO_VERSION:
        raise WireError(f"hello version {version}, this broker speaks {HELLO_VERSION}")
    if not set(raw) <= _HEX:
        raise WireError("the hello's ticket is not hex")
    return str(raw.decode("ascii"))


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
