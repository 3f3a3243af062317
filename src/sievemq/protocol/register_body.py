"""RocketMQ's RegisterBrokerBody, the body of REGISTER_BROKER (103), in both its forms (docs/registration.md §2).

JSON: ``{"filterServerList": [...], "topicConfigSerializeWrapper": {"dataVersion": {...}, "topicConfigTable": {...}}}``.

Compressed (RocketMQ's ``RegisterBrokerBody.encode(true)``): one zlib stream (Java's ``DeflaterOutputStream``) of

    int32 len, DataVersion JSON        {"counter":N,"stateVersion":S,"timestamp":T}
    int32 topic count, then for each:  int32 len, TopicConfig.encode() text "name read write perm FILTER {attrs}"
    int32 len, filterServerList JSON   ["host:port", ...]
    int32 count, then for each:        int32 len, TopicQueueMappingInfo JSON   (static topics; read from 5.0 brokers)

integers big-endian. The text form of a topic has no ``topicSysFlag`` and no ``order``: a compressed registration
carries neither (RocketMQ's own name server reads them as 0 and false too).

Decoding is hostile-input safe: the inflated size is capped (``MAX_INFLATED_BYTES``, checked while inflating), the
topic count too (``MAX_TOPICS``), every length is checked against what is left; a violation is ``BodyError``.
"""

from __future__ import annotations

import re
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

import orjson

from sievemq.protocol.names import IllegalName, topic_problem
from sievemq.protocol.route import TopicConfig
from sievemq.protocol.topic_attributes import check_stored

MAX_INFLATED_BYTES = 128 * 1024 * 1024
"""A compressed body inflating past this is refused (a 100,000-topic table is about 4 MB inflated)."""
MAX_TOPICS = 2_000_000
"""A body listing more topics than this is refused."""
FILTER_TYPES = frozenset(("SINGLE_TAG", "MULTI_TAG"))
"""RocketMQ's TopicFilterType names (``valueOf`` refuses others, and with them the whole body)."""
PART_FIELD = "topicTablePart"
"""REGISTER_BROKER header a sievemq broker adds: ``i/n``, this body is part i of the n parts of its complete topic
table (``1/1`` unsplit); other name servers ignore it (docs/registration.md §3)."""
_INT = struct.Struct(">i")
_ENTRY = re.compile(
    rb"([%|a-zA-Z0-9_-]{1,127}) ([0-9]{1,10}) ([0-9]{1,10}) ([0-9]{1,10}) (SINGLE_TAG|MULTI_TAG)(?: (.*))?\Z", re.S
)
"""A plain topic entry (legal name, no attributes): read without ``parse_topic_text``'s checks."""


class BodyError(ValueError):
    """A RegisterBrokerBody that cannot be read, or that passes a limit."""


@dataclass(slots=True)
class RegisterBody:
    """A decoded RegisterBrokerBody."""

    data_version: dict[str, int] = field(default_factory=dict)
    """DataVersion: ``counter``, ``timestamp`` and, from RocketMQ 5, ``stateVersion``."""
    topics: list[TopicConfig] = field(default_factory=list)
    filter_servers: list[str] = field(default_factory=list)
    mapping_count: int = 0
    """TopicQueueMappingInfo entries (static topics) the compressed form carried; sievemq does not route them."""


def version_key(dv: object) -> tuple[int, int, int]:
    """A DataVersion as RocketMQ's ``equals`` compares it: (stateVersion, timestamp, counter); missing fields are 0
    (what fastjson reads them as)."""
    if not isinstance(dv, dict):
        return 0, 0, 0
    try:
        return int(dv.get("stateVersion") or 0), int(dv.get("timestamp") or 0), int(dv.get("counter") or 0)
    except (TypeError, ValueError):
        return 0, 0, 0


def looks_compressed(body: bytes) -> bool:
    """True when ``body`` starts with a zlib header (deflate method, checksum of the two bytes). A RocketMQ broker
    with ``compressedRegister=true`` sends its compressed body with header ``compressed=false`` (5.x's
    ``BrokerOuterAPI`` always clears the flag), so a name server recognises the form by its first bytes; JSON
    starts with ``{`` or whitespace, which never pass this test."""
    return len(body) >= 2 and body[0] & 0x0F == 8 and (body[0] << 8 | body[1]) % 31 == 0


def table_part(value: str | None) -> tuple[int, int] | None:
    """Parse a ``topicTablePart`` value (None when absent; ValueError when it is not ``i/n`` with 1 <= i <= n)."""
    if value is None or value == "":
        return None
    index, sep, total = value.partition("/")
    try:
        i, n = int(index), int(total)
    except ValueError:
        i = n = 0
    if not sep or not 1 <= i <= n <= MAX_TOPICS:
        raise ValueError(f"{PART_FIELD} {value[:40]!r} is not i/n with 1 <= i <= n")
    return i, n


# ------------------------------------------------------------------ encode
def topic_text(tc: TopicConfig) -> bytes:
    """RocketMQ's ``TopicConfig.encode()``: name, read and write queue counts, perm, filter type and the
    attributes' JSON, separated by single spaces."""
    attrs = orjson.dumps(tc.attributes or {})
    return b"%s %d %d %d %s %s" % (
        tc.topic_name.encode(),
        tc.read_queue_nums,
        tc.write_queue_nums,
        tc.perm,
        tc.topic_filter_type.encode(),
        attrs,
    )


def encode_compressed(
    data_version: dict[str, Any], topics: list[TopicConfig], filter_servers: list[str], level: int = 6
) -> bytes:
    """The compressed form (``level``: zlib's; RocketMQ's broker uses 9, any level reads the same)."""
    dv = version_key(data_version)
    parts: list[bytes] = []
    blob = orjson.dumps({"counter": dv[2], "stateVersion": dv[0], "timestamp": dv[1]})
    parts += (_INT.pack(len(blob)), blob, _INT.pack(len(topics)))
    pack = _INT.pack
    for tc in topics:
        text = topic_text(tc)
        parts += (pack(len(text)), text)
    blob = orjson.dumps(list(filter_servers))
    parts += (_INT.pack(len(blob)), blob, _INT.pack(0))
    return zlib.compress(b"".join(parts), level)


def encode_json(data_version: dict[str, Any], topics: list[TopicConfig], filter_servers: list[str]) -> bytes:
    """The JSON form (what ``compressed=false`` carries)."""
    wrapper = {"dataVersion": dict(data_version), "topicConfigTable": {tc.topic_name: tc.to_json() for tc in topics}}
    return orjson.dumps({"filterServerList": list(filter_servers), "topicConfigSerializeWrapper": wrapper})


# ------------------------------------------------------------------ decode
def inflate(body: bytes, limit: int = MAX_INFLATED_BYTES) -> bytes:
    """Inflate a zlib stream, refusing (``BodyError``) one that inflates past ``limit`` bytes or is broken."""
    d = zlib.decompressobj()
    try:
        out = d.decompress(body, limit + 1)
    except zlib.error as e:
        raise BodyError(f"compressed RegisterBrokerBody is not a zlib stream: {e}") from None
    if len(out) > limit or d.unconsumed_tail:
        raise BodyError(f"compressed RegisterBrokerBody inflates past {limit} bytes (the limit); refused")
    return out


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def left(self) -> int:
        return len(self.data) - self.pos

    def int32(self, what: str) -> int:
        if self.left() < 4:
            raise BodyError(f"compressed RegisterBrokerBody ends inside {what} (at byte {self.pos})")
        (n,) = _INT.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(n)

    def chunk(self, what: str) -> bytes:
        n = self.int32(f"the length of {what}")
        if n < 0 or n > self.left():
            left = self.left()
            raise BodyError(f"compressed RegisterBrokerBody: {what} of {n} bytes at byte {self.pos}, {left} left")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out


def parse_topic_text(text: bytes) -> TopicConfig:
    """Parse one ``TopicConfig.encode()`` text (``BodyError`` if malformed, ``IllegalName`` for a bad name);
    attributes that are not a JSON object of strings are dropped, as RocketMQ drops them."""
    fields = text.decode("utf-8", "replace").split(" ", 5)
    if len(fields) < 5:
        raise BodyError(f"topic entry {text[:80]!r} has {len(fields)} fields, at least 5 expected")
    name, read, write, perm, ftype = fields[:5]
    problem = topic_problem(name)
    if problem is not None:
        raise IllegalName(problem)
    if ftype not in FILTER_TYPES:
        raise BodyError(f"topic {name}: filter type {ftype[:40]!r} is not SINGLE_TAG or MULTI_TAG")
    try:
        r, w, p = int(read), int(write), int(perm)
    except ValueError:
        raise BodyError(f"topic {name}: queue counts and perm must be integers ({read!r} {write!r} {perm!r})") from None
    if min(r, w, p) < 0 or max(r, w, p) > 0x7FFFFFFF:
        raise BodyError(f"topic {name}: queue counts and perm must be 0 to 2^31-1")
    attrs: dict[str, str] = {}
    if len(fields) == 6 and fields[5] not in ("", "{}"):
        try:
            attrs = check_stored(orjson.loads(fields[5]))
        except (orjson.JSONDecodeError, ValueError, TypeError, AttributeError):
            attrs = {}
    return TopicConfig(name, r, w, p, ftype, 0, False, attrs)


def decode_compressed(body: bytes, limit: int = MAX_INFLATED_BYTES, max_topics: int = MAX_TOPICS) -> RegisterBody:
    """Read the compressed form (``BodyError`` / ``IllegalName`` when it cannot be read or passes a limit)."""
    rd = _Reader(inflate(body, limit))
    out = RegisterBody()
    try:
        dv = orjson.loads(rd.chunk("the DataVersion"))
    except orjson.JSONDecodeError as e:
        raise BodyError(f"compressed RegisterBrokerBody: DataVersion is not JSON: {e}") from None
    if not isinstance(dv, dict):
        raise BodyError("compressed RegisterBrokerBody: DataVersion is not a JSON object")
    state, ts, counter = version_key(dv)
    out.data_version = {"counter": counter, "stateVersion": state, "timestamp": ts}
    count = rd.int32("the topic count")
    if count < 0 or count > max_topics:
        raise BodyError(f"compressed RegisterBrokerBody lists {count} topics; 0 to {max_topics} are accepted")
    if count * 4 > rd.left():
        raise BodyError(f"compressed RegisterBrokerBody lists {count} topics but holds {rd.left()} bytes")
    topics = out.topics
    data, pos, end = rd.data, rd.pos, len(rd.data)
    unpack, match = _INT.unpack_from, _ENTRY.match
    for _ in range(count):  # the hot loop of a large table: one regex per entry, the careful parse on a miss
        if pos + 4 > end:
            raise BodyError(f"compressed RegisterBrokerBody ends inside the length of a topic entry (at byte {pos})")
        (n,) = unpack(data, pos)
        pos += 4
        if n < 0 or n > end - pos:
            raise BodyError(
                f"compressed RegisterBrokerBody: a topic entry of {n} bytes at byte {pos}, {end - pos} left"
            )
        m = match(data, pos, pos + n)
        if m is not None and len(m[2]) < 10 and len(m[3]) < 10 and len(m[4]) < 10 and m[6] in (None, b"{}"):
            topics.append(TopicConfig(m[1].decode(), int(m[2]), int(m[3]), int(m[4]), m[5].decode()))
        else:
            topics.append(parse_topic_text(data[pos : pos + n]))
        pos += n
    rd.pos = pos
    if rd.left():
        try:
            servers = orjson.loads(rd.chunk("the filter server list"))
        except orjson.JSONDecodeError:
            servers = []  # RocketMQ logs it and goes on with none
        out.filter_servers = [str(a) for a in servers] if isinstance(servers, list) else []
    if rd.left() >= 4:
        out.mapping_count = max(0, rd.int32("the mapping count"))
    return out


def decode_json(body: bytes, max_topics: int = MAX_TOPICS) -> RegisterBody:
    """Read the JSON form (``BodyError`` / ``IllegalName``)."""
    try:
        doc = orjson.loads(body)
        wrapper = doc.get("topicConfigSerializeWrapper") or {}
        table = wrapper.get("topicConfigTable") or {}
        if len(table) > max_topics:
            raise BodyError(f"RegisterBrokerBody lists {len(table)} topics; at most {max_topics} are accepted")
        state, ts, counter = version_key(wrapper.get("dataVersion"))
        return RegisterBody(
            {"counter": counter, "stateVersion": state, "timestamp": ts},
            [TopicConfig.from_json(tc) for tc in table.values()],
            [str(a) for a in doc.get("filterServerList") or []],
        )
    except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError) as e:
        raise BodyError(f"malformed RegisterBrokerBody: {e}") from None


def decode(body: bytes, compressed: bool) -> RegisterBody:
    """Read either form: compressed when the header says so or when the body starts like a zlib stream
    (``looks_compressed``); an empty body is an empty registration."""
    if not body:
        return RegisterBody()
    if compressed or looks_compressed(body):
        return decode_compressed(body)
    return decode_json(body)
