"""The replication wire format: fixed byte vectors and arbitrary cuts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sievemq.ha.wire import (
    HELLO,
    FrameDecoder,
    ReportDecoder,
    WireError,
    decode_hello,
    encode_frame,
    encode_hello,
    encode_report,
)


def test_byte_vectors() -> None:
    assert encode_report(0x0102030405060708) == bytes.fromhex("0102030405060708")
    header, body = encode_frame(4096, b"abc")
    assert header == bytes.fromhex("0000000000001000 00000003") and body == b"abc"
    assert b"".join(encode_frame(7, b"")) == bytes.fromhex("0000000000000007 00000000")  # a heartbeat


def test_reports_keep_only_the_newest_and_wait_for_whole_ones() -> None:
    d = ReportDecoder()
    assert d.feed(encode_report(5)[:3]) is None
    assert d.feed(encode_report(5)[3:] + encode_report(9) + encode_report(12)[:7]) == 9
    assert d.feed(encode_report(12)[7:]) == 12
    with pytest.raises(WireError):
        d.feed(encode_report(-1))


@given(st.lists(st.tuples(st.integers(0, 2**62), st.binary(max_size=300)), max_size=8), st.data())
def test_frames_survive_any_cut(frames: list[tuple[int, bytes]], data: st.DataObject) -> None:
    stream = b"".join(b"".join(bytes(p) for p in encode_frame(o, b)) for o, b in frames)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    d = FrameDecoder()
    got: list[tuple[int, bytes]] = []
    last = 0
    for c in [*cuts, len(stream)]:
        got += d.feed(stream[last:c])
        last = c
    assert got == frames and d.buffered == 0


def test_bad_frames_are_protocol_errors() -> None:
    with pytest.raises(WireError):
        FrameDecoder().feed(bytes.fromhex("ffffffffffffffff 00000000"))
    with pytest.raises(WireError):
        FrameDecoder(max_body=10).feed(bytes.fromhex("0000000000000000 0000000b"))


def test_hello_byte_vectors() -> None:
    ticket = "0123456789abcdef" * 2
    hello = encode_hello(ticket)
    assert hello == bytes.fromhex("53564841 0001") + ticket.encode() and HELLO.size == len(hello) == 38
    assert decode_hello(hello) == ticket


@pytest.mark.parametrize(
    "data",
    [
        bytes.fromhex("0000000000000000"),  # RocketMQ's slave: a report first
        bytes(38),
        b"SVHB\x00\x01" + b"a" * 32,  # another magic
        b"SVHA\x00\x02" + b"a" * 32,  # another version
        b"SVHA\x00\x01" + b"A" * 32,  # not lowercase hex
        b"SVHA\x00\x01" + b"a" * 31 + b"\xff",
        encode_hello("a" * 32) + b"x",
    ],
)
def test_anything_but_a_hello_is_a_protocol_error(data: bytes) -> None:
    with pytest.raises(WireError):
        decode_hello(data)


@pytest.mark.parametrize("ticket", ["", "a" * 31, "a" * 33, "g" * 32, "é" * 32])
def test_only_tickets_of_32_hex_characters_are_sent(ticket: str) -> None:
    with pytest.raises(ValueError):
        encode_hello(ticket)
