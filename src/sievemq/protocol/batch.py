"""Batch message body codec (docs/protocol/message-format.md §10; Java ``MessageDecoder.encodeMessage/decodeMessages``).

Each entry: TOTALSIZE i32 (= 20 + bodyLen + 2 + propsLen) | MAGICCODE i32 (0) | BODYCRC i32 (0) |
FLAG i32 | body length i32 + body | properties length i16 + properties UTF-8. Pure, no I/O.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field

from sievemq.protocol import accel as _accel
from sievemq.protocol.message import (
    MAX_PROPERTIES_LENGTH,
    MessageExt,
    PropertiesSizeExceeded,
    properties_to_string,
    string_to_properties,
)

__all__ = ["BatchEntry", "batch_messages", "decode_batch", "encode_batch"]

_ENTRY_HEAD = struct.Struct(">iiiii")  # total, magic, crc, flag, body length
_I16 = struct.Struct(">h")


@dataclass(slots=True)
class BatchEntry:
    """One message of a batch body: user flag, body and its own properties (UNIQ_KEY, TAGS, KEYS...)."""

    flag: int = 0
    body: bytes = b""
    properties: dict[str, str] = field(default_factory=dict)


def decode_batch(body: bytes | bytearray | memoryview) -> list[BatchEntry]:
    """Split a batch body into entries, walking the field lengths like the Java broker does.

    TOTALSIZE, MAGICCODE and BODYCRC are read but not trusted (the Java broker ignores them).
    Raises ``ValueError`` on truncated input or negative lengths.
    """
    out: list[BatchEntry] = []
    n = len(body)
    pos = 0
    idx = 0
    while pos < n:
        if pos + 20 > n:
            raise ValueError(f"batch entry {idx} at byte {pos}: truncated header ({n - pos} of 20 bytes)")
        _total, _magic, _crc, flag, body_len = _ENTRY_HEAD.unpack_from(body, pos)
        pos += 20
        if body_len < 0 or pos + body_len + 2 > n:
            raise ValueError(f"batch entry {idx}: body length {body_len} overruns the batch ({n} bytes)")
        entry_body = bytes(body[pos : pos + body_len])
        pos += body_len
        props_len = _I16.unpack_from(body, pos)[0]
        pos += 2
        if props_len < 0 or pos + props_len > n:
            raise ValueError(f"batch entry {idx}: properties length {props_len} overruns the batch")
        props = string_to_properties(str(body[pos : pos + props_len], "utf-8", "replace"))
        pos += props_len
        out.append(BatchEntry(flag, entry_body, props))
        idx += 1
    return out


def batch_messages(
    body: bytes | bytearray | memoryview,
    topic: str,
    queue_id: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: tuple[str, int],
    store_host: tuple[str, int],
    reconsume_times: int,
    base: dict[str, str],
    max_body: int,
) -> list[MessageExt] | None:
    """The messages a broker stores for a batch body: each entry with its own properties (``WAIT`` too, as RocketMQ
    stores them) and ``base`` laid over them, and the request's topic, queue, flags, born time and hosts.

    None when the caller must look closer and refuse the batch: a malformed body, no entry, an entry with a
    ``DELAY`` level, or a body over ``max_body`` bytes.
    """
    try:
        entries = decode_batch(body)
    except ValueError:
        return None
    out: list[MessageExt] = []
    for e in entries:
        props = e.properties
        if "DELAY" in props or len(e.body) > max_body:
            return None
        props.update(base)
        out.append(MessageExt(topic, e.body, e.flag, props, queue_id, 0, 0, sys_flag, born_timestamp, born_host, 0,
                              store_host, reconsume_times))  # fmt: skip
    return out or None


def encode_batch(entries: Iterable[BatchEntry]) -> bytes:
    """Encode entries like Java ``MessageDecoder.encodeMessages`` (magic and CRC written as 0)."""
    parts: list[bytes] = []
    for e in entries:
        props_b = properties_to_string(e.properties).encode("utf-8")
        if len(props_b) > MAX_PROPERTIES_LENGTH:
            raise PropertiesSizeExceeded(f"properties length {len(props_b)} exceeds {MAX_PROPERTIES_LENGTH}")
        total = 20 + len(e.body) + 2 + len(props_b)
        parts.append(_ENTRY_HEAD.pack(total, 0, 0, e.flag, len(e.body)))
        parts.append(e.body)
        parts.append(_I16.pack(len(props_b)))
        parts.append(props_b)
    return b"".join(parts)


REFERENCE: dict[str, object] = {
    "decode_batch": decode_batch,
    "batch_messages": batch_messages,
    "encode_batch": encode_batch,
}
"""The pure-Python functions above, kept whatever runs (the accelerator's tests compare against them)."""


_accel.install(sys.modules[__name__], REFERENCE, "init_batch")
