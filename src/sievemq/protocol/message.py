"""Message model and the stored/pulled record codec (docs/protocol/message-format.md §1-§6). Pure, no I/O.

Record layout (big-endian, IPv4 hosts; Java ``MessageDecoder`` / ``CommitLog``)::

    0 TOTALSIZE i32 | 4 MAGICCODE i32 | 8 BODYCRC i32 | 12 QUEUEID i32 | 16 FLAG i32 |
    20 QUEUEOFFSET i64 | 28 PHYSICALOFFSET i64 | 36 SYSFLAG i32 | 40 BORNTIMESTAMP i64 |
    48 BORNHOST 4+4 (16+4 if sysFlag & 0x10) | STORETIMESTAMP i64 | STOREHOST 4+4 (16+4 if sysFlag & 0x20) |
    RECONSUMETIMES i32 | PREPAREDTRANSACTIONOFFSET i64 | body len i32 + body |
    topic len i8 + topic UTF-8 | properties len i16 + properties UTF-8

``encode_record`` writes that layout; ``decode_record`` reads it (also IPv6 hosts and the 5.x
``MAGIC_V2`` variant with a 2-byte topic length). ``read_record_summary`` is the cheap path for the
store's recovery/dispatch: it parses the header and properties but never copies the body.
Bodies are returned exactly as stored (compressed bodies are not inflated here).
"""

from __future__ import annotations

import mmap
import socket
import struct
import sys
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from sievemq.protocol import accel as _accel
from sievemq.protocol.msgid import ip_to_bytes, make_offset_msg_id
from sievemq.protocol.property_keys import PropertyKey
from sievemq.protocol.sysflag import (
    BORNHOST_V6_FLAG,
    STOREHOSTADDRESS_V6_FLAG,
    TRANSACTION_MASK,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)

__all__ = [
    "BLANK_MAGIC",
    "MAGIC_V1",
    "MAGIC_V2",
    "MAX_PROPERTIES_LENGTH",
    "MAX_TOPIC_LENGTH",
    "NAME_VALUE_SEPARATOR",
    "PROPERTY_SEPARATOR",
    "MessageExt",
    "PropertiesSizeExceeded",
    "PropertyKey",
    "ReadableBuffer",
    "RecordSummary",
    "body_crc32",
    "decode_record",
    "decode_records",
    "encode_record",
    "properties_to_string",
    "read_properties",
    "read_record_summary",
    "record_magic",
    "record_total_size",
    "string_to_properties",
]

MAGIC_V1 = 0xDAA320A7
"""Magic of a 4.x message record (-626843481 as a Java int)."""
MAGIC_V2 = 0xDAA320AB
"""5.x magic: same layout but a 2-byte topic length. Decoded for robustness, never written."""
BLANK_MAGIC = 0xCBD43194
"""Magic of the blank filler at the tail of a commit-log file."""

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
MAX_TOPIC_LENGTH = 127
"""Topic length is a signed byte in the 4.x record."""
MAX_PROPERTIES_LENGTH = 32767
"""Properties length is a signed int16 in the record."""

ReadableBuffer = bytes | bytearray | memoryview | mmap.mmap
"""Buffers the decoders accept (anything ``struct.unpack_from`` and slicing work on)."""


class PropertiesSizeExceeded(ValueError):
    """The encoded properties exceed 32767 bytes (store answers PROPERTIES_SIZE_EXCEEDED)."""


@dataclass(slots=True)
class MessageExt:
    """A message as stored / pulled (Java ``MessageExt``); ``properties`` holds TAGS, KEYS, UNIQ_KEY..."""

    topic: str
    body: bytes = b""
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    queue_id: int = 0
    queue_offset: int = 0
    commit_log_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: tuple[str, int] = ("127.0.0.1", 0)
    store_timestamp: int = 0
    store_host: tuple[str, int] = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    body_crc: int = 0
    store_size: int = 0

    @property
    def tags(self) -> str | None:
        """The ``TAGS`` property, or None."""
        return self.properties.get("TAGS")

    @property
    def keys(self) -> list[str]:
        """``KEYS`` split on single spaces, empty pieces dropped (as the Java index service does)."""
        keys = self.properties.get("KEYS")
        if not keys:
            return []
        return [k for k in keys.split(" ") if k]

    @property
    def uniq_key(self) -> str | None:
        """The client-side message id (``UNIQ_KEY`` property), or None."""
        return self.properties.get("UNIQ_KEY")

    @property
    def offset_msg_id(self) -> str:
        """The broker id computed from ``store_host`` and ``commit_log_offset`` (32 hex chars for IPv4)."""
        return make_offset_msg_id(self.store_host[0], self.store_host[1], self.commit_log_offset)

    @property
    def msg_id(self) -> str:
        """``uniq_key`` if present, else ``offset_msg_id`` (Java ``MessageClientExt.getMsgId``)."""
        uniq = self.properties.get("UNIQ_KEY")
        return uniq if uniq is not None else self.offset_msg_id


# --------------------------------------------------------------------------------------------- properties


def properties_to_string(props: Mapping[str, str]) -> str:
    """Java ``messageProperties2String``: ``k\\x01v\\x02k\\x01v`` with no trailing 0x02.

    Raises ``ValueError`` if a key contains 0x01/0x02 or a value contains 0x02 (the result would not
    parse back). A value may contain 0x01: Java's parser splits on the first one.
    """
    parts = []
    for k, v in props.items():
        if "\x01" in k or "\x02" in k or "\x02" in v:
            raise ValueError(f"property {k!r} contains a separator character (0x01/0x02)")
        parts.append(f"{k}\x01{v}")
    return "\x02".join(parts)


def string_to_properties(s: str) -> dict[str, str]:
    """Java 4.9 ``string2messageProperties``: split on 0x02, then on the first 0x01 of each pair.

    Tolerates a trailing 0x02 (C / ali-ons clients write one) and skips segments with an empty
    key or an empty value (which includes short and separator-less segments); later keys win.
    """
    result: dict[str, str] = {}
    if not s:
        return result
    for seg in s.split("\x02"):
        k, _, v = seg.partition("\x01")
        if k and v:
            result[k] = v
    return result


def body_crc32(body: bytes | bytearray | memoryview) -> int:
    """Stored body CRC: ``zlib.crc32(body) & 0x7FFFFFFF`` (Java ``UtilAll.crc32``)."""
    return zlib.crc32(body) & 0x7FFFFFFF


# --------------------------------------------------------------------------------------------- structs

# Whole fixed part up to and including the body length, both hosts IPv4 (88 bytes).
_V4_FIXED = struct.Struct(">iIiiiqqiq4siq4siiqi")
# Generic pieces for IPv6 variants.
_HEAD = struct.Struct(">iIiiiqqiq")  # 48 bytes: up to BORNTIMESTAMP
_HOST4 = struct.Struct(">4si")
_HOST6 = struct.Struct(">16si")
_I64 = struct.Struct(">q")
_TAIL = struct.Struct(">iqi")  # reconsume times, prepared offset, body length
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")
_I8 = struct.Struct(">b")
_SIZE_MAGIC = struct.Struct(">iI")

_V4_FIXED_SIZE = _V4_FIXED.size  # 88
_MIN_V4_RECORD = _V4_FIXED_SIZE + 1 + 2  # 91

_ip4_cache: dict[bytes, str] = {}
_ip6_cache: dict[bytes, str] = {}
_topic_cache: dict[bytes, str] = {}
_topic_parts: dict[str, bytes] = {}
_host_raw: dict[str, bytes] = {}


def _ip4_str(raw: bytes) -> str:
    s = _ip4_cache.get(raw)
    if s is None:
        if len(_ip4_cache) > 4096:
            _ip4_cache.clear()
        s = _ip4_cache[raw] = f"{raw[0]}.{raw[1]}.{raw[2]}.{raw[3]}"
    return s


def _ip6_str(raw: bytes) -> str:
    s = _ip6_cache.get(raw)
    if s is None:
        if len(_ip6_cache) > 4096:
            _ip6_cache.clear()
        s = _ip6_cache[raw] = socket.inet_ntop(socket.AF_INET6, raw)
    return s


def _topic_str(raw: bytes) -> str:
    s = _topic_cache.get(raw)
    if s is None:
        if len(_topic_cache) > 4096:
            _topic_cache.clear()
        s = _topic_cache[raw] = raw.decode("utf-8", "replace")
    return s


def _host_bytes(host: tuple[str, int], v6: bool, what: str) -> bytes:
    raw = _host_raw.get(host[0])
    if raw is None:
        raw = ip_to_bytes(host[0])
        if len(_host_raw) > 4096:
            _host_raw.clear()
        _host_raw[host[0]] = raw
    if len(raw) != (16 if v6 else 4):
        flag = "BORNHOST_V6_FLAG" if what == "born" else "STOREHOSTADDRESS_V6_FLAG"
        state = "set" if v6 else "not set"
        raise ValueError(f"{what} host {host[0]!r} does not match sysFlag ({flag} {state})")
    return raw


# --------------------------------------------------------------------------------------------- encode


def encode_record(msg: MessageExt) -> bytes:
    """Encode ``msg`` in the stored/pulled record layout; sets ``msg.body_crc`` and ``msg.store_size``.

    Hosts are IPv4 unless sysFlag carries 0x10 (born) / 0x20 (store), then IPv6 literals are
    required. Raises ``ValueError`` if the topic exceeds 127 UTF-8 bytes or a host does not match
    the sysFlag, and ``PropertiesSizeExceeded`` (a ``ValueError``) above 32767 property bytes.
    """
    body = msg.body
    topic_part = _topic_parts.get(msg.topic)  # length byte + UTF-8 bytes of the topic
    if topic_part is None:
        topic_b = msg.topic.encode("utf-8")
        if not 0 < len(topic_b) <= MAX_TOPIC_LENGTH:
            raise ValueError(f"topic must be 1..{MAX_TOPIC_LENGTH} UTF-8 bytes, got {len(topic_b)}")
        if len(_topic_parts) > 4096:
            _topic_parts.clear()
        topic_part = _topic_parts[msg.topic] = _I8.pack(len(topic_b)) + topic_b
    props_b = properties_to_string(msg.properties).encode("utf-8")
    if len(props_b) > MAX_PROPERTIES_LENGTH:
        raise PropertiesSizeExceeded(f"properties length {len(props_b)} exceeds {MAX_PROPERTIES_LENGTH}")
    crc = zlib.crc32(body) & 0x7FFFFFFF
    sys_flag = msg.sys_flag
    born_v6 = bool(sys_flag & BORNHOST_V6_FLAG)
    store_v6 = bool(sys_flag & STOREHOSTADDRESS_V6_FLAG)
    born_ip = _host_bytes(msg.born_host, born_v6, "born")
    store_ip = _host_bytes(msg.store_host, store_v6, "store")
    total = _MIN_V4_RECORD - 1 + len(body) + len(topic_part) + len(props_b)
    if born_v6 or store_v6:
        total += 12 * born_v6 + 12 * store_v6
        head = b"".join(
            (
                _HEAD.pack(
                    total,
                    MAGIC_V1,
                    crc,
                    msg.queue_id,
                    msg.flag,
                    msg.queue_offset,
                    msg.commit_log_offset,
                    sys_flag,
                    msg.born_timestamp,
                ),
                (_HOST6 if born_v6 else _HOST4).pack(born_ip, msg.born_host[1]),
                _I64.pack(msg.store_timestamp),
                (_HOST6 if store_v6 else _HOST4).pack(store_ip, msg.store_host[1]),
                _TAIL.pack(msg.reconsume_times, msg.prepared_transaction_offset, len(body)),
            )
        )
    else:
        head = _V4_FIXED.pack(
            total, MAGIC_V1, crc, msg.queue_id, msg.flag, msg.queue_offset, msg.commit_log_offset,
            sys_flag, msg.born_timestamp, born_ip, msg.born_host[1], msg.store_timestamp,
            store_ip, msg.store_host[1], msg.reconsume_times, msg.prepared_transaction_offset, len(body),
        )  # fmt: skip
    out = b"".join((head, body, topic_part, _I16.pack(len(props_b)), props_b))
    msg.body_crc = crc
    msg.store_size = total
    return out


# --------------------------------------------------------------------------------------------- decode


def record_total_size(buf: ReadableBuffer, pos: int = 0) -> int:
    """The TOTALSIZE field of the record at ``pos`` (no validation of the rest)."""
    if pos < 0 or pos + 4 > len(buf):
        raise ValueError(f"truncated record: no TOTALSIZE at {pos}")
    return int(_I32.unpack_from(buf, pos)[0])


def record_magic(buf: ReadableBuffer, pos: int = 0) -> int:
    """The MAGICCODE (unsigned) of the record at ``pos``: ``MAGIC_V1``, ``BLANK_MAGIC``, or garbage."""
    if pos < 0 or pos + 8 > len(buf):
        raise ValueError(f"truncated record: no MAGICCODE at {pos}")
    return int(_U32.unpack_from(buf, pos + 4)[0])


# total, crc, queue_id, flag, queue_offset, phy_offset, sys_flag, born_ts, born_host, store_ts,
# store_host, reconsume_times, prepared_offset, body_pos, body_len, topic, properties string, end
_Header = tuple[
    int, int, int, int, int, int, int, int, tuple[str, int], int, tuple[str, int], int, int, int, int, str, str, int
]


def _parse(buf: ReadableBuffer, pos: int) -> _Header:
    """Parse everything but the body; validates lengths against TOTALSIZE and the buffer."""
    n = len(buf)
    if pos < 0 or pos + _MIN_V4_RECORD > n:
        raise ValueError(f"truncated record at {pos}: {n - pos} bytes left")
    try:
        (total, magic, crc, qid, flag, qoff, phy, sys_flag, born_ts, born_ip, born_port,
         store_ts, store_ip, store_port, reconsume, prepared, body_len) = _V4_FIXED.unpack_from(buf, pos)  # fmt: skip
        if magic != MAGIC_V1 and magic != MAGIC_V2:
            raise ValueError(f"bad magic 0x{magic:08X} at {pos}")
        end = pos + total
        if end > n or total < _MIN_V4_RECORD:
            raise ValueError(f"record at {pos}: TOTALSIZE {total} exceeds buffer or is too small")
        if sys_flag & (BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG):
            p = pos + _HEAD.size
            if sys_flag & BORNHOST_V6_FLAG:
                raw, born_port = _HOST6.unpack_from(buf, p)
                born_host = (_ip6_str(raw), born_port)
                p += 20
            else:
                raw, born_port = _HOST4.unpack_from(buf, p)
                born_host = (_ip4_str(raw), born_port)
                p += 8
            store_ts = _I64.unpack_from(buf, p)[0]
            p += 8
            if sys_flag & STOREHOSTADDRESS_V6_FLAG:
                raw, store_port = _HOST6.unpack_from(buf, p)
                store_host = (_ip6_str(raw), store_port)
                p += 20
            else:
                raw, store_port = _HOST4.unpack_from(buf, p)
                store_host = (_ip4_str(raw), store_port)
                p += 8
            reconsume, prepared, body_len = _TAIL.unpack_from(buf, p)
            body_pos = p + 16
        else:
            born_host = (_ip4_str(born_ip), born_port)
            store_host = (_ip4_str(store_ip), store_port)
            body_pos = pos + _V4_FIXED_SIZE
        p = body_pos + body_len
        if body_len < 0 or p + 1 > end:
            raise ValueError(f"record at {pos}: bad body length {body_len}")
        if magic == MAGIC_V1:
            topic_len = buf[p]
            if topic_len > 127:
                raise ValueError(f"record at {pos}: negative topic length")
            p += 1
        else:
            topic_len = _I16.unpack_from(buf, p)[0]
            if topic_len < 0:
                raise ValueError(f"record at {pos}: negative topic length")
            p += 2
        topic = _topic_str(bytes(buf[p : p + topic_len]))
        p += topic_len
        if p + 2 > end:
            raise ValueError(f"record at {pos}: topic overruns the record")
        props_len = _I16.unpack_from(buf, p)[0]
        p += 2
        if props_len < 0 or p + props_len != end:
            raise ValueError(f"record at {pos}: field lengths do not add up to TOTALSIZE {total}")
        props_str = str(buf[p:end], "utf-8", "replace") if props_len else ""
    except struct.error as e:
        raise ValueError(f"truncated record at {pos}: {e}") from e
    return (
        total, crc, qid, flag, qoff, phy, sys_flag, born_ts, born_host, store_ts, store_host,
        reconsume, prepared, body_pos, body_len, topic, props_str, end,
    )  # fmt: skip


def decode_record(buf: ReadableBuffer, pos: int = 0, *, read_body: bool = True) -> tuple[MessageExt, int]:
    """Decode the record at ``pos``; returns ``(message, next_pos)``.

    With ``read_body=False`` the body is left empty (``body_crc``/``store_size`` still filled).
    Raises ``ValueError`` on a bad magic (including ``BLANK_MAGIC``), truncation, or lengths that
    do not add up to TOTALSIZE.
    """
    (total, crc, qid, flag, qoff, phy, sys_flag, born_ts, born_host, store_ts, store_host,
     reconsume, prepared, body_pos, body_len, topic, props_str, end) = _parse(buf, pos)  # fmt: skip
    body = bytes(buf[body_pos : body_pos + body_len]) if read_body and body_len else b""
    msg = MessageExt(
        topic, body, flag, string_to_properties(props_str), qid, qoff, phy, sys_flag, born_ts,
        born_host, store_ts, store_host, reconsume, prepared, crc, total,
    )  # fmt: skip
    return msg, end


def decode_records(buf: ReadableBuffer, *, read_body: bool = True) -> list[MessageExt]:
    """Decode back-to-back records (a pull body) until the buffer ends or a ``BLANK_MAGIC`` filler.

    The client's hot path: a 4.x record with IPv4 hosts whose lengths add up is decoded inline here (the
    same checks as ``decode_record``, about 15% less time per message); anything else goes through
    ``decode_record``, which also produces the error for a malformed record.
    """
    out: list[MessageExt] = []
    append = out.append
    pos = 0
    n = len(buf)
    unpack = _V4_FIXED.unpack_from
    ip4 = _ip4_cache
    topics = _topic_cache
    props_of = string_to_properties
    new = MessageExt
    while pos < n:
        if n - pos >= _MIN_V4_RECORD:
            (total, magic, crc, qid, flag, qoff, phy, sys_flag, born_ts, born_ip, born_port,
             store_ts, store_ip, store_port, reconsume, prepared, body_len) = unpack(buf, pos)  # fmt: skip
            end = pos + total
            body_pos = pos + _V4_FIXED_SIZE
            p = body_pos + body_len  # topic length byte
            if (
                magic == MAGIC_V1
                and not sys_flag & (BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)
                and total >= _MIN_V4_RECORD
                and end <= n
                and body_len >= 0
                and p < end
            ):
                topic_len = buf[p]
                props_pos = p + 1 + topic_len
                if topic_len <= MAX_TOPIC_LENGTH and props_pos + 2 <= end:
                    props_len = (buf[props_pos] << 8) | buf[props_pos + 1]
                    if props_len < 0x8000 and props_pos + 2 + props_len == end:
                        raw_topic = bytes(buf[p + 1 : props_pos])
                        topic = topics.get(raw_topic) or _topic_str(raw_topic)
                        born_host = ip4.get(born_ip) or _ip4_str(born_ip)
                        store_host = ip4.get(store_ip) or _ip4_str(store_ip)
                        props = props_of(str(buf[props_pos + 2 : end], "utf-8", "replace")) if props_len else {}
                        body = bytes(buf[body_pos:p]) if read_body and body_len else b""
                        append(new(topic, body, flag, props, qid, qoff, phy, sys_flag, born_ts, (born_host, born_port),
                                   store_ts, (store_host, store_port), reconsume, prepared, crc, total))  # fmt: skip
                        pos = end
                        continue
        if pos + 8 <= n and _U32.unpack_from(buf, pos + 4)[0] == BLANK_MAGIC:
            break
        msg, pos = decode_record(buf, pos, read_body=read_body)
        append(msg)
    return out


class RecordSummary(NamedTuple):
    """What the store needs from a record for recovery, dispatch and indexing (no body copy).

    ``body_offset``/``body_length`` locate the body inside the buffer passed in (absolute positions).
    ``keys`` is KEYS split on spaces; ``tags``/``uniq_key`` are None when absent.
    """

    total_size: int
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    born_timestamp: int
    store_timestamp: int
    body_crc: int
    body_offset: int
    body_length: int
    tags: str | None
    keys: list[str]
    uniq_key: str | None
    properties: dict[str, str]


def read_record_summary(buf: ReadableBuffer, pos: int = 0, *, check_crc: bool = False) -> RecordSummary:
    """Parse the record at ``pos`` without copying its body (see ``RecordSummary``).

    The caller must check ``record_magic`` first if the position may hold a ``BLANK_MAGIC`` filler
    or zeroed space: any magic other than a message magic raises ``ValueError``. With
    ``check_crc=True`` the body CRC is verified (no copy) and a mismatch raises ``ValueError``.
    """
    (total, crc, qid, _flag, qoff, phy, sys_flag, born_ts, _born_host, store_ts, _store_host,
     _reconsume, _prepared, body_pos, body_len, topic, props_str, _end) = _parse(buf, pos)  # fmt: skip
    if check_crc:
        with memoryview(buf) as mv:
            actual = zlib.crc32(mv[body_pos : body_pos + body_len]) & 0x7FFFFFFF
        if actual != crc:
            raise ValueError(f"record at {pos}: body CRC mismatch (stored {crc}, computed {actual})")
    props = string_to_properties(props_str)
    keys_s = props.get("KEYS")
    keys = [k for k in keys_s.split(" ") if k] if keys_s else []
    return RecordSummary(
        total, topic, qid, qoff, phy, sys_flag, born_ts, store_ts, crc, body_pos, body_len,
        props.get("TAGS"), keys, props.get("UNIQ_KEY"), props,
    )  # fmt: skip


_SYSFLAG_AT = struct.Struct(">i")
_MAGIC_AT = struct.Struct(">I")
_BODYLEN_V4 = struct.Struct(">i")
_PROPLEN = struct.Struct(">h")


def read_properties(buf: ReadableBuffer, pos: int = 0) -> dict[str, str]:
    """Only the properties of the record at ``pos`` (the SQL92 hot path: no hosts, no body copy).

    Raises ValueError on a record it cannot walk; ``read_record_summary`` validates more.
    """
    try:
        sys_flag = _SYSFLAG_AT.unpack_from(buf, pos + 36)[0]
        if sys_flag & (BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG):
            return read_record_summary(buf, pos).properties
        body_len = _BODYLEN_V4.unpack_from(buf, pos + 84)[0]
        p = pos + 88 + body_len
        if _MAGIC_AT.unpack_from(buf, pos + 4)[0] == MAGIC_V1:
            p += 1 + buf[p]
        else:
            p += 2 + _PROPLEN.unpack_from(buf, p)[0]
        plen = _PROPLEN.unpack_from(buf, p)[0]
        if plen <= 0:
            return {}
        raw = bytes(buf[p + 2 : p + 2 + plen])
    except (struct.error, IndexError):
        raise ValueError(f"truncated record at {pos}") from None
    return string_to_properties(raw.decode("utf-8", "replace"))


def encode_run(
    msgs: list[MessageExt], queue_offset: int, store_timestamp: int, store_host: tuple[str, int], phy: int, limit: int
) -> tuple[list[bytes], int, int]:
    """The records of one put, in a row from commit-log offset ``phy``: each message gets the next queue offset (a
    prepared or rolled-back transaction record gets none: 0), the store time and host, and the offset its record
    starts at. Returns ``(records, the next queue offset, where the last record ends)``; ``ValueError`` for a
    record longer than ``limit`` (the messages after it untouched), or whatever ``encode_record`` raises."""
    records: list[bytes] = []
    for m in msgs:
        t = m.sys_flag & TRANSACTION_MASK
        if t != TRANSACTION_PREPARED_TYPE and t != TRANSACTION_ROLLBACK_TYPE:
            m.queue_offset = queue_offset
            queue_offset += 1
        else:
            m.queue_offset = 0
        m.store_timestamp = store_timestamp
        m.store_host = store_host
        m.commit_log_offset = phy
        rec = encode_record(m)
        if len(rec) > limit:
            raise ValueError(f"record of {len(rec)} bytes does not fit a commit-log segment")
        records.append(rec)
        phy += len(rec)
    return records, queue_offset, phy


def offset_msg_ids(host: str, port: int, msgs: list[MessageExt]) -> list[str]:
    """The offsetMsgIds of stored messages (``make_offset_msg_id`` of each one's ``commit_log_offset``)."""
    return [make_offset_msg_id(host, port, m.commit_log_offset) for m in msgs]


# --------------------------------------------------------------------------------------------- compiled twins

REFERENCE: dict[str, object] = {
    "string_to_properties": string_to_properties,
    "properties_to_string": properties_to_string,
    "encode_record": encode_record,
    "decode_records": decode_records,
    "encode_run": encode_run,
    "offset_msg_ids": offset_msg_ids,
}
"""The pure-Python functions above, kept whatever runs (the accelerator's tests compare against them)."""


_accel.install(sys.modules[__name__], REFERENCE, "init_message")
