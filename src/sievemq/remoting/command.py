"""RemotingCommand and the frame codec: pure, no I/O (bytes in, commands out).

Frame layout (big-endian), see docs/protocol/frames.md §1-§4::

    length:int32 | (serializeType << 24 | headerLen):int32 | header | body

``length`` counts everything after itself. The header is JSON (type 0) or RocketMQ's binary form (type 1).
Responses mirror the serialization of the request they answer.
"""

from __future__ import annotations

import struct
import sys
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import orjson

from sievemq.errors import FrameError
from sievemq.protocol import accel as _accel

MAX_FRAME_LENGTH = 16 * 1024 * 1024
FLAG_RESPONSE = 1
FLAG_ONEWAY = 2
SIEVEMQ_VERSION = 409  # MQVersion.Version.V4_9_8.ordinal(): Java reads it as the broker version

_INT32 = struct.Struct(">i")
_FRAME_PREFIX = struct.Struct(">ii")
_BIN_FIXED = struct.Struct(">hbhii")  # code, language, version, opaque, flag

LANGUAGES: tuple[str, ...] = (
    "JAVA",
    "CPP",
    "DOTNET",
    "PYTHON",
    "DELPHI",
    "ERLANG",
    "RUBY",
    "OTHER",
    "HTTP",
    "GO",
    "PHP",
    "OMS",
    "RUST",
)
_LANGUAGE_CODE = {name: i for i, name in enumerate(LANGUAGES)}


class SerializeType(IntEnum):
    """Header serialization, the top byte of the second frame word."""

    JSON = 0
    ROCKETMQ = 1


@dataclass(slots=True)
class RemotingCommand:
    """One request or response on a remoting connection."""

    code: int
    opaque: int = 0
    flag: int = 0
    language: str = "JAVA"
    version: int = SIEVEMQ_VERSION
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    serialize_type: SerializeType = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        """True when bit 0 of ``flag`` is set."""
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        """True for a one-way request (no response may be sent)."""
        return bool(self.flag & FLAG_ONEWAY)

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: dict[str, Any] | None = None,
        body: bytes = b"",
        *,
        oneway: bool = False,
    ) -> RemotingCommand:
        """A new request; header values are stringified the way Java does (``true``/``false`` for bools)."""
        return cls(
            code=int(code),
            flag=FLAG_ONEWAY if oneway else 0,
            ext_fields=stringify_fields(ext_fields) if ext_fields else {},
            body=body,
        )

    def response(
        self,
        code: int = 0,
        remark: str | None = None,
        ext_fields: dict[str, Any] | None = None,
        body: bytes = b"",
    ) -> RemotingCommand:
        """The response to this request: same opaque and serialization, flag bit 0 set."""
        return RemotingCommand(
            code=int(code),
            opaque=self.opaque,
            flag=FLAG_RESPONSE,
            remark=remark,
            ext_fields=stringify_fields(ext_fields) if ext_fields else {},
            body=body,
            serialize_type=self.serialize_type,
        )


def _to_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return str(value)


def stringify_fields(fields: dict[str, Any]) -> dict[str, str]:
    """Header values as strings (clients such as the C++ core ignore non-string values); ``None`` dropped."""
    return {k: v if type(v) is str else _to_str(v) for k, v in fields.items() if v is not None}


# ----------------------------------------------------------------------------------------------- encoding


def encode_header(cmd: RemotingCommand) -> bytes:
    """The header bytes of ``cmd`` in its own serialization."""
    if cmd.serialize_type == SerializeType.ROCKETMQ:
        return _encode_binary_header(cmd)
    obj: dict[str, Any] = {
        "code": cmd.code,
        "flag": cmd.flag,
        "language": cmd.language,
        "opaque": cmd.opaque,
        "serializeTypeCurrentRPC": "JSON",
        "version": cmd.version,
    }
    if cmd.ext_fields:
        obj["extFields"] = cmd.ext_fields
    if cmd.remark is not None:
        obj["remark"] = cmd.remark
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


def _encode_binary_header(cmd: RemotingCommand) -> bytes:
    parts = [_BIN_FIXED.pack(cmd.code, _LANGUAGE_CODE.get(cmd.language, 0), cmd.version, cmd.opaque, cmd.flag)]
    remark = cmd.remark.encode() if cmd.remark else b""
    parts.append(_INT32.pack(len(remark)))
    parts.append(remark)
    ext = bytearray()
    for k, v in cmd.ext_fields.items():
        kb, vb = k.encode(), v.encode()
        ext += struct.pack(">h", len(kb)) + kb + _INT32.pack(len(vb)) + vb
    parts.append(_INT32.pack(len(ext)))
    parts.append(bytes(ext))
    return b"".join(parts)


def encode_frame(cmd: RemotingCommand) -> list[bytes]:
    """The whole frame as a list of byte strings (prefix+header, body), ready for ``writelines``."""
    header = encode_header(cmd)
    length = 4 + len(header) + len(cmd.body)
    prefix = _FRAME_PREFIX.pack(length, (int(cmd.serialize_type) << 24) | len(header))
    if cmd.body:
        return [prefix + header, cmd.body]
    return [prefix + header]


def encode(cmd: RemotingCommand) -> bytes:
    """The whole frame as one byte string."""
    return b"".join(encode_frame(cmd))


# ----------------------------------------------------------------------------------------------- decoding


def decode_header(header: bytes | memoryview, serialize_type: SerializeType, body: bytes = b"") -> RemotingCommand:
    """Decode one header; raises FrameError on anything malformed."""
    if serialize_type == SerializeType.ROCKETMQ:
        return _decode_binary_header(bytes(header), body)
    try:
        obj = orjson.loads(header)
    except orjson.JSONDecodeError as e:
        raise FrameError(f"header is not valid JSON: {e}") from None
    if not isinstance(obj, dict):
        raise FrameError("header JSON is not an object")
    try:
        code = int(obj["code"])
        opaque = int(obj.get("opaque", 0))
        flag = int(obj.get("flag", 0))
        version = int(obj.get("version", 0))
    except (KeyError, TypeError, ValueError) as e:
        raise FrameError(f"header lacks a valid code/opaque/flag/version: {e}") from None
    ext_raw = obj.get("extFields") or {}
    if not isinstance(ext_raw, dict):
        raise FrameError("header extFields is not an object")
    remark = obj.get("remark")
    return RemotingCommand(
        code=code,
        opaque=opaque,
        flag=flag,
        language=str(obj.get("language", "JAVA")),
        version=version,
        remark=None if remark is None else str(remark),
        ext_fields=stringify_fields(ext_raw),
        body=body,
        serialize_type=SerializeType.JSON,
    )


def _decode_binary_header(h: bytes, body: bytes) -> RemotingCommand:
    try:
        code, lang, version, opaque, flag = _BIN_FIXED.unpack_from(h, 0)
        pos = _BIN_FIXED.size
        (rlen,) = _INT32.unpack_from(h, pos)
        pos += 4
        if rlen < 0 or pos + rlen > len(h):
            raise FrameError("binary header remark length out of range")
        remark = h[pos : pos + rlen].decode() if rlen else None
        pos += rlen
        (elen,) = _INT32.unpack_from(h, pos)
        pos += 4
        end = pos + elen
        if elen < 0 or end > len(h):
            raise FrameError("binary header extFields length out of range")
        ext: dict[str, str] = {}
        while pos < end:
            (klen,) = struct.unpack_from(">h", h, pos)
            pos += 2
            key = h[pos : pos + klen].decode()
            pos += klen
            (vlen,) = _INT32.unpack_from(h, pos)
            pos += 4
            if klen < 0 or vlen < 0 or pos + vlen > end:
                raise FrameError("binary header extFields entry out of range")
            value = h[pos : pos + vlen].decode()
            pos += vlen
            if key and value:
                ext[key] = value
    except (struct.error, UnicodeDecodeError) as e:
        raise FrameError(f"malformed binary header: {e}") from None
    return RemotingCommand(
        code=code,
        opaque=opaque,
        flag=flag,
        language=LANGUAGES[lang] if 0 <= lang < len(LANGUAGES) else "OTHER",
        version=version,
        remark=remark,
        ext_fields=ext,
        body=body,
        serialize_type=SerializeType.ROCKETMQ,
    )


class FrameDecoder:
    """Incremental frame decoder: ``feed`` bytes, get whole commands back. Raises FrameError on bad input."""

    __slots__ = ("_buf", "_max")

    def __init__(self, max_frame_length: int = MAX_FRAME_LENGTH) -> None:
        self._buf = bytearray()
        self._max = max_frame_length

    @property
    def buffered(self) -> int:
        """Bytes received that do not yet form a whole frame."""
        return len(self._buf)

    def clear(self) -> None:
        """Drop the bytes of the unfinished frame (the connection is being closed)."""
        self._buf = bytearray()

    def pending(self) -> tuple[int, int] | None:
        """The unfinished frame's ``(length, header length)`` once its 8-byte prefix is in (None before), checked
        as ``feed`` checks them (FrameError). Call after ``feed``: what is buffered then is one unfinished frame."""
        buf = self._buf
        if len(buf) < 8:
            return None
        length, word = _FRAME_PREFIX.unpack_from(buf, 0)
        if length < 4 or length > self._max:
            raise FrameError(f"frame length {length} outside 4..{self._max}")
        stype, header_len = (word >> 24) & 0xFF, word & 0xFFFFFF
        if stype not in (0, 1):
            raise FrameError(f"unknown serialize type {stype}")
        if header_len > length - 4:
            raise FrameError(f"header length {header_len} exceeds frame length {length}")
        return length, header_len

    def pending_header(self) -> RemotingCommand:
        """The unfinished frame's header decoded, its body left empty (the screen of a large frame, before its
        body is read); call once ``pending`` said its header is all in. FrameError when it does not decode."""
        header_len = _INT32.unpack_from(self._buf, 4)[0] & 0xFFFFFF
        stype = SerializeType(self._buf[4])
        with memoryview(self._buf) as view, view[8 : 8 + header_len] as header:
            return decode_header(header, stype)

    def feed(self, data: bytes) -> list[RemotingCommand]:
        """Add received bytes; return every command completed by them."""
        buf = self._buf
        buf += data
        out: list[RemotingCommand] = []
        pos = split_frames(buf, 0, self._max, out)
        if pos:
            del buf[:pos]
        return out


_SERIALIZE_TYPES = (SerializeType.JSON, SerializeType.ROCKETMQ)


def split_frames(buf: bytearray, pos: int, max_length: int, out: list[RemotingCommand]) -> int:
    """Decode every whole frame of ``buf`` from ``pos`` on into ``out``; returns where the first unfinished frame
    begins. FrameError on a malformed one (the frames before it are in ``out``)."""
    n = len(buf)
    while n - pos >= 8:
        length, word = _FRAME_PREFIX.unpack_from(buf, pos)
        if length < 4 or length > max_length:
            raise FrameError(f"frame length {length} outside 4..{max_length}")
        if n - pos - 4 < length:
            break
        stype = (word >> 24) & 0xFF
        header_len = word & 0xFFFFFF
        if stype not in (0, 1):
            raise FrameError(f"unknown serialize type {stype}")
        if header_len > length - 4:
            raise FrameError(f"header length {header_len} exceeds frame length {length}")
        hstart = pos + 8
        bstart = hstart + header_len
        end = pos + 4 + length
        with memoryview(buf) as view:  # one copy of the body (a bytearray slice would be a second)
            body = bytes(view[bstart:end])
            header = view[hstart:bstart]
            try:
                out.append(decode_header(header, _SERIALIZE_TYPES[stype], body))
            finally:
                header.release()
        pos = end
    return pos


REFERENCE: dict[str, object] = {"split_frames": split_frames}
"""The pure-Python ``split_frames``, kept whatever runs (the accelerator's tests compare against it)."""
_accel.install(sys.modules[__name__], REFERENCE, "init_command", _accel.headers)
