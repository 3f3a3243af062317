"""Frame codec: fixed byte vectors, round trips, malformed input."""

from __future__ import annotations

import struct

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sievemq.errors import FrameError
from sievemq.remoting.command import (
    FrameDecoder,
    RemotingCommand,
    SerializeType,
    encode,
    stringify_fields,
)

ROUTE_JSON = (
    b'{"code":105,"extFields":{"topic":"T1"},"flag":0,"language":"JAVA","opaque":7,'
    b'"serializeTypeCurrentRPC":"JSON","version":409}'
)


def route_request() -> RemotingCommand:
    return RemotingCommand(code=105, opaque=7, ext_fields={"topic": "T1"})


def test_json_frame_matches_reference_bytes() -> None:
    frame = encode(route_request())
    assert frame[:8] == bytes.fromhex("000000800000007c")
    assert frame[8:] == ROUTE_JSON


def test_rocketmq_binary_frame_matches_reference_bytes() -> None:
    cmd = route_request()
    cmd.serialize_type = SerializeType.ROCKETMQ
    expected = bytes.fromhex(
        "00000026" "01000022" "0069" "00" "0199" "00000007" "00000000" "00000000" "0000000d" "0005" "746f706963"
        "00000002" "5431"
    )
    assert encode(cmd) == expected
    (decoded,) = FrameDecoder().feed(expected)
    assert decoded == cmd


def test_response_mirrors_request_serialization_and_opaque() -> None:
    req = route_request()
    req.serialize_type = SerializeType.ROCKETMQ
    resp = req.response(0, ext_fields={"queueOffset": 17, "ok": True})
    assert resp.opaque == 7 and resp.is_response and resp.serialize_type == SerializeType.ROCKETMQ
    assert resp.ext_fields == {"queueOffset": "17", "ok": "true"}


def test_response_ext_fields_are_json_strings() -> None:
    resp = route_request().response(0, ext_fields={"queueOffset": 17, "queueId": 0, "flag": False})
    header = encode(resp)[8:]
    ext = orjson.loads(header)["extFields"]
    assert all(isinstance(v, str) for v in ext.values())
    assert ext == {"queueOffset": "17", "queueId": "0", "flag": "false"}


def test_request_with_numbers_and_bools_in_ext_fields_is_coerced() -> None:
    header = orjson.dumps({"code": 11, "opaque": 3, "flag": 0, "language": "CPP", "version": 333,
                           "extFields": {"queueId": 2, "k": False, "x": None, "s": "v"}})
    frame = struct.pack(">ii", 4 + len(header), len(header)) + header
    (cmd,) = FrameDecoder().feed(frame)
    assert cmd.ext_fields == {"queueId": "2", "k": "false", "s": "v"}
    assert cmd.language == "CPP"


def test_decoder_handles_split_and_coalesced_frames() -> None:
    a = encode(RemotingCommand(code=34, opaque=1, body=b"hello"))
    b = encode(RemotingCommand(code=35, opaque=2, ext_fields={"clientID": "c"}))
    data = a + b
    dec = FrameDecoder()
    out = []
    for i in range(len(data)):
        out += dec.feed(data[i : i + 1])
    assert [(c.code, c.opaque, c.body) for c in out] == [(34, 1, b"hello"), (35, 2, b"")]
    assert dec.buffered == 0


@pytest.mark.parametrize(
    "frame,reason",
    [
        (struct.pack(">ii", 2, 0), "frame length"),
        (struct.pack(">ii", 16 * 1024 * 1024 + 1, 0), "frame length"),
        (struct.pack(">ii", 8, 100) + b"{}{}", "header length"),
        (struct.pack(">ii", 6, (5 << 24) | 2) + b"{}", "serialize type"),
        (struct.pack(">ii", 7, 3) + b"{{{", "not valid JSON"),
        (struct.pack(">ii", 6, 2) + b"[]", "not an object"),
        (struct.pack(">ii", 6, 2) + b"{}", "code"),
        (struct.pack(">ii", 9, (1 << 24) | 5) + b"\x00\x01\x00\x00\x00", "binary header"),
    ],
)
def test_malformed_frames_raise_frame_error(frame: bytes, reason: str) -> None:
    with pytest.raises(FrameError, match=reason):
        FrameDecoder().feed(frame)


def test_frame_cap_is_configurable() -> None:
    big = encode(RemotingCommand(code=10, body=b"x" * 1000))
    with pytest.raises(FrameError):
        FrameDecoder(max_frame_length=500).feed(big)
    assert len(FrameDecoder(max_frame_length=2000).feed(big)) == 1


def test_stringify_drops_none() -> None:
    assert stringify_fields({"a": None, "b": 1.5, "c": True}) == {"b": "1.5", "c": "true"}


text = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=20)


@given(
    code=st.integers(-32768, 32767),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(0, 3),
    remark=st.one_of(st.none(), text.filter(bool)),
    ext=st.dictionaries(text.filter(bool), text.filter(bool), max_size=5),
    body=st.binary(max_size=64),
    stype=st.sampled_from(list(SerializeType)),
)
def test_round_trip(code: int, opaque: int, flag: int, remark: str | None, ext: dict[str, str], body: bytes,
                    stype: SerializeType) -> None:
    cmd = RemotingCommand(code=code, opaque=opaque, flag=flag, remark=remark, ext_fields=ext, body=body,
                          serialize_type=stype)
    (out,) = FrameDecoder().feed(encode(cmd))
    assert out == cmd
