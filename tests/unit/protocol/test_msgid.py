"""offsetMsgId and UNIQ_KEY (docs/protocol/message-format.md §7-§8)."""

from __future__ import annotations

import datetime as dt
import struct
import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sievemq.protocol.msgid import UniqIdGenerator, ip_to_bytes, make_offset_msg_id, parse_offset_msg_id


def test_offset_msg_id_vector() -> None:
    # 10.0.0.5:10911 at commit-log offset 0x100000001
    assert make_offset_msg_id("10.0.0.5", 10911, 0x1_0000_0001) == "0A00000500002A9F0000000100000001"
    assert parse_offset_msg_id("0A00000500002A9F0000000100000001") == ("10.0.0.5", 10911, 0x1_0000_0001)
    assert parse_offset_msg_id("0a00000500002a9f0000000100000001") == ("10.0.0.5", 10911, 0x1_0000_0001)


def test_offset_msg_id_matches_struct_layout() -> None:
    raw = bytes([192, 168, 0, 1]) + struct.pack(">iq", 10911, 123456789)
    assert make_offset_msg_id("192.168.0.1", 10911, 123456789) == raw.hex().upper()


def test_offset_msg_id_ipv6() -> None:
    s = make_offset_msg_id("::1", 10911, 5)
    assert len(s) == 56
    assert s == ("0" * 31 + "1") + "00002A9F" + "0000000000000005"
    assert parse_offset_msg_id(s) == ("::1", 10911, 5)


@pytest.mark.parametrize("bad", ["", "ABC", "0" * 31, "0" * 33, "Z" * 32, "0" * 40])
def test_parse_offset_msg_id_errors(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_offset_msg_id(bad)


@given(st.ip_addresses(v=4).map(str), st.integers(0, 65535), st.integers(-(2**63), 2**63 - 1))
def test_offset_msg_id_roundtrip(host: str, port: int, offset: int) -> None:
    s = make_offset_msg_id(host, port, offset)
    assert len(s) == 32
    assert s == s.upper()
    assert parse_offset_msg_id(s) == (host, port, offset)


@given(st.ip_addresses(v=6).map(str), st.integers(0, 65535), st.integers(0, 2**63 - 1))
def test_offset_msg_id_roundtrip_v6(host: str, port: int, offset: int) -> None:
    s = make_offset_msg_id(host, port, offset)
    assert len(s) == 56
    h, p, o = parse_offset_msg_id(s)
    assert ip_to_bytes(h) == ip_to_bytes(host)
    assert (p, o) == (port, offset)


def test_ip_to_bytes_errors() -> None:
    with pytest.raises(ValueError):
        ip_to_bytes("localhost")


def _month_start_ms() -> int:
    now = dt.datetime.now()
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return int(start.timestamp() * 1000)


def test_uniq_id_layout() -> None:
    gen = UniqIdGenerator(ip="10.1.2.3", pid=0x12345, loader_hash=0xDEADBEEF)
    assert gen.prefix == "0A010203" + "2345" + "DEADBEEF"
    before = int(time.time() * 1000) - _month_start_ms()
    a = gen.next()
    after = int(time.time() * 1000) - _month_start_ms()
    b = gen.next()
    assert len(a) == 32
    assert a == a.upper()
    assert a.startswith(gen.prefix)
    diff = int(a[20:28], 16)
    assert before - 5 <= diff <= after + 5
    assert int(a[28:], 16) == 0
    assert int(b[28:], 16) == 1
    assert a != b


def test_uniq_id_counter_wraps_16_bits() -> None:
    gen = UniqIdGenerator(ip="127.0.0.1", pid=1, loader_hash=1)
    ids = [gen.next() for _ in range(0x10001)]
    assert ids[-1][-4:] == "0000"
    assert ids[-2][-4:] == "FFFF"


def test_uniq_id_ipv6_and_default() -> None:
    assert len(UniqIdGenerator(ip="::1", pid=1, loader_hash=1).next()) == 56
    assert len(UniqIdGenerator(ip=bytes(4)).next()) == 32
    gen = UniqIdGenerator()
    assert len(gen.next()) in (32, 56)
    with pytest.raises(ValueError):
        UniqIdGenerator(ip=b"\x00\x01")


def test_uniq_id_unique_across_threads() -> None:
    gen = UniqIdGenerator(ip="127.0.0.1", pid=1, loader_hash=1)
    out: list[list[str]] = [[] for _ in range(4)]

    def work(i: int) -> None:
        out[i].extend(gen.next() for _ in range(2000))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    all_ids = [x for chunk in out for x in chunk]
    assert len(set(all_ids)) == len(all_ids)
