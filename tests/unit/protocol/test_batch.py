"""Batch message body codec (docs/protocol/message-format.md §10)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sievemq.protocol.batch import BatchEntry, decode_batch, encode_batch
from sievemq.protocol.message import PropertiesSizeExceeded


def _hand_entry(flag: int, body: bytes, props: bytes) -> bytes:
    return b"".join(
        [
            struct.pack(">i", 20 + len(body) + 2 + len(props)),  # TOTALSIZE
            struct.pack(">i", 0),  # MAGICCODE
            struct.pack(">i", 0),  # BODYCRC
            struct.pack(">i", flag),  # FLAG
            struct.pack(">i", len(body)),
            body,
            struct.pack(">h", len(props)),
            props,
        ]
    )


def test_fixed_vector() -> None:
    raw = _hand_entry(0, b"hello", b"TAGS\x01TagA\x02UNIQ_KEY\x01U1") + _hand_entry(3, b"", b"KEYS\x01k1 k2")
    entries = [
        BatchEntry(0, b"hello", {"TAGS": "TagA", "UNIQ_KEY": "U1"}),
        BatchEntry(3, b"", {"KEYS": "k1 k2"}),
    ]
    assert encode_batch(entries) == raw
    assert decode_batch(raw) == entries
    assert decode_batch(memoryview(raw)) == entries


def test_trailing_separator_and_empty() -> None:
    raw = _hand_entry(1, b"x", b"TAGS\x01a\x02")  # C client style
    assert decode_batch(raw) == [BatchEntry(1, b"x", {"TAGS": "a"})]
    assert decode_batch(b"") == []
    assert encode_batch([]) == b""


def test_total_size_not_trusted() -> None:
    raw = bytearray(_hand_entry(0, b"abc", b"k\x01v"))
    raw[0:4] = struct.pack(">i", 999)  # Java's broker walks the field lengths instead
    assert decode_batch(bytes(raw)) == [BatchEntry(0, b"abc", {"k": "v"})]


def test_errors() -> None:
    good = _hand_entry(0, b"hello", b"TAGS\x01TagA")
    with pytest.raises(ValueError, match="truncated header"):
        decode_batch(good[:10])
    with pytest.raises(ValueError, match="body length"):
        decode_batch(good[:22])
    with pytest.raises(ValueError, match="properties length"):
        decode_batch(good[:-1])
    with pytest.raises(ValueError, match="entry 1"):
        decode_batch(good + good[:5])
    neg_body = good[:16] + struct.pack(">i", -1) + good[20:]
    with pytest.raises(ValueError, match="body length"):
        decode_batch(neg_body)
    neg_props = _hand_entry(0, b"", b"")[:-2] + struct.pack(">h", -5)
    with pytest.raises(ValueError, match="properties length"):
        decode_batch(neg_props)
    with pytest.raises(PropertiesSizeExceeded):
        encode_batch([BatchEntry(0, b"", {"k": "v" * 40000})])


_key = st.text(st.characters(exclude_characters="\x01\x02", codec="utf-8"), min_size=1)
_val = st.text(st.characters(exclude_characters="\x02", codec="utf-8"), min_size=1)
_entry = st.builds(
    BatchEntry,
    st.integers(-(2**31), 2**31 - 1),
    st.binary(max_size=200),
    st.dictionaries(_key, _val, max_size=5),
)


@given(st.lists(_entry, max_size=6))
def test_roundtrip(entries: list[BatchEntry]) -> None:
    raw = encode_batch(entries)
    assert decode_batch(raw) == entries
    # every entry's TOTALSIZE is 20 + body + 2 + props, as Java writes it
    pos = 0
    for _ in entries:
        total = struct.unpack_from(">i", raw, pos)[0]
        body_len = struct.unpack_from(">i", raw, pos + 16)[0]
        props_len = struct.unpack_from(">h", raw, pos + 20 + body_len)[0]
        assert total == 20 + body_len + 2 + props_len
        pos += 22 + body_len + props_len
    assert pos == len(raw)
