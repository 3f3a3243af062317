"""Stored/pulled record codec and property strings (docs/protocol/message-format.md §1-§6)."""

from __future__ import annotations

import mmap
import socket
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sievemq.protocol.message import (
    BLANK_MAGIC,
    MAGIC_V1,
    MAGIC_V2,
    MessageExt,
    PropertiesSizeExceeded,
    PropertyKey,
    body_crc32,
    decode_record,
    decode_records,
    encode_record,
    properties_to_string,
    read_record_summary,
    record_magic,
    record_total_size,
    string_to_properties,
)
from sievemq.protocol.msgid import make_offset_msg_id
from sievemq.protocol.sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG, MessageSysFlag

# ------------------------------------------------------------------------------------------ properties


def test_properties_to_string_java_format() -> None:
    assert properties_to_string({}) == ""
    assert properties_to_string({"TAGS": "TagA"}) == "TAGS\x01TagA"
    assert properties_to_string({"TAGS": "TagA", "KEYS": "k1 k2"}) == "TAGS\x01TagA\x02KEYS\x01k1 k2"


@pytest.mark.parametrize(
    ("s", "expected"),
    [
        ("", {}),
        ("TAGS\x01TagA", {"TAGS": "TagA"}),
        ("TAGS\x01TagA\x02", {"TAGS": "TagA"}),  # C / ali-ons trailing separator
        ("TAGS\x01TagA\x02KEYS\x01k1\x02", {"TAGS": "TagA", "KEYS": "k1"}),
        ("\x02TAGS\x01TagA", {"TAGS": "TagA"}),
        ("TAGS\x01TagA\x02\x02KEYS\x01k", {"TAGS": "TagA", "KEYS": "k"}),
        ("\x01v\x02TAGS\x01TagA", {"TAGS": "TagA"}),  # empty key skipped
        ("TAGS\x01\x02KEYS\x01k", {"KEYS": "k"}),  # empty value skipped
        ("ab\x02TAGS\x01TagA", {"TAGS": "TagA"}),  # no 0x01: skipped
        ("a\x01\x02b", {}),  # short segments skipped
        ("k\x01v\x01w", {"k": "v\x01w"}),  # split on the first 0x01 (Java 4.9 indexOf)
        ("k\x01a\x02k\x01b", {"k": "b"}),  # later wins (HashMap.put)
        ("k\x01v", {"k": "v"}),  # 3 chars is the minimum
    ],
)
def test_string_to_properties(s: str, expected: dict[str, str]) -> None:
    assert string_to_properties(s) == expected


def test_properties_reject_separators() -> None:
    with pytest.raises(ValueError):
        properties_to_string({"a\x01": "v"})
    with pytest.raises(ValueError):
        properties_to_string({"a": "v\x02"})
    with pytest.raises(ValueError):
        properties_to_string({"a\x02": "v"})
    # a 0x01 inside a value survives a Java round trip
    assert string_to_properties(properties_to_string({"a": "v\x01w"})) == {"a": "v\x01w"}


_key = st.text(st.characters(exclude_characters="\x01\x02", codec="utf-8"), min_size=1)
_val = st.text(st.characters(exclude_characters="\x02", codec="utf-8"), min_size=1)


@given(st.dictionaries(_key, _val, max_size=8))
def test_properties_roundtrip(props: dict[str, str]) -> None:
    s = properties_to_string(props)
    assert not s.endswith("\x02")
    assert string_to_properties(s) == props
    assert string_to_properties(s + "\x02" if s else s) == props


def test_property_keys_are_wire_names() -> None:
    assert PropertyKey.TAGS == "TAGS"
    assert PropertyKey.UNIQ_KEY == "UNIQ_KEY"
    assert PropertyKey.WAIT == "WAIT"
    assert PropertyKey.DELAY == "DELAY"
    assert PropertyKey.REAL_QID == "REAL_QID"
    assert PropertyKey.TRAN_MSG == "TRAN_MSG"
    assert PropertyKey.PGROUP == "PGROUP"
    assert PropertyKey.TRACE_ON == "TRACE_ON"
    assert PropertyKey.CONSUME_START_TIME == "CONSUME_START_TIME"
    assert PropertyKey.TRAN_PREPARED_QUEUE_OFFSET == "TRAN_PREPARED_QUEUE_OFFSET"
    assert PropertyKey.CHECK_IMMUNITY_TIME_IN_SECONDS == "CHECK_IMMUNITY_TIME_IN_SECONDS"


def test_body_crc32() -> None:
    assert body_crc32(b"") == 0
    assert body_crc32(b"hello") == zlib.crc32(b"hello") & 0x7FFFFFFF
    assert body_crc32(b"123456789") == 0xCBF43926 & 0x7FFFFFFF


# ------------------------------------------------------------------------------------------ fixed vectors


def _hand_record(
    *,
    body: bytes,
    topic: bytes,
    props: bytes,
    queue_id: int,
    flag: int,
    queue_offset: int,
    phy: int,
    sys_flag: int,
    born_ts: int,
    born: bytes,
    store_ts: int,
    store: bytes,
    reconsume: int,
    prepared: int,
    magic: int = MAGIC_V1,
) -> bytes:
    """Build a record field by field following the docs/protocol/message-format.md §1 table."""
    rest = b"".join(
        [
            struct.pack(">I", magic),  # 4 MAGICCODE
            struct.pack(">i", zlib.crc32(body) & 0x7FFFFFFF),  # 8 BODYCRC
            struct.pack(">i", queue_id),  # 12 QUEUEID
            struct.pack(">i", flag),  # 16 FLAG
            struct.pack(">q", queue_offset),  # 20 QUEUEOFFSET
            struct.pack(">q", phy),  # 28 PHYSICALOFFSET
            struct.pack(">i", sys_flag),  # 36 SYSFLAG
            struct.pack(">q", born_ts),  # 40 BORNTIMESTAMP
            born,  # 48 BORNHOST ip + port
            struct.pack(">q", store_ts),  # STORETIMESTAMP
            store,  # STOREHOST ip + port
            struct.pack(">i", reconsume),  # RECONSUMETIMES
            struct.pack(">q", prepared),  # PREPAREDTRANSACTIONOFFSET
            struct.pack(">i", len(body)),
            body,
            struct.pack(">b", len(topic)) if magic == MAGIC_V1 else struct.pack(">h", len(topic)),
            topic,
            struct.pack(">h", len(props)),
            props,
        ]
    )
    return struct.pack(">i", 4 + len(rest)) + rest


VECTOR_PROPS = b"TAGS\x01TagA\x02KEYS\x01order-1 order-2\x02UNIQ_KEY\x017F0000010F2C18B4AAC2263E8F730000"


def _vector_message() -> MessageExt:
    return MessageExt(
        topic="TopicTest",
        body=b"Hello RocketMQ",
        flag=7,
        properties={"TAGS": "TagA", "KEYS": "order-1 order-2", "UNIQ_KEY": "7F0000010F2C18B4AAC2263E8F730000"},
        queue_id=3,
        queue_offset=42,
        commit_log_offset=0x1_0000_0001,
        sys_flag=0,
        born_timestamp=1_700_000_000_123,
        born_host=("192.168.1.20", 54321),
        store_timestamp=1_700_000_000_456,
        store_host=("10.0.0.5", 10911),
        reconsume_times=2,
        prepared_transaction_offset=0,
    )


def _vector_bytes() -> bytes:
    return _hand_record(
        body=b"Hello RocketMQ",
        topic=b"TopicTest",
        props=VECTOR_PROPS,
        queue_id=3,
        flag=7,
        queue_offset=42,
        phy=0x1_0000_0001,
        sys_flag=0,
        born_ts=1_700_000_000_123,
        born=bytes([192, 168, 1, 20]) + struct.pack(">i", 54321),
        store_ts=1_700_000_000_456,
        store=bytes([10, 0, 0, 5]) + struct.pack(">i", 10911),
        reconsume=2,
        prepared=0,
    )


def test_fixed_vector_offsets() -> None:
    raw = _vector_bytes()
    assert len(raw) == 91 + len(b"Hello RocketMQ") + len(b"TopicTest") + len(VECTOR_PROPS)
    assert raw[4:8] == bytes.fromhex("DAA320A7")
    assert struct.unpack_from(">i", raw, 4)[0] == -626843481
    assert raw[48:52] == bytes([192, 168, 1, 20])
    assert raw[64:68] == bytes([10, 0, 0, 5])
    assert struct.unpack_from(">i", raw, 84)[0] == 14
    assert raw[88:102] == b"Hello RocketMQ"


def test_fixed_vector_encode() -> None:
    msg = _vector_message()
    raw = encode_record(msg)
    assert raw == _vector_bytes()
    assert msg.store_size == len(raw)
    assert msg.body_crc == zlib.crc32(b"Hello RocketMQ") & 0x7FFFFFFF


def test_fixed_vector_decode() -> None:
    raw = _vector_bytes()
    msg, end = decode_record(raw)
    assert end == len(raw)
    expected = _vector_message()
    expected.body_crc = zlib.crc32(b"Hello RocketMQ") & 0x7FFFFFFF
    expected.store_size = len(raw)
    assert msg == expected
    assert msg.tags == "TagA"
    assert msg.keys == ["order-1", "order-2"]
    assert msg.uniq_key == "7F0000010F2C18B4AAC2263E8F730000"
    assert msg.msg_id == "7F0000010F2C18B4AAC2263E8F730000"
    assert msg.offset_msg_id == "0A00000500002A9F0000000100000001"


def test_decode_trailing_separator_properties() -> None:
    raw = _hand_record(
        body=b"x",
        topic=b"T",
        props=b"TAGS\x01TagA\x02KEYS\x01k\x02",
        queue_id=0,
        flag=0,
        queue_offset=0,
        phy=0,
        sys_flag=0,
        born_ts=0,
        born=bytes(8),
        store_ts=0,
        store=bytes([127, 0, 0, 1]) + struct.pack(">i", 10911),
        reconsume=0,
        prepared=0,
    )
    msg, _ = decode_record(raw)
    assert msg.properties == {"TAGS": "TagA", "KEYS": "k"}
    assert msg.born_host == ("0.0.0.0", 0)


def test_decode_ipv6_hosts() -> None:
    born6 = socket.inet_pton(socket.AF_INET6, "2001:db8::1") + struct.pack(">i", 40000)
    store6 = socket.inet_pton(socket.AF_INET6, "::1") + struct.pack(">i", 10911)
    store4 = bytes([10, 0, 0, 1]) + struct.pack(">i", 10911)
    common = dict(
        body=b"body",
        topic=b"T6",
        props=b"TAGS\x01x",
        queue_id=1,
        flag=0,
        queue_offset=9,
        phy=123,
        born_ts=5,
        store_ts=6,
        reconsume=1,
        prepared=77,
    )
    for sys_flag, born, store, sh in [
        (BORNHOST_V6_FLAG, born6, store4, ("10.0.0.1", 10911)),
        (STOREHOSTADDRESS_V6_FLAG, bytes([1, 2, 3, 4]) + struct.pack(">i", 40000), store6, ("::1", 10911)),
        (BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG, born6, store6, ("::1", 10911)),
    ]:
        raw = _hand_record(sys_flag=sys_flag, born=born, store=store, **common)  # type: ignore[arg-type]
        msg, end = decode_record(raw)
        assert end == len(raw)
        assert msg.store_host == sh
        assert msg.body == b"body"
        assert msg.topic == "T6"
        assert msg.tags == "x"
        assert msg.prepared_transaction_offset == 77
        assert msg.store_timestamp == 6
        if sys_flag & BORNHOST_V6_FLAG:
            assert msg.born_host == ("2001:db8::1", 40000)
        else:
            assert msg.born_host == ("1.2.3.4", 40000)
        # and the encoder writes the same bytes for v6 hosts when the flags say so
        assert encode_record(msg) == raw
        if sh[0] == "::1":
            assert len(msg.offset_msg_id) == 56


def test_decode_magic_v2_two_byte_topic() -> None:
    raw = _hand_record(
        body=b"b",
        topic=b"TopicV2",
        props=b"",
        queue_id=0,
        flag=0,
        queue_offset=0,
        phy=0,
        sys_flag=0,
        born_ts=0,
        born=bytes(8),
        store_ts=0,
        store=bytes(8),
        reconsume=0,
        prepared=0,
        magic=MAGIC_V2,
    )
    msg, end = decode_record(raw)
    assert msg.topic == "TopicV2"
    assert end == len(raw)


# ------------------------------------------------------------------------------------------ round trips

_host = st.tuples(st.ip_addresses(v=4).map(str), st.integers(0, 65535))
_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)
_topic = st.text(st.characters(codec="utf-8"), min_size=1, max_size=30).filter(lambda t: len(t.encode()) <= 127)
_props = st.dictionaries(_key, _val, max_size=6)


@st.composite
def messages(draw: st.DrawFn) -> MessageExt:
    return MessageExt(
        topic=draw(_topic),
        body=draw(st.binary(max_size=300)),
        flag=draw(_i32),
        properties=draw(_props),
        queue_id=draw(_i32),
        queue_offset=draw(_i64),
        commit_log_offset=draw(_i64),
        sys_flag=draw(_i32) & ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG),
        born_timestamp=draw(_i64),
        born_host=draw(_host),
        store_timestamp=draw(_i64),
        store_host=draw(_host),
        reconsume_times=draw(_i32),
        prepared_transaction_offset=draw(_i64),
    )


@settings(max_examples=200)
@given(messages())
def test_record_roundtrip(msg: MessageExt) -> None:
    raw = encode_record(msg)
    assert record_total_size(raw, 0) == len(raw) == msg.store_size
    assert record_magic(raw, 0) == MAGIC_V1
    decoded, end = decode_record(raw)
    assert end == len(raw)
    assert decoded == msg
    nobody, _ = decode_record(memoryview(raw), read_body=False)
    assert nobody.body == b""
    assert nobody.properties == msg.properties
    s = read_record_summary(raw, check_crc=True)
    assert raw[s.body_offset : s.body_offset + s.body_length] == msg.body
    assert s.topic == msg.topic
    assert s.properties == msg.properties


@given(st.lists(messages(), min_size=0, max_size=5))
def test_records_back_to_back(msgs: list[MessageExt]) -> None:
    raw = b"".join(encode_record(m) for m in msgs)
    assert decode_records(raw) == msgs
    assert decode_records(bytearray(raw)) == msgs


def test_decode_at_offset_and_mmap() -> None:
    a = _vector_message()
    b = _vector_message()
    b.queue_offset = 43
    ra, rb = encode_record(a), encode_record(b)
    buf = ra + rb
    mm = mmap.mmap(-1, len(buf) + 64)
    try:
        mm[: len(buf)] = buf
        msg, end = decode_record(mm, len(ra))
        assert msg == b
        assert end == len(buf)
        s = read_record_summary(mm, len(ra), check_crc=True)
        assert s.queue_offset == 43
        assert s.total_size == len(rb)
        assert s.commit_log_offset == b.commit_log_offset
        assert s.tags == "TagA"
        assert s.keys == ["order-1", "order-2"]
        assert s.uniq_key == b.uniq_key
        assert s.store_timestamp == b.store_timestamp
        assert mm[s.body_offset : s.body_offset + s.body_length] == b.body
        assert record_magic(mm, len(buf)) == 0
    finally:
        mm.close()


def test_decode_records_stops_at_blank() -> None:
    rec = encode_record(_vector_message())
    blank = struct.pack(">iI", 16, BLANK_MAGIC) + bytes(8)
    msgs = decode_records(rec + blank)
    assert len(msgs) == 1
    assert record_magic(rec + blank, len(rec)) == BLANK_MAGIC


def test_decode_records_mixes_fast_and_general_paths() -> None:
    """decode_records decodes IPv4 4.x records inline and everything else through decode_record: same result."""
    v4 = encode_record(_vector_message())
    v6 = _hand_record(
        body=b"six", topic=b"T6", props=b"TAGS\x01x", queue_id=1, flag=0, queue_offset=9, phy=123,
        sys_flag=BORNHOST_V6_FLAG, born=socket.inet_pton(socket.AF_INET6, "2001:db8::1") + struct.pack(">i", 1),
        born_ts=5, store_ts=6, store=bytes([10, 0, 0, 1]) + struct.pack(">i", 10911), reconsume=1, prepared=0,
    )  # fmt: skip
    v2 = _hand_record(
        body=b"b", topic=b"TopicV2", props=b"", queue_id=0, flag=0, queue_offset=0, phy=0, sys_flag=0, born_ts=0,
        born=bytes(8), store_ts=0, store=bytes(8), reconsume=0, prepared=0, magic=MAGIC_V2,
    )  # fmt: skip
    no_props = encode_record(MessageExt(topic="T", body=b""))
    raw = v4 + v6 + v2 + no_props + v4
    expected = []
    pos = 0
    while pos < len(raw):
        msg, pos = decode_record(raw, pos)
        expected.append(msg)
    for buf in (raw, bytearray(raw), memoryview(raw)):
        assert decode_records(buf) == expected
    assert [m.body for m in decode_records(raw, read_body=False)] == [b""] * 5
    assert decode_records(raw)[2].topic == "TopicV2"
    assert decode_records(raw)[3].properties == {}


def test_decode_records_rejects_what_decode_record_rejects() -> None:
    good = encode_record(_vector_message())
    bad_props_len = good[: -len(VECTOR_PROPS) - 2] + struct.pack(">h", len(VECTOR_PROPS) + 1) + VECTOR_PROPS
    negative_props_len = good[: -len(VECTOR_PROPS) - 2] + struct.pack(">h", -1) + VECTOR_PROPS
    bad_body = good[:84] + struct.pack(">i", 10_000) + good[88:]
    long_topic = good[: 88 + 14] + b"\xff" + good[88 + 15 :]
    for bad in (bad_props_len, negative_props_len, bad_body, long_topic, good[:-1], good + b"\x00" * 10):
        with pytest.raises(ValueError):
            decode_records(good + bad)


# ------------------------------------------------------------------------------------------ errors


def test_decode_errors() -> None:
    raw = encode_record(_vector_message())
    with pytest.raises(ValueError, match="truncated"):
        decode_record(raw[:50])
    with pytest.raises(ValueError):
        decode_record(raw[:-1])
    bad_magic = raw[:4] + b"\x00\x00\x00\x00" + raw[8:]
    with pytest.raises(ValueError, match="magic"):
        decode_record(bad_magic)
    blank = struct.pack(">iI", 100, BLANK_MAGIC) + bytes(92)
    with pytest.raises(ValueError, match="magic"):
        decode_record(blank)
    bigger = struct.pack(">i", len(raw) + 1) + raw[4:] + b"\x00"
    with pytest.raises(ValueError, match="TOTALSIZE"):
        decode_record(bigger)
    bad_body = raw[:84] + struct.pack(">i", 10_000) + raw[88:]
    with pytest.raises(ValueError, match="body length"):
        decode_record(bad_body)
    with pytest.raises(ValueError):
        read_record_summary(raw[:40])
    with pytest.raises(ValueError):
        record_total_size(b"\x00\x00")


def test_crc_mismatch_detected() -> None:
    raw = bytearray(encode_record(_vector_message()))
    raw[90] ^= 0xFF  # flip a body byte
    read_record_summary(raw)  # no check by default
    with pytest.raises(ValueError, match="CRC"):
        read_record_summary(raw, check_crc=True)


def test_encode_errors() -> None:
    with pytest.raises(ValueError, match="topic"):
        encode_record(MessageExt(topic="x" * 128))
    with pytest.raises(ValueError, match="topic"):
        encode_record(MessageExt(topic=""))
    encode_record(MessageExt(topic="x" * 127))
    with pytest.raises(PropertiesSizeExceeded):
        encode_record(MessageExt(topic="T", properties={"k": "v" * 32767}))
    with pytest.raises(ValueError, match="born host"):
        encode_record(MessageExt(topic="T", born_host=("::1", 1)))
    with pytest.raises(ValueError, match="store host"):
        encode_record(MessageExt(topic="T", sys_flag=STOREHOSTADDRESS_V6_FLAG))
    with pytest.raises(ValueError):
        encode_record(MessageExt(topic="T", store_host=("not-an-ip", 1)))


# ------------------------------------------------------------------------------------------ MessageExt


def test_message_ext_properties() -> None:
    m = MessageExt(topic="T", store_host=("127.0.0.1", 10911), commit_log_offset=1234)
    assert m.tags is None
    assert m.keys == []
    assert m.uniq_key is None
    assert m.offset_msg_id == make_offset_msg_id("127.0.0.1", 10911, 1234)
    assert m.offset_msg_id == "7F00000100002A9F00000000000004D2"
    assert m.msg_id == m.offset_msg_id
    m.properties["KEYS"] = " a  b c "
    assert m.keys == ["a", "b", "c"]
    m.properties["UNIQ_KEY"] = "U"
    assert m.msg_id == "U"
    assert m.properties is not MessageExt(topic="T").properties


def test_sys_flag_enum() -> None:
    assert int(MessageSysFlag.COMPRESSED) == 0x1
    assert int(MessageSysFlag.TRANSACTION_ROLLBACK) == 0xC
    assert int(MessageSysFlag.BORNHOST_V6) == 0x10
    assert int(MessageSysFlag.STOREHOSTADDRESS_V6) == 0x20


def test_transaction_bits() -> None:
    from sievemq.protocol.sysflag import (
        TRANSACTION_COMMIT_TYPE,
        TRANSACTION_PREPARED_TYPE,
        reset_transaction_value,
        transaction_value,
    )

    flag = 0x1 | TRANSACTION_PREPARED_TYPE
    assert transaction_value(flag) == TRANSACTION_PREPARED_TYPE
    assert reset_transaction_value(flag, TRANSACTION_COMMIT_TYPE) == 0x1 | TRANSACTION_COMMIT_TYPE
    assert reset_transaction_value(flag, 0) == 0x1
