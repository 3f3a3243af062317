"""Message ids (docs/protocol/message-format.md §7-§8): the broker's offsetMsgId and the producer's UNIQ_KEY.

* offsetMsgId = store host IP (4 or 16 bytes) + port (int32) + commit-log offset (int64), uppercase hex:
  32 chars for IPv4, 56 for IPv6 (Java ``MessageDecoder.createMessageId/decodeMessageId``).
* UNIQ_KEY = IP (4/16) + pid (int16) + class-loader hash (int32) + ms since the start of the current
  month, local time (int32) + counter (int16), uppercase hex (Java ``MessageClientIDSetter``).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import itertools
import os
import random
import socket
import struct
import time
from functools import lru_cache

__all__ = ["UniqIdGenerator", "ip_to_bytes", "local_ip_bytes", "make_offset_msg_id", "parse_offset_msg_id"]

_PORT_OFFSET = struct.Struct(">iq")


@lru_cache(maxsize=256)
def ip_to_bytes(host: str) -> bytes:
    """Packed address of an IPv4 (4 bytes) or IPv6 (16 bytes) literal; ``ValueError`` otherwise."""
    try:
        if ":" in host:
            return socket.inet_pton(socket.AF_INET6, host)
        return socket.inet_pton(socket.AF_INET, host)
    except OSError as e:
        raise ValueError(f"not an IP address literal: {host!r}") from e


def make_offset_msg_id(host: str, port: int, phy_offset: int) -> str:
    """offsetMsgId of a stored record: 32 uppercase hex chars (IPv4 host) or 56 (IPv6)."""
    return (ip_to_bytes(host) + _PORT_OFFSET.pack(port, phy_offset)).hex().upper()


def parse_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    """Decode an offsetMsgId back to ``(host, port, phy_offset)``; 32 (IPv4) or 56 (IPv6) hex chars."""
    n = len(msg_id)
    if n == 32:
        ip_len, family = 4, socket.AF_INET
    elif n == 56:
        ip_len, family = 16, socket.AF_INET6
    else:
        raise ValueError(f"offsetMsgId must be 32 or 56 hex chars, got {n}")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError as e:
        raise ValueError(f"offsetMsgId is not hex: {msg_id!r}") from e
    port, offset = _PORT_OFFSET.unpack_from(raw, ip_len)
    return socket.inet_ntop(family, raw[:ip_len]), port, offset


def _fake_ip() -> bytes:
    """Java ``MessageClientIDSetter.createFakeIP``: the low 4 bytes of the current time in ms."""
    return struct.pack(">q", time.time_ns() // 1_000_000)[4:]


def local_ip_bytes() -> bytes:
    """Best-effort non-loopback IPv4 address of this host (4 bytes), else Java's fake IP.

    Uses a connected UDP socket (a route lookup; no packet is sent).
    """
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))  # TEST-NET-1, never contacted
        ip = s.getsockname()[0]
        if ip and not ip.startswith("127.") and ip != "0.0.0.0":
            return socket.inet_aton(ip)
    return _fake_ip()


def _month_bounds(now_ms: int) -> tuple[int, int]:
    """Start of the current local month and of the next one, in epoch ms (Java ``Calendar``)."""
    now = _dt.datetime.fromtimestamp(now_ms / 1000)
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    nxt = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
    return int(start.timestamp() * 1000), int(nxt.timestamp() * 1000)


class UniqIdGenerator:
    """Java-compatible UNIQ_KEY generator (``MessageClientIDSetter.createUniqID``).

    The fixed prefix is IP + pid (int16) + a random int32 standing in for Java's class-loader hash;
    each id appends the ms since the start of the current local month (int32) and a wrapping int16
    counter. ``next()`` is safe to call from asyncio code and from threads (the counter is an
    ``itertools.count``, atomic under the GIL).
    """

    __slots__ = ("_bounds", "_counter", "_prefix")

    def __init__(self, ip: str | bytes | None = None, pid: int | None = None, loader_hash: int | None = None):
        """``ip`` is a literal or packed 4/16 bytes (default: this host's IPv4 or Java's fake IP)."""
        if ip is None:
            ip_bytes = local_ip_bytes()
        elif isinstance(ip, str):
            ip_bytes = ip_to_bytes(ip)
        else:
            if len(ip) not in (4, 16):
                raise ValueError("ip must be 4 or 16 bytes")
            ip_bytes = bytes(ip)
        pid = os.getpid() if pid is None else pid
        loader_hash = random.getrandbits(32) if loader_hash is None else loader_hash
        self._prefix = (ip_bytes + struct.pack(">HI", pid & 0xFFFF, loader_hash & 0xFFFFFFFF)).hex().upper()
        self._bounds = _month_bounds(time.time_ns() // 1_000_000)
        self._counter = itertools.count()

    @property
    def prefix(self) -> str:
        """The fixed hex prefix (IP + pid + class-loader hash) shared by all ids of this generator."""
        return self._prefix

    def next(self) -> str:
        """A new UNIQ_KEY: 32 uppercase hex chars for an IPv4 prefix (56 for IPv6)."""
        now = time.time_ns() // 1_000_000
        start, nxt = self._bounds
        if now >= nxt:
            self._bounds = bounds = _month_bounds(now)
            start = bounds[0]
        diff = now - start
        if -1_000_000 < diff < 0:  # clock stepped back (NTP), as Java
            diff = 0
        return f"{self._prefix}{diff & 0xFFFFFFFF:08X}{next(self._counter) & 0xFFFF:04X}"
